"""SLURM submission: the one module that talks to submitit (and through it to sbatch).

Runs on: the login node. A sweep is grouped by resource shape (identical sbatch options); each group becomes ONE job
array, submitted without waiting for anything to run (the stock Hydra submitit launcher can do neither: one template
per launch, hydra#2874, and it blocks until jobs end, hydra#692). A shape with more jobs than the cluster's
MaxArraySize (`scontrol show config`) becomes several arrays; `cluster.array_parallelism` throttles each (%N).
A manifest in the sweep directory (launch/manifest.py) records run ids, job ids, arrays and overrides for
`launch/sweep.py status|logs|cancel`. The code snapshot the jobs import is written here, just before they are queued
(never by a dry run). Afterwards SLURM's own commands answer for the jobs (`ask_slurm`: squeue, sacct -D with every
attempt of a requeued job, scancel), for sweep.py and the reports (launch/report/failures/logs.py job_records).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from launch import container, ray_cluster, snapshot
from launch.errors import UserError
from launch.manifest import Manifest, ManifestArray, ManifestRun
from launch.rundir import Plan


@dataclass(frozen=True)
class ShapeGroup:
    """Jobs whose sbatch options are identical: one array."""

    parameters: dict[str, Any]
    plans: list[Plan]


def group_by_shape(plans: list[Plan]) -> list[ShapeGroup]:
    groups: dict[str, ShapeGroup] = {}
    for plan in plans:
        key = json.dumps([plan.slurm, plan.container], sort_keys=True)
        groups.setdefault(key, ShapeGroup(plan.slurm, []))
        groups[key].plans.append(plan)
    return list(groups.values())


def parse_max_array_size(config_text: str) -> int | None:
    """`scontrol show config`'s 'MaxArraySize = 1001' -> 1001 (array indices run 0..MaxArraySize-1)."""
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", config_text, re.MULTILINE)
    return int(match.group(1)) if match else None


@cache  # one sweep renders and submits against one controller
def max_array_size() -> int | None:
    """The controller's MaxArraySize, or None when no SLURM answers here (a dry run on a laptop)."""
    try:
        result = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_max_array_size(result.stdout) if result.returncode == 0 else None


def split_arrays(groups: list[ShapeGroup], limit: int | None) -> list[ShapeGroup]:
    """Each shape in arrays of at most `limit` tasks (None: no limit known, one array per shape)."""
    if limit is None:
        return groups
    return [
        replace(group, plans=group.plans[start : start + limit])
        for group in groups
        for start in range(0, len(group.plans), limit)
    ]


def arrays_of(plans: list[Plan], limit: int | None) -> list[ShapeGroup]:
    return split_arrays(group_by_shape(plans), limit)


def sweep_dir_of(plans: list[Plan]) -> Path:
    return Path(plans[0].run_dir).parent


def submitit_folder(sweep_dir: Path) -> Path:
    return sweep_dir / "submitit" / "%j"


def job_name(group: ShapeGroup, index: int) -> str:
    return f"rl-{group.plans[0].sweep_id}-{index}"


def array_parameters(group: ShapeGroup) -> dict[str, Any]:
    """The group's sbatch options; without cluster.array_parallelism every task may run at once (submitit would
    otherwise throttle arrays to 256 without saying so)."""
    return {"array_parallelism": len(group.plans), **group.parameters}


def job_python(group: ShapeGroup) -> str:
    """The interpreter the srun step starts: this one, or the container's (apptainer: `apptainer exec ... python`)."""
    return container.python_command(group.plans[0].container, sys.executable)


def _submitit_command(folder: Path, python: str) -> str:
    # what submitit's SlurmExecutor puts in the script (shown by dry runs exactly as it will be submitted)
    return " ".join([python, "-u -m submitit.core._submit", shlex.quote(str(folder))])


def render_sbatch(group: ShapeGroup, index: int, sweep_dir: Path) -> str:
    """The sbatch script submitit will write for this group (pure: nothing is submitted)."""
    from submitit.slurm.slurm import _make_sbatch_string

    folder = submitit_folder(sweep_dir)
    map_count = len(group.plans) if len(group.plans) > 1 else None
    return _make_sbatch_string(
        command=_submitit_command(folder, job_python(group)),
        folder=folder,
        job_name=job_name(group, index),
        map_count=map_count,
        **array_parameters(group),
    )


def render_all(plans: list[Plan], limit: int | None = None) -> list[tuple[ShapeGroup, str]]:
    sweep_dir = sweep_dir_of(plans)
    groups = arrays_of(plans, limit)
    return [(group, render_sbatch(group, index, sweep_dir)) for index, group in enumerate(groups)]


class SlurmSilent(Exception):
    """squeue, sacct or scancel did not answer: not installed on this machine, or no controller (or accounting)
    reachable."""


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


def sacct_attempts(job_ids: list[str]) -> dict[str, list[dict[str, str]]]:
    """job id -> every attempt sacct knows (-D: a requeued job shows each run), oldest first."""
    fields = "JobID,State,ExitCode,Elapsed,NodeList,Start"
    output = ask_slurm(["sacct", "-D", "-X", "-n", "-P", f"--format={fields}", "-j", ",".join(job_ids)])
    attempts: dict[str, list[dict[str, str]]] = {}
    for line in output.splitlines():
        values = dict(zip(fields.split(","), line.split("|"), strict=False))
        attempts.setdefault(values["JobID"], []).append(values)
    return attempts


def squeue_states(job_ids: list[str]) -> dict[str, str]:
    """job id -> its state while SLURM still queues it (a pending one with its reason: 'PENDING (BeginTime)')."""
    output = ask_slurm(["squeue", "-h", "-r", "-o", "%i|%T|%R", "-j", ",".join(job_ids)])
    states = {}
    for line in output.splitlines():
        job_id, state, reason = line.split("|", 2)
        states[job_id] = f"{state} {reason}" if state == "PENDING" else state
    return states


def sbatch_refusal(error: str, parameters: dict[str, Any]) -> str:
    """sbatch's own reason (submitit's FailedJobError carries its stderr), with the cluster keys that set what it
    judged (`parameters`: the array's sbatch parameters)."""
    said = next(
        (line.strip() for line in error.splitlines() if "sbatch: error" in line), error.strip().splitlines()[-1]
    )
    keys = ", ".join(
        f"cluster.{name}={parameters[name]}" for name in ("partition", "account", "qos") if name in parameters
    )
    return f"sbatch refused the job, nothing was queued: {said}; check {keys or 'cluster.partition / cluster.account'}"


def submit(plans: list[Plan], max_requeues: int) -> Manifest:
    """Queue every plan, one array per shape (several where a shape exceeds MaxArraySize); write the sweep's manifest
    and return this submission's part of it. Returns as soon as sbatch answered."""
    import submitit
    from submitit.core.utils import FailedJobError

    from launch.job import RunInAllocation

    for plan in plans:  # every run's Ray token exists before anything is queued
        ray_cluster.ensure_auth_token(Path(plan.run_dir), plan.cluster_settings.ray_auth_token_file)
        if plan.code_dir:  # the code the jobs import, written before they are queued
            snapshot.materialize(Path(plan.code_dir))
    sweep_dir = sweep_dir_of(plans)
    manifest = Manifest(plans[0].sweep_id, str(sweep_dir), runs=[])
    started = time.perf_counter()
    for index, group in enumerate(arrays_of(plans, max_array_size())):
        executor = submitit.SlurmExecutor(
            folder=submitit_folder(sweep_dir), max_num_timeout=max_requeues, python=job_python(group)
        )
        executor.update_parameters(job_name=job_name(group, index), **array_parameters(group))
        try:
            with executor.batch():
                jobs = [executor.submit(RunInAllocation(plan.run_dir)) for plan in group.plans]
        except FailedJobError as refused:
            if manifest.arrays:  # arrays before this one are queued: their runs keep the sweep directory
                raise
            raise UserError(sbatch_refusal(str(refused), group.parameters)) from None  # no manifest: no sweep
        array_id = jobs[0].job_id.split("_")[0]
        manifest.arrays.append(ManifestArray(array_id, len(jobs), job_name(group, index), group.parameters))
        for task, (plan, job) in enumerate(zip(group.plans, jobs, strict=True)):
            manifest.runs.append(
                ManifestRun(
                    plan.run_id,
                    plan.run_dir,
                    plan.job_name,
                    plan.overrides,
                    job_id=job.job_id,
                    array_job_id=array_id,
                    array_index=task if len(jobs) > 1 else None,
                    stdout=str(job.paths.stdout),
                    stderr=str(job.paths.stderr),
                )
            )
    manifest = replace(manifest, submit_seconds=round(time.perf_counter() - started, 3))
    manifest.write()
    return manifest
