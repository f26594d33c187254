"""Checks before anything happens: ours (the arithmetic of launch/layout_checks.py, shown), then verl's own
validate_config and config dataclasses on exactly the config verl will receive.

Runs on: the login node. Every failure is a UserError whose first line names the key and the fix.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import io
import os
import re
import warnings
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from algos.pcgrad_checks import pcgrad_refusal
from launch import verl_checks
from launch.errors import FORK_VALUES, UserError, fork_key_message, fork_value_message
from launch.facts import Facts, is_local_path, query_partition
from launch.job_software import skipped_engine_check
from launch.layout_checks import (
    ConfigView,
    check_batches,
    check_engine_heads,
    check_megatron,
    check_rollout_span,
    check_ulysses_heads,
    packed_budgets,
)
from launch.overrides import holds_interpolation, keys_of
from launch.readiness import executes, file_list, skipped
from launch.rundir import Plan, Resources, requeue_signal_at_start
from launch.schema import LaunchSettings, choices_of, mappings, select
from launch.verl_diff import leaves

ROLLOUT_ENGINES = ("vllm", "sglang", "trtllm")
PLACEHOLDER_VALUES = ("???",)
PLACEHOLDER_PATH_PARTS = ("/path/to/",)  # verl's and Reasoning360's scripts ship paths like /path/to/checkpoint/


def check_launch_settings(cfg: DictConfig) -> None:
    """launch.dry_run, .preflight, .wandb_mode and .calibration against the choices their schema fields name."""
    for name in ("dry_run", "preflight", "wandb_mode", "calibration"):
        value = cfg.launch[name]
        allowed = choices_of(LaunchSettings, name)
        # launch.dry_run=true arrives as a YAML boolean: compared as the text it was written as
        if (str(value).lower() if name == "dry_run" else value) not in allowed:
            raise UserError(f"launch.{name}={value} is not one of {', '.join(allowed)}")
    # the run directory is <launch.runs_dir>/<launch.sweep_id>/<run id>: an id with a path in it, or an empty directory
    # (cluster.shared_dir='' makes the default runs dir /rlaunch), would put it somewhere else than the runs dir
    check_sweep_id(str(cfg.launch.sweep_id))
    for key in ("cluster.shared_dir", "launch.runs_dir"):
        if not str(OmegaConf.select(cfg, key) or "").strip():
            raise UserError(f"{key} is empty: give the directory (on the shared filesystem for SLURM) where runs go")


def check_sweep_id(sweep_id: str) -> None:
    """A sweep id names <launch.runs_dir>/<sweep id>, which Hydra creates as it starts: checked on the command line
    first (launch/run.py main), so that a path in it creates nothing."""
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", sweep_id):
        raise UserError(
            f"launch.sweep_id={sweep_id}: a sweep id is one directory name (letters, digits, _ . -, not starting "
            "with . or -): it names <launch.runs_dir>/<sweep id>"
        )


def check_model(cfg: DictConfig, facts: Facts) -> None:
    path = str(cfg.actor_rollout_ref.model.path)
    if not is_local_path(path):
        return  # a hub id: accepted as it is; checks that need files apply to local paths only
    if "model" in skipped(cfg):
        return  # a directory only the compute nodes see: the plan takes llm=...'s architecture, or cannot judge
    directory = Path(path).expanduser()
    nodes_only = (
        "; a directory only the compute nodes see: launch.skip_checks=[model], with llm=<its architecture> for the "
        "preflight"
    )
    if not directory.is_dir():
        raise UserError(
            f"model path '{path}' does not exist: set actor_rollout_ref.model.path to a local HF model directory "
            f"or a hub id (or pick one with llm=..., e.g. llm=qwen2_5_7b){nodes_only}"
        )
    if facts.model_config is None:
        raise UserError(
            f"model path '{path}' has no config.json: point actor_rollout_ref.model.path at a HF model directory"
            f"{nodes_only}"
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


# verl's advantage estimators that compare a response with the others of its prompt (core_algos.py): identical
# responses all get advantage 0 (GRPO, RLOO, OPO, GPG and REINFORCE++'s baseline subtract the group's mean; pass@k
# rewards only the best over the second best)
GROUP_ESTIMATORS = (
    "grpo",
    "grpo_vectorized",
    "grpo_passk",
    "rloo",
    "rloo_vectorized",
    "opo",
    "gpg",
    "reinforce_plus_plus_baseline",
)


def check_sampling(verl: dict[str, Any]) -> None:
    """Greedy sampling (temperature 0) gives a prompt's n rollouts the same response: a group-relative estimator then
    learns nothing, though verl runs it."""
    rollout = verl["actor_rollout_ref"]["rollout"]
    estimator = str(verl["algorithm"].get("adv_estimator"))
    temperature, n = rollout.get("temperature"), int(rollout.get("n") or 1)
    if estimator in GROUP_ESTIMATORS and n > 1 and temperature is not None and float(temperature) == 0:
        raise UserError(
            f"actor_rollout_ref.rollout.temperature={temperature} samples greedily: the rollout.n={n} responses to a "
            f"prompt are the same, so algorithm.adv_estimator={estimator}'s advantages are all 0 and verl 0.9.1 would "
            "train on nothing; set a temperature > 0 (verl's default 1.0; val_kwargs.temperature=0 is for validation)"
        )


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


# What ray.init refuses when it joins a running cluster (ray/_private/worker.py: "When connecting to an existing
# cluster, num_cpus and num_gpus must not be provided", and the same for the others)
RAY_INIT_KEYS_REFUSED_ON_JOIN = ("num_cpus", "num_gpus", "resources", "labels", "object_store_memory", "_system_config")


def check_ray_init(verl: dict[str, Any]) -> None:
    """verl's docs advise ray_kwargs.ray_init.num_cpus under SLURM, where verl's driver starts Ray itself; rlaunch's
    job starts verl's driver with RAY_ADDRESS set to the Ray it started on the allocation (launch/job.py), and
    main_ppo's ray.init(**ray_kwargs.ray_init) then joins it, which Ray refuses for these sizes."""
    ray_init = select(verl, "ray_kwargs.ray_init") or {}
    for name in RAY_INIT_KEYS_REFUSED_ON_JOIN:
        value = ray_init.get(name)
        if value is None or value == {}:  # verl's default null; an empty _system_config is allowed on join
            continue
        key = f"ray_kwargs.ray_init.{name}"
        raise UserError(
            f"{key}={value}: rlaunch starts verl on the Ray it sizes from the allocation (cluster.cpus_per_task, "
            f"trainer.n_gpus_per_node, SLURM's), and verl 0.9.1's ray.init joining it would fail as the job starts "
            f"(Ray: When connecting to an existing cluster, {name} must not be provided): drop {key}"
        )


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
    cheapest = verdict.cheapest_fix  # the one the plan and fit_table.py name (verdict.CHEAPEST)
    if verdict.too_close_to_call or (cheapest and verdict.gpus_of(cheapest) is None):
        return None  # a change on the run's own GPUs fits (one of your keys, perhaps): the gate names it
    n_gpus = plan.resources.nodes * plan.resources.gpus_per_node
    card = f"{cfg.gpu.name} ({cfg.gpu.card})"
    summary = verdict.fits_with.summary if verdict.fits_with is not None else None
    if not cheapest:
        return UserError(
            f"{plan.llm['name']} does not fit {card} at any GPU count with these lengths ({summary}): "
            "pick a bigger card (gpu=...) or shorten data.max_response_length; launch.preflight=warn runs it anyway"
        )
    return UserError(
        f"{plan.llm['name']} needs at least {verdict.gpus_of(cheapest)} {cfg.gpu.name} GPUs (the run has {n_gpus}; "
        f"{summary}): set {' '.join(cheapest)}, or pick a bigger card; launch.preflight=warn runs it anyway"
    )


def check_fork_keys(verl: dict[str, Any]) -> None:
    """Keys and values of verl forks that a pasted script added with + (verl 0.9.1 would ignore them silently)."""
    # an empty mapping sets no key
    for key in (".".join(path) for path, value in leaves(verl) if value != {}):
        message = fork_key_message(key)
        if message is not None:
            raise UserError(message)
    for key, _ in FORK_VALUES:
        message = fork_value_message(key, select(verl, key))
        if message is not None:
            raise UserError(message)


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
        said = verl_message(error)
        raise UserError(f"verl rejects the config: {unexpected_field(verl, said) or said}") from error


def unexpected_field(verl: DictConfig, said: str) -> str | None:
    """verl's `Class.__init__() got an unexpected keyword argument 'name'` (a key added with + under a node verl builds
    into its dataclass) said with the key's full path, found as the node whose `_target_` is that class."""
    unexpected = re.search(r"(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'", said)
    if not unexpected:
        return None
    cls, name = unexpected.groups()
    tree = OmegaConf.to_container(verl, resolve=False)
    places = [
        path for path, node in mappings(tree) if str(node.get("_target_", "")).endswith(f".{cls}") and name in node
    ]
    if not places:
        return None
    keys = " and ".join(f"{place}.{name}" for place in places)
    nodes = " and ".join(places)
    return f"{keys}: no field of verl's {cls}, which verl builds {nodes} into as it checks the config: drop it"


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


def check_signal_delay(cfg: DictConfig, resources: Resources) -> None:
    """SLURM sends the requeue signal (--signal=USR2@cluster.signal_delay_s) that long before --time ends: at or past
    the job's start, every attempt would be stopped and requeued at once, before any step (then left, once
    cluster.max_requeues is spent)."""
    delay_s, time_s = int(cfg.cluster.signal_delay_s), resources.time_min * 60
    if requeue_signal_at_start(delay_s, resources.time_min):
        raise UserError(
            f"cluster.signal_delay_s={delay_s}: SLURM would send the requeue signal {delay_s} s before --time="
            f"{resources.time_min} min ends, that is as the job starts, and every attempt would be requeued before "
            f"its first step; lower cluster.signal_delay_s well below {time_s} s or raise mode.time_budget_min"
        )


def check_cluster(cfg: DictConfig, resources: Resources, facts: Facts) -> None:
    """What the partition cannot give, refused before sbatch is asked (EnforcePartLimits would refuse it at submit,
    or worse, a cluster without it would leave the job pending forever)."""
    if cfg.cluster.name == "ray":
        return check_ray_cluster(resources, facts)
    if cfg.cluster.name != "slurm":
        return
    check_signal_delay(cfg, resources)
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
    if resources.gpus_per_node > 0 and partition.gpus_per_node == 0:  # fewer GPUs per node cannot help: there are none
        with_gpus = [
            f"{name} ({found.gpus_per_node} per node)"
            for name in facts.partitions
            if (found := query_partition(name)) is not None and found.gpus_per_node > 0
        ]
        choose = f"choose one with GPUs: {', '.join(with_gpus)}" if with_gpus else "sinfo lists no partition with GPUs"
        raise UserError(
            f"trainer.n_gpus_per_node={resources.gpus_per_node} but {where} has no GPUs (no gpu GRES in sinfo): "
            f"{choose} (cluster.partition=...)"
        )
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
            f"matching gpu profile, another partition, or map it with "
            f"++cluster.gres_types.{cfg.gpu.name}={partition.gres_type}"
        )


def train_file_columns(cfg: DictConfig) -> frozenset[str] | None:
    """The columns every train file read here has (a parquet file's schema, a json file's first row); None when no
    file could be read here (remote, missing, not parquet: readiness says so)."""
    import json

    found: list[frozenset[str]] = []
    for path in file_list(cfg.data.train_files):
        local = Path(path).expanduser()
        if not is_local_path(path) or not local.is_file():
            continue
        try:
            if path.endswith((".json", ".jsonl")):
                with local.open() as file:
                    first = file.readline() if path.endswith(".jsonl") else file.read()
                row = json.loads(first)
                row = row[0] if isinstance(row, list) and row else row
                found.append(frozenset(row) if isinstance(row, dict) else frozenset())
            else:
                import pyarrow.parquet as pq

                found.append(frozenset(pq.read_schema(local).names))
        except Exception:  # an unreadable file is readiness's to refuse, with its own fix
            continue
    return frozenset.intersection(*found) if found else None


def check_pcgrad(cfg: DictConfig, verl: dict[str, Any]) -> None:
    """A run that selects PCGrad and would run without it (verl's legacy trainer, Megatron's grad buffers) or fail
    only at its first actor update (a task key verl's batch lacks) is refused here, before the queue."""
    if not cfg.algo.pcgrad.enabled:
        return
    refusal = pcgrad_refusal(verl, str(cfg.algo.pcgrad.task_key), train_file_columns(cfg))
    if refusal:
        raise UserError(refusal)


def validate(cfg: DictConfig, plan: Plan, facts: Facts) -> None:
    """All checks, cheapest first; the first failure stops the run before anything is written or submitted."""
    check_launch_settings(cfg)
    check_model(cfg, facts)
    check_cluster(cfg, plan.resources, facts)
    check_placeholders(plan.verl)
    check_ray_init(plan.verl)
    if cfg.algo.name != "rft":  # rft's stages are not PPO steps: it has no advantages
        check_sampling(plan.verl)
    check_fork_keys(plan.verl)
    check_pcgrad(cfg, plan.verl)
    # the TPs and Ulysses sizes that cannot split the model's heads at any GPU count: a cause, never a symptom of too
    # few GPUs (the preflight's GPU-count search keeps the run's TP, so it would call such a run unfittable)
    check_engine_heads(ConfigView(plan.verl), plan.llm)
    too_few_gpus = gpu_count_refusal(cfg, plan)
    if too_few_gpus is not None and executes(cfg, plan):
        raise too_few_gpus
    try:
        check_after_gpu_count(cfg, plan, facts)
    except UserError:
        if too_few_gpus is not None:  # "TP 4 does not divide 1 GPU" is a symptom of "needs 16 A40s"
            raise too_few_gpus from None
        raise


def budget_setters(plan: Plan) -> dict[str, str]:
    """Who set each token budget the run packs by, said where one is refused: the layer that changed it from verl's
    own composition of the user's keys (changed_from_verl), else the command line, else verl's own value. (One a gpu
    profile set too short for a sequence was raised already: readiness.profile_budgets_hold_one_sequence.)"""
    changed = {change.key: f"{change.by} set it" for change in plan.changed_from_verl}
    typed = keys_of(plan.overrides)
    mine_or_verls = lambda key: "you set it on the command line" if key in typed else "it is verl's own"  # noqa: E731
    return {key: changed.get(key) or mine_or_verls(key) for key in packed_budgets(ConfigView(plan.verl))}


def check_after_gpu_count(cfg: DictConfig, plan: Plan, facts: Facts) -> None:
    """The checks of verl's config, down to verl's own: where the preflight found too few GPUs, their failures are
    its symptoms, and validate says the cause instead."""
    verl = ConfigView(plan.verl)
    check_rollout_engine(verl)
    if verl.actor_rollout_ref.actor.get("strategy") == "megatron":
        check_megatron(verl, plan.llm)
        check_rollout_span(verl)
    check_engine_heads(verl, plan.llm)
    check_batches(
        verl, int(plan.llm["max_position_embeddings"]), ppo_updates=cfg.algo.name != "rft", set_by=budget_setters(plan)
    )
    check_ulysses_heads(verl, plan.llm)  # after the GPU count it must divide (check_batches)
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
