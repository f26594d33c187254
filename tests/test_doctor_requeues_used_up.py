"""A run stopped by cluster.max_requeues is told a number of requeues it did not have: cluster.max_requeues=0
doubled had been offered as `cluster.max_requeues=0` (a probe's time-limited job), and where its last attempt never
reached a save, a save_freq comes first: a requeue would start that attempt over."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from metric_fixtures import StepProfile, run_records, write_attempt
from test_doctor import fixture_runs, load_plan  # noqa: F401 (the fixture, used by name)

from launch.report import doctor
from launch.report.metrics import RunMetrics


def requeue_diagnosis(
    healthy: Path, tmp_path: Path, limit: int, starts: list[int], steps: range, save_freq: int = 1
) -> doctor.Diagnosis:
    plan = load_plan(healthy)
    plan = replace(plan, cluster_settings=replace(plan.cluster_settings, max_requeues=limit))
    plan = replace(plan, verl={**plan.verl, "trainer": {**plan.verl["trainer"], "save_freq": save_freq}})
    (tmp_path / "not_requeued.txt").write_text(f"requeued {limit} times: cluster.max_requeues={limit} reached\n")
    attempts = [{"checkpointed_step": step} for step in starts]
    records = run_records(steps, StepProfile(), 0.0)
    write_attempt(tmp_path, len(starts), records)  # the last attempt's own log: how far it got
    run = RunMetrics(tmp_path, plan, dict(records), attempts)
    (found,) = [item for item in doctor.diagnose(run) if item.kind.startswith("requeue")]
    return found


def test_max_requeues_zero_is_told_one_and_a_save_freq_where_the_attempt_never_saved(fixture_runs, tmp_path):  # noqa: F811
    found = requeue_diagnosis(fixture_runs["healthy"], tmp_path, 0, [0], range(0, 11), save_freq=1000)
    assert found.kind == "requeues_exhausted"
    assert found.overrides[-1] == "cluster.max_requeues=1"
    assert found.overrides[0] == "trainer.save_freq=5"  # 10 steps an attempt, saved twice
    assert "reached 10 steps and saved none (trainer.save_freq=1000)" in found.headline


def test_an_attempt_that_saved_is_told_more_requeues_alone(fixture_runs, tmp_path):  # noqa: F811
    found = requeue_diagnosis(fixture_runs["healthy"], tmp_path, 3, [0, 20, 40, 60], range(60, 71))
    assert found.overrides == ["cluster.max_requeues=6"]
