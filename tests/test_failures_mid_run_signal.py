"""A Ray worker node's `ray start --block` that ended mid-run is said by how it ended: an exit code, or the signal and
whom it usually comes from. A SIGKILL (the kernel's OOM killer, SLURM past its KillWait) still reads as the node lost;
a SIGTERM is scancel's, the time limit's or a preemption's, which SLURM's own line names, never a lost node."""

from __future__ import annotations

from launch import ray_cluster
from launch.report.failures import classify


def test_how_a_process_ended_is_said_by_its_return_code():
    assert ray_cluster.ended_by(1) == "exited with code 1"
    assert ray_cluster.ended_by(-15) == "was stopped by SIGTERM (scancel, the time limit or a preemption)"
    assert ray_cluster.ended_by(-9).startswith("was stopped by SIGKILL (the kernel's OOM killer")
    assert ray_cluster.start_stopped("c2", "worker", 15) == (
        "ray start on node c2 (worker) was stopped by SIGTERM (scancel, the time limit or a preemption)"
    )


def test_a_worker_killed_mid_run_is_a_lost_node_and_one_terminated_is_not():
    killed = f"RuntimeError: the Ray worker on c2 {ray_cluster.ended_by(-9)} mid-run: raylet died\n"
    assert classify(killed).kind == "ray_node_lost"
    exited = "RuntimeError: the Ray worker on c2 exited with code 1 mid-run: raylet died\n"
    assert classify(exited).kind == "ray_node_lost"
    terminated = (
        f"RuntimeError: the Ray worker on c2 {ray_cluster.ended_by(-15)} mid-run: \n"
        "slurmstepd: error: *** JOB 41 ON c1 CANCELLED AT 2026-11-29T22:10:00 DUE TO TIME LIMIT ***\n"
    )
    assert classify(terminated).kind == "time_limit"
