"""A rejected invocation leaves nothing behind: Hydra writes its bookkeeping (`.hydra/`: the composed config, the
overrides, multirun.yaml) before rlaunch's checks run, into the sweep directory that a plan would have filled (the
code snapshot is written only at submission, under the runs dir: launch/snapshot.py), and makes every directory above
it that did not exist (a new `cluster.shared_dir`, its `rlaunch/`). What existed is recorded just before Hydra makes
them (NearestExistingDirectory, a Hydra callback conf/config.yaml names), and only what this invocation made goes.

Runs on: the login node, on the way out of a refusal (launch/run.py's exit_with_message).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

# the nearest directory above Hydra's output directory that existed before Hydra made any (None: not known)
_existing_before: Path | None = None


def nearest_existing(path: Path) -> Path:
    """`path` itself where it exists, else its nearest ancestor that does."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


class NearestExistingDirectory(Callback):
    """Records, as Hydra starts and before it makes its output directory, the nearest directory above it that exists:
    a refusal removes what this invocation made, never a directory that was there (an empty one included)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.record(config, "hydra.run.dir")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.record(config, "hydra.sweep.dir")

    @staticmethod
    def record(config: DictConfig, key: str) -> None:
        global _existing_before
        try:  # an interpolation a later check refuses in one line is no reason to fail here
            value = OmegaConf.select(config, key, default=None, throw_on_resolution_failure=True)
        except Exception:  # noqa: BLE001 - whatever fails to resolve is refused later, by the check that owns it
            value = None
        _existing_before = nearest_existing(Path(str(value)).absolute()) if value else None


def hydra_dir_of_this_invocation() -> Path | None:
    """Where Hydra wrote this invocation's bookkeeping (hydra.run.dir or hydra.sweep.dir), if it composed at all."""
    if not HydraConfig.initialized():
        return None
    hydra = HydraConfig.get()
    key = "sweep.dir" if hydra.mode == RunMode.MULTIRUN else "runtime.output_dir"
    value = OmegaConf.select(hydra, key, default=None, throw_on_resolution_failure=False)
    return Path(str(value)).absolute() if value else None


def discard(hydra_dir: Path, keep_above: Path) -> None:
    """Remove `hydra_dir` when its sweep directory holds nothing else (no run directory, no manifest: a sweep that
    was planned before keeps it), then the directories above it that are left empty, up to `keep_above`."""
    sweep_dir = hydra_dir.parent
    if not hydra_dir.is_dir() or any(entry != hydra_dir for entry in sweep_dir.iterdir()):
        return
    shutil.rmtree(hydra_dir, ignore_errors=True)
    sweep_dir.rmdir()
    directory = sweep_dir.parent
    while directory != keep_above and directory.is_relative_to(keep_above) and not any(directory.iterdir()):
        directory.rmdir()
        directory = directory.parent


def discard_rejected_invocation() -> None:
    hydra_dir = hydra_dir_of_this_invocation()
    if hydra_dir is not None:
        global _existing_before
        before, _existing_before = _existing_before, None  # this invocation's, used once
        discard(hydra_dir, keep_above=before if before is not None and hydra_dir.is_relative_to(before) else Path.cwd())
