"""Plan-time checks of algo=rft: the rft settings, stage 1's config with the code verl's generation server runs on it,
and stage 3's composed sft_trainer_engine config with verl's SFT config code.

Runs on: the login node, from launch/validate.py, on the composed config (our roots and verl's keys together).
Every failure is a launch.errors.UserError whose one line names the key and the fix.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from algos.rft.filter import SFT_FILE
from algos.rft.sft import SftConfigError, check_with_verl, compose_sft_config, root_message
from launch.errors import UserError

# stands in for the run directory, which the plan makes later: validation composes paths but never opens them
PLANNED_RUN_DIR = Path("/rlaunch-planned-run")


def verl_part(cfg: DictConfig) -> dict[str, Any]:
    from launch.schema import RLAUNCH_ROOTS

    resolved = OmegaConf.to_container(cfg, resolve=True)
    for root in (*RLAUNCH_ROOTS, "hydra"):
        resolved.pop(root, None)
    return resolved  # type: ignore[return-value]


def check_settings(rft: dict[str, Any], rollout: dict[str, Any]) -> None:
    oversample, k, temperature = int(rft["oversample"]), int(rft["k"]), float(rft["temperature"])
    if oversample < 1:
        raise UserError(f"rft.oversample={oversample}: generate at least one sample per prompt (seed 002: 15-50)")
    if not 1 <= k <= oversample:
        raise UserError(f"rft.k={k} must be between 1 and rft.oversample ({oversample}): keep at most that many")
    if temperature < 0:
        raise UserError(f"rft.temperature={temperature} is negative: use e.g. 0.7")
    if int(rollout["n"]) != oversample:
        raise UserError(
            f"actor_rollout_ref.rollout.n={rollout['n']} contradicts rft.oversample={oversample}: set rft.oversample "
            "(algo=rft derives rollout.n from it)"
        )
    if float(rollout["temperature"]) != temperature:
        raise UserError(
            f"actor_rollout_ref.rollout.temperature={rollout['temperature']} contradicts rft.temperature="
            f"{temperature}: set rft.temperature (algo=rft derives the rollout temperature from it)"
        )
    if temperature == 0 and oversample > 1:
        # verl's generation server asserts the same; the samples would all be identical anyway
        raise UserError(f"rft.temperature=0 gives {oversample} identical samples: raise it (e.g. 0.7) or oversample=1")


def check_generation(verl: dict[str, Any]) -> None:
    """What verl.trainer.main_generation_server builds from the config before it asks for GPUs: the RolloutConfig
    each replica makes (omega_conf_to_dataclass) and the replica count (GPUs / rollout TP)."""
    from verl.utils.config import omega_conf_to_dataclass

    rollout = verl["actor_rollout_ref"]["rollout"]
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            omega_conf_to_dataclass(OmegaConf.create(rollout))
    except Exception as error:  # verl's dataclasses raise ValueError, AssertionError, TypeError, ...
        raise UserError(f"verl rejects stage 1's rollout config: {root_message(error)}") from error
    trainer = verl["trainer"]
    gpus = int(trainer["nnodes"]) * int(trainer["n_gpus_per_node"])
    tp = int(rollout["tensor_model_parallel_size"])
    if gpus // tp < 1:
        raise UserError(
            f"stage 1 has {gpus} GPU(s) for rollout replicas of tensor_model_parallel_size {tp}: no replica fits; "
            f"lower actor_rollout_ref.rollout.tensor_model_parallel_size to at most {gpus}"
        )
    data = verl["data"]
    if not data.get("train_files"):
        raise UserError("data.train_files is empty: stage 1 generates for its prompts; point it at parquet files")
    if not data.get("prompt_key"):
        raise UserError("data.prompt_key is not set: name the chat-prompt column of data.train_files")


def validate_rft(cfg: DictConfig) -> None:
    verl = verl_part(cfg)
    rft = OmegaConf.to_container(cfg.rft, resolve=True)
    check_settings(rft, verl["actor_rollout_ref"]["rollout"])  # type: ignore[arg-type]
    check_generation(verl)
    model_path = Path(str(verl["actor_rollout_ref"]["model"]["path"])).expanduser()
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sft = compose_sft_config(verl, rft["sft"], PLANNED_RUN_DIR / "rft" / "filter" / SFT_FILE)  # type: ignore[index]
            check_with_verl(sft, model_is_local=model_path.is_dir())
    except SftConfigError as error:
        raise UserError(str(error)) from error
