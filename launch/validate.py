"""Checks before anything happens: ours (with the arithmetic shown), then verl's own validate_config and config
dataclasses on exactly the config verl will receive.

Runs on: the login node. Every failure is a UserError whose first line names the key and the fix.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import io
import os
import warnings
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from launch import verl_checks
from launch.errors import FORK_VALUES, UserError, fork_key_message
from launch.facts import EXPERT_KEYS, Facts, is_local_path
from launch.job_software import skipped_engine_check
from launch.overrides import holds_interpolation
from launch.plan import GLOBAL_MICRO_BATCHES
from launch.ranges import select
from launch.readiness import executes
from launch.rundir import Plan, Resources
from launch.schema import LaunchSettings, choices_of

ROLLOUT_ENGINES = ("vllm", "sglang", "trtllm")
PLACEHOLDER_VALUES = ("???",)
PLACEHOLDER_PATH_PARTS = ("/path/to/",)  # verl's and Reasoning360's scripts ship paths like /path/to/checkpoint/


class ConfigView(dict):
    """Attribute access (verl.data.train_batch_size) over the resolved config verl receives: our checks read a few
    keys of a thousand-key tree, and building a DictConfig of it costs ~50 ms a job of a sweep."""

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        return ConfigView(value) if isinstance(value, dict) else value


def check_launch_settings(cfg: DictConfig) -> None:
    """launch.dry_run, .preflight, .wandb_mode and .calibration against the choices their schema fields name."""
    for name in ("dry_run", "preflight", "wandb_mode", "calibration"):
        value = cfg.launch[name]
        allowed = choices_of(LaunchSettings, name)
        # launch.dry_run=true arrives as a YAML boolean: compared as the text it was written as
        if (str(value).lower() if name == "dry_run" else value) not in allowed:
            raise UserError(f"launch.{name}={value} is not one of {', '.join(allowed)}")


def check_model(cfg: DictConfig, facts: Facts) -> None:
    path = str(cfg.actor_rollout_ref.model.path)
    if not is_local_path(path):
        return  # a hub id: accepted as it is; checks that need files apply to local paths only
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise UserError(
            f"model path '{path}' does not exist: set actor_rollout_ref.model.path to a local HF model directory "
            f"or a hub id (or pick one with llm=..., e.g. llm=qwen2_5_7b)"
        )
    if facts.model_config is None:
        raise UserError(
            f"model path '{path}' has no config.json: point actor_rollout_ref.model.path at a HF model directory"
        )


def check_global_micro_batches(verl: ConfigView, ranks: int) -> None:
    """verl's older scripts (its examples/tuning among them) set the global micro-batch; verl 0.9.1's engine workers
    read only the *_per_gpu one, so the run would use the profile's instead or stop at verl's own check: the
    per-GPU value it meant, computed."""
    for role, name in GLOBAL_MICRO_BATCHES.items():
        value = verl.actor_rollout_ref[role].get(name)
        if value is not None:
            key = f"actor_rollout_ref.{role}.{name}"
            raise UserError(
                f"{key}={value} is the global micro-batch of older verl, which verl 0.9.1 does not read: drop it and "
                f"set {key}_per_gpu={max(1, int(value) // ranks)} ({value} / {ranks} data-parallel ranks)"
            )


# Where verl 0.9.1 stops on PPO batch arithmetic, at the first actor update (after the first rollout): its engine
# workers are the only ones it has, and they assert where older verl's dp_actor split off a smaller last mini-batch
VERL_MINI_BATCHES = (
    "verl 0.9.1 stops at the first actor update: TrainingWorker.train_mini_batch (verl/workers/engine_workers.py) "
    "cuts each rank's share of the batch with tensordict_utils.make_iterator, which asserts whole mini-batches "
    "(older verl ran a smaller last mini-batch)"
)
VERL_MINI_OVER_RANKS = (
    "verl 0.9.1 stops at the first actor update: TrainingWorker.train_mini_batch (verl/workers/engine_workers.py) "
    "asserts mini_batch_size % data-parallel size == 0"
)
VERL_MICRO_BATCHES = (
    "verl 0.9.1 stops at the first actor update: prepare_micro_batches (verl/workers/engine/utils.py) asserts "
    "whole micro-batches"
)


def neighbours(whole: int, part: int) -> str:
    """The divisors of `whole` nearest to `part` on either side, as 'A or B' (one of them at the ends)."""
    below = next((d for d in range(min(part, whole), 0, -1) if whole % d == 0), 1)
    above = next((d for d in range(part + 1, whole + 1) if whole % d == 0), None)
    return f"{below} or {above}" if above is not None and below != above else str(below)


def check_ppo_batches(verl: ConfigView, gpus: str, n_gpus: int, sequence_tokens: int) -> None:
    """PPO's update arithmetic: batch into mini-batches, mini-batches over the GPUs, micro-batches or token budgets.
    Each refusal says where verl 0.9.1 would stop (the first update, after a whole rollout)."""
    data, actor, rollout = verl.data, verl.actor_rollout_ref.actor, verl.actor_rollout_ref.rollout
    batch, mini = data.train_batch_size, actor.ppo_mini_batch_size
    if batch % mini:
        raise UserError(
            f"data.train_batch_size ({batch}) is not a multiple of actor_rollout_ref.actor.ppo_mini_batch_size "
            f"({mini}): {batch} % {mini} = {batch % mini}; make the batch a multiple of the mini-batch (e.g. "
            f"ppo_mini_batch_size={neighbours(batch, mini)}); {VERL_MINI_BATCHES}"
        )
    sequences = mini * rollout.n
    if actor.get("strategy") == "megatron":  # its product already divides the GPUs (check_megatron)
        sizes = megatron_sizes(actor.megatron)
        ranks, sp = n_gpus // (sizes["TP"] * sizes["PP"] * sizes["CP"]), sizes["CP"]
        where = f"{ranks} data-parallel ranks ({n_gpus} GPUs / TP {sizes['TP']} x PP {sizes['PP']} x CP {sp})"
    else:
        # verl splits a mini-batch over the data-parallel ranks: the GPUs / the Ulysses group that shares a sequence
        sp = actor.ulysses_sequence_parallel_size
        if n_gpus % sp:
            raise UserError(
                f"actor_rollout_ref.actor.ulysses_sequence_parallel_size ({sp}) does not divide {gpus}: choose a "
                f"sequence-parallel size that divides {n_gpus}"
            )
        ranks = n_gpus // sp
        where = (
            gpus if sp == 1 else f"{ranks} data-parallel ranks ({n_gpus} GPUs / ulysses_sequence_parallel_size {sp})"
        )
    if sequences % ranks:
        raise UserError(
            f"a mini-batch of {sequences} sequences (ppo_mini_batch_size {mini} x rollout.n {rollout.n}) does not "
            f"split over {where}: {sequences} % {ranks} = {sequences % ranks}; change the mini-batch or the GPU count; "
            f"{VERL_MINI_OVER_RANKS}"
        )
    if actor.use_dynamic_bsz:
        budgets = {
            "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": actor.ppo_max_token_len_per_gpu,
            "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": rollout.log_prob_max_token_len_per_gpu,
        }
        needed = -(-sequence_tokens // sp)  # a Ulysses group packs budget x SP tokens and splits each sequence
        split = f", split over ulysses_sequence_parallel_size {sp}" if sp > 1 else ""
        for key, budget in budgets.items():
            if budget < needed:
                raise UserError(
                    f"{key} ({budget}) cannot hold one sequence of data.max_prompt_length + max_response_length "
                    f"({data.max_prompt_length} + {data.max_response_length} = {sequence_tokens}{split}); raise it "
                    f"to at least {needed} or shorten the lengths"
                )
    else:
        check_global_micro_batches(verl, ranks)
        micro = actor.ppo_micro_batch_size_per_gpu
        if micro is None:
            raise UserError(
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu is not set and use_dynamic_bsz is false: "
                "set one of them"
            )
        share = sequences // ranks
        rank = "GPU" if sp == 1 else "data-parallel rank"
        if share % micro:
            raise UserError(
                f"each {rank}'s share of a mini-batch ({sequences} / {ranks} = {share} sequences) is not a multiple "
                f"of actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu ({micro}): {share} % {micro} = "
                f"{share % micro}; pick a micro-batch that divides {share} (e.g. {neighbours(share, micro)}); "
                f"{VERL_MICRO_BATCHES}"
            )


# Megatron's parallel sizes as verl's engine config names them (verl/trainer/config/engine/megatron.yaml), by the
# names its and Megatron-core's messages use
MEGATRON_SIZES = {
    "TP": "tensor_model_parallel_size",
    "PP": "pipeline_model_parallel_size",
    "CP": "context_parallel_size",
    "EP": "expert_model_parallel_size",
    "ETP": "expert_tensor_parallel_size",
    "VPP": "virtual_pipeline_model_parallel_size",
}


def megatron_sizes(megatron: dict[str, Any]) -> dict[str, int]:
    """TP, PP, CP, EP, ETP (null: Megatron-core takes TP) and VPP (null: 1) of one role's megatron block."""
    sizes = {name: megatron.get(key) for name, key in MEGATRON_SIZES.items()}
    sizes["ETP"] = sizes["ETP"] if sizes["ETP"] is not None else sizes["TP"]
    sizes["VPP"] = sizes["VPP"] if sizes["VPP"] is not None else 1
    return {name: int(value) for name, value in sizes.items()}


def expert_count(model_path: str) -> int | None:
    """The routed experts the model's config.json states (a local directory, or the HF cache, offline); None for a
    dense model or one whose config.json is not here (conf/llm/ tables hold no expert count)."""
    import json

    from launch.facts import cached_file, hub_cache_dir, is_local_path

    local = Path(model_path).expanduser() / "config.json"
    found = local if is_local_path(model_path) else cached_file(model_path, "config.json", hub_cache_dir(os.environ))
    if found is None or not found.is_file():
        return None
    raw = json.loads(found.read_text())
    raw = raw.get("text_config", raw) if "num_hidden_layers" not in raw else raw
    return next((int(raw[key]) for key in EXPERT_KEYS if raw.get(key)), None)


def megatron_roles(verl: ConfigView) -> list[str]:
    """The roles whose Megatron engine the run builds: the actor; the reference policy when a KL term needs it; the
    critic when verl's need_critic would (critic.enable, else adv_estimator gae)."""
    roles = ["actor_rollout_ref.actor"]
    if verl.actor_rollout_ref.actor.get("use_kl_loss") or verl.algorithm.get("use_kl_in_reward"):
        roles.append("actor_rollout_ref.ref")
    critic_on = verl.critic.get("enable")
    if critic_on or (critic_on is None and verl.algorithm.get("adv_estimator") == "gae"):
        roles.append("critic")
    return [role for role in roles if (select(verl, role) or {}).get("strategy") == "megatron"]


def pipeline_layers(layers: int, pp: int, vpp: int, transformer: dict[str, Any]) -> tuple[int, int, str]:
    """(layers to split, stages they split over, what was counted) as Megatron-core splits a model's layers over the
    pipeline: the stages with a stated layer count (num_layers_in_first/last_pipeline_stage) take theirs; the
    embedding and the loss count as one layer each where account_for_*_in_pipeline_split says so."""
    counted = [f"{layers} layers"]
    first = transformer.get("num_layers_in_first_pipeline_stage")
    last = transformer.get("num_layers_in_last_pipeline_stage")
    if first is not None or last is not None:
        rest = layers - int(first or 0) - int(last or 0)
        stages = pp - (first is not None) - (last is not None)
        counted.append(f"less {int(first or 0)} first and {int(last or 0)} last-stage layers")
        return rest, max(stages, 1), ", ".join(counted)
    for part in ("embedding", "loss"):
        if transformer.get(f"account_for_{part}_in_pipeline_split"):
            layers += 1
            counted.append(f"+1 for the {part}")
    return layers, pp * vpp, ", ".join(counted)


def check_megatron(verl: ConfigView, llm: dict[str, Any], experts: int | None) -> None:
    """What Megatron-core asserts when verl builds each Megatron engine on the GPUs (parallel_state's world-size
    products, the layer split over the pipeline, heads over TP, experts over EP), refused before queueing with the
    product that does not match. `llm`: the plan's architecture (its layers and heads unless `known` is false)."""
    trainer = verl.trainer
    n_gpus = trainer.nnodes * trainer.n_gpus_per_node
    gpus = f"{n_gpus} GPUs (trainer.nnodes {trainer.nnodes} x trainer.n_gpus_per_node {trainer.n_gpus_per_node})"
    known = llm.get("known") is not False
    for role in megatron_roles(verl):
        node = select(verl, role)
        size = megatron_sizes(node["megatron"])
        key = f"{role}.megatron"
        tp, pp, cp, ep, etp, vpp = (size[name] for name in ("TP", "PP", "CP", "EP", "ETP", "VPP"))
        if n_gpus % (tp * pp * cp):
            raise UserError(
                f"{key}: TP {tp} x PP {pp} x CP {cp} x DP = {gpus} has no whole DP: {n_gpus} % {tp * pp * cp} = "
                f"{n_gpus % (tp * pp * cp)}; choose tensor/pipeline/context parallel sizes whose product divides "
                f"{n_gpus}"
            )
        if n_gpus % (etp * ep * pp):
            raise UserError(
                f"{key}: expert TP {etp} x EP {ep} x PP {pp} x expert DP = {gpus} has no whole expert DP: {n_gpus} % "
                f"{etp * ep * pp} = {n_gpus % (etp * ep * pp)}; choose expert_model_parallel_size / "
                f"expert_tensor_parallel_size whose product with PP divides {n_gpus}"
            )
        if experts is not None and experts % ep:
            raise UserError(
                f"{key}.expert_model_parallel_size ({ep}) does not divide the model's {experts} experts: {experts} % "
                f"{ep} = {experts % ep}; choose an EP that divides {experts} (e.g. {neighbours(experts, ep)})"
            )
        if not known:
            continue
        transformer = node["megatron"].get("override_transformer_config") or {}
        layers, stages, counted = pipeline_layers(int(llm["layers"]), pp, vpp, transformer)
        if layers % stages:
            split = f"PP {pp}" + (f" x VPP {vpp}" if vpp > 1 and stages == pp * vpp else "")
            raise UserError(
                f"the model's layers ({counted} = {layers}) do not split over {key} {split} = {stages} stages: "
                f"{layers} % {stages} = {layers % stages}; choose a pipeline size that divides {layers}, or set "
                "override_transformer_config.num_layers_in_first/last_pipeline_stage"
            )
        for heads, what in ((int(llm["heads"]), "attention heads"), (int(llm["kv_heads"]), "key-value heads")):
            if heads % tp:
                raise UserError(
                    f"{key}.tensor_model_parallel_size ({tp}) does not divide the model's {heads} {what}: {heads} % "
                    f"{tp} = {heads % tp}; choose a TP that divides {heads} (e.g. {neighbours(heads, tp)})"
                )


def check_rollout_span(verl: ConfigView) -> None:
    """The engine's TP against the GPUs per node: a TP group larger than a node spans whole nodes (vLLM over Ray) or
    it leaves one replica split across a node boundary."""
    trainer, tp = verl.trainer, verl.actor_rollout_ref.rollout.tensor_model_parallel_size
    per_node = trainer.n_gpus_per_node
    if tp > per_node and tp % per_node:
        raise UserError(
            f"actor_rollout_ref.rollout.tensor_model_parallel_size ({tp}) spans nodes of {per_node} GPUs "
            f"(trainer.n_gpus_per_node) unevenly: {tp} % {per_node} = {tp % per_node}; choose a TP that divides "
            f"{per_node} or a multiple of it"
        )


def check_batches(verl: ConfigView, max_position_embeddings: int, ppo_updates: bool = True) -> None:
    """The arithmetic verl would otherwise check on the GPUs, hours later, or not at all; the values are of the right
    type and range already (launch/ranges.py, at the start of planning). `ppo_updates` false (RFT:
    the PPO config only generates; algos/rft/validate.py checks its SFT batches) skips the mini-batch arithmetic."""
    trainer, data, rollout = verl.trainer, verl.data, verl.actor_rollout_ref.rollout
    n_gpus = trainer.nnodes * trainer.n_gpus_per_node
    gpus = f"{n_gpus} GPUs (trainer.nnodes {trainer.nnodes} x trainer.n_gpus_per_node {trainer.n_gpus_per_node})"
    sequence_tokens = data.max_prompt_length + data.max_response_length
    if ppo_updates:
        check_ppo_batches(verl, gpus, n_gpus, sequence_tokens)
    tp = rollout.tensor_model_parallel_size
    if trainer.n_gpus_per_node % tp and n_gpus % tp:
        raise UserError(
            f"actor_rollout_ref.rollout.tensor_model_parallel_size ({tp}) does not divide {gpus}: "
            f"choose a TP size that divides {trainer.n_gpus_per_node}"
        )
    if sequence_tokens > max_position_embeddings:
        raise UserError(
            f"data.max_prompt_length + max_response_length ({sequence_tokens}) exceeds the model's context "
            f"({max_position_embeddings} positions): shorten the lengths or pick a longer-context llm"
        )


def check_placeholders(verl: dict[str, Any]) -> None:
    """MISSING ('???') values, and '<...>' placeholders, anywhere verl will read them. Sub-trees that are switched
    off (enable/enabled: false) are not read by verl and are skipped."""
    found = list(_placeholders(verl, ""))
    if found:
        key, value = found[0]
        hint = f"; choose one of {', '.join(ROLLOUT_ENGINES)}" if key == "actor_rollout_ref.rollout.name" else ""
        more = f" (and {len(found) - 1} more: {', '.join(k for k, _ in found[1:4])})" if len(found) > 1 else ""
        state = "is not set" if value in PLACEHOLDER_VALUES else "is a placeholder"
        raise UserError(f"{key} {state} (value {value!r}){more}: give it a value on the command line ({key}=...){hint}")


def _placeholders(node: Any, path: str) -> Any:
    if isinstance(node, dict):
        if node.get("enable") is False or node.get("enabled") is False:
            return
        for key, value in node.items():
            yield from _placeholders(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _placeholders(value, f"{path}[{index}]")
    elif isinstance(node, str) and (
        node in PLACEHOLDER_VALUES
        or (node.startswith("<") and node.endswith(">"))
        or any(part in node for part in PLACEHOLDER_PATH_PARTS)
    ):
        yield path, node


def check_rollout_engine(verl: ConfigView) -> None:
    name = verl.actor_rollout_ref.rollout.name
    if name is None:
        raise UserError(
            f"actor_rollout_ref.rollout.name is not set: choose one of {', '.join(ROLLOUT_ENGINES)} "
            "(e.g. actor_rollout_ref.rollout.name=vllm)"
        )
    if name not in ROLLOUT_ENGINES:
        raise UserError(
            f"actor_rollout_ref.rollout.name={name} is not a verl 0.9 rollout engine: choose one of "
            f"{', '.join(ROLLOUT_ENGINES)} (verl has no HF rollout)"
        )


GPU_COUNT_KEYS = {"trainer.nnodes", "trainer.n_gpus_per_node"}


def gpu_count_refusal(cfg: DictConfig, plan: Plan) -> UserError | None:
    """A run that no offload or rollout TP fits on its GPUs is refused before any TP arithmetic, with the GPU count the
    preflight searched (its `fits_with`): "needs 16 A40s" is the fix, "TP 4 does not divide 1 GPU" is a symptom.
    Under launch.preflight=warn (or off) it runs anyway; a misfit that some change fits on its GPUs is the
    preflight's own refusal (gate), which names that change. A dry run is refused only when another check fails
    too (validate): the cause comes before its symptom, and a dry run alone shows the verdict and `what fits`."""
    verdict = plan.preflight
    if verdict is None or verdict.fits or str(cfg.launch.preflight) != "fail":
        return None
    if verdict.rough:  # Megatron's verdict searches no GPU count: the gate refuses it with Megatron's own knobs
        return None
    found = verdict.fits_with
    on_these_gpus = [fix for fix in verdict.fixes if not GPU_COUNT_KEYS & set(fix.overrides)]
    if (found is not None and found.on_your_gpus is not None) or any(fix.fits for fix in on_these_gpus):
        return None  # a change on the run's own GPUs fits (one of your keys, perhaps): the gate names it
    n_gpus = plan.resources.nodes * plan.resources.gpus_per_node
    card = f"{cfg.gpu.name} ({cfg.gpu.card})"
    needed = found.searched_count if found is not None else None
    summary = found.summary if found is not None else None
    if needed is None:
        return UserError(
            f"{plan.llm['name']} does not fit {card} at any GPU count with these lengths ({summary}): "
            "pick a bigger card (gpu=...) or shorten data.max_response_length; launch.preflight=warn runs it anyway"
        )
    return UserError(
        f"{plan.llm['name']} needs at least {needed.gpus} {cfg.gpu.name} GPUs (the run has {n_gpus}; "
        f"{summary}): set {' '.join(needed.overrides)}, or pick a bigger card; launch.preflight=warn "
        "runs it anyway"
    )


def check_fork_keys(verl: dict[str, Any]) -> None:
    """Keys and values of verl forks that a pasted script added with + (verl 0.9.1 would ignore them silently)."""
    for key in _leaf_keys(verl, ""):
        message = fork_key_message(key)
        if message is not None:
            raise UserError(message)
    for (key, value), (fork, instead) in FORK_VALUES.items():
        if select(verl, key) == value:
            raise UserError(f"{key}={value} is {fork}'s, not verl 0.9.1's: {instead}")


def _leaf_keys(node: Any, path: str) -> Any:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaf_keys(value, f"{path}.{key}" if path else str(key))
    else:
        yield path


def check_reward_function(verl: ConfigView) -> None:
    path = verl.reward.custom_reward_function.path
    if path and not Path(path).is_file():
        raise UserError(f"reward.custom_reward_function.path '{path}' does not exist: point it at a Python file")


@cache
def verl_check_functions() -> tuple[Callable[..., Any], ...]:
    """verl's checks, imported once per process. Importing verl leaves millions of objects (torch, transformers,
    Ray) that every later garbage collection would scan again, making the rest of a sweep's planning ~2x slower;
    they live as long as the process, so they are moved out of the collector's reach."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    gc.freeze()
    return need_critic, need_reference_policy, omega_conf_to_dataclass, validate_config


# What run_verl_validation's calls read of verl's config in verl 0.9.1 (utils/config.py validate_config with its
# Actor/Critic/Rollout dataclasses and their validate(), trainer/ppo/utils.py need_critic/need_reference_policy): whole
# roots (None) or named keys. verl is given only this part, so its verdict is a function of it and the part is what the
# verdict is cached by: a sweep over data.seed or trainer.experiment_name asks verl once, not once per job. A key read
# outside it fails loudly here (a missing key), not silently; raise verl_checks.CHECKS_VERSION when this changes.
VERL_CHECKED: dict[str, tuple[str, ...] | None] = {
    "actor_rollout_ref": None,
    "algorithm": None,
    "critic": None,
    "trainer": ("n_gpus_per_node", "nnodes"),
    "data": ("train_batch_size", "val_batch_size"),  # val_batch_size: read with .get (a deprecation notice)
}


def verl_checked_part(verl: dict[str, Any]) -> dict[str, Any]:
    """The part of the resolved config that verl's checks read (VERL_CHECKED). The whole config where a value still
    holds `${`: OmegaConf would read it as an interpolation, which may point outside the part."""
    part: dict[str, Any] = {}
    for root, keys in VERL_CHECKED.items():
        if root in verl:
            node = verl[root]
            part[root] = node if keys is None or not isinstance(node, dict) else {k: node[k] for k in keys if k in node}
    return verl if holds_interpolation(part) else part


def model_files_here(path: str) -> bool:
    """A model's config.json is on this machine: a local directory, or the HF cache this process reads (offline)."""
    from launch.facts import cached_file, hub_cache_dir

    local = Path(path).expanduser()
    return local.is_dir() or cached_file(path, "config.json", hub_cache_dir(os.environ)) is not None


def run_verl_validation(verl: DictConfig, critic_model_here: bool = True) -> None:
    """verl's own checks, as main_ppo runs them, plus the rollout and actor dataclasses it builds later
    (docs/facts.md#verl: validate_config alone does not look at rollout.name). Its prints go to stderr: stdout may be
    carrying JSON.
    verl builds a critic's config from its model's files (HFModelConfig loads config and tokenizer, from the Hub when
    they are not here: a minute of retries on an offline login node); without them here (`critic_model_here`) the
    critic's checks are left to the job, and readiness names a model the nodes' cache lacks."""
    need_critic, need_reference_policy, omega_conf_to_dataclass, validate_config = verl_check_functions()

    if skipped_engine_check(verl):  # every other check still runs, on a copy without the LoRA rank
        verl = copy.deepcopy(verl)
        verl.actor_rollout_ref.model.lora_rank = 0
        if verl.actor_rollout_ref.model.get("lora"):
            verl.actor_rollout_ref.model.lora.rank = 0

    # verl prints and warns as it checks ("All configuration checks passed", "Disabled critic"): that chatter is held
    # back, so the first line a user sees is either the plan or the error
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            use_critic = bool(need_critic(verl)) and critic_model_here  # need_critic warns: held back too
            validate_config(verl, use_reference_policy=need_reference_policy(verl), use_critic=use_critic)
            omega_conf_to_dataclass(verl.actor_rollout_ref.rollout)
    except Exception as error:  # anything verl raises building its config (Hydra wraps it in InstantiationException)
        raise UserError(f"verl rejects the config: {verl_message(error)}") from error


def verl_message(error: BaseException) -> str:
    """The innermost cause's first line: verl's own words, not Hydra's wrapping ("Error in call to target ...")."""
    while error.__cause__ is not None:
        error = error.__cause__
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def check_ray_cluster(resources: Resources, facts: Facts) -> None:
    """What a standing Ray cluster (cluster=ray; its nodes as launch/facts.py asked them of Ray's state API) cannot
    give, refused with the fix. A cluster that reports no GPU at all is let through (an autoscaling cluster adds GPU
    nodes on demand); the plan warns instead."""
    cluster = facts.partition
    if cluster is None or cluster.gpus_per_node == 0:
        return
    if resources.gpus_per_node > cluster.gpus_per_node:
        raise UserError(
            f"trainer.n_gpus_per_node={resources.gpus_per_node} but the nodes of {cluster.name} have at most "
            f"{cluster.gpus_per_node} GPUs: set trainer.n_gpus_per_node<={cluster.gpus_per_node} and raise "
            "trainer.nnodes"
        )
    if resources.nodes > cluster.nodes:
        raise UserError(
            f"trainer.nnodes={resources.nodes} but {cluster.name} has {cluster.nodes} node(s) with GPUs: use fewer "
            "nodes"
        )


def check_cluster(cfg: DictConfig, resources: Resources, facts: Facts) -> None:
    """What the partition cannot give, refused before sbatch is asked (EnforcePartLimits would refuse it at submit,
    or worse, a cluster without it would leave the job pending forever)."""
    if cfg.cluster.name == "ray":
        return check_ray_cluster(resources, facts)
    if cfg.cluster.name != "slurm":
        return
    partition = facts.partition
    if cfg.cluster.get("array_parallelism") is not None and int(cfg.cluster.array_parallelism) < 1:
        raise UserError(f"cluster.array_parallelism={cfg.cluster.array_parallelism}: give at least 1, or null")
    if partition is None and not facts.partitions:
        if str(cfg.launch.dry_run).lower() != "false":
            return  # a dry run anywhere: the plan says what is unknown (plan.slurm_unreachable_warning)
        raise UserError(
            "cluster=slurm but no SLURM answers here (sinfo): submit from the cluster's login node, or add "
            "launch.dry_run=true to see the sbatch scripts"
        )
    if partition is None:
        wanted = cfg.cluster.partition or "(the default)"
        listed = ", ".join(facts.partitions) or "none: is SLURM reachable from here?"
        raise UserError(f"SLURM partition {wanted} does not exist: choose one of {listed} (cluster.partition=...)")
    where = f"partition {partition.name}"
    if resources.gpus_per_node > partition.gpus_per_node:
        raise UserError(
            f"trainer.n_gpus_per_node={resources.gpus_per_node} but {where} has {partition.gpus_per_node} GPUs per "
            f"node: set trainer.n_gpus_per_node<={partition.gpus_per_node} and raise trainer.nnodes"
        )
    if resources.nodes > partition.nodes:
        raise UserError(f"trainer.nnodes={resources.nodes} but {where} has {partition.nodes} nodes: use fewer nodes")
    if resources.cpus_per_task > partition.cpus_per_node:
        raise UserError(
            f"--cpus-per-task={resources.cpus_per_task} but {where}'s nodes have {partition.cpus_per_node} CPUs: "
            f"set cluster.cpus_per_task<={partition.cpus_per_node}"
        )
    if resources.mem_gb > partition.mem_gib_per_node:
        raise UserError(
            f"--mem={resources.mem_gb}GB but {where}'s nodes have {partition.mem_gib_per_node:g} GiB: "
            f"set cluster.mem_gb<={int(partition.mem_gib_per_node)}"
        )
    if partition.max_time_min is not None and resources.time_min > partition.max_time_min:
        raise UserError(
            f"--time={resources.time_min} min (mode {cfg.mode.name}'s budget + margin) exceeds {where}'s limit of "
            f"{partition.max_time_min} min: pick a shorter mode or another partition (requeue continues long runs)"
        )
    gres_parts = resources.gres.split(":")
    if len(gres_parts) == 3 and not partition.gres_type:
        raise UserError(
            f"gpu={cfg.gpu.name} asks for GPU type '{gres_parts[1]}' (cluster.gres_types) but {where}'s GPUs have no "
            f"type: remove cluster.gres_types.{cfg.gpu.name}"
        )
    if len(gres_parts) == 3 and gres_parts[1] != partition.gres_type:
        raise UserError(
            f"gpu={cfg.gpu.name} needs GPU type '{gres_parts[1]}' but {where} has '{partition.gres_type}': pick the "
            f"matching gpu profile, another partition, or map it with cluster.gres_types.{cfg.gpu.name}=..."
        )


def validate(cfg: DictConfig, plan: Plan, facts: Facts) -> None:
    """All checks, cheapest first; the first failure stops the run before anything is written or submitted."""
    check_launch_settings(cfg)
    check_model(cfg, facts)
    check_cluster(cfg, plan.resources, facts)
    check_placeholders(plan.verl)
    check_fork_keys(plan.verl)
    too_few_gpus = gpu_count_refusal(cfg, plan)
    if too_few_gpus is not None and executes(cfg, plan):
        raise too_few_gpus
    try:
        check_after_gpu_count(cfg, plan, facts)
    except UserError:
        if too_few_gpus is not None:  # "TP 4 does not divide 1 GPU" is a symptom of "needs 16 A40s"
            raise too_few_gpus from None
        raise


def check_after_gpu_count(cfg: DictConfig, plan: Plan, facts: Facts) -> None:
    """The checks of verl's config, down to verl's own: where the preflight found too few GPUs, their failures are
    its symptoms, and validate says the cause instead."""
    verl = ConfigView(plan.verl)
    check_rollout_engine(verl)
    check_reward_function(verl)
    if verl.actor_rollout_ref.actor.get("strategy") == "megatron":
        check_megatron(verl, plan.llm, expert_count(str(verl.actor_rollout_ref.model.path)))
        check_rollout_span(verl)
    check_batches(verl, int(plan.llm["max_position_embeddings"]), ppo_updates=cfg.algo.name != "rft")
    names = {"run_dir": plan.run_dir, "sweep_id": plan.sweep_id, "run_id": plan.run_id}
    cache = str(cfg.launch.verl_check_cache)
    checked = verl_checked_part(plan.verl)
    critic_here = model_files_here(str(plan.verl["critic"]["model"]["path"]))
    ask_verl = lambda: run_verl_validation(OmegaConf.create(checked), critic_here)  # noqa: E731
    # whether the critic's checks could run is part of the verdict's key: a cached pass without them is not one with
    verl_checks.check_once(
        checked, names, {**facts.packages, "(critic model files here)": str(critic_here)}, cache, ask_verl
    )
    if cfg.algo.name == "rft":  # its stages' own configs: verl's generation (PPO rollout) and SFT config code
        from algos.rft import RftConfigError, validate_rft

        try:
            validate_rft(plan.verl, OmegaConf.to_container(cfg.rft, resolve=True))
        except RftConfigError as error:
            raise UserError(str(error)) from None
