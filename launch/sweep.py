"""Sweep commands: python launch/sweep.py {status,logs,cancel} <sweep dir | sweep id> [--runs-dir DIR]

Runs on: the login node. Reads the manifest that submission wrote; asks squeue/sacct (every attempt of a requeued
job included) and scancel. A sweep id is looked up under --runs-dir (default: the slurm cluster's shared_dir/rlaunch).
`status` names the cause of each failed or interrupted attempt and `logs` shows its evidence and fix before the
tail (launch/report/failures.py, through the doctor for the plan's numbers).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launch.errors import UserError
from launch.report import doctor, failures
from launch.report.metrics import progress, read_run
from launch.rundir import is_run_dir
from launch.slurm import read_manifest, select_runs

DEFAULT_RUNS_DIR = Path("~/rlaunch/rlaunch").expanduser()


def sacct_attempts(job_ids: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    """job id -> every attempt sacct knows (-D: a requeued job shows each run), oldest first."""
    fields = "JobID,State,ExitCode,Elapsed,NodeList,Start"
    result = subprocess.run(
        ["sacct", "-D", "-X", "-n", "-P", f"--format={fields}", "-j", ",".join(job_ids)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    attempts: dict[str, list[dict[str, str]]] = {}
    for line in result.stdout.splitlines():
        values = dict(zip(fields.split(","), line.split("|"), strict=False))
        attempts.setdefault(values["JobID"], []).append(values)
    return attempts


def squeue_states(job_ids: Sequence[str]) -> dict[str, str]:
    result = subprocess.run(
        ["squeue", "-h", "-r", "-o", "%i|%T|%R", "-j", ",".join(job_ids)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    states = {}
    for line in result.stdout.splitlines():
        job_id, state, reason = line.split("|", 2)
        states[job_id] = f"{state} {reason}" if state == "PENDING" else state
    return states


def status(manifest: dict[str, Any]) -> str:
    runs = manifest["runs"]
    array_ids = sorted({run["array_job_id"] for run in runs})
    queued = squeue_states(array_ids)
    accounted = sacct_attempts(array_ids)
    lines = [f"sweep {manifest['sweep_id']}  ({len(runs)} runs in {len(manifest['arrays'])} arrays)"]
    for run in runs:
        # an array cancelled before its tasks started has one sacct line for all of them: 12_[0-3%4]
        pending_array = next((v for k, v in accounted.items() if k.startswith(f"{run['array_job_id']}_[")), [])
        attempts = accounted.get(run["job_id"], pending_array)
        state = queued.get(run["job_id"]) or (attempts[-1]["State"] if attempts else "UNKNOWN")
        history = " > ".join(a["State"] for a in attempts) if len(attempts) > 1 else ""
        cause = failures.summary(failures.run_failures(Path(run["run_dir"])))
        lines.append(
            f"  {run['job_id']:>10}  {state:<28} attempts {max(len(attempts), 1)}  {progress(run):<12} "
            f"{run['run_id']}  {run['job_name']}"
            + (f"  [{history}]" if history else "")
            + (f"  cause {cause}" if cause else "")
        )
    return "\n".join(lines)


def logs(manifest: dict[str, Any], run: str | None, lines: int) -> str:
    out = []
    for record in select_runs(manifest, run):
        run_dir = Path(record["run_dir"])
        found = doctor.run_failures(read_run(run_dir)) if is_run_dir(run_dir) else []
        if found:  # the lines that show the cause first: they sit far above the tail
            out.append(f"==> {record['job_id']} {record['run_id']} cause:")
            out.extend(line for failure in found for line in failures.render(failure))
        for stream in ("stdout", "stderr"):
            path = Path(record[stream])
            text = path.read_text(errors="replace").splitlines()[-lines:] if path.exists() else ["(not written yet)"]
            out.append(f"==> {record['job_id']} {record['run_id']} {stream}: {path}")
            out.extend(text)
    return "\n".join(out)


def cancel(manifest: dict[str, Any]) -> str:
    array_ids = sorted({run["array_job_id"] for run in manifest["runs"]})
    subprocess.run(["scancel", *array_ids], check=False, timeout=30)
    return f"cancelled {len(array_ids)} array(s): {', '.join(array_ids)}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sweep.py", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("status", "logs", "cancel"))
    parser.add_argument("sweep", help="sweep directory, or sweep id under --runs-dir")
    parser.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS_DIR)
    parser.add_argument("--run", help="logs: one run (run id or job id); default all")
    parser.add_argument("-n", "--lines", type=int, default=20, help="logs: lines per file")
    args = parser.parse_args(argv)
    try:
        manifest = read_manifest(args.sweep, args.runs_dir)
    except FileNotFoundError as error:
        print(f"sweep: error: {error}: give a sweep directory or id (see the submission's last line)", file=sys.stderr)
        sys.exit(2)
    if manifest.get("cluster") == "ray":  # Ray jobs: the same commands through Ray's job API
        from launch import ray_jobs

        backend = {"status": ray_jobs.status, "logs": ray_jobs.logs, "cancel": ray_jobs.cancel}
        try:
            print(backend[args.command](*([manifest, args.run, args.lines] if args.command == "logs" else [manifest])))
        except UserError as error:  # the cluster is gone or refuses: say so in one line
            print(f"sweep: error: {error}", file=sys.stderr)
            sys.exit(2)
        return
    if args.command == "status":
        print(status(manifest))
    elif args.command == "logs":
        print(logs(manifest, args.run, args.lines))
    else:
        print(cancel(manifest))


if __name__ == "__main__":
    main()
