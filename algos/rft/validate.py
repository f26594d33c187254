"""Plan-time checks of algo=rft: the rft settings, stage 1's config with the code verl's generation server runs on it,
and stage 3's composed sft_trainer_engine config with verl's SFT config code.

Runs on: the login node, from launch/validate.py, on plain dicts: verl's part of the composed config and the rft
settings. Every failure is an RftConfigError whose one line names the key and the fix (the launcher turns it into
its own one-line refusal); nothing here imports the launcher.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from algos.rft.filter import SFT_FILE
from algos.rft.settings import RftConfigError
from algos.rft.sft import SftConfigError, check_with_verl, compose_sft_config, root_message

# stands in for the run directory, which the plan makes later: validation composes paths but never opens them
PLANNED_RUN_DIR = Path("/rlaunch-planned-run")


def check_settings(rft: dict[str, Any], rollout: dict[str, Any]) -> None:
    oversample, k, temperature = int(rft["oversample"]), int(rft["k"]), float(rft["temperature"])
    if oversample < 1:
        raise RftConfigError(f"rft.oversample={oversample}: generate at least one sample per prompt (15-50 is usual)")
    if not 1 <= k <= oversample:
        raise RftConfigError(f"rft.k={k} must be between 1 and rft.oversample ({oversample}): keep at most that many")
    if temperature < 0:
        raise RftConfigError(f"rft.temperature={temperature} is negative: use e.g. 0.7")
    if int(rollout["n"]) != oversample:
        raise RftConfigError(
            f"actor_rollout_ref.rollout.n={rollout['n']} contradicts rft.oversample={oversample}: set rft.oversample "
            "(algo=rft derives rollout.n from it)"
        )
    if float(rollout["temperature"]) != temperature:
        raise RftConfigError(
            f"actor_rollout_ref.rollout.temperature={rollout['temperature']} contradicts rft.temperature="
            f"{temperature}: set rft.temperature (algo=rft derives the rollout temperature from it)"
        )
    if temperature == 0 and oversample > 1:
        # verl's generation server asserts the same; the samples would all be identical anyway
        raise RftConfigError(
            # rft.k (the samples kept per prompt) must stay within rft.oversample: the fix sets both
            f"rft.temperature=0 gives {oversample} identical samples: raise it (e.g. rft.temperature=0.7) or sample "
            "once with rft.oversample=1 rft.k=1"
        )


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
        raise RftConfigError(f"verl rejects stage 1's rollout config: {root_message(error)}") from error
    trainer = verl["trainer"]
    gpus = int(trainer["nnodes"]) * int(trainer["n_gpus_per_node"])
    tp = int(rollout["tensor_model_parallel_size"])
    if gpus // tp < 1:
        raise RftConfigError(
            f"stage 1 has {gpus} GPU(s) for rollout replicas of tensor_model_parallel_size {tp}: no replica fits; "
            f"lower actor_rollout_ref.rollout.tensor_model_parallel_size to at most {gpus}"
        )
    data = verl["data"]
    if not data.get("train_files"):
        raise RftConfigError("data.train_files is empty: stage 1 generates for its prompts; point it at parquet files")
    if not data.get("prompt_key"):
        raise RftConfigError("data.prompt_key is not set: name the chat-prompt column of data.train_files")


def planned_sft_config(verl: dict[str, Any], rft_sft: dict[str, Any]) -> dict[str, Any]:
    """Stage 3's config as the job will compose it, its data file where the planned run directory will hold it:
    what the plan validates and the preflight sizes."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compose_sft_config(verl, rft_sft, PLANNED_RUN_DIR / "rft" / "filter" / SFT_FILE)
    except SftConfigError as error:
        raise RftConfigError(str(error)) from error


def validate_rft(verl: dict[str, Any], rft: dict[str, Any]) -> None:
    check_settings(rft, verl["actor_rollout_ref"]["rollout"])  # type: ignore[arg-type]
    check_generation(verl)
    model_path = Path(str(verl["actor_rollout_ref"]["model"]["path"])).expanduser()
    sft = planned_sft_config(verl, rft["sft"])  # type: ignore[arg-type]
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_with_verl(sft, rft["sft"], model_is_local=model_path.is_dir())  # type: ignore[arg-type]
    except SftConfigError as error:
        raise RftConfigError(str(error)) from error
