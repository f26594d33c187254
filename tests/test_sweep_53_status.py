"""sweep.py status / logs / find_sweep as a user meets them right after submitting, cancelling or mistyping: squeue
and sacct stood in for by what they printed on the dev cluster."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from launch import slurm, sweep
from launch.errors import UserError
from launch.manifest import Manifest, ManifestArray, ManifestRun
from launch.report import failures

START = (
    "submitit INFO (2026-11-22 19:50:01,000) - Starting with JobEnvironment(job_id={job}, hostname=c1, "
    "local_rank=0(1), node=0(1), global_rank=0(1))"
)
RAYLET_DIED = (
    "(raylet) agent_manager.cc:87: The raylet exited immediately because one Ray agent failed, agent_name = "
    "dashboard_agent/424238335.\nThe raylet fate shares with the agent. This can happen because\n"
    " - The agent is killed by the OS (e.g., out of memory).\n"
    "submitit ERROR (2026-11-22 19:50:09,000) - Submitted job triggered an exception\n"
    "Traceback (most recent call last):\n"
    "RuntimeError: verl exited with code 1 (run x; its output is in this job's log)"
)


def submitted(sweep_dir: Path, jobs: dict[str, str | None]) -> Manifest:
    """A sweep of one array whose tasks are `jobs` (job id -> its stderr, None: it never wrote a log)."""
    runs = []
    for index, (job_id, err) in enumerate(jobs.items()):
        folder = sweep_dir / "submitit" / job_id
        logs = {"stdout": str(folder / f"{job_id}_0_log.out"), "stderr": str(folder / f"{job_id}_0_log.err")}
        if err is not None:
            folder.mkdir(parents=True, exist_ok=True)
            Path(logs["stdout"]).write_text(START.format(job=job_id) + "\n")
            Path(logs["stderr"]).write_text(err + "\n")
        run_dir = sweep_dir / f"run{index}"
        runs.append(
            ManifestRun(run_dir.name, str(run_dir), f"job{index}", [], job_id, job_id.split("_")[0], index, **logs)
        )
    array = ManifestArray(job_id=runs[0].array_job_id or "", tasks=len(runs))
    return Manifest(sweep_dir.name, str(sweep_dir), runs, arrays=[array]).write()


def scheduler_says(monkeypatch, queued: dict[str, str], accounted: dict[str, list[str]]) -> None:
    monkeypatch.setattr(slurm, "squeue_states", lambda ids: queued)
    attempts = {
        job: [{"JobID": job, "State": state, "Elapsed": "00:00:00"} for state in states]
        for job, states in accounted.items()
    }
    monkeypatch.setattr(slurm, "sacct_attempts", lambda ids: attempts)


def line_of(text: str, job_id: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(job_id + " "))


def test_a_job_cancelled_or_waiting_before_it_started_counts_no_attempt(tmp_path: Path, monkeypatch):
    manifest = submitted(tmp_path / "s1", {"5_0": "", "5_1": None, "5_2": None})
    scheduler_says(
        monkeypatch, {"5_1": "PENDING (Priority)"}, {"5_0": ["RUNNING"], "5_1": ["PENDING"], "5_2": ["CANCELLED by 0"]}
    )
    shown = sweep.status(manifest)
    assert "(3 runs in 1 array)" in shown
    assert "attempts 1" in line_of(shown, "5_0")
    assert "attempts 0" in line_of(shown, "5_1") and "attempts 0" in line_of(shown, "5_2")
    logs = sweep.logs(manifest, "5_2", 5)
    assert "never started: no log" in logs and "not written yet" not in logs
    # a requeued job waiting again ran once
    scheduler_says(monkeypatch, {"5_1": "PENDING (BeginTime)"}, {"5_1": ["NODE_FAIL", "PENDING"]})
    assert "attempts 1" in line_of(sweep.status(manifest), "5_1")
    scheduler_says(monkeypatch, {"5_2": "PENDING (Priority)"}, {"5_2": ["PENDING"]})
    assert "(not written yet)" in sweep.logs(manifest, "5_2", 5)  # a queued job will still write it


def test_a_job_squeue_still_holds_completing_after_a_cancel_is_cancelled_not_a_lost_node(tmp_path: Path, monkeypatch):
    manifest = submitted(tmp_path / "s1", {"12_0": RAYLET_DIED})
    # what the log alone says: the raylet died as scancel killed the job
    assert [failure.kind for failure in failures.run_failures(Path(manifest.runs[0].run_dir))] == ["ray_node_lost"]
    scheduler_says(monkeypatch, {"12_0": "COMPLETING"}, {"12_0": ["CANCELLED by 0"]})
    shown = line_of(sweep.status(manifest), "12_0")
    assert "CANCELLED by 0" in shown and "COMPLETING" not in shown
    assert "ray_node_lost" not in shown and "cancelled" in shown


def test_a_path_that_is_not_there_is_no_such_directory(tmp_path: Path):
    with pytest.raises(UserError, match=f"^no such directory: {tmp_path}/rlaunch/nonexistent: give a sweep directory"):
        sweep.find_sweep(f"{tmp_path}/rlaunch/nonexistent", None)


def test_a_shared_dir_names_its_sweeps_and_a_directory_inside_a_sweep_is_that_sweep(tmp_path: Path):
    shared = tmp_path / "shared"
    for index, sweep_id in enumerate(("20261129-a", "20261129-b")):
        submitted(shared / "rlaunch" / sweep_id, {f"{7 + index}_0": None})
        os.utime(shared / "rlaunch" / sweep_id, (index, index))
    with pytest.raises(UserError) as named:
        sweep.find_sweep(str(shared), None)
    assert str(named.value).startswith(f"{shared}/rlaunch is a runs directory (launch.runs_dir), not a sweep")
    assert "20261129-b, 20261129-a" in str(named.value)
    (shared / "rlaunch" / "20261129-a" / "submitit" / "7_0").mkdir(parents=True)
    assert sweep.find_sweep(f"{shared}/rlaunch/20261129-a/submitit", None) == shared / "rlaunch" / "20261129-a"
    assert sweep.find_sweep(f"{shared}/rlaunch/20261129-a/submitit/7_0", None) == shared / "rlaunch" / "20261129-a"


def test_runs_dir_may_be_the_shared_dir_and_a_mistyped_id_gets_the_closest(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    shared = tmp_path / "shared"
    submitted(shared / "rlaunch" / "20261129-221500-abc1", {"7_0": None})
    assert sweep.find_sweep("20261129-221500-abc1", shared) == shared / "rlaunch" / "20261129-221500-abc1"
    with pytest.raises(UserError, match=r"^no sweep 20261129-221500-abc \(did you mean '20261129-221500-abc1'\?\)"):
        sweep.find_sweep("20261129-221500-abc", shared / "rlaunch")
