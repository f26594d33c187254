"""Shared fixtures: compose rlaunch's real config tree (verl's shipped yaml included) in-process, and run the real
CLI in a subprocess."""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import runpy
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from launch.compose_once import SharedConfigCache
from launch.facts import Facts
from launch.gpu import DetectedGpus
from launch.ray_cluster import NO_IDLE_PRESTART
from launch.schema import register_schemas

PROJECT = Path(__file__).resolve().parent.parent
CONF = PROJECT / "conf"
GPUS = ("a40", "a100_40", "a100_80", "h100")
MODES = ("quick_test", "standard", "production", "extended")
ALGOS = ("guru_baseline", "mtl_pcgrad", "verl")

register_schemas()

# Ray starts its workers at nice 15 (worker_niceness in Ray's src/ray/common/ray_config_def.h) so that its own daemons
# stay responsive. On a job's node the workers are the run; on this 2-core test machine they share the cores with the
# suite's own nice-0 processes (and a second suite, or a load beside it), where a worker got ~2 % of a core: an actor
# that starts in 13 s took over 120 s beside a load of 2, and 38 s at nice 0. Every Ray the tests start (ray.init,
# `ray start` in the dev cluster's jobs, which inherit this environment through sbatch) runs its workers at 0.
os.environ.setdefault("RAY_worker_niceness", "0")
# and, as a job's Ray, starts no idle workers ahead of the first driver: a driver with a runtime env never uses them,
# and each cost ~1 CPU-s of this machine's two cores
for name, value in NO_IDLE_PRESTART.items():
    os.environ.setdefault(name, value)


_yaml_read_once: SharedConfigCache | None = None


def compose_config(*overrides: str) -> DictConfig:
    """Hydra's own composition of conf/ with `overrides`. The yaml files are read once per test process (the file
    cache a sweep shares, launch/compose_once.py; tests/test_overrides.py holds it equal to composing from disk):
    reading them again for each of the suite's thousands of compositions was most of its planning tests' time."""
    global _yaml_read_once
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        if not any(override.lstrip("+~").startswith("hydra.") for override in overrides):
            _yaml_read_once = _yaml_read_once or SharedConfigCache(loader.repository)  # type: ignore[attr-defined]
            loader.repository = _yaml_read_once  # type: ignore[attr-defined]
        return compose("config", overrides=["launch.sweep_id=test-sweep", *overrides])


def cpu_facts(**changes: object) -> Facts:
    """This machine as the tests see it: no GPU, no SLURM partition."""
    values: dict = {"gpus": DetectedGpus("", 0.0, 0, "test: no GPU")}
    values.update(changes)
    return Facts(**values)


# what a user's shell would not hand launch/run.py: the dev cluster's SLURM_CONF, a debug switch, the test runner's
# terminal size (pytest-xdist's workers have one set; a user's pipe has none)
NOT_INHERITED = ("SLURM_CONF", "RLAUNCH_DEBUG", "COLUMNS", "LINES")


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """launch/run.py as a user runs it, in a directory of the test's own (run dirs land there)."""
    inherited = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    full_env = {**inherited, **(env or {})}
    return subprocess.run(
        [sys.executable, str(PROJECT / "launch" / "run.py"), *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def compose_cfg():
    return compose_config


RUN_PY = str(PROJECT / "launch" / "run.py")


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


def run_here(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """launch/run.py as run_cli runs it (the same environment: no SLURM_CONF, no terminal size), but as __main__ in
    this process: a subprocess costs ~2-4 s of interpreter and import start-up per case, several times that while
    the suite's workers share two cores. The working directory and the environment are restored afterwards, and the
    next invocation composes afresh, as a new process would."""
    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, Path.cwd()
    for name in NOT_INHERITED:
        os.environ.pop(name, None)
    os.environ.update(env or {})
    sys.argv = [RUN_PY, *args]
    os.chdir(cwd)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(RUN_PY, run_name="__main__")
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
            except Exception:  # a bug: its traceback, as the interpreter would print it
                traceback.print_exc(file=err)
                code = 1
    finally:
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None  # type: ignore[assignment]
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
    return Result(code, out.getvalue(), err.getvalue())


@pytest.fixture
def cli(tmp_path: Path) -> Callable[..., Result]:
    """run_here in the test's own directory."""

    def run(*args: str) -> Result:
        return run_here(*args, cwd=tmp_path)

    return run


# Under pytest-xdist (`-n 3 --dist worksteal`, pyproject.toml) each worker starts with a share of the tests and an idle
# one takes pending tests from a busy one, so the long real-part tests no longer leave one worker running alone at the
# end (`make test` 859 s against 957 s with `--dist load`, one run each). Each worker is a test session of its own:
# the first dev-cluster test a worker runs starts that worker's own cluster (its own slot below), so jobs of different
# workers never share nodes and their waits overlap the CPU-bound tests.
# `--dist loadgroup` would not keep a group together here: xdist 3.8 tags a grouped test by rewriting `item._nodeid`,
# which pytest 9 no longer reads (a node's id is `Node._id`), so every group silently ran as plain `load`.


@contextmanager
def local_ray(**init_kwargs: Any) -> Iterator[None]:
    """A Ray of this test's own in this process (address="local": never a dev-cluster job's Ray on the host), shut
    down after it. The suite's workers run tests of every file one after another (`--dist worksteal`), and a test that
    started Ray in the process before (Ray Data starts one on first use) would make ray.init refuse to start again:
    that one is shut down first."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    saved = os.environ.pop("RAY_ADDRESS", None)
    ray.init(address="local", include_dashboard=False, **init_kwargs)
    try:
        yield
    finally:
        ray.shutdown()
        if saved is not None:
            os.environ["RAY_ADDRESS"] = saved


def require_or_skip(reason: str) -> None:
    """A real part is missing: skip, except under CI=true, where a skipped real-part test is a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and a real part is missing: {reason}")
    pytest.skip(reason)


# Each test session gets a dev cluster of its own: a slot of its own (held with a lock for the whole session), so
# two test runs on one host (two checkouts, or a developer's second run) never share nodes or jobs. A slot k is
# prefix /tmp/rlt<k> (short: Unix socket paths under it must stay < 107 bytes) and ports from 17817 + 100 k (never
# the dev default 16817, so a developer's own dev cluster keeps running); a second cluster of the session (the
# array tests') takes base + 50. RLAUNCH_TEST_SLURM_PREFIX / _PORT_BASE pin them instead.
SLOTS = 16
_slot_lock: IO[str] | None = None


def _session_slot() -> int:
    """The first slot no other test session on this host holds (flock: released by the OS when this one ends,
    however it ends)."""
    global _slot_lock
    for slot in range(SLOTS):
        lock = open(f"/tmp/rlaunch-test-slot-{slot}.lock", "w")  # noqa: SIM115 (held open for the session)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        _slot_lock = lock
        return slot
    raise RuntimeError(f"all {SLOTS} dev-cluster slots are held by other test sessions on this host")


def slurm_slot() -> tuple[str, str]:
    """(prefix, port base) of this session's dev cluster."""
    if os.environ.get("RLAUNCH_TEST_SLURM_PREFIX"):
        return os.environ["RLAUNCH_TEST_SLURM_PREFIX"], os.environ.get("RLAUNCH_TEST_SLURM_PORT_BASE", "17817")
    slot = _session_slot() if _slot_lock is None else int(Path(_slot_lock.name).stem.rsplit("-", 1)[1])
    return f"/tmp/rlt{slot}", str(17817 + 100 * slot)


def wait_until(condition: Callable[[], object], timeout_s: float, what: str, poll_s: float = 0.5) -> object:
    """Poll `condition` until it returns something true (returned), or fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(poll_s)


def _no_jobs(env: dict[str, str]) -> bool:
    listed = subprocess.run(["squeue", "-h", "-o", "%i"], env={**os.environ, **env}, capture_output=True, text=True)
    return listed.returncode == 0 and not listed.stdout.strip()


def dev_cluster(prefix: str, port_base: str, *shape: str) -> Iterator[dict[str, str]]:
    """scripts/dev_cluster.sh up with `shape` under its own prefix and ports (skipped, or failed under CI=true,
    where it cannot start); yields the environment that points SLURM commands at it, then cancels every job and
    stops exactly its daemons. Jobs a killed earlier session left in the slot are cancelled before the first test."""
    if os.geteuid() != 0:
        require_or_skip("the dev SLURM cluster needs root (slurmd runs as root)")
    script = PROJECT / "scripts" / "dev_cluster.sh"
    args = [*shape, "--prefix", prefix, "--port-base", port_base]
    up = subprocess.run(["bash", str(script), "up", *args], capture_output=True, text=True, timeout=600)
    if up.returncode != 0:
        require_or_skip(f"dev SLURM cluster did not start: {(up.stdout + up.stderr)[-4000:]}")
    env = {"SLURM_CONF": f"{prefix}/etc/slurm.conf"}
    cancel = ["scancel", "--full", "-u", "root"]
    subprocess.run(cancel, env={**os.environ, **env}, check=False, timeout=30)
    wait_until(lambda: _no_jobs(env), 120, f"the jobs left on the dev cluster under {prefix} to end")
    try:
        yield env
    finally:
        subprocess.run(cancel, env={**os.environ, **env}, check=False, timeout=30)
        subprocess.run(["bash", str(script), "down", "--prefix", prefix], check=False, timeout=120)


@pytest.fixture(scope="session")
def slurm_env():
    """A real SLURM cluster on loopback, started once per test session by the project's own script: two virtual
    DGX-sized nodes (128 CPUs, ~1 TiB, 8 fake GPUs each) with the preemption partitions."""
    yield from dev_cluster(*slurm_slot(), "-n", "2", "-g", "8", "--big", "--preempt")
