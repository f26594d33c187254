"""Provenance: what produced a run, in its run directory and in its W&B config.

Runs on: the login node (written with the plan, before anything is queued) and inside the job (each attempt adds
where it ran: SLURM job id, array index, node list). The same record goes to two places: provenance.json, and the
`rlaunch` key of the config verl reads (verl_config.yaml, the attempt's part as overrides on verl's command line),
because verl hands its whole config to wandb.init. (W&B's own route, WANDB_CONFIG_PATHS, fails in wandb 0.31: the
variable's string is refused where a list is expected.) Nothing here reads the environment wholesale: keys and
tokens never enter the record (launch/secret_guard.py).
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from launch.facts import checkout_facts, git_diff
from launch.overrides import hydra_quoted
from launch.rundir import PLAN_FILE, PROVENANCE_FILE, RLAUNCH_CONFIG_FILE, Plan
from launch.secret_guard import redact, secret_values
from launch.verdict import Verdict

GIT_DIFF = "git_diff.patch"
CONFIG_FILES = (PLAN_FILE, RLAUNCH_CONFIG_FILE)  # verl_config.yaml carries this record: not hashed here
VERL_KEY = "rlaunch"  # the key of verl's config (and so of the W&B config) holding the record
SLURM_VARIABLES = {
    "job_id": "SLURM_JOB_ID",
    "array_job_id": "SLURM_ARRAY_JOB_ID",
    "array_task_id": "SLURM_ARRAY_TASK_ID",
    "node_list": "SLURM_JOB_NODELIST",
    "nodes": "SLURM_NNODES",
    "restart_count": "SLURM_RESTART_COUNT",
    "partition": "SLURM_JOB_PARTITION",
}


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def preflight_summary(verdict: Verdict | None) -> dict[str, Any] | None:
    """The verdict in brief, for the W&B config: the peaks against the card, the throughput, what the policy set."""
    if verdict is None:
        return None
    return {
        "fits": verdict.fits,
        "policy": verdict.policy,
        "peaks_gib": verdict.peaks_gib,
        "capacity_gib": verdict.capacity_gib,
        "predicted": verdict.predicted.to_dict(),
        "changed": dict(verdict.changed),
    }


def build(plan: Plan, run_dir: Path) -> dict[str, Any]:
    """The planning side of the record (the config files must already be in the run directory)."""
    checkout = checkout_facts()
    return {
        "run_id": plan.run_id,
        "sweep_id": plan.sweep_id,
        "job_name": plan.job_name,
        "planned_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "planned_by": getpass.getuser(),
        "command": redact(" ".join(sys.argv), secret_values()),
        "overrides": plan.overrides,
        **checkout,
        "git_diff_file": GIT_DIFF if checkout["git_diff_sha256"] else None,
        "config_files": {name: sha256_of(run_dir / name) for name in CONFIG_FILES if (run_dir / name).exists()},
        # where the job's code is (launch/snapshot.py): the sha above plus git_diff.patch describe the same content
        "code_snapshot": plan.code_dir,
        "gpu_profile": plan.gpu_profile,
        "resources": plan.to_dict()["resources"],
        "preflight": preflight_summary(plan.preflight),
        "slurm": None,  # the job fills it in at each attempt
    }


def write_planned(plan: Plan) -> dict[str, Any]:
    """provenance.json (and the dirty diff) beside the config files; returns the record for verl's config."""
    run_dir = Path(plan.run_dir)
    record = build(plan, run_dir)
    if record["git_diff_file"]:
        (run_dir / GIT_DIFF).write_text(redact(git_diff(), secret_values()))
    (run_dir / PROVENANCE_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return record


def record_attempt(run_dir: Path, attempt: int) -> list[str]:
    """Inside the job: where this attempt runs, added to provenance.json; returns the same as overrides of the
    `rlaunch` key for verl's command line (so the W&B config shows the attempt that is running)."""
    record = json.loads((run_dir / PROVENANCE_FILE).read_text())
    slurm = {name: os.environ[variable] for name, variable in SLURM_VARIABLES.items() if variable in os.environ}
    record.update(slurm=slurm, attempt=attempt)
    (run_dir / PROVENANCE_FILE).write_text(json.dumps(record, indent=2) + "\n")
    overrides = [f"++{VERL_KEY}.attempt={attempt}"]
    overrides += [f"++{VERL_KEY}.slurm.{name}={hydra_quoted(value)}" for name, value in slurm.items()]
    return overrides
