"""A dry run's sweep as compare and the doctor show it: planned only (it had been PENDING in compare, and 'no metrics
... once the run has started' from the doctor, while sweep.py status said 'dry run: nothing submitted')."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import PROJECT, run_here
from metric_fixtures import make_plan_dir


def dry_sweep(tmp_path: Path) -> Path:
    sweep = tmp_path / "g_dry"
    run_dir = make_plan_dir(sweep, "guru_baseline", "a40", "launch.dry_run=true")
    run = {"run_id": run_dir.name, "run_dir": str(run_dir), "job_name": "a40"}
    manifest = {"sweep_id": sweep.name, "sweep_dir": str(sweep), "runs": [run], "arrays": [], "dry_run": True}
    (sweep / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def tool(name: str, target: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT / "launch" / "report" / name), str(target)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PATH": f"/nonexistent{os.pathsep}{os.environ['PATH']}"},
    )


def test_compare_and_doctor_say_a_dry_run_was_planned_only(tmp_path: Path):
    run_dir = dry_sweep(tmp_path)
    compared = tool("compare.py", run_dir.parent)
    assert compared.returncode == 0, compared.stderr
    assert "dry run: 1 run(s) marked DRY RUN were planned only, nothing was submitted" in compared.stdout
    report = (run_dir.parent / "report" / "report.md").read_text()
    [row] = [line for line in report.splitlines() if line.startswith("| ") and f"| {run_dir.name} |" in line]
    assert row.split(" | ")[2] == "DRY RUN", row
    assert "PENDING" not in report
    for target in (run_dir.parent, run_dir):
        said = tool("doctor.py", target)
        assert said.returncode == 0, said.stderr
        assert f"run {run_dir.name}  ({run_dir}): dry run: planned only, nothing was submitted" in said.stdout
        assert "once the run has started" not in said.stdout + said.stderr


def test_a_run_only_planned_for_want_of_a_gpu_is_not_called_a_dry_run(tmp_path: Path):
    """`make run` on a machine without a GPU plans only (cluster=local): status and the doctor had called it a dry run
    and said to submit without launch.dry_run, which plans again (helper-44's walkthrough)."""
    planned = run_here(cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr[-2000:]
    run_dir = next(tmp_path.rglob("plan.json")).parent
    status = subprocess.run(
        [sys.executable, str(PROJECT / "launch" / "sweep.py"), "status", str(run_dir.parent)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert status.returncode == 0, status.stderr
    for said in (status.stdout, tool("doctor.py", run_dir).stdout):
        assert "planned only (cluster=auto: no SLURM controller answers here (sinfo) -> local and no GPU" in said, said
        assert "on a GPU machine or from a SLURM login node with cluster=slurm" in said
        assert "launch.dry_run" not in said
