"""A sweep's manifest (`<sweep_dir>/manifest.json`): which runs it holds, where their run directories are and, once
submitted, their job ids: what `launch/sweep.py status|logs|cancel` reads. The one writer and reader of that file.

Runs on: the login node: launch/run.py writes one for a dry run (`dry_run: true`: the planned runs, no job ids),
launch/slurm.py and launch/ray_submit.py for a submission; sweep.py and the report tools read it.

The JSON is the dataclass's fields; a manifest written before `cluster` and `dry_run` existed (a SLURM submission)
reads as cluster=slurm, not dry. Each run is a `ManifestRun`: what it holds differs by backend (a SLURM array task has
`array_job_id` and its log paths, a Ray job only its submission id, a dry run no job id at all), and the JSON leaves
out what a backend does not have.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from launch.errors import UserError
from launch.rundir import Plan

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class ManifestRun:
    """One run of the sweep, as its backend queued it."""

    run_id: str
    run_dir: str
    job_name: str = ""
    overrides: list[str] = field(default_factory=list)
    job_id: str | None = None  # SLURM's <array>_<task> or plain job id, Ray's submission id; None: a dry run's
    array_job_id: str | None = None  # SLURM: the array it is a task of
    array_index: int | None = None  # SLURM: its task in an array of more than one
    stdout: str | None = None  # SLURM: submitit's log files of the job's first task
    stderr: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ManifestRun:
        known = {item.name for item in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass(frozen=True)
class ManifestArray:
    """One SLURM job array: its id, name, task count and the sbatch parameters its tasks share."""

    job_id: str
    tasks: int
    name: str = ""
    sbatch: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Manifest:
    sweep_id: str
    sweep_dir: str
    runs: list[ManifestRun]
    arrays: list[ManifestArray] = field(default_factory=list)  # SLURM job arrays; empty for Ray and dry runs
    cluster: str = "slurm"  # slurm | ray | local: which backend status, logs and cancel ask
    dry_run: bool = False  # planned only: nothing was submitted, no run has a job id
    address: str | None = None  # cluster=ray: the dashboard the jobs went to
    token_file: str | None = None  # cluster=ray: the token file its clients read (never the token)
    submit_seconds: float | None = None

    @classmethod
    def planned(cls, plans: list[Plan]) -> Manifest:
        """A dry run's manifest: the runs as planned, with their run directories and job names."""
        runs = [ManifestRun(plan.run_id, plan.run_dir, plan.job_name, plan.overrides) for plan in plans]
        sweep_dir = str(Path(plans[0].run_dir).parent)
        return cls(plans[0].sweep_id, sweep_dir, runs, cluster=plans[0].cluster, dry_run=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        known = {item.name for item in fields(cls)}
        read = {key: value for key, value in data.items() if key in known}
        read["runs"] = [ManifestRun.from_dict(run) for run in data.get("runs", [])]
        read["arrays"] = [ManifestArray(**array) for array in data.get("arrays", [])]
        return cls(**read)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"runs": [run.to_dict() for run in self.runs]}

    @property
    def array_ids(self) -> list[str]:
        return sorted({run.array_job_id for run in self.runs if run.array_job_id})

    def select(self, run: str | None) -> list[ManifestRun]:
        """One run by run id or job id, or all of them."""
        chosen = [r for r in self.runs if run in (None, r.run_id, r.job_id)]
        if not chosen:
            known = ", ".join(f"{r.job_id or '-'} ({r.run_id})" for r in self.runs)
            raise UserError(f"no run {run} in this sweep: choose one of {known} (--run takes a run id or a job id)")
        return chosen

    def merged_into(self, previous: Manifest) -> Manifest:
        """One sweep id may be submitted in parts (never the same run twice). A submission replaces a dry run's list
        (the plans it listed were not queued), and a dry run never hides what an earlier submission queued."""
        if previous.dry_run != self.dry_run:
            return previous if self.dry_run else self
        known = {run.run_id for run in self.runs}
        runs = [run for run in previous.runs if run.run_id not in known] + self.runs
        return replace(self, arrays=previous.arrays + self.arrays, runs=runs)

    def write(self) -> Manifest:
        """Merged with the sweep directory's manifest, if any; returns what the file now holds. Renamed into place:
        a reader (sweep.py status while a sweep is being submitted) never sees half a file."""
        sweep_dir = Path(self.sweep_dir)
        previous = read(sweep_dir) if (sweep_dir / MANIFEST).is_file() else None
        merged = self.merged_into(previous) if previous is not None else self
        sweep_dir.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(prefix=f".{MANIFEST}.", dir=sweep_dir)
        with os.fdopen(handle, "w") as file:
            file.write(json.dumps(merged.to_dict(), indent=2) + "\n")
        os.chmod(partial, 0o644)  # mkstemp's 0600 would hide the manifest from a colleague's sweep.py status
        os.replace(partial, sweep_dir / MANIFEST)
        return merged


def read(sweep_dir: Path) -> Manifest:
    """The manifest of a sweep directory (FileNotFoundError without one)."""
    return Manifest.from_dict(json.loads((sweep_dir / MANIFEST).read_text()))
