"""The dev cluster's 4-job probe (helper-52): a run whose three attempts each reached ~100 steps past
trainer.save_freq=5 with no checkpoint ever written (attempts.jsonl checkpointed_step 0), each ended by submitit's
requeue signal (USR2, 120 s before --time=4), the last one not requeued (not_requeued.txt). The time-limit fix names
the signal, says each requeue started over from step 0 and that the last was not requeued; the job's 'lower
trainer.save_freq' is read as what the steps show: verl saved none."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

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


# --- the doctor's state: as sweep.py status gives it (failures.run_state), not 'failed' for every run ---------------


def doctor_text(run_dir: Path, attempts: int, failed: list, state: str | None, record=None) -> str:
    from launch.report.doctor import render_text
    from launch.report.metrics import RunMetrics

    run = RunMetrics(run_dir, load_plan(run_dir), {}, [{"checkpointed_step": 0}] * attempts)
    return render_text(run, [], run_dir / "diagnosis.md", failed, None, state, record)


def test_a_requeued_running_run_is_running_with_its_ended_attempt(context):
    run_dir = Path(context.plan.run_dir)
    ended = failures.Failure("time_limit", ["Caught signal SIGUSR2"], 1, fix="x")
    text = doctor_text(run_dir, 2, [ended], "RUNNING")
    assert "  state: running (attempt 2; attempt 1 ended: time_limit, requeued)" in text, text
    assert "failed [" not in text and "  ended [time_limit] (attempt 1)" in text, text
    waiting = doctor_text(run_dir, 1, [ended], "PENDING")
    assert "state: pending (attempt 2 waits to start; attempt 1 ended: time_limit, requeued)" in waiting, waiting


def test_cancels_say_cancelled_and_by_whom(context):
    run_dir = Path(context.plan.run_dir)
    record = failures.JobRecord("SLURM", "7", "CANCELLED by 0")
    cancel = failures.Failure("cancelled", ["SLURM: job 7 CANCELLED by 0"], None, fix="x")
    before = doctor_text(run_dir, 0, [cancel], "CANCELLED by 0", record)
    assert "state: cancelled by user root (uid 0) before it started" in before, before
    assert "  cancelled [cancelled]" in before and "failed [" not in before, before
    ended = failures.Failure("time_limit", ["Caught signal SIGUSR2"], 1, fix="x")
    waited = doctor_text(run_dir, 1, [ended, cancel], "CANCELLED by 0", record)
    assert (
        "state: cancelled by user root (uid 0) while it waited to start again (attempt 1 ended: time_limit, requeued)"
    ) in waited, waited


def test_a_completed_job_without_steps_says_completed(context):
    text = doctor_text(Path(context.plan.run_dir), 1, [], "COMPLETED")
    assert "  state: completed" in text and "the job COMPLETED with no training step" in text, text
    assert "no training step logged yet" not in text, text


# --- a cancel's fix: where a resubmitted run starts -----------------------------------------------------------------


def test_a_cancel_without_a_checkpoint_says_the_run_starts_over(context, tmp_path):
    from launch.report.failures.fixes import cancelled_fix, resumes_from, saved_step

    fix = cancelled_fix("SLURM", "CANCELLED by 0", " before it started", "s1", 0)
    assert fix.endswith("the same run directory, where the run starts over from step 0 (no checkpoint was written)")
    assert "resumes from its last checkpoint" not in fix
    assert resumes_from(40) == "where verl resumes from its checkpoint of step 40"
    assert resumes_from(None) == "where verl resumes from its last checkpoint"  # no plan to say where verl saves
    assert saved_step(tmp_path) is None
    assert saved_step(Path(context.plan.run_dir)) == 0  # the probe's run: nothing under its default_local_dir
