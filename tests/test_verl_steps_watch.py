"""The hang watchdog's validations and the status forecast count the steps verl's fit loop runs: the fewer of
trainer.total_training_steps and total_epochs x the steps per epoch (readiness's VerlSteps), with no last-step
validation where the epochs end the run first; also where the plan has no time prediction (the model's architecture
unknown here), from the training rows readiness read (launch/watchdog.py planned_steps)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import compose_config, cpu_facts

from launch.plan import make_plan
from launch.report.forecast import forecast
from launch.rundir import DataRead, Plan, PredictedTime, Readiness
from launch.watchdog import Validations, planned_steps, window_text

# 80 rows in batches of 8: 10 steps an epoch; 2 epochs end the run at step 20, before the 50 steps asked for
ROWS, BATCH, EPOCHS, ASKED, TEST_FREQ = 80, 8, 2, 50, 7
STEP_S = 60.0


@pytest.fixture(scope="module")
def base_plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    overrides = [
        f"data.train_batch_size={BATCH}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={BATCH}",
        f"trainer.total_epochs={EPOCHS}",
        f"trainer.total_training_steps={ASKED}",
        f"trainer.test_freq={TEST_FREQ}",
        "trainer.save_freq=-1",
    ]
    cfg = compose_config("cluster=local", *overrides)
    return make_plan(cfg, cpu_facts(), overrides, tmp_path_factory.mktemp("steps"), "python")


def without_time(plan: Plan, rows: int | None) -> Plan:
    """readiness read the training file (or could not: None) and predicted no time."""
    return replace(plan, readiness=Readiness(data=(DataRead("data.train_files", "/data/train.parquet", rows),)))


def with_time(plan: Plan, validation_s: float) -> Plan:
    """readiness's time check as predict_time writes it for this run (VerlSteps: 20 steps)."""
    time = PredictedTime(
        rows=ROWS,
        steps_per_epoch=ROWS // BATCH,
        total_steps=EPOCHS * ROWS // BATCH,
        step_s=STEP_S,
        wall_min=40.0,
        time_limit_min=600,
        attempts=1,
        first_checkpoint_step=20,
        checkpoints=False,
        attempt_min=580,
        validation_s=validation_s,
        test_freq=TEST_FREQ,
        validations=2,
    )
    return replace(plan, readiness=Readiness(time=time))


def history(last_step: int) -> dict[int, dict[str, float]]:
    return {step: {"timing_s/step": STEP_S} for step in range(1, last_step + 1)}


def test_without_a_time_prediction_the_epochs_end_the_run_at_step_20(base_plan: Plan):
    plan = without_time(base_plan, ROWS)
    steps = planned_steps(plan)
    assert steps is not None and (steps.total, steps.by_epochs) == (20, True)
    validations = Validations.of(plan)
    assert (validations.total_steps, validations.at_the_last_step) == (20, False)
    ahead = forecast(plan, history(5))
    assert ahead is not None and ahead.total_steps == 20
    assert ahead.eta_h == pytest.approx(15 * STEP_S / 3600)  # 15 steps left, not 45
    assert "step 5/20 at 60 s/step" in ahead.lines()[0]


def test_train_max_samples_caps_the_rows_as_verl_does(base_plan: Plan):
    plan = without_time(
        replace(base_plan, verl=base_plan.verl | {"data": base_plan.verl["data"] | {"train_max_samples": 40}}), ROWS
    )
    steps = planned_steps(plan)
    assert steps is not None and steps.total == 10


def test_no_last_step_validation_where_the_epochs_end_the_run(base_plan: Plan):
    plan = with_time(base_plan, validation_s=100.0)
    validations = Validations.of(plan)
    # step 20 is the last and no multiple of 7: verl's is_last_step never holds (total_training_steps is 50)
    assert [validations.before_next_record(last) for last in (6, 13, 19)] == [1, 1, 0]
    assert "(every 7 steps, before training)" in window_text(STEP_S, 5, 60, validations, 100.0)
    ahead = forecast(plan, history(5))
    # 15 steps and the validations of steps 7 and 14 (none at 20)
    assert ahead is not None and ahead.eta_h == pytest.approx((15 * STEP_S + 2 * 100.0) / 3600)


def test_where_the_rows_are_unknown_the_step_count_is_taken_as_written(base_plan: Plan):
    plan = without_time(base_plan, None)
    validations = Validations.of(plan)
    assert (validations.total_steps, validations.at_the_last_step) == (ASKED, True)
    assert validations.before_next_record(ASKED - 1) == 1
    assert "every 7 steps and the last" in window_text(STEP_S, 5, 60, validations, 100.0)
