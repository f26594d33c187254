"""The hang window's validation allowance follows the step rule (launch/watchdog.py expected_validation_s, through
expected_step_s): the slowest validation measured, but at most 4 x the median of the last 5, so one validation that
stalled (a slow file system, a reward worker restarted) does not hold the window open for the rest of the run."""

from __future__ import annotations

import pytest

from launch.watchdog import SLOWEST_OVER_TYPICAL, Progress, Validations, expected_validation_s

STEP_S, VALIDATION_S, OUTLIER_S = 40.0, 300.0, 9000.0


def progress_through(validation_times: list[float]) -> Progress:
    """Steps of 40 s, a validation every 5 steps taking the given times in turn (verl's timing_s/testing on the step
    record that follows it)."""
    progress = Progress(
        started_at=0.0,
        predicted_s=STEP_S,
        factor=5.0,
        floor_s=60.0,
        validations=Validations(predicted_s=200.0, test_freq=5, total_steps=100),
    )
    now, step = 0.0, 0
    for validation in validation_times:
        for _ in range(5):
            step += 1
            now += STEP_S
            data = {"timing_s/step": STEP_S} | ({"timing_s/testing": validation} if step % 5 == 0 else {})
            progress.observe([(step, data)], now)
    return progress


def test_one_outlier_validation_is_capped_like_a_step():
    progress = progress_through([VALIDATION_S] * 4 + [OUTLIER_S])
    assert progress.last_step == 25 and progress.validations.before_next_record(29) == 1
    progress.observe([(n, {"timing_s/step": STEP_S}) for n in (26, 27, 28, 29)], 2000.0)
    capped = SLOWEST_OVER_TYPICAL * VALIDATION_S  # the median of the last five is 300 s
    assert progress.validation_s == pytest.approx(capped)
    assert progress.window_s == pytest.approx(5 * (STEP_S + capped))


def test_validations_that_all_grow_slower_are_followed():
    progress = progress_through([300.0, 600.0, 900.0, 1200.0, 1500.0])
    progress.observe([(n, {"timing_s/step": STEP_S}) for n in (26, 27, 28, 29)], 2000.0)
    assert progress.validation_s == pytest.approx(1500.0)  # under 4 x the median 900 s: the slowest holds


def test_before_any_measured_validation_the_plan_s_and_none_where_nothing_predicts_one():
    assert expected_validation_s(200.0, []) == 200.0
    assert expected_validation_s(0.0, []) == 0.0
    assert expected_validation_s(200.0, [OUTLIER_S]) == OUTLIER_S  # one measured: nothing to call it an outlier against
