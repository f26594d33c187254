"""cluster=ray, afterwards: `launch/sweep.py status|logs|cancel` for a sweep of Ray jobs, through Ray's job API.

Runs on: the login node or a laptop, talking to the head's dashboard at the manifest's address (launch/ray_api.py),
with the token file the manifest names (never the token).
"""

from __future__ import annotations

from pathlib import Path

from launch.manifest import Manifest
from launch.ray_api import connect
from launch.report import failures
from launch.report.forecast import forecast_lines
from launch.report.metrics import progress

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


def status(manifest: Manifest) -> str:
    client = connect(str(manifest.address), manifest.token_file)
    lines = [f"sweep {manifest.sweep_id}  ({len(manifest.runs)} Ray jobs on {manifest.address})"]
    for run in manifest.runs:
        info = client.get_job_info(run.job_id)
        state = str(info.status.value if hasattr(info.status, "value") else info.status)
        message = f"  ({info.message.strip().splitlines()[0][:100]})" if info.message and state in TERMINAL else ""
        # Ray keeps the job's log, not the run dir: the cause rlaunch can name here is what the run dir records
        cause = failures.summary(failures.run_failures(Path(run.run_dir))) if state == "FAILED" else ""
        shown = f"{state:<10} {progress(Path(run.run_dir)):<12} {run.run_id}  {run.job_name}{message}"
        shown += f"  cause {cause}" if cause else ""
        lines.append(f"  {run.job_id:>28}  {shown}")
        lines += forecast_lines(Path(run.run_dir), state)
    return "\n".join(lines)


def logs(manifest: Manifest, run: str | None, lines: int) -> str:
    client = connect(str(manifest.address), manifest.token_file)
    out = []
    for record in manifest.select(run):
        out.append(f"==> {record.job_id} {record.run_id} (Ray job logs)")
        out.extend(client.get_job_logs(record.job_id).splitlines()[-lines:] or ["(nothing yet)"])
    return "\n".join(out)


def cancel(manifest: Manifest) -> str:
    client = connect(str(manifest.address), manifest.token_file)
    stopped = [str(run.job_id) for run in manifest.runs if client.stop_job(run.job_id)]
    return f"stopped {len(stopped)} Ray job(s): {', '.join(stopped) or 'none was running'}"
