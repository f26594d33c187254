"""cluster=ray, afterwards: what Ray's job API says of a sweep's Ray jobs (each one's status and message, which
`launch/sweep.py status` and the reports set beside the runs' own records), and stopping them (`sweep.py cancel`).

Runs on: the login node or a laptop, talking to the head's dashboard at the manifest's address (launch/ray_api.py),
with the token file the manifest names (never the token). The jobs' output is read from the run directories
(launch/ray_submit.py RAY_JOB_LOG), which outlive the cluster.
"""

from __future__ import annotations

from launch.manifest import Manifest
from launch.ray_api import connect, refusal

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


def job_states(manifest: Manifest) -> dict[str, tuple[str, str]]:
    """job id -> (Ray's status, the first line of its message for a job that ended); a UserError naming the cluster
    where it does not answer (gone, restarted without the job, or refusing the token)."""
    address = str(manifest.address)
    client = connect(address, manifest.token_file)
    states = {}
    for run in manifest.runs:
        try:
            info = client.get_job_info(run.job_id)
        except Exception as error:  # the head went away between two questions, or forgot the job (restarted)
            raise refusal(address, error, manifest.token_file) from None
        state = str(info.status.value if hasattr(info.status, "value") else info.status)
        message = info.message.strip().splitlines()[0][:100] if info.message and state in TERMINAL else ""
        states[str(run.job_id)] = (state, message)
    return states


def cancel(manifest: Manifest) -> str:
    client = connect(str(manifest.address), manifest.token_file)
    stopped = [str(run.job_id) for run in manifest.runs if client.stop_job(run.job_id)]
    return f"stopped {len(stopped)} Ray job(s): {', '.join(stopped) or 'none was running'}"
