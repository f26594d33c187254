"""Sweep commands: python launch/sweep.py {status,logs,cancel} <sweep dir | run dir | sweep id> [--runs-dir DIR]

Runs on: the login node. Reads the sweep's manifest (launch/manifest.py); asks squeue/sacct (every attempt of a
requeued job included) and scancel. A sweep id is looked up in --runs-dir and in every runs directory a plan made here
could have used by default (launch.runs_dir over each conf/cluster/*.yaml's shared_dir: ./runs/rlaunch for local,
~/rlaunch/rlaunch for slurm and ray). A dry run's manifest lists what was planned and says that nothing was
submitted. `status` names the cause of each failed or interrupted attempt and `logs` shows its evidence and fix
before the tail (launch/report/failures/, through the doctor for the plan's numbers).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from launch import manifest as manifests
from launch.errors import UserError
from launch.manifest import MANIFEST, Manifest
from launch.report import doctor, failures
from launch.report.forecast import forecast_lines
from launch.report.metrics import progress, read_run
from launch.rundir import attempts as run_attempts
from launch.rundir import is_run_dir
from launch.schema import PROJECT_DIR, LaunchSettings


def default_runs_dirs() -> list[Path]:
    """launch.runs_dir's default resolved over each cluster option's shared_dir, as a plan made in this directory
    would resolve it (a relative one is under the working directory)."""
    found = []
    for conf in sorted((PROJECT_DIR / "conf" / "cluster").glob("*.yaml")):
        shared_dir = OmegaConf.load(conf).get("cluster", {}).get("shared_dir")
        if shared_dir is None:  # cluster=auto: one of the others
            continue
        tree = OmegaConf.create(
            {"cluster": {"shared_dir": shared_dir}, "launch": {"runs_dir": LaunchSettings.runs_dir}}
        )
        try:
            runs_dir = Path(str(tree.launch.runs_dir)).expanduser()
        except OmegaConfBaseException:  # a shared_dir naming a variable this shell lacks: no plan here used it
            continue
        found.append(runs_dir if runs_dir.is_absolute() else Path.cwd() / runs_dir)
    return list(dict.fromkeys(found))


def find_sweep(sweep: str, runs_dir: Path | None) -> Path:
    """The sweep directory a command names: a sweep directory, one of its run directories, or a sweep id found in
    exactly one runs directory (--runs-dir, then the defaults); else UserError, naming where it looked."""
    given = Path(sweep).expanduser()
    if is_run_dir(given):
        return given.parent
    if (given / MANIFEST).is_file() or given.is_dir() and any(is_run_dir(entry) for entry in given.iterdir()):
        return given
    roots = [*([runs_dir.expanduser().absolute()] if runs_dir else []), *default_runs_dirs()]
    found = list(dict.fromkeys((root / sweep).resolve() for root in roots if (root / sweep).is_dir()))
    if len(found) == 1:
        return found[0]
    where = ", ".join(map(str, found or dict.fromkeys(roots)))
    if found:
        raise UserError(f"sweep id {sweep} is ambiguous: it is in {where}: give its directory")
    raise UserError(f"no sweep {sweep}: looked in {where} (give the sweep directory, or --runs-dir)")


def read_sweep(directory: Path) -> Manifest:
    try:
        return manifests.read(directory)
    except FileNotFoundError:
        raise UserError(
            f"{directory} has no {MANIFEST}: nothing was submitted from it (a cluster=local run, or one planned by an "
            "rlaunch whose dry runs wrote no manifest)"
        ) from None


def dry_run(manifest: Manifest) -> str:
    """status and logs of a dry run: what was planned, where its run directories are."""
    lines = [f"sweep {manifest.sweep_id}  dry run: nothing submitted ({len(manifest.runs)} planned runs)"]
    lines += [f"  {run.run_id}  {run.job_name:<24} {run.run_dir}" for run in manifest.runs]
    return "\n".join(lines)


class SlurmSilent(Exception):
    """squeue or sacct did not answer: not installed on this machine, or no controller (or accounting) reachable."""


def ask_slurm(command: list[str]) -> str:
    """The command's output; SlurmSilent with its own words when it is missing, fails or hangs."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError:
        raise SlurmSilent(f"{command[0]} is not installed here") from None
    except subprocess.TimeoutExpired:
        raise SlurmSilent(f"{command[0]} did not answer within 30 s") from None
    # squeue -j with ids no longer queued exits 1 saying so: an answer (none of them is queued), not silence
    if result.returncode != 0 and "Invalid job id specified" not in result.stderr:
        said = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
        raise SlurmSilent(said if said.startswith(command[0]) else f"{command[0]}: {said}")
    return result.stdout


def sacct_attempts(job_ids: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    """job id -> every attempt sacct knows (-D: a requeued job shows each run), oldest first."""
    fields = "JobID,State,ExitCode,Elapsed,NodeList,Start"
    output = ask_slurm(["sacct", "-D", "-X", "-n", "-P", f"--format={fields}", "-j", ",".join(job_ids)])
    attempts: dict[str, list[dict[str, str]]] = {}
    for line in output.splitlines():
        values = dict(zip(fields.split(","), line.split("|"), strict=False))
        attempts.setdefault(values["JobID"], []).append(values)
    return attempts


def squeue_states(job_ids: Sequence[str]) -> dict[str, str]:
    output = ask_slurm(["squeue", "-h", "-r", "-o", "%i|%T|%R", "-j", ",".join(job_ids)])
    states = {}
    for line in output.splitlines():
        job_id, state, reason = line.split("|", 2)
        states[job_id] = f"{state} {reason}" if state == "PENDING" else state
    return states


def status(manifest: Manifest) -> str:
    """One line per run: SLURM's state and every attempt sacct knows; where SLURM does not answer (a machine without
    it, a controller down), the state the job's own records give (attempts.jsonl, the run's logs), said as such."""
    runs = manifest.runs
    lines = [f"sweep {manifest.sweep_id}  ({len(runs)} runs in {len(manifest.arrays)} arrays)"]
    try:
        queued, accounted = squeue_states(manifest.array_ids), sacct_attempts(manifest.array_ids)
    except SlurmSilent as silent:
        queued, accounted = {}, {}
        lines.append(f"  SLURM did not answer ({silent}): states from the runs' own records, as their jobs last wrote")
    for run in runs:
        # an array cancelled before its tasks started has one sacct line for all of them: 12_[0-3%4]
        job_id = str(run.job_id)
        pending_array = next((v for k, v in accounted.items() if k.startswith(f"{run.array_job_id}_[")), [])
        attempts = accounted.get(job_id, pending_array)
        recorded = run_attempts(Path(run.run_dir)) if is_run_dir(Path(run.run_dir)) else []
        state = queued.get(job_id) or (attempts[-1]["State"] if attempts else None)
        state = state or failures.run_state(Path(run.run_dir)) or "UNKNOWN"
        history = " > ".join(a["State"] for a in attempts) if len(attempts) > 1 else ""
        cause = failures.summary(failures.run_failures(Path(run.run_dir)))
        lines.append(
            f"  {job_id:>10}  {state:<28} attempts {max(len(attempts), len(recorded), 1)}  "
            f"{progress(Path(run.run_dir)):<12} "
            f"{run.run_id}  {run.job_name}"
            + (f"  [{history}]" if history else "")
            + (f"  cause {cause}" if cause else "")
        )
        lines += forecast_lines(Path(run.run_dir), state)
    return "\n".join(lines)


def logs(manifest: Manifest, run: str | None, lines: int) -> str:
    out = []
    for record in manifest.select(run):
        run_dir = Path(record.run_dir)
        found = doctor.run_failures(read_run(run_dir)) if is_run_dir(run_dir) else []
        if found:  # the lines that show the cause first: they sit far above the tail
            out.append(f"==> {record.job_id} {record.run_id} cause:")
            out.extend(line for failure in found for line in failures.render(failure))
        for stream, written in (("stdout", record.stdout), ("stderr", record.stderr)):
            path = Path(written or "")
            shown = written is not None and path.exists()
            text = path.read_text(errors="replace").splitlines()[-lines:] if shown else ["(not written yet)"]
            out.append(f"==> {record.job_id} {record.run_id} {stream}: {path}")
            out.extend(text)
    return "\n".join(out)


def cancel(manifest: Manifest) -> str:
    try:
        ask_slurm(["scancel", *manifest.array_ids])
    except SlurmSilent as silent:
        raise UserError(f"could not cancel {', '.join(manifest.array_ids)}: {silent}") from None
    return f"cancelled {len(manifest.array_ids)} array(s): {', '.join(manifest.array_ids)}"


def answer(command: str, manifest: Manifest, run: str | None, lines: int) -> str:
    if manifest.dry_run:
        return f"sweep {manifest.sweep_id}: dry run: nothing to cancel" if command == "cancel" else dry_run(manifest)
    if manifest.cluster == "ray":  # Ray jobs: the same commands through Ray's job API
        from launch import ray_status

        return ray_status.logs(manifest, run, lines) if command == "logs" else getattr(ray_status, command)(manifest)
    if command == "logs":
        return logs(manifest, run, lines)
    return status(manifest) if command == "status" else cancel(manifest)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sweep.py", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("status", "logs", "cancel"))
    parser.add_argument("sweep", help="sweep directory (or a run directory in it), or sweep id")
    parser.add_argument("--runs-dir", type=Path, help="look for a sweep id here first (a plan's launch.runs_dir)")
    parser.add_argument("--run", help="logs: one run (run id or job id); default all")
    parser.add_argument("-n", "--lines", type=int, default=20, help="logs: lines per file")
    args = parser.parse_args(argv)
    try:
        if args.lines < 1:  # a tail of 0 or fewer lines ([-0:] is the whole file)
            raise UserError(f"-n {args.lines}: give the lines per file as a whole number >= 1")
        manifest = read_sweep(find_sweep(args.sweep, args.runs_dir))
        print(answer(args.command, manifest, args.run, args.lines))
    except UserError as error:  # not found, or the Ray cluster is gone or refuses: one line
        print(f"sweep: error: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
