"""A node's `ray start` process group as launch/ray_cluster.py runs it (its own session): stopping the node kills what
is left in the group even once `ray start` itself has exited, and a `ray start` a signal ended is said to have been
stopped by it (SIGTERM: scancel, the time limit or a preemption), not to have failed. Real process groups, no
cluster."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from conftest import wait_until

from launch import ray_cluster
from launch.report import failures


def gone(pid: int) -> bool:
    """The process has ended: no such pid, or a zombie nobody has reaped yet (it was reparented)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_stopping_a_node_whose_ray_start_exited_kills_what_is_left_in_its_group(tmp_path: Path):
    left = tmp_path / "left.pid"
    # `ray start` that exits leaving a daemon of its own behind (a raylet, a GCS), in its process group
    process = subprocess.Popen(
        ["bash", "-c", f"sleep 600 & echo $! > {left}.tmp && mv {left}.tmp {left}; exit 1"],
        start_new_session=True,
    )
    process.wait(timeout=60)
    wait_until(left.exists, 60, "the left-behind process's pid", poll_s=0.05)
    daemon = int(left.read_text())
    assert not gone(daemon) and os.getpgid(daemon) == process.pid
    try:
        ray_cluster.stop_node(process)
        wait_until(lambda: gone(daemon), 30, "the left-behind process to be killed", poll_s=0.05)
    finally:
        if not gone(daemon):
            os.kill(daemon, signal.SIGKILL)


def test_a_ray_start_ended_by_sigterm_says_it_was_stopped_by_it_not_that_it_failed(tmp_path: Path):
    log = tmp_path / "ray_start-c2-1.log"
    log.touch()  # Ray came up silently so far: the log holds nothing
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    node = ray_cluster.StartedNode("c2", "worker", process, log)
    assert node.failure() is None
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=60)
    said = node.failure()
    assert said == "ray start on node c2 (worker) was stopped by SIGTERM (scancel, the time limit or a preemption)"
    # no start failure: SLURM's own line in the job's log decides the kind (here its time limit)
    ended = "slurmstepd: error: *** JOB 5 ON c1 CANCELLED AT 2026-11-29T22:00:00 DUE TO TIME LIMIT ***"
    assert failures.classify(f"RuntimeError: {said}\n{ended}").kind == "time_limit"
    assert failures.classify(f"RuntimeError: {said}").kind != "ray_start_failed"


def test_a_ray_start_that_exits_with_a_code_still_failed(tmp_path: Path):
    log = tmp_path / "ray_start-c2-1.log"
    log.touch()
    process = subprocess.Popen(["bash", "-c", "exit 3"], start_new_session=True)
    process.wait(timeout=60)
    node = ray_cluster.StartedNode("c2", "worker", process, log)
    assert node.failure() == "ray start failed on node c2 (worker): exited with code 3 and wrote nothing"
