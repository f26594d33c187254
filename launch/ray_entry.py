"""cluster=ray, inside the job: `python -m launch.ray_entry <run_dir>` is the entrypoint of each Ray job
(launch/ray_submit.py submits it).

Runs on: whichever node of the standing Ray cluster Ray starts the job on, from the run's code snapshot (the job's
working_dir). It records the attempt and runs the planned driver with the node's own interpreter against the cluster
Ray names in RAY_ADDRESS: there is no Ray to bring up or tear down. The hang watchdog watches the driver's steps as
in a SLURM job; it records the stacks of this node's processes of the run (the driver, and the workers Ray started
for this job: RUN_ID_VARIABLE in their environment), since no rlaunch process runs on the cluster's other nodes, and
nothing requeues a Ray job: a hung attempt fails, with its record in hang.json.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

ENTRY_MODULE = "launch.ray_entry"
RUN_ID_VARIABLE = "RLAUNCH_RUN_ID"  # set in the job's runtime env: every worker Ray starts for the job holds it


def ray_status_command() -> list[str]:
    """`ray status` of the cluster this job runs on (RAY_ADDRESS, which Ray sets for an entrypoint)."""
    from launch.ray_cluster import ray_executable

    address = os.environ.get("RAY_ADDRESS")
    return [ray_executable(), "status", *([f"--address={address}"] if address else [])]


def run_entrypoint(run_dir: str) -> int:
    """Record the attempt, then run the planned driver with this node's interpreter (the plan names the submitting
    machine's), watched for hangs and measured against its plan."""
    from launch import calibration, job, provenance, watchdog
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
    node = socket.gethostname()
    others = plan.resources.nodes - 1
    watch = watchdog.watch_for(
        plan,
        attempt,
        (node,),
        f"ray-{plan.run_id}-{attempt}",
        watchdog.ancestor_named("raylet", os.getpid()),
        ray_status_command(),
        dict(os.environ),
        ray_marker=f"{RUN_ID_VARIABLE}={plan.run_id}",
        unreached=(
            f"the run's {others} other node(s) of the standing Ray cluster run no rlaunch process to dump theirs "
            "(`ray stack` on each)"
            if others > 0
            else None
        ),
    )
    stop_measuring = threading.Event()
    calibrating = job.measure_against_plan(plan, attempt, stop_measuring)
    try:
        code = job.run_watched(command, run_dir, env, watch)
    finally:
        stop_measuring.set()
        if calibrating:  # the attempt's end, however it ended: what it measured goes to the store
            calibration.ingest_quietly(Path(run_dir), job.runs_dir_of(plan))
    if watch is not None and watch.hang is not None:
        try:
            job.end_hung_attempt(plan, watch.hang, None)
        except RuntimeError as hung:  # one line in the Ray job's log, not a traceback
            print(f"rlaunch: {hung}", file=sys.stderr, flush=True)
            return 1
    return code


if __name__ == "__main__":
    sys.exit(run_entrypoint(sys.argv[1]))
