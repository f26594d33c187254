"""A node SLURM lost (helper-41's probe, cases c6down and c6down2: an admin's `scontrol update state=down`) is named
as the node the log says was lost, and its fix claims no crash the log does not show: SLURM's Reason says why."""

from __future__ import annotations

from pathlib import Path

from test_failures_directions import run_with_log

from launch.report import failures

# c6down2's job log (submitit/22/22_0_log.err): a two-node job whose second node, c2, was set down
LOST_SECOND_NODE = "\n".join(
    [
        "srun: error: Node failure on c2",
        "slurmstepd-c1: error: *** STEP 22.0 ON c1 CANCELLED AT 2026-11-22T19:50:04 DUE TO NODE FAILURE, SEE "
        "SLURMCTLD LOG FOR DETAILS ***",
        "slurmstepd-c1: error: *** JOB 22 ON c1 CANCELLED AT 2026-11-22T19:50:04 DUE TO NODE FAILURE, SEE SLURMCTLD "
        "LOG FOR DETAILS ***",
        "srun: forcing job termination",
    ]
)


def test_the_lost_node_is_the_one_srun_names_and_the_fix_points_at_its_reason_not_a_crash(tmp_path: Path):
    [failure] = failures.run_failures(run_with_log(tmp_path, [LOST_SECOND_NODE]))
    assert (failure.kind, failure.node) == ("ray_node_lost", "c2")
    assert failure.fix.startswith("SLURM lost the job's node c2 (NODE_FAIL: SLURM marked it down; the log does not ")
    assert "`sinfo -R -n c2`" in failure.fix and "+cluster.sbatch_extra.exclude=c2" in failure.fix
    assert "a crash, a reboot" not in failure.fix


def test_a_reason_the_log_holds_is_quoted():
    reason = "   Reason=probe: maintenance [root@2026-11-22T19:50:03]"
    failure = failures.classify(LOST_SECOND_NODE + "\n" + reason)
    assert "its Reason in SLURM says why: probe: maintenance, set by root" in failure.fix
    assert failure.details["node_reason"] == "probe: maintenance"
