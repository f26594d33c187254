"""Bad input to the report commands: one line, exit 2, saying what to give instead (doctor.py <run dir> --json,
doctor.py --log <a directory>, sweep.py status <the runs directory itself>)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import PROJECT
from metric_fixtures import make_plan_dir


def refused(tool: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(PROJECT / "launch" / tool), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"/nonexistent{os.pathsep}{os.environ['PATH']}"},
    )
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr


def job_with_logs(sweep: Path) -> tuple[Path, Path]:
    run_dir = make_plan_dir(sweep, "guru_baseline", "a40")
    logs = sweep / "submitit" / "16"
    logs.mkdir(parents=True)
    for name in ("16_0_log.err", "16_0_log.out", "16_1_log.err", "16_1_log.out"):
        (logs / name).write_text("submitit INFO (2026-11-29 12:29:09,716) - Starting with JobEnvironment()\n")
    run = {"run_id": run_dir.name, "run_dir": str(run_dir), "job_name": "a40", "job_id": "16", "array_job_id": "16"}
    run |= {"stdout": str(logs / "16_0_log.out"), "stderr": str(logs / "16_0_log.err")}
    manifest = {
        "sweep_id": sweep.name,
        "sweep_dir": str(sweep),
        "runs": [run],
        "arrays": [{"job_id": "16", "tasks": 1}],
    }
    (sweep / "manifest.json").write_text(json.dumps(manifest))
    return run_dir, logs


def test_doctor_json_with_a_directory_says_it_goes_with_log(tmp_path: Path):
    run_dir, _ = job_with_logs(tmp_path / "s")
    said = refused("report/doctor.py", str(run_dir), "--json")
    assert "--json goes with --log FILE" in said and "got 2" not in said, said


def test_doctor_log_with_a_directory_names_the_logs_in_it(tmp_path: Path):
    run_dir, logs = job_with_logs(tmp_path / "s")
    for directory in (logs, run_dir):
        said = refused("report/doctor.py", "--log", str(directory))
        assert f"{directory} is a directory: --log reads one log file; give one of: {logs / '16_0_log.err'}" in said
        assert str(logs / "16_1_log.out") in said and "no such log file" not in said, said


def test_sweep_status_of_the_runs_directory_lists_its_sweeps_most_recent_first(tmp_path: Path):
    runs = tmp_path / "runs"
    job_with_logs(runs / "older")
    job_with_logs(runs / "newer")
    (runs / "code").mkdir()  # rlaunch's code snapshots sit beside the sweeps: not one
    past = time.time() - 3600
    os.utime(runs / "older", (past, past))
    said = refused("sweep.py", "status", str(runs))
    assert (
        f"{runs} is a runs directory (launch.runs_dir), not a sweep: give one of its sweeps, most recent first: "
        in said
    )
    assert said.split("most recent first: ")[1].startswith("newer, older (its path"), said
    assert "nothing was submitted" not in said
