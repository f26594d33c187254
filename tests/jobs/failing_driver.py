"""A stand-in for verl in failure tests, run by the job as verl would be (cwd = the run directory).

usage:
  failing_driver.py steps        log one training step a second to verl's file-logger path, never checkpoint: an
                                 attempt that a time limit ends before its first checkpoint
  failing_driver.py node_lost    hold an actor on every Ray node of the job and call them until one fails: the
                                 Ray error a driver sees when a node goes away mid-run, raised as verl would
  failing_driver.py host_memory  grow to 3 GiB of host RAM, 128 MiB at a time: past a small --mem SLURM kills it"""

import json
import os
import sys
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=1)
class Pinger:
    def ping(self) -> str:
        return ray.get_runtime_context().get_node_id()


def steps() -> None:
    path = os.environ["VERL_FILE_LOGGER_PATH"]  # launch/job.py points each attempt at its own file
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as log:
        for step in range(1, 100000):
            time.sleep(1)
            log.write(json.dumps({"step": step, "data": {"timing_s/step": 1.0}}) + "\n")
            log.flush()


def node_lost() -> None:
    ray.init(logging_level="ERROR")
    nodes = [node for node in ray.nodes() if node["Alive"]]
    strategy = [NodeAffinitySchedulingStrategy(node["NodeID"], soft=False) for node in nodes]
    actors = [Pinger.options(scheduling_strategy=s, max_restarts=0).remote() for s in strategy]
    ray.get([actor.ping.remote() for actor in actors])
    with open("pinging.txt", "w") as marker:  # the test kills a node once this exists
        marker.write(str(len(actors)))
    while True:
        ray.get([actor.ping.remote() for actor in actors], timeout=120)
        time.sleep(0.5)


def host_memory() -> None:
    held = []
    for _ in range(24):
        held.append(bytearray(128 << 20))  # bytearray zero-fills: the pages are really resident
        time.sleep(0.5)
    time.sleep(120)  # still alive: the kill never came


if __name__ == "__main__":
    {"steps": steps, "node_lost": node_lost, "host_memory": host_memory}[sys.argv[1]]()
