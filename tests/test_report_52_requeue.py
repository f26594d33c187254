"""The dev cluster's 4-job probe (helper-52): a run whose three attempts each reached ~100 steps past
trainer.save_freq=5 with no checkpoint ever written (attempts.jsonl checkpointed_step 0), each ended by submitit's
requeue signal (USR2, 120 s before --time=4), the last one not requeued (not_requeued.txt). The time-limit fix names
the signal, says each requeue started over from step 0 and that the last was not requeued; the job's 'lower
trainer.save_freq' is read as what the steps show: verl saved none."""

from __future__ import annotations

from dataclasses import replace

import pytest
from metric_fixtures import make_plan_dir

from launch.report import failures
from launch.report.failures.fixes import fix_time_limit, not_requeued_reason
from launch.rundir import NOT_REQUEUED_FILE, load_plan

JOB_WORDS = "3 attempts and never a first checkpoint: lower trainer.save_freq (now 5) or give the mode more time"


@pytest.fixture(scope="module")
def context(tmp_path_factory) -> failures.FixContext:
    run_dir = make_plan_dir(tmp_path_factory.mktemp("probe52") / "sweep", "guru_baseline", "a40")
    (run_dir / NOT_REQUEUED_FILE).write_text(JOB_WORDS + "\n")
    plan = load_plan(run_dir)
    trainer = plan.verl["trainer"] | {"save_freq": 5, "default_local_dir": str(run_dir / "checkpoints")}
    plan = replace(
        plan,
        verl={**plan.verl, "trainer": trainer},
        slurm={**(plan.slurm or {}), "signal_delay_s": 120},
        resources=replace(plan.resources, time_min=4),
    )
    return failures.FixContext(
        plan=plan,
        steps_reached={1: 99, 2: 107, 3: 99},
        checkpointed_step={1: 0, 2: 0, 3: 0},
        attempt_records={1: {}, 2: {}, 3: {}},
    )


def fix_of(context: failures.FixContext, attempt: int) -> str:
    failure = failures.Failure("time_limit", ["Caught signal SIGUSR2"], attempt)
    return fix_time_limit(failure, context, "")[0]


@pytest.mark.parametrize("attempt", [1, 2])
def test_a_requeue_without_a_checkpoint_says_it_started_over(context, attempt):
    fix = fix_of(context, attempt)
    assert "last checkpoint" not in fix, fix
    assert fix.startswith("the requeue signal, 120 s before the time limit of 4 min, came at step "), fix
    assert "no checkpoint yet: the requeued attempt started over from step 0" in fix, fix
    assert "passed step 5 (trainer.save_freq) 3 times without a checkpoint: verl saved none" in fix, fix


def test_the_last_attempt_says_it_was_not_requeued_and_why(context):
    fix = fix_of(context, 3)
    assert "requeued from" not in fix and "started over" not in fix, fix
    assert "came at step 99; not requeued: 3 attempts and never a first checkpoint: passed step 5" in fix, fix
    assert "lower trainer.save_freq" not in fix, fix


def test_the_jobs_save_freq_advice_is_read_against_the_steps(context):
    reason = not_requeued_reason(context)
    assert reason == (
        "3 attempts and never a first checkpoint: passed step 5 (trainer.save_freq) 3 times without a checkpoint: "
        "verl saved none; check trainer.default_local_dir and the save's lines in the attempt's log"
    )
    short = replace(context, steps_reached={1: 3, 2: 4, 3: 3})  # never reached step 5: the job's words stand
    assert not_requeued_reason(short) == JOB_WORDS


def test_a_written_checkpoint_is_resumed_from(context):
    resumed = replace(context, checkpointed_step={1: 0, 2: 5, 3: 5}, steps_reached={1: 99, 2: 90, 3: 90})
    assert "requeued: attempt 2 resumed from the checkpoint of step 5" in fix_of(resumed, 1)
