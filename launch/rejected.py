"""A rejected invocation leaves nothing behind: Hydra writes its bookkeeping (`.hydra/`: the composed config, the
overrides, multirun.yaml) before rlaunch's checks run, into the sweep directory that a plan would have filled (the
code snapshot is written only at submission, under the runs dir: launch/snapshot.py).

Runs on: the login node, on the way out of a refusal (launch/run.py's exit_with_message).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf


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
        discard(hydra_dir, keep_above=Path.cwd())
