"""Shared fixtures: compose rlaunch's real config tree (verl's shipped yaml included) in-process, and run the real
CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
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
    values: dict = {"gpus": DetectedGpus("", 0.0, 0, "test: no GPU"), "git_sha": "0" * 40}
    values.update(changes)
    return Facts(**values)


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """launch/run.py as a user runs it, in a directory of the test's own (run dirs land there)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("RLAUNCH_DEBUG", None)
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
