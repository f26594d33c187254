"""Ray across the nodes of one job: a head on the first node, a worker on every other, readiness by polling (no
sleeps), and a teardown that leaves nothing behind.

Runs on: every node of the job (one submitit task per node: rank 0 is the head and runs the driver, the others run
a worker), or on the cluster=local machine (a head alone). The topology is computed from SLURM's variables first
(`topology_from_slurm` is pure given its inputs); only `start_*` touch processes. It follows docs/facts.md#ray:
ports from a block per node (random ones collide when jobs share a node), a short temp dir (Unix sockets break past 107
bytes), each node's own address (Ray rewrites 127.0.0.1), `RAY_AUTH_MODE` set explicitly, never `ray stop --force`.

Authentication: each run has its own Ray token, generated at submission into a 0600 file in the run directory (the
shared filesystem every node reads), or a site-managed file (`cluster.ray_auth_token_file`). Every `ray start`, the
driver and, through the raylets they inherit from, verl's workers find it by RAY_AUTH_TOKEN_PATH: the value itself is
never in an environment SLURM records, a command line, the plan or a log. Nothing depends on ~/.ray.

Ports: each node takes the first block whose ports are all free on it, trying its job id's block first, so that two
jobs sharing a node (ids 107 apart, or a stale Ray) move apart instead of failing; the head writes the GCS port it
took into the run directory for the workers, once it has started: a head whose raylet missed Ray's fixed 30 s
registration wait on a loaded node (ray/_private/node.py, "timed out during startup") starts once more before any
worker has met it.

Failing fast: a node that finds no free block, or whose `ray start` exits, ends the job within seconds with the
node's name and the last error line of its log; a worker's failure reaches the head through a marker file.
"""

from __future__ import annotations

import errno
import os
import re
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

from launch.errors import UserError
from launch.secret_guard import copy_redacted, secret_values

# A block of ports: the GCS and client ports, then 8 per node. A node starts looking at its job id's block, so jobs
# sharing a node mostly differ at once. The blocks lie outside Linux's default ephemeral range (32768-60999,
# ip_local_port_range): a port inside it can be taken by any outgoing connection between the free-port check and
# Ray's bind (seen: "Failed to start the grpc server. The specified port is 33448"). Below: Ray's own worker ports
# (10002-19999). Ray's GCS listens on every address of its node, so a block taken on one address is taken on all.
PORT_BLOCK = 160
PORT_RANGES = ((20000, 32768), (61000, 65536))  # [start, end) of the room for blocks
PORT_BLOCK_STARTS = tuple(
    start for low, high in PORT_RANGES for start in range(low, high - PORT_BLOCK + 1, PORT_BLOCK)
)  # 107 blocks
PORTS_PER_NODE = 8
MAX_NODES_PER_BLOCK = (PORT_BLOCK - 8) // PORTS_PER_NODE
# token auth, decided here and never inherited: every process of the job reads the run's own token file
RAY_AUTH_MODE = "token"
AUTH_TOKEN_FILE = "ray_auth_token"  # in the run directory, mode 0600
START_FAILED_MARKER = "ray_start_failed-{tag}-{rank}.txt"  # a worker's failure, for the head to report
HEAD_PORT_FILE = "ray_head_port-{tag}.txt"  # the GCS port the head took, for the workers


@dataclass(frozen=True)
class Topology:
    job_id: int
    nodes: tuple[str, ...]  # host names in SLURM's order; the first is the head
    addresses: tuple[str, ...]  # the address each node's Ray binds (NodeAddr: 127.0.0.1x on the dev cluster)
    rank: int  # this process's node
    cpus: int  # logical CPUs each Ray node advertises
    gpus: int  # GPUs on this node, counted with NVML (never CUDA_VISIBLE_DEVICES)
    attempt: int = 0  # SLURM_RESTART_COUNT: a requeued job keeps its id, and its markers must not be the last one's
    block: int | None = None  # this node's port block once chosen (`with_free_ports`); before, the job id's
    head_port: int | None = None  # the GCS port the head took (a worker reads it from the run directory)

    @property
    def attempt_tag(self) -> str:
        """Names this attempt's marker files in the (shared) run directory."""
        return f"{self.job_id}-{self.attempt}"

    @property
    def first_block(self) -> int:
        return self.job_id % len(PORT_BLOCK_STARTS)

    @property
    def base_port(self) -> int:
        return PORT_BLOCK_STARTS[self.first_block if self.block is None else self.block]

    @property
    def head_address(self) -> str:
        return f"{self.addresses[0]}:{self.base_port if self.head_port is None else self.head_port}"

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
        # <= 45 characters (docs/facts.md#ray); the node's address keeps two SLURM clusters on one host (dev copies,
        # whose job ids both start at 1) out of each other's sessions
        return f"/tmp/rl{self.job_id % 10**7}-{rank}-{self.addresses[rank]}"


def expand_nodelist(nodelist: str) -> list[str]:
    """SLURM's expansion; inside a container image without SLURM's commands (pyxis, apptainer) the same in Python."""
    if shutil.which("scontrol") is None:
        return expand_hostlist(nodelist)
    result = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    return result.stdout.split()


def expand_hostlist(nodelist: str) -> list[str]:
    """'c[1-3,5],gpu[01-02]' -> c1 c2 c3 c5 gpu01 gpu02 (zero padding kept; n[1-2]b[3-4]: brackets multiply)."""
    names: list[str] = []
    for entry in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", nodelist):
        expanded = [""]
        for text, ranges in re.findall(r"([^\[]*)(?:\[([^\]]*)\])?", entry):
            choices = [text]
            if ranges:
                choices = []
                for part in ranges.split(","):
                    low, _, high = part.partition("-")
                    choices += [f"{text}{n:0{len(low)}d}" for n in range(int(low), int(high or low) + 1)]
            expanded = [prefix + choice for prefix in expanded for choice in choices]
        names += [name for name in expanded if name]
    return names


def node_address(node: str) -> str:
    """The node's NodeAddr in SLURM (virtual nodes on one host each have their own), resolved to an IP; without
    SLURM's commands (inside a container) the node's name as DNS resolves it."""
    if shutil.which("scontrol") is None:
        return socket.gethostbyname(node)
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
        attempt=int(env.get("SLURM_RESTART_COUNT", "0")),
    )


def import_ray(token_path: Path) -> ModuleType:
    """ray, imported with this process's auth settings in place first (Ray reads them when it is imported, and its
    token loader caches what it read: reset, so that a second run in one process uses its own token)."""
    os.environ.update(auth_environment(token_path))
    os.environ.pop("RAY_AUTH_TOKEN", None)
    import ray
    import ray.util
    from ray._raylet import AuthenticationMode, AuthenticationTokenLoader, get_authentication_mode

    if get_authentication_mode() != AuthenticationMode.TOKEN:  # Ray fixes the mode when it is first imported
        raise RuntimeError(
            "ray was imported in this process before rlaunch set RAY_AUTH_MODE=token: the run's Ray would refuse "
            "it (InvalidAuthToken); connect from a process that imports ray after ray_cluster.import_ray"
        )
    AuthenticationTokenLoader.instance().reset_cache()
    return ray


def local_topology(cpus: int, gpus: int, token_path: Path) -> Topology:
    """This machine alone, at the address Ray itself picks for it (given 127.0.0.1, Ray registers the node under
    the host's address instead, and the head would wait for a node that never appears)."""
    address = import_ray(token_path).util.get_node_ip_address()
    return Topology(
        job_id=os.getpid(), nodes=(socket.gethostname(),), addresses=(address,), rank=0, cpus=cpus, gpus=gpus
    )


def ensure_auth_token(run_dir: Path, site_token_file: str | None) -> Path:
    """The token file this run's Ray uses: the site's own when it manages one, else a new random token written once
    (a requeued job finds the same file) into the run directory, readable by its owner alone."""
    if site_token_file:
        if not os.access(site_token_file, os.R_OK) or not Path(site_token_file).is_file():
            raise UserError(
                f"cluster.ray_auth_token_file={site_token_file}: no readable file there; point it at the site's Ray "
                "token on the shared filesystem, or remove it and rlaunch makes a token per run"
            )
        return Path(site_token_file)
    path = run_dir / AUTH_TOKEN_FILE
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(descriptor, "w") as token:
        token.write(secrets.token_hex(32))
    return path


def auth_token_path(run_dir: Path, site_token_file: str | None) -> Path:
    return Path(site_token_file) if site_token_file else run_dir / AUTH_TOKEN_FILE


def auth_environment(token_path: Path) -> dict[str, str]:
    return {"RAY_AUTH_MODE": RAY_AUTH_MODE, "RAY_AUTH_TOKEN_PATH": str(token_path)}


# Ray 2.60 drains a node for up to 30 s on SIGTERM (for Ray Serve's traffic), and with the node's GCS stopped by the
# same signal the drain RPC waits out all 30 s: every job's Ray down took 34 s. Ray comes down here after verl ended,
# with nothing to drain: 0 turns the drain off (3.5 s). A value the job inherits wins.
NO_DRAIN_ON_SIGTERM = {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
# When the first driver registers, each raylet starts idle Python workers ahead of demand (up to its logical CPUs, as
# many at a time as the node has cores), but only a task without a runtime env can use them: verl's driver always
# passes one (ray_kwargs.ray_init.runtime_env; rlaunch adds the file logger's path to it), so on a job's node they
# sit idle for the whole run, ~80 MB RSS and ~1 CPU-s of imports each (docs/facts.md#ray). A value the job inherits
# wins.
NO_IDLE_PRESTART = {"RAY_prestart_worker_first_driver": "0"}


def ray_environment(token_path: Path) -> dict[str, str]:
    """This process's environment for Ray's processes and the driver: the run's token by path (an inherited
    RAY_AUTH_TOKEN would win over it, so it is dropped), no drain at shutdown, no idle workers started ahead."""
    inherited = {name: value for name, value in os.environ.items() if name != "RAY_AUTH_TOKEN"}
    return {
        **NO_DRAIN_ON_SIGTERM,
        **NO_IDLE_PRESTART,
        **inherited,
        **auth_environment(token_path),
        "RAY_USAGE_STATS_ENABLED": "0",
    }


def raise_open_files_limit() -> None:
    """To the hard limit, never above it (raising past it kills the job: docs/facts.md#ray)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def ray_executable() -> str:
    """The venv's own `ray` next to this interpreter (a job's PATH need not contain the venv), else PATH's."""
    ray = Path(sys.executable).parent / "ray"
    return str(ray) if ray.exists() else "ray"


def ray_start_command(topology: Topology, rank: int) -> list[str]:
    command = [
        ray_executable(),
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


@dataclass
class StartedNode:
    """One `ray start --block` of this job: which node, in which role, and where its output goes."""

    node: str
    role: str  # head | worker
    process: subprocess.Popen
    log_path: Path

    def failure(self) -> str | None:
        """None while `ray start` runs; once it has exited, why (for the job's error)."""
        if self.process.poll() is None:
            return None
        if self.process.returncode < 0:  # a signal ended it, not Ray: its log says nothing of why
            return start_stopped(self.node, self.role, -self.process.returncode)
        return start_failure(self.node, self.role, last_error_line(self.log_path, self.process.returncode))


def start_failure(node: str, role: str, reason: str) -> str:
    return f"ray start failed on node {node} ({role}): {reason}"


# who sends a `ray start` each signal: SLURM TERMs every process of a job at a scancel, its time limit or a preemption
# (KILL after KillWait), and the kernel's OOM killer KILLs
SIGNAL_SENDERS = {
    signal.SIGTERM: "scancel, the time limit or a preemption",
    signal.SIGKILL: "the kernel's OOM killer, or SLURM after its KillWait",
}


def ended_by(returncode: int) -> str:
    """How a process ended, said by its return code: a signal (negative) by its name and whom it usually comes from."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        name = signal.Signals(-returncode).name
        sender = SIGNAL_SENDERS.get(signal.Signals(-returncode))
    except ValueError:
        name, sender = f"signal {-returncode}", None
    return f"was stopped by {name}" + (f" ({sender})" if sender else "")


def start_stopped(node: str, role: str, signal_number: int) -> str:
    """A `ray start` a signal ended: by whom it usually comes, not a start that failed."""
    return f"ray start on node {node} ({role}) {ended_by(-signal_number)}"


ERROR_LINE = re.compile(r"(Error|Exception|error:|failed|Failed|Check failed|refused|denied)")


def last_error_line(log_path: Path, returncode: int | None = None) -> str:
    """The last line of a node's log that says what went wrong (else its last line)."""
    try:
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    errors = [line for line in lines if ERROR_LINE.search(line) and not line.startswith("File ")]
    reason = (errors or lines or [f"exited with code {returncode} and wrote nothing"])[-1]
    return reason[:500]


def planned_ports(topology: Topology, rank: int) -> list[int]:
    ports = list(topology.node_ports(rank).values())
    return [topology.base_port, topology.base_port + 1, *ports] if rank == 0 else ports


def ports_in_use(address: str, ports: list[int]) -> list[int]:
    """The ones among `ports` that something else already holds on this node's address (another job, a stale Ray)."""
    taken = []
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # as servers bind: a listener conflicts, a closed connection in TIME_WAIT (a requeued job's own last
            # attempt) does not
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((address, port))
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    taken.append(port)
    return taken


def with_free_ports(
    topology: Topology, rank: int, taken: Callable[[str, list[int]], list[int]] = ports_in_use
) -> Topology:
    """This node's topology on the first port block whose ports are all free here, from the job id's block on; a
    node that finds none fails at once, naming itself."""
    address = topology.addresses[rank]
    for step in range(len(PORT_BLOCK_STARTS)):
        block = (topology.first_block + step) % len(PORT_BLOCK_STARTS)
        candidate = replace(topology, block=block)
        if not taken(address, planned_ports(candidate, rank)):
            return replace(candidate, head_port=candidate.base_port) if rank == 0 else candidate
    raise RuntimeError(
        start_failure(
            topology.nodes[rank],
            "head" if rank == 0 else "worker",
            f"every port block ({PORT_BLOCK_STARTS[0]}-{PORT_RANGES[-1][1] - 1}) has a port in use on {address}; "
            "free them (a stale Ray? `ps -ef | grep raylet`) or run on other nodes",
        )
    )


def moved_note(topology: Topology, rank: int) -> str | None:
    """A line for the job's log when this node left its job id's block (something else holds a port of it)."""
    if topology.block in (None, topology.first_block):
        return None
    first = PORT_BLOCK_STARTS[topology.first_block]
    return (
        f"rlaunch: a port of block {first} is in use on {topology.nodes[rank]} ({topology.addresses[rank]}): "
        f"its Ray uses the block at {topology.base_port}"
    )


def publish_head_port(topology: Topology, run_dir: Path) -> None:
    path = run_dir / HEAD_PORT_FILE.format(tag=topology.attempt_tag)
    partial = path.with_suffix(".partial")
    partial.write_text(f"{topology.head_port}\n")
    partial.rename(path)  # a worker never reads half a number


def wait_for_head_port(
    topology: Topology, run_dir: Path, timeout_s: float, gave_up: Callable[[], str | None]
) -> Topology:
    """A worker's topology with the GCS port its head took, once the head has written it."""
    path = run_dir / HEAD_PORT_FILE.format(tag=topology.attempt_tag)
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        reason = gave_up()
        if reason:
            raise RuntimeError(reason)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Ray head on {topology.nodes[0]} chose no port within {timeout_s:.0f} s")
        time.sleep(0.2)
    return replace(topology, head_port=int(path.read_text()))


def start_node(topology: Topology, rank: int, log_path: Path, token_path: Path) -> StartedNode:
    """Start this node's Ray on its topology's ports (`with_free_ports` first: Ray itself retries a taken port for
    ~40 s before it says so)."""
    node, role = topology.nodes[rank], "head" if rank == 0 else "worker"
    raise_open_files_limit()
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            ray_start_command(topology, rank),
            env=ray_environment(token_path),
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    return StartedNode(node, role, process, log_path)


# `ray start` says so once its node's daemons have registered; a start that exits with Ray's fixed 30 s registration
# wait (RAYLET_START_TIMEOUT) failed on a node too loaded at that moment, and a second start usually comes up
RAY_STARTED = "Ray runtime started."
RAYLET_START_TIMEOUT = "timed out during startup"


def start_head(topology: Topology, log_path: Path, token_path: Path, timeout_s: float, starts: int = 2) -> StartedNode:
    """The head's `ray start`, returned once it says it started or has exited (its failure is then the job's, as
    `wait_for_nodes` reports it); a start that missed Ray's raylet registration wait is made again, up to `starts`
    times within `timeout_s`. Workers meet the head only after this returns (publish_head_port), so none joined a
    head that was then started again."""
    deadline = time.monotonic() + timeout_s
    for start in range(1, starts + 1):
        offset = log_path.stat().st_size if log_path.exists() else 0
        head = start_node(topology, 0, log_path, token_path)
        output = ""
        while head.process.poll() is None and RAY_STARTED not in output and time.monotonic() < deadline:
            time.sleep(0.2)
            output = read_from(log_path, offset)
        output = read_from(log_path, offset)
        again = start < starts and time.monotonic() < deadline and RAYLET_START_TIMEOUT in output
        if head.process.poll() is None or not again:
            return head
        stop_group(head.process)  # what the failed start left: its GCS, a raylet that registered too late
        print(
            f"rlaunch: the Ray head on {topology.nodes[0]} missed Ray's 30 s raylet registration "
            f"({RAYLET_START_TIMEOUT}: a loaded node); starting it again ({start + 1} of {starts})",
            flush=True,
        )
    return head


def read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as file:
            file.seek(offset)
            return file.read().decode(errors="replace")
    except OSError:
        return ""


def stop_group(process: subprocess.Popen) -> None:
    """KILL what is left of an exited `ray start`'s process group (its session: start_new_session)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop_node(process: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """TERM the `ray start --block` process group: it stops its own GCS/raylet and workers. Once `ray start` itself
    has exited, what it started may still run in its group: that is killed (stop_group)."""
    if process.poll() is not None:
        stop_group(process)
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


def wait_for_head(topology: Topology, timeout_s: float, gave_up: Callable[[], str | None]) -> None:
    """Poll the head's port; stop early with the reason `gave_up` returns (the head's own failure, or the head
    marking the job done)."""
    deadline = time.monotonic() + timeout_s
    while not port_open(topology.head_address):
        reason = gave_up()
        if reason:
            raise RuntimeError(reason)
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the Ray head on {topology.nodes[0]} ({topology.head_address}) did not come up "
                f"within {timeout_s:.0f} s"
            )
        time.sleep(0.2)


def worker_failures(topology: Topology, run_dir: Path) -> str | None:
    """The first worker failure this job's workers reported through the shared run directory."""
    for rank in range(1, len(topology.nodes)):
        marker = run_dir / START_FAILED_MARKER.format(tag=topology.attempt_tag, rank=rank)
        if marker.exists():
            return marker.read_text().strip()
    return None


def report_worker_failure(topology: Topology, run_dir: Path, reason: str) -> None:
    (run_dir / START_FAILED_MARKER.format(tag=topology.attempt_tag, rank=topology.rank)).write_text(reason + "\n")


def connect(ray: ModuleType, topology: Topology, failed: Callable[[], str | None], deadline: float) -> None:
    """ray.init against the head, polled: its GCS port opens before its own raylet has registered, and a driver
    connecting in between is refused ("No node info found ...")."""
    while True:
        try:
            ray.init(address=topology.head_address, logging_level="ERROR", log_to_driver=False)
            return
        except (ConnectionError, RuntimeError) as error:
            reason = failed()
            if reason:
                raise RuntimeError(reason) from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not connect to the Ray head on {topology.nodes[0]}: {error}") from None
            time.sleep(0.5)


def wait_for_nodes(topology: Topology, head: StartedNode, run_dir: Path, token_path: Path, timeout_s: float) -> float:
    """Poll the head until every node of the allocation has registered (with its GPUs); name the missing ones.
    A head whose `ray start` exited, or a worker that reported its own failure, ends the wait at once."""

    def failed() -> str | None:
        return head.failure() or worker_failures(topology, run_dir)

    started = time.monotonic()
    wait_for_head(topology, timeout_s, failed)
    ray = import_ray(token_path)
    # ray.init puts Ray's failure handler on SIGTERM, which aborts the process at once: the caller's (job.BringUp,
    # which ends the bring-up through its clean-up) stays for the wait, as a scancel then comes through it
    kept = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    connect(ray, topology, failed, started + timeout_s)
    if kept is not None:
        signal.signal(signal.SIGTERM, kept)
    try:
        expected = dict(zip(topology.addresses, topology.nodes, strict=True))
        while True:
            alive = {node["NodeManagerAddress"]: node for node in ray.nodes() if node["Alive"]}
            missing = [name for address, name in expected.items() if address not in alive]
            if not missing and len(alive) >= len(expected):
                return time.monotonic() - started
            reason = failed()
            if reason:
                raise RuntimeError(reason)
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(
                    f"Ray node(s) {', '.join(missing)} did not register within {timeout_s:.0f} s "
                    f"(head {topology.head_address}; {len(alive)} of {len(expected)} up): see their ray_start.log"
                )
            time.sleep(0.5)
    finally:
        ray.shutdown()


def copy_logs(topology: Topology, rank: int, run_dir: Path, token_path: Path) -> None:
    """The node-local Ray logs (and the engine's, which live there too) into the shared run directory, secrets
    masked."""
    source = Path(topology.temp_dir(rank)) / "session_latest" / "logs"
    if source.is_dir():
        target = run_dir / "ray_logs" / f"{topology.nodes[rank]}-{rank}"
        # Ray's logs may echo the environment its processes got; the token is masked too, should Ray ever print it
        masked = [*secret_values(), *token_values(token_path)]
        copy_redacted(source, target, sorted(masked, key=len, reverse=True))


def remove_temp_dir(topology: Topology, rank: int) -> None:
    """The node's Ray session (its logs already copied, spilled objects, sockets) off the node-local /tmp, once the
    node's Ray has stopped: every job left one behind, hundreds per node over a few weeks of runs."""
    shutil.rmtree(topology.temp_dir(rank), ignore_errors=True)


def token_values(token_path: Path) -> list[str]:
    try:
        token = token_path.read_text().strip()
    except OSError:
        return []
    return [token] if token else []
