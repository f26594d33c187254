"""What the reports say of a job's log that has not ended, or that ended in ways the log alone half-tells: a healthy
running job whose verl config dump holds the word error, a scancelled job seen without SLURM's record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import PROJECT

from launch.report.failures import classify as classify_log
from launch.report.failures.classify import CONFIG_ENTRY

ESC = "\x1b"
PREFIX = f"{ESC}[36m(TaskRunnerV1 pid=16598){ESC}[0m "
# the head of a healthy job's stdout (a_gpu on the dev cluster, cut while verl ran): its config dump, as verl prints it
RUNNING_OUT = (
    "submitit INFO (2026-11-29 12:05:01,102) - Starting with JobEnvironment(job_id=1, hostname=vm, local_rank=0(1), "
    "node=0(1), global_rank=0(1))\n"
    "rlaunch: Ray up on 1 node(s) 3.9 s after the job started (127.140.0.11:21760); code from /runs/code/x\n"
    + "".join(
        PREFIX + line + "\n"
        for line in (
            "{'actor_rollout_ref': {'actor': {'_target_': 'verl.workers.config.FSDPActorConfig',",
            "          'shuffle': False,",
            "          'truncation': 'error',",
            "          'trust_remote_code': False,",
            "                    'metrics': {'enabled': False, 'port': 0}}}",
            "Using dataset class: RLHFDataset",
            "dataset len: 16",
            "filter dataset len: 16",
        )
    )
)


def doctor_log(path: Path) -> dict:
    result = subprocess.run(
        [sys.executable, str(PROJECT / "launch" / "report" / "doctor.py"), "--log", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_running_jobs_config_dump_is_not_its_error(tmp_path: Path):
    """`'truncation': 'error',` is a setting in verl's config dump: the log has no end line and no error, so the job
    is running (it had been 'failed', kind unknown, with that line as evidence)."""
    log = tmp_path / "1_0_log.out"
    log.write_text(RUNNING_OUT)
    assert doctor_log(log) == {"outcome": "running", "failure": None}
    # the same dump before a real error: the error is the evidence
    log.write_text(RUNNING_OUT + PREFIX + "RuntimeError: the reward server went away\n")
    said = doctor_log(log)
    assert said["outcome"] == "failed"
    assert said["failure"]["evidence"][-1].endswith("RuntimeError: the reward server went away"), said


def test_config_entries_are_told_from_error_lines():
    for entry in ("'truncation': 'error',", "truncation: error", "{'data': {'truncation': 'error'}}", "level: FATAL"):
        assert CONFIG_ENTRY.match(entry), entry
    for line in ("error: disk failed", "FATAL: boom", "slurmstepd-c1: error: *** JOB 7 ON c1 CANCELLED AT x ***"):
        assert not CONFIG_ENTRY.match(line), line


def test_a_cancel_seen_without_slurms_record_shows_the_cancel_line():
    """d_cancel on the dev cluster (scancel while verl started), read where SLURM does not answer: the cause cannot be
    named from the log, but its evidence is SLURM's cancel line, not the config dump or srun's exit line after it."""
    text = RUNNING_OUT + (
        "submitit WARNING (2026-11-29 12:15:41,931) - Bypassing signal SIGCONT\n"
        "slurmstepd-c1: error: *** JOB 7 ON c1 CANCELLED AT 2026-11-29T12:15:41 ***\n"
        "srun: Job step aborted: Waiting up to 7 seconds for job step to finish.\n"
        "submitit ERROR (2026-11-29 12:15:45,036) - Submitted job triggered an exception\n"
        "srun: error: c1: task 0: Exited with exit code 1\n"
    )
    failure = classify_log(text)
    assert failure.kind == "unknown"
    assert failure.evidence[0] == "slurmstepd-c1: error: *** JOB 7 ON c1 CANCELLED AT 2026-11-29T12:15:41 ***"
    assert not any("truncation" in line for line in failure.evidence)
    assert "SLURM cancelled job 7 without a reason in the log" in failure.fix
