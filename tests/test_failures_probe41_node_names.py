"""`doctor --log` names the node as SLURM does where srun's own line names it (helper-41's probe, defect G: "vm", the
hostname submitit reports, or "127.132.0.11", Ray's IP, while the log says `srun: error: c1: task 0`)."""

from __future__ import annotations

from test_failures import SUBMITIT_START
from test_failures_probe41_imports import SHADOW_RAISED
from test_failures_probe41_reward import LOADER_FAILED

from launch.report import failures

SRUN_EXIT = "srun: error: c1: task 0: Exited with exit code 1"


def test_the_hostname_submitit_reports_gives_way_to_sruns_node_name():
    # c5pp2: the evidence names no node, so the attempt's host (submitit's hostname=vm) was shown
    assert failures.classify(SHADOW_RAISED, 1, "vm").node == "c1"


def test_rays_ip_gives_way_to_sruns_node_name_in_a_one_node_job_only():
    # c4imp2: the evidence's `ip=127.132.0.11` in a job of one node (submitit's node=0(1))
    one_node = "\n".join([SUBMITIT_START.format(s=1, host="vm"), LOADER_FAILED, SRUN_EXIT])
    assert failures.classify(one_node, 1, "vm").node == "c1"
    # in a job of two nodes the IP may be the other node's: kept
    two_nodes = one_node.replace("node=0(1)", "node=0(2)")
    assert failures.classify(two_nodes, 1, "vm").node == "127.132.0.11"
