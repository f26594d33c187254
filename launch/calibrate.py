"""Ingest measured runs into the calibration store: python launch/calibrate.py RUN_DIR... [--runs-dir DIR]

Runs on: the login node (or any machine that sees the run directories). For each run directory (or every run of a
sweep directory) it writes the run's calibration.json (predicted against measured, per phase) and appends one record
to the store, <runs dir>/calibration.jsonl by default (the runs dir the run lives in: <runs dir>/<sweep>/<run>), which
the next plan of the same shape reads (launch/calibration.py). The job does the same itself after step
launch.calibrate_after_step and when an attempt ends; ingesting a run again replaces its earlier record in what the
planner reads.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from launch import calibration
from launch.errors import UserError
from launch.rundir import is_run_dir, load_plan, read_history
from launch.steptime import PHASES


def run_dirs_of(path: Path) -> list[Path]:
    if is_run_dir(path):
        return [path]
    found = sorted(child for child in path.iterdir() if is_run_dir(child)) if path.is_dir() else []
    if not found:
        raise UserError(f"{path} is neither a run directory (no plan.json) nor a sweep directory holding any")
    return found


def summary(run_dir: Path, record: calibration.StoreRecord | None, runs_dir: Path | None) -> str:
    if record is None:
        plan = load_plan(run_dir)
        if plan.time is None:
            why = "its plan has no step time: planned before calibration, or algo=rft"
            return f"{run_dir.name}: nothing to ingest ({why})"
        why, later = calibration.why_unmeasured(read_history(run_dir))
        return f"{run_dir.name}: " + (f"nothing to ingest yet ({why})" if later else f"nothing to ingest: {why}")
    parts = []
    for phase in PHASES:
        model, measured = record.model_s.get(phase, 0.0), record.measured_s.get(phase, 0.0)
        if phase not in record.measured_s:
            parts.append(f"{phase} not timed")
            continue
        ratio = f"x{measured / model:.2f}" if model > 0 else "-"
        parts.append(f"{phase} {measured:g} s ({ratio} the model)")
    if record.checkpoint_s is not None:  # verl times it inside its step; the step model leaves it out of every phase
        parts.append(f"checkpoint save {record.checkpoint_s:g} s (timed apart from the step)")
    lengths = "no lengths logged"
    if record.response_mean is not None:
        lengths = f"mean response {record.response_mean:.0f} tokens"
    store = calibration.store_path(runs_dir or run_dir.parent.parent)
    return f"{run_dir.name}: " + ", ".join(parts) + f"; {lengths}; appended to {store}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="calibrate.py", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories, or sweep directories")
    parser.add_argument("--runs-dir", type=Path, help="the store's runs dir (default: the one each run lives in)")
    args = parser.parse_args(argv)
    try:
        for path in args.runs:
            for run_dir in run_dirs_of(path.expanduser().resolve()):
                print(summary(run_dir, calibration.ingest(run_dir, args.runs_dir), args.runs_dir))
    except UserError as error:
        print(f"calibrate: error: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
