"""hydra/sweeper=rlaunch: Hydra's basic sweeper without its up-front trial composition of every job.

Runs on: the login node. The basic sweeper composes each job once just to validate the batch, then the launcher
composes it again; with verl's 47-file tree that doubles a sweep's planning time. rlaunch's launcher composes,
plans and validates every job before it submits any, so the guarantee (nothing queued if one job is bad) holds.
"""

# no `from __future__ import annotations`: see launcher.py

from collections.abc import Sequence
from dataclasses import dataclass

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore


@dataclass
class RlaunchSweeperConf:
    _target_: str = "hydra_plugins.rlaunch_slurm_launcher.sweeper.RlaunchSweeper"
    max_batch_size: int | None = None


ConfigStore.instance().store(group="hydra/sweeper", name="rlaunch", node=RlaunchSweeperConf, provider="rlaunch")


class RlaunchSweeper(BasicSweeper):
    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        """Left to the launcher, which composes and validates every job before submitting any."""
