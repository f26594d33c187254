"""cluster=ray, submission: runs submitted to a Ray cluster that already stands (KubeRay, a head node), through Ray's
job API, one Ray job per run.

Runs on: the login node or a laptop, talking to the head's dashboard at `cluster.address` with
`ray.job_submission.JobSubmissionClient` (launch/ray_api.py). The job's working_dir is the run's code snapshot
(launch/snapshot.py; Ray uploads it once, content-addressed), its runtime env carries rlaunch's worker settings (the
same `worker_env` verl's own ray.init passes; Ray merges the two), and its entrypoint is launch/ray_entry.py. Run
directories live under `cluster.shared_dir`, which the cluster's nodes must see at the same path (verl writes
checkpoints there, and the entrypoint reads the plan there). Ray jobs are never requeued: a failed job stays FAILED;
submitting the same overrides again with the same `launch.sweep_id` gives the same run id, run directory and W&B
run, and verl resumes from the last checkpoint. The job's output goes to Ray's log on the head and, as it is written,
to <run_dir>/ray_job.log with a last line saying how the entrypoint ended (its exit code, or a stop): the reports read
the run's cause there, also once the cluster is gone. Afterwards: launch/sweep.py (status, logs, cancel; Ray's job
API through launch/ray_status.py) and launch/report/.

Resources come from what the cluster reports (Ray's state API over the dashboard: CPUs, GPUs, memory per alive
node), as a `PartitionFacts` (launch/facts.py), so the plan's caps, the checks and the preflight's host-RAM verdict
use them as they use sinfo's.

Auth: `cluster.ray_auth_token_file` is the cluster's token file, read by each client into its HTTP header (never
copied, logged or put in the job); without it Ray's own lookup applies, and a cluster that requires a token refuses,
which is reported with the fix.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from launch import snapshot
from launch.errors import UserError
from launch.manifest import Manifest, ManifestRun
from launch.ray_api import connect
from launch.ray_entry import ENTRY_MODULE, RUN_ID_VARIABLE
from launch.rundir import Plan

# the job's output, copied into the run directory as it is written: Ray keeps its own copy on the head, which a
# cluster that is gone (or restarted) takes with it, and the reports name a failed run's cause from this one
RAY_JOB_LOG = "ray_job.log"
# the entrypoint's last line in it (launch/report/failures/logs.py reads how the attempt ended from them)
ENTRY_EXITED = "rlaunch: the Ray job's entrypoint exited with code"
ENTRY_STOPPED = "rlaunch: the Ray job was stopped (SIGTERM: sweep.py cancel, ray job stop, or the cluster ending it)"
# Ray runs the entrypoint with /bin/sh, which need not know pipefail (dash): bash keeps the entrypoint's exit code
# through tee. Ray stops a job by signalling every process of it: the trap writes the stop once the pipeline is gone.
COPIED_OUTPUT = (
    f'trap \'echo "{ENTRY_STOPPED}" >> "$1"; exit 143\' TERM; set -o pipefail; "${{@:2}}" 2>&1 | tee -a "$1"; '
    f'code=$?; echo "{ENTRY_EXITED} $code" | tee -a "$1"; exit $code'
)


def entrypoint(python: str, run_dir: str) -> str:
    """The Ray job's command: launch/ray_entry.py on the run, its output also appended to the run's RAY_JOB_LOG."""
    log = str(Path(run_dir) / RAY_JOB_LOG)
    return shlex.join(["bash", "-c", COPIED_OUTPUT, "rlaunch-ray-job", log, python, "-m", ENTRY_MODULE, run_dir])


def job_request(plan: Plan, python: str) -> dict[str, Any]:
    """What is submitted for one run (pure): entrypoint, runtime env (working_dir = the snapshot), metadata."""
    return {
        "entrypoint": entrypoint(python, plan.run_dir),
        # the run's id in every worker's environment: the hang watchdog tells this job's workers from the others
        # that the standing cluster's raylet runs (launch/ray_entry.py)
        "runtime_env": {"working_dir": plan.code_dir, "env_vars": {**plan.worker_env, RUN_ID_VARIABLE: plan.run_id}},
        "metadata": {"rlaunch_run_id": plan.run_id, "rlaunch_sweep_id": plan.sweep_id, "job_name": plan.job_name},
    }


# Ray's job API answers 500 "No available agent to submit job, please try again later" until a node's dashboard agent
# has registered with the head (seconds after `ray start`, longer on a loaded head): it says to retry, so it is
AGENT_NOT_YET = "No available agent to submit job"
AGENT_WAIT_S = 60.0


def submit_when_an_agent_answers(client: Any, request: dict[str, Any], wait_s: float = AGENT_WAIT_S) -> str:
    """client.submit_job(**request), retried while the cluster has no job agent yet (at most `wait_s`)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return str(client.submit_job(**request))
        except RuntimeError as error:
            if AGENT_NOT_YET not in str(error) or time.monotonic() > deadline:
                raise
        time.sleep(1.0)


def submit(plans: list[Plan], address: str, token_file: str | None, python: str) -> Manifest:
    """One Ray job per run; returns (and writes) the sweep's manifest, as soon as the cluster accepted them."""
    if any(plan.code_dir is None for plan in plans):
        raise UserError("cluster=ray needs the code snapshot as the job's working_dir: set cluster.snapshot=true")
    client = connect(address, token_file)
    started = time.perf_counter()
    runs = []
    for plan in plans:
        snapshot.materialize(Path(str(plan.code_dir)))
        try:
            submission_id = submit_when_an_agent_answers(client, job_request(plan, python))
        except RuntimeError as error:
            if AGENT_NOT_YET not in str(error) or runs:
                raise
            raise UserError(
                f"cluster.address={address}: the Ray cluster took no job in {AGENT_WAIT_S:.0f} s (no job agent: "
                "its dashboard agent did not start, often a port another Ray on the head holds: `ray start "
                "--dashboard-agent-listen-port=<free port>`; see the head's dashboard_agent.log); nothing submitted"
            ) from error
        runs.append(ManifestRun(plan.run_id, plan.run_dir, plan.job_name, plan.overrides, job_id=submission_id))
    sweep_dir = str(Path(plans[0].run_dir).parent)
    manifest = Manifest(plans[0].sweep_id, sweep_dir, runs, cluster="ray", address=address, token_file=token_file)
    return replace(manifest, submit_seconds=round(time.perf_counter() - started, 3)).write()
