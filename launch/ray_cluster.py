"""Ray across the nodes of one job: a head on the first node, a worker on every other, readiness by polling (no
sleeps), and a teardown that leaves nothing behind.

Runs on: every node of the job (one submitit task per node: rank 0 is the head and runs the driver, the others run
a worker), or on the cluster=local machine (a head alone). The topology is computed from SLURM's variables first
(`topology_from_slurm` is pure given its inputs); only `start_*` touch processes. Facts this follows (FACTS.md):
fixed ports per job (random ones collide when jobs share a node), a short temp dir (Unix sockets break past 107
bytes), each node's own address (Ray rewrites 127.0.0.1), `RAY_AUTH_MODE` set explicitly, never `ray stop --force`.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from launch.secret_guard import copy_redacted, secret_values

# Each job gets a block of ports: its GCS and client ports, then 8 per node. Jobs on one node differ by job id.
PORT_BASE = 20000
PORT_BLOCK = 160
PORT_BLOCKS = 250  # 20000 .. 60000
PORTS_PER_NODE = 8
MAX_NODES_PER_BLOCK = (PORT_BLOCK - 8) // PORTS_PER_NODE
# token auth: every process of the job reads the same ~/.ray/auth_token (home is shared); decided, not inherited
RAY_AUTH_MODE = "token"


@dataclass(frozen=True)
class Topology:
    job_id: int
    nodes: tuple[str, ...]  # host names in SLURM's order; the first is the head
    addresses: tuple[str, ...]  # the address each node's Ray binds (NodeAddr: 127.0.0.1x on the dev cluster)
    rank: int  # this process's node
    cpus: int  # logical CPUs each Ray node advertises
    gpus: int  # GPUs on this node, counted with NVML (never CUDA_VISIBLE_DEVICES)

    @property
    def base_port(self) -> int:
        return PORT_BASE + (self.job_id % PORT_BLOCKS) * PORT_BLOCK

    @property
    def head_address(self) -> str:
        return f"{self.addresses[0]}:{self.base_port}"

    def node_ports(self, rank: int) -> dict[str, int]:
        first = self.base_port + 8 + (rank % MAX_NODES_PER_BLOCK) * PORTS_PER_NODE
        names = (
            "node-manager-port",
            "object-manager-port",
            "metrics-export-port",
            "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port",
            "runtime-env-agent-port",
        )
        return {name: first + offset for offset, name in enumerate(names)}

    def temp_dir(self, rank: int) -> str:
        return f"/tmp/rl{self.job_id % 10**7}-{rank}"  # <= 45 characters (FACTS)


def expand_nodelist(nodelist: str) -> list[str]:
    result = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    return result.stdout.split()


def node_address(node: str) -> str:
    """The node's NodeAddr in SLURM (virtual nodes on one host each have their own), resolved to an IP."""
    result = subprocess.run(["scontrol", "show", "node", node, "-o"], capture_output=True, text=True, check=False)
    fields = dict(part.split("=", 1) for part in result.stdout.split() if "=" in part)
    return socket.gethostbyname(fields.get("NodeAddr", node))


def topology_from_slurm(env: Mapping[str, str], cpus: int, gpus: int) -> Topology:
    nodes = expand_nodelist(env["SLURM_JOB_NODELIST"])
    return Topology(
        job_id=int(env["SLURM_JOB_ID"]),
        nodes=tuple(nodes),
        addresses=tuple(node_address(node) for node in nodes),
        rank=int(env.get("SLURM_NODEID", "0")),
        cpus=cpus,
        gpus=gpus,
    )


def import_ray() -> ModuleType:
    """ray, imported with this process's auth mode set first (Ray reads RAY_AUTH_MODE when it is imported)."""
    os.environ["RAY_AUTH_MODE"] = RAY_AUTH_MODE
    import ray
    import ray.util

    return ray


def local_topology(cpus: int, gpus: int) -> Topology:
    """This machine alone, at the address Ray itself picks for it (given 127.0.0.1, Ray registers the node under
    the host's address instead, and the head would wait for a node that never appears)."""
    address = import_ray().util.get_node_ip_address()
    return Topology(
        job_id=os.getpid(), nodes=(socket.gethostname(),), addresses=(address,), rank=0, cpus=cpus, gpus=gpus
    )


def ray_environment() -> dict[str, str]:
    return {**os.environ, "RAY_AUTH_MODE": RAY_AUTH_MODE, "RAY_USAGE_STATS_ENABLED": "0"}


def raise_open_files_limit() -> None:
    """To the hard limit, never above it (raising past it kills the job, FACTS)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def ray_start_command(topology: Topology, rank: int) -> list[str]:
    # the venv's own ray next to this interpreter: a job's PATH need not contain the venv
    ray = str(Path(sys.executable).parent / "ray") if (Path(sys.executable).parent / "ray").exists() else "ray"
    command = [
        ray,
        "start",
        "--block",
        f"--num-cpus={topology.cpus}",
        f"--num-gpus={topology.gpus}",
        f"--temp-dir={topology.temp_dir(rank)}",
        f"--node-ip-address={topology.addresses[rank]}",
    ]
    command += [f"--{name}={port}" for name, port in topology.node_ports(rank).items()]
    if rank == 0:
        command += [
            "--head",
            f"--port={topology.base_port}",
            f"--ray-client-server-port={topology.base_port + 1}",
            "--include-dashboard=false",
        ]
    else:
        command += [f"--address={topology.head_address}"]
    return command


def start_node(topology: Topology, rank: int, log_path: Path) -> subprocess.Popen:
    raise_open_files_limit()
    log = log_path.open("ab")
    return subprocess.Popen(
        ray_start_command(topology, rank), env=ray_environment(), stdout=log, stderr=log, start_new_session=True
    )


def stop_node(process: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """TERM the `ray start --block` process group: it stops its own GCS/raylet and workers."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


def port_open(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1.0):
            return True
    except OSError:
        return False


def wait_for_head(topology: Topology, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not port_open(topology.head_address):
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the Ray head on {topology.nodes[0]} ({topology.head_address}) did not come up "
                f"within {timeout_s:.0f} s"
            )
        time.sleep(0.2)


def wait_for_nodes(topology: Topology, head: subprocess.Popen, timeout_s: float) -> float:
    """Poll the head until every node of the allocation has registered (with its GPUs); name the missing ones."""
    ray = import_ray()
    started = time.monotonic()
    wait_for_head(topology, timeout_s)
    ray.init(address=topology.head_address, logging_level="ERROR", log_to_driver=False)
    try:
        expected = dict(zip(topology.addresses, topology.nodes, strict=True))
        while True:
            alive = {node["NodeManagerAddress"]: node for node in ray.nodes() if node["Alive"]}
            missing = [name for address, name in expected.items() if address not in alive]
            if not missing and len(alive) >= len(expected):
                return time.monotonic() - started
            if head.poll() is not None:
                raise RuntimeError(f"the Ray head on {topology.nodes[0]} exited with code {head.returncode}")
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(
                    f"Ray node(s) {', '.join(missing)} did not register within {timeout_s:.0f} s "
                    f"(head {topology.head_address}; {len(alive)} of {len(expected)} up): see their ray_start.log"
                )
            time.sleep(0.5)
    finally:
        ray.shutdown()


def copy_logs(topology: Topology, rank: int, run_dir: Path) -> None:
    """The node-local Ray logs (and the engine's, which live there too) into the shared run directory, secrets
    masked."""
    source = Path(topology.temp_dir(rank)) / "session_latest" / "logs"
    if source.is_dir():
        target = run_dir / "ray_logs" / f"{topology.nodes[rank]}-{rank}"
        copy_redacted(source, target, secret_values())  # Ray's logs may echo the environment its processes got
