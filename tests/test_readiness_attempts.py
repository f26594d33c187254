"""A SLURM attempt keeps only what it saved at its last checkpoint (verl resumes from it: trainer.resume_mode=auto),
so the attempts a run needs are counted in whole steps to each attempt's last checkpoint (launch/readiness.py
Schedule), and every fix the time check names is one that finishes the run: checked here by planning each fix again."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import compose_config
from tiny_assets import make_tiny_dataset, tiny_run_overrides

from launch import readiness
from launch.facts import PartitionFacts, gather_facts
from launch.readiness import Schedule
from launch.render import render_readiness
from launch.run import plan_job
from launch.rundir import Plan


@pytest.fixture(autouse=True)
def own_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))


def partition(max_time_min: int | None) -> PartitionFacts:
    return PartitionFacts("debug", 128, 1006.0, 8, None, max_time_min, 2)


def planned(tmp_path: Path, *overrides: str, max_time_min: int | None = None) -> Plan:
    """The plan of a SLURM submission (readiness judged as for sbatch), on this machine's real facts with a partition
    whose time limit is `max_time_min`."""

    def on_partition(model_path: str, cluster: str, _: object, hub_cache: str, **__: object) -> object:
        return replace(gather_facts(str(model_path), "local", None, str(hub_cache)), partition=partition(max_time_min))

    cfg = compose_config("cluster=slurm", f"cluster.shared_dir={tmp_path}", *overrides)
    return plan_job(cfg, list(overrides), gather=on_partition)


def time_problems(plan: Plan) -> list[str]:
    return [p.problem for p in plan.readiness.problems if p.check == "time"] if plan.readiness else []


@pytest.fixture
def slow_steps(tmp_path: Path) -> list[str]:
    """A 3B model on one A40 with 8k responses: minutes per step. quick_test: 10 steps, a checkpoint and a validation
    every 5, none before training. The check under test is the time's alone."""
    train, val = make_tiny_dataset(tmp_path / "data", ("math", "logic"), per_source=400)
    overrides = tiny_run_overrides(tmp_path / "model", train, val)
    overrides = [o for o in overrides if not o.startswith("actor_rollout_ref.model.path")]  # llm=qwen2_5_3b's
    return [
        "launch.preflight=warn",  # it needs 2 A40s for memory
        *overrides,
        "llm=qwen2_5_3b",
        "data.max_response_length=8192",
        "launch.skip_checks=[hub_cache,disk]",
    ]


def test_attempts_are_whole_steps_to_each_attempts_last_checkpoint_not_minutes_over_minutes():
    # 10 one-minute steps, a checkpoint every 3, attempts of 5.5 min: each keeps 3 steps (its 4th and 5th are lost)
    # until the last runs to the end
    run = Schedule(total=10, step_s=60.0, validation_s=0.0, test_freq=-1, validations=0, save_freq=3)
    assert run.attempts(5.5) == 3 and math.ceil(10 / 5.5) == 2
    assert [run.reach(start, 5.5) for start in (0, 3, 6)] == [3, 6, 10]
    assert Schedule(10, 60.0, 0.0, -1, 0, 1).attempts(5.5) == 2  # a checkpoint every step keeps all 5
    # the last step saved, its validation cut off: verl resumed there runs one step more, saves and validates
    ends_late = Schedule(10, 60.0, 60.0, 10, 1, 5)
    assert ends_late.reach(5, 5.5) == 10 and ends_late.to_end_s(5) > 5.5 * 60 and ends_late.attempts(5.5) == 3
    # a step longer than an attempt: none keeps anything, and no number of attempts finishes it
    assert Schedule(10, 400.0, 0.0, -1, 0, 1).attempts(5.5) is None
    # no checkpoint: only an attempt that runs to the end counts
    assert Schedule(10, 60.0, 0.0, -1, 0, -1).attempts(5.5) is None and Schedule(5, 60.0, 0.0, -1, 0, -1).attempts(6)
    # a validation among the steps (every 5th, and the last) is spent before the next checkpoint
    validating = Schedule(10, 60.0, 90.0, 5, 2, 1)
    assert validating.to_checkpoint_s(0, 6) == 6 * 60 + 90 and validating.to_end_s(5) == 5 * 60 + 90


def test_an_attempt_that_keeps_fewer_steps_than_its_minutes_hold_needs_more_attempts(
    tmp_path: Path, slow_steps: list[str]
):
    """Attempts that hold 5.5 steps with a checkpoint every 3: each keeps 3, so 10 steps need 3 attempts, where the
    run's minutes over an attempt's say 2. With cluster.max_requeues=1 the job would have stopped unfinished."""
    probe = planned(tmp_path, *slow_steps).predicted_time
    assert probe is not None and probe.validation_s < probe.step_s / 2, probe  # the arithmetic below assumes it
    budget = readiness.STARTUP_MIN + math.ceil(5.5 * probe.step_s / 60)
    overrides = [*slow_steps, f"mode.time_budget_min={budget}", "trainer.save_freq=3", "cluster.max_requeues=1"]
    plan = planned(tmp_path, *overrides)
    time = plan.predicted_time
    assert time is not None and time.total_steps == 10
    train_min = (10 * time.step_s + 2 * time.validation_s) / 60
    assert time.attempts == 3 and math.ceil(train_min / time.attempt_min) == 2
    (said,) = time_problems(plan)
    assert said.startswith(f"the run needs 3 attempts of {time.attempt_min} min (10 steps x {time.step_s:g} s + ")
    assert "an attempt keeps only the steps to its last checkpoint: the first 3, with trainer.save_freq=3" in said
    fixes = re.search(
        r"choose fewer steps \(trainer.total_training_steps=(\d+)\), a larger budget \(mode.time_budget_min=(\d+)\) or "
        r"more requeues \(cluster.max_requeues=2\)$",
        said,
    )
    assert fixes is not None, said
    steps, larger = fixes.groups()
    for fix in (f"trainer.total_training_steps={steps}", f"mode.time_budget_min={larger}", "cluster.max_requeues=2"):
        assert not time_problems(planned(tmp_path, *overrides, fix)), fix
    # and each is the least that does: one step more, or a minute less, needs a third attempt again
    assert time_problems(planned(tmp_path, *overrides, f"trainer.total_training_steps={int(steps) + 1}"))
    assert time_problems(planned(tmp_path, *overrides, f"mode.time_budget_min={int(larger) - 1}"))


def test_one_step_longer_than_an_attempt_names_only_fixes_that_finish_the_run(tmp_path: Path, slow_steps: list[str]):
    """No attempt reaches a checkpoint: more requeues, fewer steps or a save_freq cannot help (the refusal had named
    "more requeues (cluster.max_requeues=N)" and "fewer steps" as if they could). A budget that fits the steps to
    each checkpoint can, alone or with the requeues it then needs."""
    overrides = [*slow_steps, "mode.time_budget_min=15", "trainer.save_freq=1"]
    plan = planned(tmp_path, *overrides)
    time = plan.predicted_time
    assert time is not None and time.step_s / 60 > time.attempt_min == 5 and time.attempts == 0
    (time_line,) = [line for line in render_readiness(plan) if line.lstrip().startswith("time ")]
    assert "-> never: no attempt keeps a step;" in time_line, time_line  # not "-> 0 attempt(s)"
    (said,) = time_problems(plan)
    assert said.startswith(f"one step takes {time.step_s:g} s = ") and "no attempt would reach a checkpoint" in said
    fixes = re.search(
        r"; choose a larger budget \(mode.time_budget_min=(\d+)\) or mode.time_budget_min=(\d+) with more requeues "
        r"\(cluster.max_requeues=(\d+)\)$",
        said,
    )
    assert fixes is not None, said
    larger, least, requeues = fixes.groups()
    # one step and its checkpoint, and the last step's validation after it
    assert int(least) == math.ceil(readiness.STARTUP_MIN + (time.step_s + time.validation_s) / 60)
    assert not time_problems(planned(tmp_path, *overrides, f"mode.time_budget_min={larger}"))
    both = [f"mode.time_budget_min={least}", f"cluster.max_requeues={requeues}"]
    assert not time_problems(planned(tmp_path, *overrides, *both))
    assert time_problems(planned(tmp_path, *overrides, both[0], f"cluster.max_requeues={int(requeues) - 1}"))


def test_a_budget_beyond_the_partitions_limit_is_replaced_by_the_step_time_that_limit_needs(
    tmp_path: Path, slow_steps: list[str]
):
    """The partition's MaxTime caps mode.time_budget_min (less cluster.time_margin_min, which --time adds): where
    the budget that would finish the run is above it, the fix is a shorter step, with the number it must reach."""
    overrides = [*slow_steps, "mode.time_budget_min=15", "cluster.time_margin_min=5"]
    plan = planned(tmp_path, *overrides, max_time_min=45)
    time = plan.predicted_time
    assert time is not None
    (said,) = time_problems(plan)
    step = re.search(r"choose a step of at most (\d+) s, now [\d.]+ s \(more GPUs or shorter lengths: ", said)
    assert step is not None and "mode.time_budget_min<=40 with cluster.time_margin_min=5" in said, said
    # that step time, under the partition's largest budget, finishes in the attempts allowed; a second more does not
    schedule = Schedule.of(time, 5)
    assert schedule.attempts(40 - readiness.STARTUP_MIN) is None  # as planned: even the limit keeps no step
    fast = replace(schedule, step_s=float(step.group(1)))
    assert (fast.attempts(30) or 99) <= 4 < (replace(fast, step_s=fast.step_s + 1).attempts(30) or 99)


def test_a_save_freq_fix_names_one_with_which_the_run_also_finishes(tmp_path: Path, slow_steps: list[str]):
    """200 steps of ~10 min, 50-min attempts, 61 allowed: trainer.save_freq=100 never saves in time. The save_freq
    that comes in time at the step-time model's error (3) keeps only 3 of the 5 steps an attempt holds, so 67
    attempts: the fix had named it anyway. The one named now finishes the run."""
    overrides = [*slow_steps, "trainer.total_training_steps=null", "trainer.total_epochs=2", "cluster.max_requeues=60"]
    plan = planned(tmp_path, *overrides, "trainer.save_freq=100")
    time = plan.predicted_time
    assert time is not None and time.total_steps == 200 and time.attempt_min == 50
    safe = readiness.steps_within(50 / 1.35, time.step_s, time.validation_s, time.test_freq)
    (said,) = time_problems(plan)
    named = re.search(r"first checkpoint comes after 100 steps x .*; set trainer.save_freq=(\d+)$", said)
    assert named is not None, said
    assert 1 <= int(named.group(1)) < safe
    assert not time_problems(planned(tmp_path, *overrides, f"trainer.save_freq={named.group(1)}"))
    (too_few,) = time_problems(planned(tmp_path, *overrides, f"trainer.save_freq={safe}"))
    assert too_few.startswith("the run needs ") and "cluster.max_requeues=60 allows 1 + 60" in too_few
