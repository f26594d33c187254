"""A stand-in driver for job tests: connects to the job's Ray (RAY_ADDRESS), runs one task pinned to each node,
and writes what it saw to probe.json in the run directory (its cwd)."""

import json
import socket
import sys
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=1)
def where() -> dict:
    import os

    return {"host": socket.gethostname(), "node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}


def main() -> None:
    ray.init(logging_level="ERROR")
    nodes = [node for node in ray.nodes() if node["Alive"]]
    results = ray.get(
        [
            where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote()
            for node in nodes
        ]
    )
    record = {
        "nodes": [node["NodeManagerAddress"] for node in nodes],
        "tasks": results,
        "gpus": ray.cluster_resources().get("GPU", 0),
        "cpus": ray.cluster_resources().get("CPU", 0),
    }
    ray.shutdown()
    with open("probe.json", "w") as out:
        json.dump(record, out)
    if len(sys.argv) > 1:  # hold the allocation a while (preemption tests)
        time.sleep(float(sys.argv[1]))


if __name__ == "__main__":
    main()
