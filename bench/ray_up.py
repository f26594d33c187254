"""Ray bring-up inside a SLURM job on the real dev cluster: time from the job's start to every node registered, on
1 and on 3 virtual nodes, against a bare `ray start --head` plus the first driver connection on the same machine,
measured in the same run. No fixed sleeps anywhere: readiness is polled.

Usage: python bench/ray_up.py     (root; starts and stops its own 3-node cluster)
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "tests"))

from bench.common import commit_tag, dev_cluster  # noqa: E402

PREFIX = "/tmp/rlaunch-bench-ray"
PORT_BASE = "19817"


def bare_ray_start(workdir: Path) -> float:
    from launch import ray_cluster

    env = ray_cluster.ray_environment(ray_cluster.ensure_auth_token(workdir, None))  # nothing from ~/.ray
    started = time.perf_counter()
    head = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "ray"),
            "start",
            "--head",
            "--block",
            "--port=6999",
            "--num-cpus=16",
            "--include-dashboard=false",
            f"--temp-dir={tempfile.mkdtemp(prefix='rb', dir='/tmp')}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    probe = "import ray; ray.init(address='127.0.0.1:6999', logging_level='ERROR'); ray.shutdown()"
    while subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True).returncode != 0:
        time.sleep(0.2)
    elapsed = time.perf_counter() - started
    os.killpg(head.pid, 15)
    head.wait()
    return elapsed


def job_bring_up(nodes: int, workdir: Path) -> float:
    from conftest import compose_config

    from launch import slurm
    from launch.facts import gather_facts
    from launch.plan import make_plan
    from launch.run import write_run_dir
    from launch.rundir import RAY_READY_FILE

    overrides = [
        "cluster=slurm",
        f"cluster.shared_dir={workdir}",
        "gpu=a40",
        "mode=quick_test",
        f"trainer.nnodes={nodes}",
        f"launch.sweep_id=rayup{nodes}",
    ]
    cfg = compose_config(*overrides)
    plan = make_plan(cfg, gather_facts("x", "slurm", None), overrides, workdir, sys.executable)
    plan = dataclasses.replace(plan, driver_command=[sys.executable, str(PROJECT / "tests" / "jobs" / "ray_probe.py")])
    write_run_dir(plan, cfg)
    job_id = slurm.submit([plan], 1).runs[0].job_id
    ready = Path(plan.run_dir) / RAY_READY_FILE
    deadline = time.monotonic() + 300
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(1)
    while subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True).stdout.strip():
        time.sleep(1)
    return json.loads(ready.read_text().splitlines()[-1])["seconds_after_job_start"]


def main() -> None:
    with (
        dev_cluster(PREFIX, PORT_BASE, "-n", "3", "-g", "8", "--big"),
        tempfile.TemporaryDirectory(prefix="rl-rayup-") as tmp,
    ):
        workdir = Path(tmp)
        bare = bare_ray_start(workdir)
        one = job_bring_up(1, workdir)
        three = job_bring_up(3, workdir)
    print(
        f"[commit {commit_tag()}] Ray ready after job start: 1 node {one:.1f} s ({one / bare:.2f}x), "
        f"3 nodes {three:.1f} s ({three / bare:.2f}x); bare ray start --head + first connection {bare:.1f} s"
    )


if __name__ == "__main__":
    main()
