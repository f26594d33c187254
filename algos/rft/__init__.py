"""Rejection-sampling fine-tuning (docs/background.md#rft-sampling): three stages on verl 0.9.1's own entry points.

    generate  verl.trainer.main_generation_server: `rft.oversample` samples per prompt from the rollout engine
    filter    rewards' batch API scores them; at most `rft.k` correct, distinct samples per prompt are kept
    sft       verl.trainer.sft_trainer_ray: verl's SFT trainer on the kept samples, on the job's Ray cluster

Each stage writes under <run_dir>/rft/<stage>/ and is skipped when its output exists for the same configuration
(a config hash chained through the stages before it). The launcher calls the functions below; everything
heavy (verl, pandas, rewards) is imported where it is used, so launch/ can import this package at no cost.

Runs on: the login node (`validate_rft` and `planned_sft_config`, at plan time) and the job head (`pipeline_command`
names what the job runs instead of verl's PPO driver: `python -m algos.rft.pipeline --run-dir <run_dir>`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from algos.rft.settings import RftConfigError

__all__ = ["RftConfigError", "pipeline_command", "planned_sft_config", "validate_rft"]


def validate_rft(verl: dict[str, Any], rft: dict[str, Any]) -> None:
    """Plan-time checks of the three stages (algos/rft/validate.py) on verl's part of the config and the rft
    settings, as plain dicts; raises RftConfigError."""
    from algos.rft.validate import validate_rft as validate

    validate(verl, rft)


def planned_sft_config(verl: dict[str, Any], rft_sft: dict[str, Any]) -> dict[str, Any]:
    """Stage 3's config as the job will compose it (algos/rft/validate.py), for the preflight to size; raises
    RftConfigError."""
    from algos.rft.validate import planned_sft_config as planned

    return planned(verl, rft_sft)


def pipeline_command(python: str, run_dir: Path) -> list[str]:
    """The job's driver for algo=rft: the pipeline reads verl_config.yaml, rlaunch_config.yaml and plan.json from
    the run directory and runs the stages that are not done yet."""
    return [python, "-m", "algos.rft.pipeline", "--run-dir", str(run_dir)]
