"""What a standing Ray cluster (cluster=ray) cannot give, refused before submission; the rest of cluster=ray lives in
launch/ray_submit.py (submission), launch/ray_status.py (afterwards) and launch/ray_entry.py (inside the job).

Runs on: the login node or a laptop (launch/validate.py asks it).
"""

from __future__ import annotations

from typing import Any

from launch.errors import UserError


def check_resources(cfg: Any, resources: Any, facts: Any) -> None:
    """What the cluster cannot give, refused with the fix. A cluster that reports no GPU at all is let through (an
    autoscaling cluster adds GPU nodes on demand); the plan warns instead."""
    cluster = facts.partition
    if cluster is None or cluster.gpus_per_node == 0:
        return
    where = cluster.name
    if resources.gpus_per_node > cluster.gpus_per_node:
        raise UserError(
            f"trainer.n_gpus_per_node={resources.gpus_per_node} but the nodes of {where} have at most "
            f"{cluster.gpus_per_node} GPUs: set trainer.n_gpus_per_node<={cluster.gpus_per_node} and raise "
            "trainer.nnodes"
        )
    if resources.nodes > cluster.nodes:
        raise UserError(
            f"trainer.nnodes={resources.nodes} but {where} has {cluster.nodes} node(s) with GPUs: use fewer nodes"
        )
