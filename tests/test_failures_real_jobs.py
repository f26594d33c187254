"""Endings of real dev-cluster jobs, as their logs were written (a probe's jobs, helper-41), and what rlaunch must
say of them: each had been misread."""

from __future__ import annotations

from pathlib import Path

from test_failures_directions import run_with_log

from launch.report import failures

# `scontrol requeue <job>` of a running job: slurmstepd's lines, then submitit and srun stopping the attempt
SCONTROL_REQUEUE = """\
slurmstepd-c1: error: *** STEP 12.0 ON c1 CANCELLED AT 2026-11-22T19:50:03 DUE TO JOB REQUEUE ***
slurmstepd-c1: error: *** JOB 12 ON c1 CANCELLED AT 2026-11-22T19:50:03 DUE TO JOB REQUEUE ***
submitit WARNING (2026-11-22 19:50:03,618) - Bypassing signal SIGCONT
srun: got SIGCONT
srun: forcing job termination
srun: Job step aborted: Waiting up to 7 seconds for job step to finish.
submitit WARNING (2026-11-22 19:50:03,641) - Bypassing signal SIGTERM
srun: error: c1: task 0: Exited with exit code 1"""


def test_a_job_requeued_through_scontrol_is_an_interruption_with_nothing_to_change(tmp_path: Path):
    """It had been `unknown` (its evidence the srun exit line) in status, doctor and compare, though SLURM requeued
    it and it resumed."""
    (found,) = failures.run_failures(run_with_log(tmp_path, [SCONTROL_REQUEUE, "ValueError: later"]))[:1]
    assert found.kind == "preempted", found
    assert any("DUE TO JOB REQUEUE" in line for line in found.evidence)
    assert found.fix.startswith("nothing to change: the job was requeued through SLURM (scontrol requeue")
    assert "higher-priority" not in found.fix.split(";")[0].replace("not a higher-priority job", "")
    assert failures.classify(SCONTROL_REQUEUE, 1, "c1").kind == "preempted"  # the log alone (doctor --log)


def test_an_oom_fix_names_the_offload_keys_in_full():
    """'set the fsdp_config offloads to true' left a new user to find the keys (helper-44's walkthrough)."""
    log = (
        "(TaskRunner pid=4242) Traceback (most recent call last):\n"
        '  File "/opt/verl/verl/workers/engine_workers.py", line 356, in train_batch\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.27 GiB. GPU 0 has a total capacity of "
        "79.11 GiB of which 6.02 GiB is free."
    )
    found = failures.classify(log, 1, "c1")
    assert found.kind == "cuda_oom"
    assert "actor_rollout_ref.actor.fsdp_config.param_offload and optimizer_offload to true" in found.fix
