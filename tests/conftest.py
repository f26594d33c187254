"""Shared fixtures: compose rlaunch's real config tree (verl's shipped yaml included) in-process, and run the real
CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from launch.facts import Facts
from launch.gpu import DetectedGpus
from launch.schema import register_schemas

PROJECT = Path(__file__).resolve().parent.parent
CONF = PROJECT / "conf"
GPUS = ("a40", "a100_40", "a100_80", "h100")
MODES = ("quick_test", "standard", "production", "extended")
ALGOS = ("guru_baseline", "mtl_pcgrad")

register_schemas()


def compose_config(*overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=["launch.sweep_id=test-sweep", *overrides])


def cpu_facts(**changes: object) -> Facts:
    """This machine as the tests see it: no GPU, no SLURM partition."""
    values: dict = {"gpus": DetectedGpus("", 0.0, 0, "test: no GPU")}
    values.update(changes)
    return Facts(**values)


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """launch/run.py as a user runs it, in a directory of the test's own (run dirs land there)."""
    inherited = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "RLAUNCH_DEBUG")}
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


def require_or_skip(reason: str) -> None:
    """A real part is missing: skip, except under CI=true, where a skipped real-part test is a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and a real part is missing: {reason}")
    pytest.skip(reason)


# Short: Unix socket paths under it must stay < 107 bytes. Not the dev default port (16817), so a developer's own dev
# cluster keeps running; both can be moved so that two checkouts can run their suites side by side.
SLURM_PREFIX = os.environ.get("RLAUNCH_TEST_SLURM_PREFIX", "/tmp/rlaunch-test-slurm")
SLURM_PORT_BASE = os.environ.get("RLAUNCH_TEST_SLURM_PORT_BASE", "17817")


def dev_cluster(prefix: str, port_base: str, *shape: str) -> Iterator[dict[str, str]]:
    """scripts/dev_cluster.sh up with `shape` under its own prefix and ports (skipped, or failed under CI=true,
    where it cannot start); yields the environment that points SLURM commands at it, then stops exactly its
    daemons."""
    if os.geteuid() != 0:
        require_or_skip("the dev SLURM cluster needs root (slurmd runs as root)")
    script = PROJECT / "scripts" / "dev_cluster.sh"
    args = [*shape, "--prefix", prefix, "--port-base", port_base]
    up = subprocess.run(["bash", str(script), "up", *args], capture_output=True, text=True, timeout=600)
    if up.returncode != 0:
        require_or_skip(f"dev SLURM cluster did not start: {(up.stdout + up.stderr)[-1500:]}")
    env = {"SLURM_CONF": f"{prefix}/etc/slurm.conf"}
    yield env
    subprocess.run(["scancel", "--full", "-u", "root"], env={**os.environ, **env}, check=False, timeout=30)
    subprocess.run(["bash", str(script), "down", "--prefix", prefix], check=False, timeout=120)


@pytest.fixture(scope="session")
def slurm_env():
    """A real SLURM cluster on loopback, started once per test session by the project's own script: two virtual
    DGX-sized nodes (128 CPUs, ~1 TiB, 8 fake GPUs each) with the preemption partitions."""
    yield from dev_cluster(SLURM_PREFIX, SLURM_PORT_BASE, "-n", "2", "-g", "8", "--big", "--preempt")
