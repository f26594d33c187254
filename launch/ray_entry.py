"""cluster=ray, inside the job: `python -m launch.ray_entry <run_dir>` is the entrypoint of each Ray job
(launch/ray_submit.py submits it).

Runs on: whichever node of the standing Ray cluster Ray starts the job on, from the run's code snapshot (the job's
working_dir). It records the attempt and runs the planned driver with the node's own interpreter against the cluster
Ray names in RAY_ADDRESS: there is no Ray to bring up or tear down.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ENTRY_MODULE = "launch.ray_entry"


def run_entrypoint(run_dir: str) -> int:
    """Record the attempt, then run the planned driver with this node's interpreter (the plan names the submitting
    machine's)."""
    from launch import job, provenance
    from launch.gpu import detect_gpus
    from launch.rundir import attempts, load_plan

    plan = load_plan(run_dir)
    job.record_attempt(plan, detect_gpus().count)
    attempt = len(attempts(Path(run_dir)))
    command, attempt_env = job.attempt_command(plan, attempt, provenance.record_attempt(Path(run_dir), attempt))
    command[0] = sys.executable
    print(f"rlaunch: Ray job for run {plan.run_id}, attempt {attempt}; code from {Path.cwd()}", flush=True)
    # verl's ray.init passes its own runtime env (the same worker settings, its defaults, this attempt's log path);
    # Ray refuses keys present in both unless told to combine them, the driver's values winning
    env = {**os.environ, **plan.worker_env, **attempt_env, "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1"}
    return subprocess.call(command, cwd=run_dir, env=env)


if __name__ == "__main__":
    sys.exit(run_entrypoint(sys.argv[1]))
