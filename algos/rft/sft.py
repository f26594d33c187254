"""Stage 3, sft: verl's SFT trainer on the kept samples, its config composed from verl's own sft_trainer_engine tree.

Runs on: the login node (composition and verl's config dataclasses, at plan time) and the job head (the pipeline
composes the same config, dumps it, checks the Ray cluster and starts `python -m verl.trainer.sft_trainer_ray` on
it). The Ray variant of verl's SFT trainer is the one that runs across the nodes of the job's Ray cluster;
verl.trainer.sft_trainer needs one torchrun per node, which this launcher's job does not start.

The config is composed in its own Hydra compose call, over verl's `sft_trainer_engine` with overrides in this order
(a later one wins):
  1. derived from the run: the hardware knobs the GPU profile set for the PPO actor (micro-batch / token budget per
     GPU, dynamic batching, gradient checkpointing, offload, FSDP strategy), the lengths (prompt + response), the
     tracking names and loggers: the SFT step trains the same model on the same cards;
  2. the run's `rft.sft.*` keys (conf/algo/rft.yaml; mode/ reaches epochs and steps through them);
  3. what rlaunch owns and a user may not set: the data file (stage 2's output), the model (the run's), the GPU
     count (the run's trainer.nnodes x n_gpus_per_node) and the checkpoint directory (the run's, absolute).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from functools import cache, reduce
from pathlib import Path
from typing import Any

from algos.verl_entry_points import hydra_entry_command, render_value

SFT_CONFIG_NAME = "sft_config"
OWNED_KEYS = (
    "data.train_files",
    "model.path",
    "trainer.nnodes",
    "trainer.n_gpus_per_node",
    "trainer.default_local_dir",
)
# verl's SFT workers are placed in bundles of {CPU: 10, GPU: 1}: RayResourcePool's default max_colocate_count
CPUS_PER_SFT_WORKER = 10


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted keys of the leaves; an empty mapping is a leaf (it sets the key to {})."""
    for key, value in mapping.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from flatten(value, dotted + ".")
        else:
            yield dotted, value


# Stage 3's keys that follow the run's (the GPU profile's knobs for the same model on the same cards) unless rft.sft
# sets them: stage 3's key -> the run's key. One the run lacks (a Megatron actor has no fsdp_config) keeps verl's SFT
# default.
FOLLOWED = {
    "data.use_dynamic_bsz": "actor_rollout_ref.actor.use_dynamic_bsz",
    "data.max_token_len_per_gpu": "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "data.micro_batch_size_per_gpu": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "model.enable_gradient_checkpointing": "actor_rollout_ref.model.enable_gradient_checkpointing",
    "model.use_remove_padding": "actor_rollout_ref.model.use_remove_padding",
    "model.trust_remote_code": "actor_rollout_ref.model.trust_remote_code",
    "engine.param_offload": "actor_rollout_ref.actor.fsdp_config.param_offload",
    "engine.optimizer_offload": "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
}
MAX_LENGTH = "data.max_length"  # a sample is at most a prompt and its response
LENGTHS = "data.max_prompt_length + data.max_response_length"


def derived_from_run(verl: Mapping[str, Any]) -> dict[str, Any]:
    actor = verl["actor_rollout_ref"]["actor"]
    data = verl["data"]
    trainer = verl["trainer"]
    followed = {
        key: reduce(lambda node, part: (node or {}).get(part), run.split("."), verl) for key, run in FOLLOWED.items()
    }
    derived: dict[str, Any] = {
        MAX_LENGTH: int(data["max_prompt_length"]) + int(data["max_response_length"]),
        **{key: value for key, value in followed.items() if value is not None},
        "trainer.project_name": trainer["project_name"],
        "trainer.experiment_name": trainer["experiment_name"],
        "trainer.logger": list(trainer["logger"]),
    }
    if actor.get("strategy") in ("fsdp", "fsdp2"):
        derived["engine.strategy"] = actor["strategy"]
    return derived


def named(key: str, rft_sft: Mapping[str, Any]) -> str:
    """The key a refusal about stage 3's `key` names: rft.sft's where the run sets it there, else the run's key its
    value came from (the user set that one, or their GPU profile did)."""
    if key in dict(flatten(rft_sft)):
        return f"rft.sft.{key}"
    return LENGTHS if key == MAX_LENGTH else FOLLOWED.get(key, f"rft.sft.{key}")


def owned_by_rlaunch(verl: Mapping[str, Any], sft_file: Path) -> dict[str, Any]:
    trainer = verl["trainer"]
    return {
        "data.train_files": str(sft_file),
        "model.path": str(verl["actor_rollout_ref"]["model"]["path"]),
        "trainer.nnodes": int(trainer["nnodes"]),
        "trainer.n_gpus_per_node": int(trainer["n_gpus_per_node"]),
        "trainer.default_local_dir": str(trainer["default_local_dir"]),
    }


def owned_keys_set(rft_sft: Mapping[str, Any]) -> list[str]:
    return [f"rft.sft.{key}" for key, _ in flatten(rft_sft) if key in OWNED_KEYS]


def sft_overrides(verl: Mapping[str, Any], rft_sft: Mapping[str, Any], sft_file: Path) -> list[str]:
    merged: dict[str, Any] = {}
    for layer in (derived_from_run(verl), dict(flatten(rft_sft)), owned_by_rlaunch(verl, sft_file)):
        merged.update(layer)
    return [f"{key}={render_value(value)}" for key, value in merged.items()]


class SftConfigError(ValueError):
    """The rft.sft keys do not compose over verl's sft_trainer_engine tree."""


def root_message(error: BaseException) -> str:
    """The first line of the innermost cause: Hydra wraps verl's own message ("strategy x not supported") in
    "Error in call to target ...:"."""
    messages = []
    current: BaseException | None = error
    while current is not None and len(messages) < 10:
        lines = [line.strip() for line in str(current).splitlines() if line.strip()]
        messages.append(lines[0] if lines else type(current).__name__)
        current = current.__cause__ or current.__context__
    return messages[-1]


def compose_sft_config(verl: Mapping[str, Any], rft_sft: Mapping[str, Any], sft_file: Path) -> dict[str, Any]:
    """verl's sft_trainer_engine composed with the overrides above, resolved: exactly what verl's SFT trainer gets.
    Composes in a fresh Hydra context: a running Hydra app (launch/run.py validates from inside its own) is set
    aside and put back afterwards."""
    owned = owned_keys_set(rft_sft)
    if owned:
        raise SftConfigError(
            f"{owned[0]} is set by rlaunch (stage 2's data, the run's model, GPU count and checkpoint directory): "
            f"remove it from rft.sft"
        )
    return copy.deepcopy(composed_sft_config(tuple(sft_overrides(verl, rft_sft, sft_file))))


@cache  # the same overrides compose the same tree: a plan composes it for validation and again for the preflight
def composed_sft_config(overrides: tuple[str, ...]) -> dict[str, Any]:
    import re

    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    running = GlobalHydra.instance()
    outer = running.hydra if running.is_initialized() else None  # launch/run.py's own app, when called from it
    running.clear()
    try:
        with initialize_config_module(config_module="verl.trainer.config", version_base="1.3"):
            cfg = compose(config_name="sft_trainer_engine", overrides=list(overrides))
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except Exception as error:  # Hydra and OmegaConf raise several types; all mean the keys did not compose
        text = f"{error} {error.__cause__ or ''}"
        key = re.search(r"Could not override '([^']+)'", text) or re.search(r"[Kk]ey '([^']+)'", text)
        name = f"rft.sft.{key.group(1)}" if key else "rft.sft"
        first = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
        raise SftConfigError(
            f"{name} does not compose over verl's sft_trainer_engine ({first}): fix the key or value "
            "(the tree is verl/trainer/config/sft_trainer_engine.yaml)"
        ) from error
    finally:
        GlobalHydra.instance().clear()
        if outer is not None:
            GlobalHydra.instance().initialize(outer)


def check_with_verl(sft: Mapping[str, Any], rft_sft: Mapping[str, Any], model_is_local: bool) -> None:
    """The dataclasses verl's SFT trainer builds first (SFTTrainer._build_config), plus the arithmetic it would hit
    on the GPUs, on the composed config `sft` of the run's `rft_sft`. The model's dataclass loads the tokenizer, so
    it is built only for a local model directory."""
    from omegaconf import OmegaConf
    from verl.utils.config import omega_conf_to_dataclass

    config = OmegaConf.create(dict(sft))
    sections = ("engine", "optim", "checkpoint", "profiler", *(("model",) if model_is_local else ()))
    for section in sections:
        try:
            omega_conf_to_dataclass(config[section])
        except Exception as error:  # verl's dataclasses raise ValueError, AssertionError, TypeError, ...
            raise SftConfigError(f"verl rejects rft.sft.{section}: {root_message(error)}") from error
    trainer, data = sft["trainer"], sft["data"]
    world = int(trainer["nnodes"]) * int(trainer["n_gpus_per_node"])
    batch = int(data["train_batch_size"])
    if batch % world:
        raise SftConfigError(
            f"rft.sft.data.train_batch_size ({batch}) does not split over {world} GPUs (trainer.nnodes x "
            f"n_gpus_per_node): {batch} % {world} = {batch % world}; make it a multiple of {world}"
        )
    if data["use_dynamic_bsz"] and int(data["max_token_len_per_gpu"]) < int(data["max_length"]):
        budget, length = named("data.max_token_len_per_gpu", rft_sft), named(MAX_LENGTH, rft_sft)
        raise SftConfigError(
            f"{budget} ({data['max_token_len_per_gpu']}) cannot hold one sample of {length} ({data['max_length']}), "
            f"which stage 3 (verl's SFT trainer) packs whole: raise it to at least {data['max_length']} or shorten "
            "the samples"
        )
    start, end = (list(trainer.get("profile_interval") or [-1, -1]) + [-1, -1])[:2]
    if end < start or (start < 0 <= end):
        raise SftConfigError(f"rft.sft.trainer.profile_interval [{start}, {end}] is not a valid step range")


def check_ray_cluster(nnodes: int, gpus_per_node: int) -> None:
    """Before verl's SFT trainer starts: it asks Ray for its placement groups and waits for them without a timeout,
    so a cluster that cannot hold them would hang the job until its time limit. verl's own resource check (the one
    its PPO trainer and generation server run) and a CPU check say so at once instead."""
    import ray
    from verl.single_controller.ray.base import ResourcePoolManager

    ray.init()  # RAY_ADDRESS: the job's cluster
    try:
        pools = ResourcePoolManager(resource_pool_spec={"rft_sft": [gpus_per_node] * nnodes}, mapping={})
        pools.create_resource_pool()  # creates no placement group yet; raises "Total available GPUs ..."
        needed_cpus = CPUS_PER_SFT_WORKER * gpus_per_node
        nodes = ray._private.state.available_resources_per_node()
        fitting = [node for node, free in nodes.items() if free.get("GPU", 0) >= gpus_per_node]
        fitting = [node for node in fitting if nodes[node].get("CPU", 0) >= needed_cpus]
        if len(fitting) < nnodes:
            have = ", ".join(f"{free.get('GPU', 0):g} GPUs/{free.get('CPU', 0):g} CPUs" for free in nodes.values())
            raise RuntimeError(
                f"stage 3 needs {nnodes} Ray node(s) with {gpus_per_node} GPUs and {needed_cpus} logical CPUs each "
                f"(verl's SFT workers take {CPUS_PER_SFT_WORKER} CPUs per GPU); the cluster has {have}: start Ray "
                f"with --num-cpus >= {needed_cpus}"
            )
    finally:
        ray.shutdown()


def sft_command(python: str, stage_dir: Path) -> list[str]:
    hydra_dir = render_value(str(stage_dir / "hydra"))
    return hydra_entry_command(python, "verl.trainer.sft_trainer_ray", stage_dir, SFT_CONFIG_NAME, hydra_dir)
