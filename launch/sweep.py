"""Sweep commands: python launch/sweep.py {status,logs,cancel} <sweep dir | run dir | sweep id> [--runs-dir DIR]

Runs on: the login node. Reads the sweep's manifest (launch/manifest.py); asks squeue/sacct (every attempt of a
requeued job included) and scancel (launch/slurm.py), or Ray's job API for cluster=ray (launch/ray_status.py); where
neither answers, `status` and `logs` show what the runs' own records say. A sweep id is looked up in --runs-dir and
in every runs directory a plan made here could have used by default (launch.runs_dir over each conf/cluster/*.yaml's
shared_dir: ./runs/rlaunch for local, ~/rlaunch/rlaunch for slurm and ray). A dry run's manifest lists what was
planned and says that nothing was submitted. `status` names the cause of each failed or interrupted attempt and
`logs` shows its evidence and fix before the tail (launch/report/failures/, through the doctor for the plan's
numbers).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from launch import manifest as manifests
from launch.errors import UserError, closest
from launch.manifest import MANIFEST, Manifest
from launch.ray_submit import RAY_JOB_LOG
from launch.report import doctor, failures
from launch.report.failures.logs import JobRecord, job_logs, read_attempts, task_of, why_only_planned
from launch.report.forecast import forecast_lines
from launch.report.metrics import progress, read_run
from launch.rundir import attempts as run_attempts
from launch.rundir import is_run_dir
from launch.schema import PROJECT_DIR, LaunchSettings
from launch.slurm import SlurmSilent, ask_slurm


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


SWEEPS_SHOWN = 8  # sweeps a runs directory's message names


def sweeps_in(directory: Path) -> list[Path]:
    """The sweep directories in a runs directory (launch.runs_dir): those with a manifest or a run directory, the
    most recent first."""

    def is_sweep(entry: Path) -> bool:
        try:
            return entry.is_dir() and ((entry / MANIFEST).is_file() or any(is_run_dir(run) for run in entry.iterdir()))
        except OSError:  # a directory this user cannot read: not one to name
            return False

    found = [entry for entry in directory.iterdir() if is_sweep(entry)]
    return sorted(found, key=lambda sweep: sweep.stat().st_mtime, reverse=True)


def runs_dir_message(directory: Path, sweeps: list[Path]) -> str:
    more = f" (and {len(sweeps) - SWEEPS_SHOWN} more)" if len(sweeps) > SWEEPS_SHOWN else ""
    named = ", ".join(sweep.name for sweep in sweeps[:SWEEPS_SHOWN])
    return (
        f"{directory} is a runs directory (launch.runs_dir), not a sweep: give one of its sweeps, most recent first: "
        f"{named}{more} (its path, or the id with --runs-dir {directory})"
    )


def enclosing_sweep(directory: Path) -> Path | None:
    """The sweep a directory lies inside (its submitit/ logs, a job's folder), or None."""
    return next((parent for parent in directory.absolute().parents if (parent / MANIFEST).is_file()), None)


def find_sweep(sweep: str, runs_dir: Path | None) -> Path:
    """The sweep directory a command names: a sweep directory, one of its run directories (or any directory inside
    it), or a sweep id found in exactly one runs directory (--runs-dir or its rlaunch/, then the defaults); else
    UserError, naming where it looked and the ids it likely meant."""
    given = Path(sweep).expanduser()
    if is_run_dir(given):
        return given.parent
    if (given / MANIFEST).is_file() or given.is_dir() and any(is_run_dir(entry) for entry in given.iterdir()):
        return given
    if given.is_dir():
        # a shared_dir holds its sweeps under rlaunch/ (launch.runs_dir's default): name them, not 'no manifest'
        for holder in (given, given / "rlaunch"):
            if holder.is_dir() and (sweeps := sweeps_in(holder)):
                raise UserError(runs_dir_message(holder, sweeps))
        if (inside := enclosing_sweep(given)) is not None:
            return inside
    elif "/" in sweep:  # a path, not an id: an id never holds a /
        said = "not a directory" if given.exists() else "no such directory"
        raise UserError(f"{said}: {given}: give a sweep directory (or a run directory in it), or a sweep id")
    given_roots = [runs_dir.expanduser().absolute()] if runs_dir else []
    # --runs-dir may be the shared_dir the user typed: its sweeps are under rlaunch/ (launch.runs_dir's default)
    roots = [*given_roots, *(root / "rlaunch" for root in given_roots if (root / "rlaunch").is_dir())]
    roots = list(dict.fromkeys([*roots, *default_runs_dirs()]))
    found = list(dict.fromkeys((root / sweep).resolve() for root in roots if (root / sweep).is_dir()))
    if len(found) == 1:
        return found[0]
    where = ", ".join(map(str, found or roots))
    if found:
        raise UserError(f"sweep id {sweep} is ambiguous: it is in {where}: give its directory")
    known = [entry.name for root in roots if root.is_dir() for entry in sweeps_in(root)]
    meant = closest(sweep, known)
    raise UserError(f"no sweep {sweep}{meant}: looked in {where} (give the sweep directory, or --runs-dir)")


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
    planned = len(manifest.runs)
    lines = [f"sweep {manifest.sweep_id}  nothing submitted ({planned} planned run{'s' * (planned != 1)})"]
    for run in manifest.runs:
        lines += [f"  {run.run_id}  {run.job_name:<24} {run.run_dir}", f"    {why_only_planned(Path(run.run_dir))}"]
    return "\n".join(lines)


def settled(record: JobRecord | None) -> JobRecord | None:
    """squeue still says COMPLETING for seconds after a scancel while sacct already says CANCELLED: the cancel is what
    happened (a cancelled job is never queued again), and the raylet dying as its job is killed is no lost node."""
    if record is None or not record.queued or not record.attempts or not record.attempts[-1].startswith("CANCELLED"):
        return record
    return replace(record, state=record.attempts[-1])


def started(record: JobRecord | None, logged: int, recorded: int) -> int:
    """The attempts that began: sacct lists a job that waited (or was cancelled while waiting) as an attempt too; a
    started one wrote its start to the job's log or to attempts.jsonl."""
    if record is not None and record.scheduler == "Ray":  # its job API keeps no attempts: one it took counts one
        return max(int(record.state != "PENDING"), logged, recorded)
    attempts = record.attempts if record is not None else ()
    last = attempts[-1] if attempts else ""
    waiting = last.startswith("PENDING") or last.startswith("CANCELLED") and max(logged, recorded) < len(attempts)
    return max(len(attempts) - waiting, logged, recorded)


def status(manifest: Manifest) -> str:
    """One line per run: the state its scheduler gives it (SLURM's, every attempt sacct knows; Ray's, with its
    message) and the cause of each failed attempt; where the scheduler does not answer (a machine without SLURM, a
    controller down, a Ray cluster gone), the state the job's own records give (attempts.jsonl, the run's logs), said
    as such. A job that never started counts 0 attempts."""
    runs = manifest.runs
    records = failures.job_records(manifest)
    arrays = len(manifest.arrays)
    where = f"on {manifest.address}" if manifest.cluster == "ray" else f"in {arrays} array{'s' * (arrays != 1)}"
    lines = [f"sweep {manifest.sweep_id}  ({len(runs)} run{'s' * (len(runs) != 1)} {where})"]
    if records.silent:
        lines.append(f"  {records.silent}: states from the runs' own records, as their jobs last wrote")
    width = max([10, *(len(str(run.job_id)) for run in runs)])
    for run in runs:
        run_dir = Path(run.run_dir)
        record = settled(records.by_run.get(run.run_id))
        attempts = record.attempts if record is not None else ()
        recorded = run_attempts(run_dir) if is_run_dir(run_dir) else []
        count = started(record, len(read_attempts(run_dir)), len(recorded))
        state = failures.run_state(run_dir, record) or "UNKNOWN"
        history = " > ".join(attempts) if len(attempts) > 1 else ""
        cause = failures.summary(failures.run_failures(run_dir, record=record))
        message = f"  ({record.message})" if record is not None and record.message else ""
        lines.append(
            f"  {run.job_id!s:>{width}}  {state:<28} attempts {count}  "
            f"{progress(run_dir):<12} "
            f"{run.run_id}  {run.job_name}"
            + (f"  [{history}]" if history else "")
            + message
            + (f"  cause {cause}" if cause else "")
        )
        lines += forecast_lines(run_dir, state)
    return "\n".join(lines)


def logs(manifest: Manifest, run: str | None, lines: int) -> str:
    """Each run's cause (evidence and fix, from its plan) above the tails of its job's log files: submitit's stdout
    and stderr of every task (a multi-node job's ranks > 0 after task 0's), or a Ray job's output as the run directory
    holds it."""
    records = failures.job_records(manifest)
    out = []
    for entry in manifest.select(run):
        run_dir = Path(entry.run_dir)
        record = settled(records.by_run.get(entry.run_id))
        found = doctor.run_failures(read_run(run_dir), record=record) if is_run_dir(run_dir) else []
        recorded = len(run_attempts(run_dir)) if is_run_dir(run_dir) else 0
        # a job that ended before it started never writes its log; a queued one still may
        ended_unstarted = record is not None and record.scheduler == "SLURM" and not record.queued
        ended_unstarted = ended_unstarted and not started(record, len(read_attempts(run_dir)), recorded)
        unwritten = "(never started: no log)" if ended_unstarted else "(not written yet)"
        if found:  # the lines that show the cause first: they sit far above the tail
            out.append(f"==> {entry.job_id} {entry.run_id} cause:")
            out.extend(line for failure in found for line in failures.render(failure))
        if manifest.cluster == "ray":
            written_logs = [("output", str(run_dir / RAY_JOB_LOG))]
        else:  # task 0's (the driver's), then each other node's task: a worker rank's own error is only in its log
            written_logs = [("stdout", entry.stdout), ("stderr", entry.stderr)] + [
                (f"rank {task_of(path)} {'stdout' if path.suffix == '.out' else 'stderr'}", str(path))
                for path in sorted(
                    job_logs(run_dir), key=lambda path: (len(task_of(path)), task_of(path), path.suffix != ".out")
                )
                if task_of(path) != "0"
            ]
        for stream, written in written_logs:
            path = Path(written or "")
            shown = written is not None and path.exists()
            text = path.read_text(errors="replace").splitlines()[-lines:] if shown else [unwritten]
            out.append(f"==> {entry.job_id} {entry.run_id} {stream}: {path}")
            out.extend(text)
    return "\n".join(out)


def cancel(manifest: Manifest) -> str:
    if manifest.cluster == "ray":  # through Ray's job API
        from launch import ray_status

        return ray_status.cancel(manifest)
    records = failures.job_records(manifest)
    submitted = [run for run in manifest.runs if run.job_id]
    known = [records.by_run[run.run_id] for run in submitted if run.run_id in records.by_run]
    states = ", ".join(f"{state} x{count}" for state, count in Counter(record.state for record in known).items())
    if known and len(known) == len(submitted) and not any(record.queued for record in known):
        # scancel of jobs that ended says nothing: a 'cancelled' would claim what did not happen
        return (
            f"sweep {manifest.sweep_id}: nothing was running to cancel: its {len(known)} job(s) have ended "
            f"({states}, as SLURM records them)"
        )
    try:
        ask_slurm(["scancel", *manifest.array_ids])
    except SlurmSilent as silent:
        raise UserError(f"could not cancel {', '.join(manifest.array_ids)}: {silent}") from None
    before = f" (its jobs were {states})" if known else ""
    return f"cancelled {len(manifest.array_ids)} array(s): {', '.join(manifest.array_ids)}{before}"


def answer(command: str, manifest: Manifest, run: str | None, lines: int) -> str:
    if manifest.dry_run:
        return f"sweep {manifest.sweep_id}: dry run: nothing to cancel" if command == "cancel" else dry_run(manifest)
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
