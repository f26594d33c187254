"""The time-limit diagnosis where no step was reached (e_timelimit on the dev cluster: --time=2 with
--signal=USR2@120, so every attempt was signalled ~15 s in): the fix names the signal, or a budget with a number,
never a placeholder, nor a save_freq that cannot help; a log whose job was not requeued ended for good."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import PROJECT
from metric_fixtures import make_plan_dir

from launch.report import failures
from launch.report.doctor import diagnose_requeues, failure_context, load_thresholds
from launch.report.metrics import read_run
from launch.rundir import NOT_REQUEUED_FILE

# attempt 1 of e_timelimit (stderr, then stdout): signalled 15 s after it started
ATTEMPT_ERR = """\
submitit WARNING (2026-11-29 12:14:09,798) - Caught signal SIGUSR2 on vm: this job is timed-out.
submitit WARNING (2026-11-29 12:14:09,799) - Bypassing signal SIGCONT
"""
ATTEMPT_OUT = (
    "submitit INFO (2026-11-29 12:13:54,101) - Starting with JobEnvironment(job_id=6, hostname=vm, local_rank=0(1), "
    "node=0(1), global_rank=0(1))\n"
    "submitit INFO (2026-11-29 12:14:09,800) - Requeued job 6 (1 remaining timeouts)\n"
)
# its last attempt: the checkpoint hook refused the requeue, submitit's end-for-good line follows the signal
LAST_ERR = """\
submitit WARNING (2026-11-29 12:15:09,239) - Caught signal SIGUSR2 on vm: this job is timed-out.
submitit ERROR (2026-11-29 12:15:09,318) - Submitted job triggered an exception
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/submitit/core/job_environment.py", line 227, in checkpoint_and_try_requeue
    raise utils.UncompletedJobError(message)
submitit.core.utils.UncompletedJobError: Job not requeued because: checkpoint function returned None.
srun: error: c1: task 0: Exited with exit code 1
"""


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> Path:
    return make_plan_dir(tmp_path_factory.mktemp("timelimit") / "sweep", "guru_baseline", "a40")


def context_for(run_dir: Path, signal_delay_s: int, time_min: int) -> failures.FixContext:
    context = failure_context(read_run(run_dir), load_thresholds())
    plan = context.plan
    plan = replace(plan, slurm={"signal_delay_s": signal_delay_s}, resources=replace(plan.resources, time_min=time_min))
    return replace(context, plan=plan, steps_reached={1: 0}, checkpointed_step={1: 0})


def test_a_signal_due_at_the_start_is_named_not_a_longer_budget(planned: Path):
    text = ATTEMPT_ERR + ATTEMPT_OUT
    failure = failures.classify(text, attempt=1)
    assert failure.kind == "time_limit"
    fix = failures.with_plan_fix(failure, context_for(planned, 120, 2), text).fix
    assert fix.startswith("the requeue signal came before any work (the attempt was signalled 15 s in)"), fix
    assert "cluster.signal_delay_s=120 (sbatch --signal=USR2@120) is not below the time limit of 2 min" in fix
    assert "<longer>" not in fix and "save_freq" not in fix


def test_no_step_in_a_real_time_limit_says_a_budget_with_a_number(planned: Path):
    text = ATTEMPT_ERR + ATTEMPT_OUT
    failure = failures.classify(text, attempt=1)
    context = context_for(planned, 120, 30)  # the signal 2 min before a 30 min limit: it came at the end
    trainer = context.plan.verl["trainer"]
    context = replace(
        context,
        plan=replace(context.plan, verl={**context.plan.verl, "trainer": trainer | {"val_before_train": False}}),
    )
    fix = failures.with_plan_fix(failure, context, text).fix
    assert "reached no training step in its time limit of 30 min: mode.time_budget_min=" in fix, fix
    assert "<longer>" not in fix and "requeue signal" not in fix
    assert fix.split("mode.time_budget_min=")[1].split(" ")[0].isdigit(), fix


def test_the_doctor_does_not_offer_save_freq_where_no_step_was_reached(tmp_path: Path):
    run_dir = make_plan_dir(tmp_path / "sweep", "guru_baseline", "a40")
    (run_dir / "attempts.jsonl").write_text(
        "".join(json.dumps({"time": f"2026-11-29T12:1{n}:00+0000", "checkpointed_step": 0}) + "\n" for n in range(3))
    )
    (run_dir / NOT_REQUEUED_FILE).write_text(
        "3 attempts and never a first checkpoint: lower trainer.save_freq (now 5) or give the mode more time\n"
    )
    run = read_run(run_dir)
    plan = replace(run.local_plan, slurm={"signal_delay_s": 120})
    run = replace(run, plan=replace(plan, resources=replace(plan.resources, time_min=2)))
    found = diagnose_requeues(run, load_thresholds())
    assert found is not None
    assert "no attempt reaches a training step: cluster.signal_delay_s=120" in found.headline, found.headline
    assert "lower trainer.save_freq (now" not in found.headline
    assert "a lower trainer.save_freq cannot help" in found.headline


def test_a_job_not_requeued_ended_for_good(tmp_path: Path):
    """The time-limit signal then submitit's 'Job not requeued': the outcome is failed (it had been interrupted, as
    if the job would come back)."""
    (tmp_path / "6_0_log.err").write_text(LAST_ERR)
    (tmp_path / "6_0_log.out").write_text(ATTEMPT_OUT.splitlines()[0].replace("12:13:54", "12:14:56") + "\n")
    result = subprocess.run(
        [
            sys.executable,
            str(PROJECT / "launch" / "report" / "doctor.py"),
            "--log",
            str(tmp_path / "6_0_log.err"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = json.loads(result.stdout)
    assert said["outcome"] == "failed" and said["failure"]["kind"] == "time_limit", said
