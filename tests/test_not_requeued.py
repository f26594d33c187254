"""Why requeues stop without a first checkpoint (launch/job.py never_checkpointed): a smaller save_freq only helps
an attempt that reached a step."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from conftest import compose_config, cpu_facts

from launch.job import never_checkpointed
from launch.plan import make_plan
from launch.rundir import attempt_log_path


def planned(tmp_path: Path, *overrides: str):
    cfg = compose_config("cluster=slurm", "mode=quick_test", *overrides)
    plan = make_plan(cfg, cpu_facts(), list(overrides), tmp_path, "python")
    run_dir = tmp_path / "run"
    (run_dir / "metrics").mkdir(parents=True)
    return replace(plan, run_dir=str(run_dir))


def test_attempts_that_never_reached_a_step_are_not_told_to_lower_save_freq(tmp_path: Path):
    plan = planned(tmp_path, "mode.time_budget_min=3", "cluster.time_margin_min=0", "cluster.signal_delay_s=120")
    reason = never_checkpointed(plan, 3)
    assert reason.startswith("3 attempts and never a first step: each ended before verl's first step (the requeue")
    assert "lower cluster.signal_delay_s" in reason and "save_freq" not in reason
    attempt_log_path(Path(plan.run_dir), 2).write_text(json.dumps({"step": 1, "data": {"timing_s/step": 9.0}}) + "\n")
    stepped = never_checkpointed(plan, 3)
    assert stepped.startswith("3 attempts and never a first checkpoint: lower trainer.save_freq (now ")


def test_attempts_past_save_freq_without_a_checkpoint_are_not_told_to_lower_it(tmp_path: Path):
    """Steps beyond save_freq and still no checkpoint: verl saved none, which a smaller save_freq cannot change
    (a probe's requeued sweep reached steps 99, 107 and 99 at save_freq 5 and was told to lower it)."""
    plan = planned(tmp_path, "trainer.save_freq=5")
    records = "".join(json.dumps({"step": step, "data": {"timing_s/step": 1.0}}) + "\n" for step in range(1, 8))
    attempt_log_path(Path(plan.run_dir), 1).write_text(records)
    reason = never_checkpointed(plan, 3)
    assert reason.startswith("3 attempts and never a first checkpoint: passed step 5 (trainer.save_freq) without")
    assert "verl saved none" in reason and "lower trainer.save_freq" not in reason
