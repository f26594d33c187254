"""The run directory's layout: the one module that knows its file names, and reads back what the job recorded.

Runs on: the login node (launch/run.py writes a run directory before anything runs), the job head (attempts, the
metrics file of each attempt) and wherever the report tools read runs (metrics, doctor, compare, sweep status).
A run directory holds everything to reproduce and judge its run; a sweep directory holds its run directories.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

PLAN_FILE = "plan.json"  # the Plan, as JSON (launch/plan.py)
PLAN_TEXT_FILE = "plan.txt"  # the plan as the user read it
RLAUNCH_CONFIG_FILE = "rlaunch_config.yaml"  # our own roots of the composed config, resolved
VERL_CONFIG_NAME = "verl_config"  # verl's config exactly as verl reads it: <run_dir>/verl_config.yaml
ATTEMPTS_FILE = "attempts.jsonl"  # one record per start of the job (a requeued job appends another)
METRICS_DIR = "metrics"  # verl's file logger, one file per attempt; other metric files beside them
ATTEMPT_METRICS = re.compile(r"attempt-(\d+)\.jsonl$")


def load_plan(run_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / PLAN_FILE).read_text())


def is_run_dir(path: Path) -> bool:
    return (path / PLAN_FILE).exists()


def attempts(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / ATTEMPTS_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def append_attempt(run_dir: Path, record: dict[str, Any]) -> None:
    with (run_dir / ATTEMPTS_FILE).open("a") as log:
        log.write(json.dumps(record) + "\n")


def attempt_log_path(run_dir: Path, attempt: int) -> Path:
    """Where verl's file logger writes during attempt `attempt` (1-based) of a run."""
    return run_dir / METRICS_DIR / f"attempt-{attempt}.jsonl"
