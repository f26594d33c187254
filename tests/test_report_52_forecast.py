"""The status forecast of the dev cluster's probe (helper-52): a stand-in driver logging past its plan's
trainer.total_training_steps=2, on its third attempt of --time=4 with the requeue signal 120 s before it. It had
read 'step 45/2 ...; ETA 0 s; 1 attempt(s) of 4 allowed; first checkpoint (step 2) at 10 min of an attempt's 1',
and no warning for a first checkpoint after the attempt's end."""

from __future__ import annotations

from dataclasses import replace

import pytest
from metric_fixtures import make_plan_dir

from launch.report.forecast import forecast
from launch.rundir import Plan, PredictedTime, Readiness, load_plan
from launch.steptime import STARTUP_MIN


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Plan:
    run_dir = make_plan_dir(tmp_path_factory.mktemp("forecast52") / "sweep", "guru_baseline", "a40")
    planned = load_plan(run_dir)
    # the probe's time check: a budget below the start-up, planned as one training minute (readiness's floor)
    time = PredictedTime(
        rows=1000, steps_per_epoch=100, total_steps=20, step_s=30.0, wall_min=20.0, time_limit_min=4, attempts=1,
        first_checkpoint_step=10, checkpoints=True, attempt_min=1,
    )  # fmt: skip
    return replace(
        planned,
        slurm={**(planned.slurm or {}), "signal_delay_s": 120},
        resources=replace(planned.resources, time_min=4),
        readiness=replace(planned.readiness or Readiness(), time=time),
    )


def with_trainer(plan: Plan, **values) -> Plan:
    return replace(plan, verl={**plan.verl, "trainer": plan.verl["trainer"] | values})


def history(steps: int, step_s: float) -> dict[int, dict[str, float]]:
    return {step: {"timing_s/step": step_s} for step in range(1, steps + 1)}


def test_steps_past_the_planned_total_have_no_eta_and_say_the_attempt(plan):
    short = with_trainer(plan, total_training_steps=2, save_freq=2, total_epochs=100)
    ahead = forecast(short, history(45, 1.0), attempt=3)
    assert ahead is not None and ahead.total_steps == 2
    line = ahead.lines()[0]
    assert "45/2" not in line and "ETA" in line and "ETA 0" not in line, line
    assert "step 45 at 1 s/step" in line and "past the plan's 2 steps: no ETA" in line, line
    allowed = 1 + plan.cluster_settings.max_requeues
    assert f"attempt 3 of {allowed} allowed" in line and "attempt(s)" not in line, line
    assert "an attempt's" not in line, line
    assert any("step 45 is past the plan's 2 steps" in warning for warning in ahead.warnings), ahead.warnings


def test_a_first_checkpoint_after_the_attempts_end_is_warned_with_units(plan):
    longer = with_trainer(plan, total_training_steps=20, save_freq=10, total_epochs=100)
    ahead = forecast(longer, history(3, 30.0), attempt=1)
    assert ahead is not None and ahead.limit_min == 2.0  # --time=4 less the signal's 120 s
    line = ahead.lines()[0]
    assert "(this is attempt 1)" in line and "attempt(s)" not in line, line
    assert f"({STARTUP_MIN} min of start-up assumed) of the attempt's 2 min" in line, line
    [warning] = [text for text in ahead.warnings if "first checkpoint" in text]
    assert "lands after the time limit" in warning and "of 2 min" in warning, warning
    assert f"the start-up alone is assumed to take {STARTUP_MIN} min" in warning, warning
