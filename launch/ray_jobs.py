"""cluster=ray: runs submitted to a Ray cluster that already stands (KubeRay, a head node), through Ray's job API.

Runs on: the login node or a laptop (`cluster_facts`, `submit`, and `status`/`logs`/`cancel` for launch/sweep.py),
talking to the head's dashboard at `cluster.address` with `ray.job_submission.JobSubmissionClient`; and, as
`python -m launch.ray_jobs <run_dir>`, as the entrypoint of each Ray job (`run_entrypoint`), on whichever node Ray
starts it. A sweep is one Ray job per run. The job's working_dir is the run's code snapshot (launch/snapshot.py;
Ray uploads it once, content-addressed), its runtime env carries rlaunch's worker settings (the same `worker_env`
verl's own ray.init passes; Ray merges the two), and the entrypoint records the attempt and runs the planned driver
with the node's own interpreter. Run directories live under `cluster.shared_dir`, which the cluster's nodes must see
at the same path (verl writes checkpoints there, and the entrypoint reads the plan there).

Resources come from what the cluster reports (Ray's state API over the dashboard: CPUs, GPUs, memory per alive node),
as a `PartitionFacts`, so the plan's caps, the checks and the preflight's host-RAM verdict use them as they use
sinfo's. Ray jobs are never requeued: a failed job stays FAILED; submitting the same overrides again with the same
`launch.sweep_id` gives the same run id, run directory and W&B run, and verl resumes from the last checkpoint.

Auth: `cluster.ray_auth_token_file` is the cluster's token file, read by each client into its HTTP header (never
copied, logged or put in the job); without it Ray's own lookup applies, and a cluster that requires a token refuses,
which is reported with the fix.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launch.errors import UserError
from launch.ray_api import connect

if TYPE_CHECKING:
    from launch.rundir import Plan

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
ENTRY_MODULE = "launch.ray_jobs"


def check_resources(cfg: Any, resources: Any, facts: Any) -> None:
    """What the cluster cannot give, refused with the fix. A cluster that reports no GPU at all is let through (an
    autoscaling cluster adds GPU nodes on demand); the plan warns instead."""
    cluster = facts.partition
    if cluster is None or cluster.gpus_per_node == 0:
        return
    where = cluster.name
    if resources.gpus_per_node > cluster.gpus_per_node:
        raise UserError(
            f"trainer.n_gpus_per_node={resources.gpus_per_node} but the nodes of {where} have at most "
            f"{cluster.gpus_per_node} GPUs: set trainer.n_gpus_per_node<={cluster.gpus_per_node} and raise "
            "trainer.nnodes"
        )
    if resources.nodes > cluster.nodes:
        raise UserError(
            f"trainer.nnodes={resources.nodes} but {where} has {cluster.nodes} node(s) with GPUs: use fewer nodes"
        )


def entrypoint(python: str, run_dir: str) -> str:
    return shlex.join([python, "-m", ENTRY_MODULE, run_dir])


def job_request(plan: Plan, python: str) -> dict[str, Any]:
    """What is submitted for one run (pure): entrypoint, runtime env (working_dir = the snapshot), metadata."""
    return {
        "entrypoint": entrypoint(python, plan.run_dir),
        "runtime_env": {"working_dir": plan.code_dir, "env_vars": dict(plan.worker_env)},
        "metadata": {"rlaunch_run_id": plan.run_id, "rlaunch_sweep_id": plan.sweep_id, "job_name": plan.job_name},
    }


def submit(plans: list[Plan], address: str, token_file: str | None, python: str) -> dict[str, Any]:
    """One Ray job per run; returns (and writes) the sweep's manifest, as soon as the cluster accepted them."""
    from launch import slurm, snapshot

    if any(plan.code_dir is None for plan in plans):
        raise UserError("cluster=ray needs the code snapshot as the job's working_dir: set cluster.snapshot=true")
    client = connect(address, token_file)
    sweep_dir = slurm.sweep_dir_of(plans)
    manifest: dict[str, Any] = {
        "cluster": "ray",
        "address": address,
        "token_file": token_file,
        "sweep_id": plans[0].sweep_id,
        "sweep_dir": str(sweep_dir),
        "arrays": [],
        "runs": [],
    }
    started = time.perf_counter()
    for plan in plans:
        snapshot.materialize(Path(plan.code_dir))
        submission_id = client.submit_job(**job_request(plan, python))
        manifest["runs"].append(
            {
                "run_id": plan.run_id,
                "job_name": plan.job_name,
                "overrides": plan.overrides,
                "run_dir": plan.run_dir,
                "job_id": submission_id,
            }
        )
    manifest["submit_seconds"] = round(time.perf_counter() - started, 3)
    slurm.write_manifest(sweep_dir, manifest)
    return manifest


def status(manifest: dict[str, Any]) -> str:
    from launch.report.metrics import progress

    client = connect(manifest["address"], manifest.get("token_file"))
    runs = manifest["runs"]
    lines = [f"sweep {manifest['sweep_id']}  ({len(runs)} Ray jobs on {manifest['address']})"]
    for run in runs:
        info = client.get_job_info(run["job_id"])
        state = str(info.status.value if hasattr(info.status, "value") else info.status)
        message = f"  ({info.message.strip().splitlines()[0][:100]})" if info.message and state in TERMINAL else ""
        shown = f"{state:<10} {progress(run):<12} {run['run_id']}  {run['job_name']}{message}"
        lines.append(f"  {run['job_id']:>28}  {shown}")
    return "\n".join(lines)


def logs(manifest: dict[str, Any], run: str | None, lines: int) -> str:
    from launch.slurm import select_runs

    client = connect(manifest["address"], manifest.get("token_file"))
    out = []
    for record in select_runs(manifest, run):
        out.append(f"==> {record['job_id']} {record['run_id']} (Ray job logs)")
        out.extend(client.get_job_logs(record["job_id"]).splitlines()[-lines:] or ["(nothing yet)"])
    return "\n".join(out)


def cancel(manifest: dict[str, Any]) -> str:
    client = connect(manifest["address"], manifest.get("token_file"))
    stopped = [run["job_id"] for run in manifest["runs"] if client.stop_job(run["job_id"])]
    return f"stopped {len(stopped)} Ray job(s): {', '.join(stopped) or 'none was running'}"


def run_entrypoint(run_dir: str) -> int:
    """Inside the Ray job: record the attempt, then run the planned driver with this node's interpreter (the plan's
    names the submitting machine's) against the cluster Ray set in RAY_ADDRESS. No Ray to bring up or tear down."""
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
