"""A stand-in for verl in the hang test, run by the job as verl would be (cwd = the run directory).

Four ranks, two Ray actors pinned to each node of the job and given their RANK in Ray's runtime env (as verl gives
its workers theirs), join one gloo process group and run `update_actor` steps, each an all_reduce; the driver logs one
line a step to verl's file-logger path, with the step's time as verl's `timing_s/step`. Steps 1 and 2 are the
start-up (actors placed, process group joined), logged as steps so that the watchdog's clock restarts after each.
At step HANG_STEP the last rank never joins the collective: it waits on an HTTP server that accepted its connection
and never answers (a reward judge, a rollout server), while the other ranks block in the all_reduce.

usage: hang_driver.py HANG_STEP"""

import json
import os
import socket
import sys
import time
import urllib.request
from datetime import timedelta

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

RANKS_PER_NODE = 2


@ray.remote(num_cpus=1)
class TrainerRank:
    def __init__(self) -> None:
        self.rank = int(os.environ["RANK"])

    def free_address(self) -> str:
        with socket.socket() as probe:
            probe.bind((ray.util.get_node_ip_address(), 0))
            host, port = probe.getsockname()
        return f"{host}:{port}"

    def join(self, master: str, world: int) -> None:
        import torch.distributed as dist

        dist.init_process_group(
            "gloo", init_method=f"tcp://{master}", rank=self.rank, world_size=world, timeout=timedelta(hours=1)
        )

    def update_actor(self, step: int, hang_step: int, judge: str) -> float:
        import torch
        import torch.distributed as dist

        if step == hang_step and self.rank == dist.get_world_size() - 1:
            return ask_judge(judge)
        grads = torch.ones(4) * (self.rank + 1)
        dist.all_reduce(grads)
        return float(grads[0])


def ask_judge(judge: str) -> float:
    with urllib.request.urlopen(f"http://{judge}/score") as answer:
        return float(answer.read())


def log_step(path: str, step: int, seconds: float) -> None:
    with open(path, "a") as log:
        log.write(json.dumps({"step": step, "data": {"timing_s/step": seconds, "timing_s/update_actor": seconds}}))
        log.write("\n")


def main() -> None:
    hang_step = int(sys.argv[1])
    path = os.environ["VERL_FILE_LOGGER_PATH"]  # launch/job.py points each attempt at its own file
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ray.init(logging_level="ERROR")
    here = ray.util.get_node_ip_address()
    # a judge that accepts connections (the kernel's listen backlog does) and never answers
    judge = socket.create_server((here, 0))
    judge_address = f"{here}:{judge.getsockname()[1]}"
    started = time.monotonic()
    nodes = sorted((node for node in ray.nodes() if node["Alive"]), key=lambda n: n["NodeManagerAddress"] != here)
    ranks = [
        TrainerRank.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
            runtime_env={"env_vars": {"RANK": str(index * RANKS_PER_NODE + local)}},
        ).remote()
        for index, node in enumerate(nodes)
        for local in range(RANKS_PER_NODE)
    ]
    master = ray.get(ranks[0].free_address.remote())
    ray.get([rank.free_address.remote() for rank in ranks])
    log_step(path, 1, time.monotonic() - started)
    for step in range(2, hang_step + 1):
        started = time.monotonic()
        if step == 2:
            ray.get([rank.join.remote(master, len(ranks)) for rank in ranks])
        else:
            ray.get([rank.update_actor.remote(step, hang_step, judge_address) for rank in ranks])
        log_step(path, step, time.monotonic() - started)


if __name__ == "__main__":
    main()
