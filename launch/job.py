"""The job: what runs inside the allocation (SLURM) or on this machine (cluster=local) once the plan is made.

Runs on: the job's head node (rank 0 of the submitit job), or the cluster=local machine. Both go through
`run_verl`, so a local run exercises the same code a SLURM job runs. On one node verl's own `ray.init` starts Ray
with the logical CPUs the plan set (TransferQueue needs ~9 plus 3 per GPU, FACTS); multi-node Ray bring-up is the
in-job issue's work and is refused at planning until it lands.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import submitit

from launch.gpu import detect_gpus

# Variables worth a line in the attempt log; everything else (tokens, keys) stays out of files rlaunch writes.
LOGGED_VARIABLES = (
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_JOB_NODELIST",
    "SLURM_NNODES",
    "SLURM_RESTART_COUNT",
    "SLURM_GPUS_ON_NODE",
    "CUDA_VISIBLE_DEVICES",
)


def load_plan(run_dir: str) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "plan.json").read_text())


def record_attempt(run_dir: Path) -> dict[str, Any]:
    """One JSON line per attempt (a requeued job appends another), with the GPUs NVML really sees."""
    gpus = detect_gpus()
    attempt = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "gpus": gpus.count,
        "gpu_name": gpus.name,
        **{name: os.environ[name] for name in LOGGED_VARIABLES if name in os.environ},
    }
    with (run_dir / "attempts.jsonl").open("a") as log:
        log.write(json.dumps(attempt) + "\n")
    return attempt


def run_verl(plan: dict[str, Any]) -> int:
    """verl's own entry point on the planned config, in the run directory, with the worker settings in the env."""
    run_dir = Path(plan["run_dir"])
    record_attempt(run_dir)
    env = {**os.environ, **plan["worker_env"]}
    result = subprocess.run(plan["verl_command"], cwd=run_dir, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"verl exited with code {result.returncode} (run {plan['run_id']}, see the job's log)")
    return result.returncode


class RunInAllocation(submitit.helpers.Checkpointable):
    """The submitted callable: checkpointable, so submitit requeues it on preemption and at the time limit, and the
    requeued attempt finds the same run directory (verl resumes with trainer.resume_mode=auto)."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir

    def __call__(self) -> int:
        plan = load_plan(self.run_dir)
        if submitit.JobEnvironment().global_rank != 0:
            return 0  # one task per node; only the head runs the driver
        return run_verl(plan)


def run_local(plan: dict[str, Any]) -> int:
    return run_verl(plan)
