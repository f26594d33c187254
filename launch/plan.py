"""The plan of one run: a pure function of (composed config, facts, the job's overrides).

Runs on: the login node. Nothing here touches the outside world: ids, run directory, SLURM resources, the exact verl
config and command, and what happens next are all derived from the inputs, so every count is derived once (the GPU
count from trainer.nnodes x trainer.n_gpus_per_node) and a plan can be diffed in review (tests/golden/).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.core.override_parser.types import Override, OverrideType
from omegaconf import DictConfig, OmegaConf

from algos.pcgrad_checks import single_task_warning
from algos.verl_entry_points import hydra_entry_command
from launch import snapshot, watchdog
from launch.auto import own_config_keys
from launch.calibration import StoreRecord, cluster_identity, planned_forecast
from launch.compose_once import full_resolution
from launch.container import resolve as resolve_container
from launch.container import setup_lines as container_setup_lines
from launch.container import srun_args as container_srun_args
from launch.errors import UserError
from launch.facts import Facts, is_local_path
from launch.layout_checks import GLOBAL_MICRO_BATCHES
from launch.lengths import TypicalLengths
from launch.overrides import find, identity_excluded, key_in, key_of, parse
from launch.readiness import READINESS_REPAIR, file_list, raised_budgets
from launch.rundir import VERL_CONFIG_NAME, Driver, JobSettings, Plan, Resources, attempt_log_path
from launch.schema import RLAUNCH_ROOTS, HangWatchdog, model_tag
from launch.steptime import STARTUP_MIN, STEP_TIME_MARGIN, StepTime
from launch.verdict import Verdict
from launch.verl_diff import algo_suggestion, changed_from_verl, relabel


def identity_overrides(overrides: list[str]) -> list[str]:
    return sorted(o for o in overrides if not identity_excluded(key_in(o) or ""))


def make_run_id(sweep_id: str, overrides: list[str]) -> str:
    """sha1(sweep id + sorted overrides)[:12]: stable for a job across requeues, distinct across a sweep."""
    text = sweep_id + "\n" + "\n".join(identity_overrides(overrides))
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def llm_architecture(cfg: DictConfig, facts: Facts, overrides: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The model actor_rollout_ref.model.path names wins over the llm/ group (whose table describes its own path):
    its config.json (a local directory or the HF cache) or the llm/ option with that path (facts.find_model). A path
    nothing knows takes the architecture of an llm/ option named on the command line (a base model and its Instruct
    share one: llm=qwen2_5_32b for Qwen/Qwen2.5-32B), else keeps the llm/ table, marked `known: false`: the preflight
    cannot judge it."""
    table = OmegaConf.to_container(cfg.llm, resolve=True)
    path = str(cfg.actor_rollout_ref.model.path)
    if facts.model_config is None and path != table["path"] and find(overrides, "llm") is not None:
        source = f"conf/llm/{cfg.llm.name}.yaml (llm={cfg.llm.name}, named for {path})"
        return {**table, "path": path, "source": source}, []
    if facts.model_config is None or facts.model_source == f"conf/llm/{cfg.llm.name}.yaml":
        if path != table["path"] and facts.model_config is None:
            unknown = {"name": path.rstrip("/").rsplit("/", 1)[-1], "path": path, "known": False}
            nowhere = "a local path not readable here" if is_local_path(path) else "not local, not cached"
            return {**table, **unknown, "source": f"nowhere ({nowhere}, no llm= named)"}, []
        return {**table, "source": f"conf/llm/{cfg.llm.name}.yaml"}, []
    source = facts.model_source or f"{path}/config.json"
    name = cfg.llm.name if path == table["path"] else path.rstrip("/").rsplit("/", 1)[-1]
    used = {**table, "name": name, **facts.model_config, "path": path}
    differing = [key for key, value in facts.model_config.items() if key in table and table[key] != value]
    differing = [key for key in differing if key not in ("name", "path")]
    # only an llm= the user named can conflict with the path: the group's default is no claim about their model (the
    # plan's model line says where the architecture came from)
    warnings = (
        [f"{path} differs from llm={cfg.llm.name} in {', '.join(differing)}: using the architecture from {source}"]
        if differing and find(overrides, "llm") is not None
        else []
    )
    return {**used, "source": source}, warnings


HOST_RAM_MARGIN = 1.2  # --mem over the preflight's host-RAM estimate: the estimate is not exact, SLURM's cgroup is


def host_memory_gb(share_gb: int, estimate_gib: float, node_gib: float | None) -> int:
    """--mem: the profile's host share (already capped at the node), never below 1.2 x the preflight's host-RAM
    estimate where the node has that much (where it has not, the plan says so: node_short_of_host_ram)."""
    needed = math.ceil(HOST_RAM_MARGIN * estimate_gib)
    return share_gb if node_gib and needed > node_gib else max(share_gb, needed)


def node_short_of_host_ram(cfg: DictConfig, facts: Facts, host_ram_gib: float | None) -> float | None:
    """The GiB a node gives the job where the preflight's host-RAM estimate will not fit in it: the user's
    cluster.mem_gb (--mem, SLURM's cgroup ends the job past it; validate checks it against the node) below the
    estimate itself, else the partition's nodes below 1.2 x it; None where it fits or nothing says the node's size."""
    if host_ram_gib is None:
        return None
    given = cfg.cluster.get("mem_gb")
    if given:
        return float(given) if host_ram_gib > given else None
    partition = facts.partition
    if partition is None or not partition.mem_gib_per_node:
        return None
    return (
        partition.mem_gib_per_node if math.ceil(HOST_RAM_MARGIN * host_ram_gib) > partition.mem_gib_per_node else None
    )


def node_size_warnings(cfg: DictConfig, facts: Facts, resources: Resources) -> list[str]:
    """More GPUs on one node than the gpu profile's typical node holds (gpu.gpus_per_node), where no partition or Ray
    cluster says what this site's nodes hold (validate refuses against those figures): SLURM grants it only where the
    site's nodes are that large, and --cpus-per-task / --mem scale the profile's per-GPU share of its own node."""
    typical = int(cfg.gpu.get("gpus_per_node") or 0)
    if facts.partition is not None or not typical or resources.gpus_per_node <= typical:
        return []
    nodes = math.ceil(resources.nodes * resources.gpus_per_node / typical)
    return [
        f"trainer.n_gpus_per_node={resources.gpus_per_node} but a typical {cfg.gpu.name} node has {typical} GPUs "
        f"(gpu.gpus_per_node): SLURM grants --gres=gpu:{resources.gpus_per_node} with --cpus-per-task="
        f"{resources.cpus_per_task} --mem={resources.mem_gb}G only where this site's nodes are that large; else set "
        f"trainer.n_gpus_per_node={typical} trainer.nnodes={nodes} (or gpu.gpus_per_node={resources.gpus_per_node} "
        "where they are)"
    ]


def make_resources(cfg: DictConfig, facts: Facts, host_ram_gib: float | None = None) -> Resources:
    """`host_ram_gib`: the preflight's host-RAM estimate per node, when it judged the run: --mem never below 1.2 x
    it where the node has that much, unless cluster.mem_gb says otherwise."""
    gpu, trainer, partition, cluster = cfg.gpu, cfg.trainer, facts.partition, cfg.cluster
    gpus_per_node = int(trainer.n_gpus_per_node)
    # The profile's typical node share, capped at what the partition's nodes have; an explicit cluster.cpus_per_task
    # or cluster.mem_gb is taken as it is (validation refuses one the node cannot give).
    cpus = int(gpu.host_cpus_per_gpu) * gpus_per_node
    mem_gb = int(gpu.host_ram_gib_per_gpu) * gpus_per_node
    if partition is not None:
        cpus = min(cpus, partition.cpus_per_node)
        mem_gb = min(mem_gb, int(partition.mem_gib_per_node))
    cpus = int(cluster.get("cpus_per_task") or cpus)
    if cluster.get("mem_gb"):
        mem_gb = int(cluster.mem_gb)
    elif host_ram_gib is not None:
        mem_gb = host_memory_gb(mem_gb, host_ram_gib, partition.mem_gib_per_node if partition is not None else None)
    site_type = cfg.cluster.get("gres_types", {}).get(gpu.name)
    typed = site_type or (gpu.gres_type if partition is not None and partition.gres_type else None)
    gres = f"gpu:{typed}:{gpus_per_node}" if typed else f"gpu:{gpus_per_node}"
    return Resources(
        nodes=int(trainer.nnodes),
        gpus_per_node=gpus_per_node,
        cpus_per_task=cpus,
        mem_gb=mem_gb,
        time_min=int(cfg.mode.time_budget_min) + int(cfg.cluster.get("time_margin_min", 0)),
        gres=gres,
        partition=partition.name if partition is not None else cfg.cluster.get("partition"),
    )


def make_slurm_parameters(
    cfg: DictConfig, resources: Resources, code_dir: str | None = None, container: dict[str, Any] | None = None
) -> dict[str, Any]:
    """sbatch options in submitit's names. One task per node: the job's rank 0 brings Ray up and runs verl. With a
    code snapshot, the job's first lines move it there (launch/snapshot.py); with a pyxis container, srun starts
    each task in the image (launch/container.py)."""
    if cfg.cluster.name != "slurm":
        return {}
    cluster = cfg.cluster
    extra: dict[str, Any] = {"requeue": True}
    extra.update({str(key): value for key, value in (cluster.get("sbatch_extra") or {}).items()})
    parameters: dict[str, Any] = {
        "nodes": resources.nodes,
        "ntasks_per_node": 1,
        "cpus_per_task": resources.cpus_per_task,
        "mem": f"{resources.mem_gb}GB",
        "time": resources.time_min,
        "gres": resources.gres,
        "signal_delay_s": int(cluster.signal_delay_s),
        # the job's own processes (the verl driver) see cluster.env too, not only verl's Ray workers
        "setup": (snapshot.job_setup(code_dir) if code_dir else [])
        + container_setup_lines(container)
        + [guarded_setup_line(index, str(line)) for index, line in enumerate(cluster.get("setup") or [])]
        + [env_line(str(key), str(value), code_dir) for key, value in (cluster.get("env") or {}).items()],
        "additional_parameters": extra,
    }
    optional = {"partition": resources.partition, **{key: cluster.get(key) for key in ("account", "qos", "constraint")}}
    parameters.update({key: str(value) for key, value in optional.items() if value})
    if container_srun_args(container):
        parameters["srun_args"] = container_srun_args(container)
    if cluster.get("exclusive"):
        parameters["exclusive"] = True
    if cluster.get("array_parallelism"):
        parameters["array_parallelism"] = int(cluster.array_parallelism)
    return parameters


def slurm_unreachable_warning(cfg: DictConfig, facts: Facts) -> list[str]:
    """cluster=slurm where no SLURM answers (a dry run on a laptop): what the plan could not know."""
    if cfg.cluster.name != "slurm" or facts.partitions:
        return []
    return [
        "no SLURM answers here (sinfo): the partition's limits, GPU type and MaxArraySize are UNKNOWN; resources "
        "and sbatch scripts come from the configuration alone and were not checked against the cluster"
    ]


# The batch knobs verl reads in each mode (actor.use_dynamic_bsz): a token budget per GPU, or sequences per GPU.
BATCH_KNOBS = {
    True: ("ppo_max_token_len_per_gpu", "log_prob_max_token_len_per_gpu"),
    False: ("ppo_micro_batch_size_per_gpu", "log_prob_micro_batch_size_per_gpu", *GLOBAL_MICRO_BATCHES.values()),
}


def ignored_batch_knobs(cfg: DictConfig, overrides: list[str]) -> list[str]:
    """A pasted verl script sets micro-batches, and the GPU profiles pack by tokens (use_dynamic_bsz=true): verl then
    ignores the micro-batches without a word. Said here, with both ways out."""
    # the actor's and its log-prob passes' knobs: the critic's micro-batches are its engine's own (UNREAD_BY_VERL)
    set_by_user = {key for key in map(key_of, parse(overrides)) if not key.startswith("critic.")}
    if any(key.endswith("use_dynamic_bsz") for key in set_by_user):
        return []
    dynamic = bool(cfg.actor_rollout_ref.actor.use_dynamic_bsz)
    ignored = sorted(key for key in set_by_user if key.rpartition(".")[2] in BATCH_KNOBS[not dynamic])
    if not ignored:
        return []
    live = ", ".join(BATCH_KNOBS[dynamic][:2])
    return [
        f"{', '.join(ignored)} ignored by verl: use_dynamic_bsz={str(dynamic).lower()} (gpu={cfg.gpu.name}) reads "
        f"{live} instead; set actor_rollout_ref.actor.use_dynamic_bsz={str(not dynamic).lower()} to use yours"
    ]


# Keys verl 0.9.1's config holds that its trainer does not read (each with the key it reads instead): a pasted value
# has no effect. ActorConfig/CriticConfig.grad_clip: the engines clip at optim.clip_grad (only optim.grad_clip is
# carried over, optimizer.py). critic.ppo_max_token_len_per_gpu: the v1 trainer (trainer.use_v1, verl's default)
# gives the critic's engine ppo_infer_max_token_len_per_gpu for its updates too (trainer/ppo/v1/trainer_base.py; the
# legacy trainer, ray_trainer.py, reads it). The critic's micro-batches and whether it packs by tokens: both trainers
# hand its engine (critic.fsdp / critic.megatron) only the token budgets, and the engine cuts its batches by its own
# use_dynamic_bsz, micro_batch_size_per_gpu and infer_micro_batch_size_per_gpu (workers/engine_workers.py
# train_batch / infer_batch), keys verl's yaml lacks
CRITIC_ENGINE = "++critic.fsdp (++critic.megatron under backend=megatron)"
UNREAD_BY_VERL = {
    "actor_rollout_ref.actor.grad_clip": ("actor_rollout_ref.actor.optim.clip_grad", False),
    "critic.grad_clip": ("critic.optim.clip_grad", False),
    "critic.ppo_max_token_len_per_gpu": ("critic.ppo_infer_max_token_len_per_gpu", True),
    "critic.use_dynamic_bsz": (f"{CRITIC_ENGINE}.use_dynamic_bsz", False),
    "critic.ppo_micro_batch_size_per_gpu": (
        f"{CRITIC_ENGINE}.micro_batch_size_per_gpu, with its use_dynamic_bsz=false",
        False,
    ),
    "critic.ppo_infer_micro_batch_size_per_gpu": (
        f"{CRITIC_ENGINE}.infer_micro_batch_size_per_gpu, with its use_dynamic_bsz=false",
        False,
    ),
}


def repeated_keys(overrides: list[str], from_file: Callable[[Override], bool] = lambda _: False) -> list[str]:
    """A key set twice on one command line (a pasted script's own value, then the user's "$@"): Hydra keeps the last
    without a word. Said, with both values, so a silent change is seen. `from_file`: whether a config file of the
    user's own made an override (launch.auto.own_config_keys); the command line setting one of its keys again is
    Hydra's layering, as verl's own Hydra composes the file, not a repeat."""
    values: dict[str, list[str]] = {}
    for override in parse(overrides):
        if "." in key_of(override) and override.type != OverrideType.DEL and not from_file(override):
            values.setdefault(key_of(override), []).append(override.get_value_string())
    return [
        f"{key} is given {len(given)} times ({', '.join(given)}): the last, {given[-1]}, is used"
        for key, given in values.items()
        if len(set(given)) > 1
    ]


def unread_keys(cfg: DictConfig, overrides: list[str]) -> list[str]:
    """A key the user set that verl 0.9.1's trainer does not read, said with the one it reads: the value would change
    nothing."""
    set_by_user = {key_of(override) for override in parse(overrides)}
    v1 = bool(cfg.trainer.get("use_v1", True))
    return [
        f"{key} is not read by verl 0.9.1{' (its v1 trainer, trainer.use_v1=true)' if only_v1 else ''}: its value "
        f"changes nothing; verl reads {reads}, set that instead"
        for key, (reads, only_v1) in UNREAD_BY_VERL.items()
        if key in set_by_user and (v1 or not only_v1)
    ]


def guarded_setup_line(index: int, line: str) -> str:
    """A cluster.setup line that stops the job when it fails (a `module load` of a module the site lacks, a venv
    that is not there), saying which line: the job would otherwise go on and fail later for a reason nothing points
    back to. End a line with `|| true` where its failure is harmless."""
    said = shlex.quote(f"rlaunch: error: cluster.setup[{index}] failed (exit ")
    shown = shlex.quote(f"): {line}")
    return f'{line} || {{ code=$?; echo {said}"$code"{shown} >&2; exit 1; }}'


def env_line(name: str, value: str, code_dir: str | None) -> str:
    """`export NAME=value` for cluster.env; a PYTHONPATH keeps the code snapshot first (launch/snapshot.py)."""
    if name == "PYTHONPATH" and code_dir:
        return f"export PYTHONPATH={shlex.quote(code_dir)}:{shlex.quote(value)}"
    return f"export {name}={shlex.quote(value)}"


def make_worker_env(cfg: DictConfig) -> dict[str, str]:
    """What code inside verl's Ray workers must read: Ray workers see neither the job shell's variables nor its cwd
    (docs/facts.md#ray), so it travels in Ray's runtime env."""
    import json

    from launch.secret_guard import refuse_secret_env

    env = {str(key): str(value) for key, value in (cfg.cluster.get("env") or {}).items()}
    refuse_secret_env(env)
    for name in env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UserError(
                f"cluster.env.{name}: not a shell variable name (letters, digits and _, not starting with a digit): "
                f"the job's `export` would refuse it and go on without it; write "
                f"cluster.env.{re.sub(r'[^A-Za-z0-9_]', '_', name)}=..."
            )
    pcgrad = cfg.algo.pcgrad
    trainer_mode = cfg.trainer.v1.trainer_mode
    if bool(pcgrad.enabled) != (trainer_mode == "mtl_pcgrad"):
        # the plugin's trainer is what runs PCGrad; the variables only carry its settings: both or neither
        raise UserError(
            f"algo.pcgrad.enabled={pcgrad.enabled} contradicts trainer.v1.trainer_mode={trainer_mode}: PCGrad runs "
            "only as verl trainer mode mtl_pcgrad; use algo=mtl_pcgrad (sets both) or algo=guru_baseline (neither)"
        )
    if pcgrad.enabled:
        env.update(
            RLAUNCH_PCGRAD_ENABLED="1",
            RLAUNCH_PCGRAD_TASK_KEY=str(pcgrad.task_key),
            RLAUNCH_PCGRAD_SEED=str(pcgrad.seed),
            RLAUNCH_PCGRAD_TASK_MAP=json.dumps(dict(sorted((pcgrad.get("task_map") or {}).items()))),
            RLAUNCH_PCGRAD_STRATIFY="1" if pcgrad.get("stratify", True) else "0",
        )
    return env


def wandb_mode(cfg: DictConfig, facts: Facts) -> str:
    """launch.wandb_mode=auto: online when the planning shell has W&B credentials (the job inherits that
    environment), otherwise offline under the run directory. A trainer.logger without wandb (a pasted
    logger=["console"]) means verl never calls wandb.init: the plan says W&B is off instead of naming a run to sync."""
    if "wandb" not in file_list(cfg.trainer.logger):
        return "disabled"
    mode = str(cfg.launch.wandb_mode)
    if mode != "auto":
        return mode
    return "online" if facts.wandb_credentials else "offline"


def tracking_env(cfg: DictConfig, facts: Facts, sweep_id: str, run_id: str, run_dir: Path) -> dict[str, str]:
    """W&B identity for verl's own wandb.init (which passes no id): the same run id on every attempt, resume allowed,
    so a requeued job continues its W&B run instead of starting a new one (verl#2783)."""
    return {
        "WANDB_RUN_ID": run_id,
        "WANDB_RESUME": "allow",
        "WANDB_RUN_GROUP": sweep_id,
        "WANDB_JOB_TYPE": str(cfg.algo.name),
        "WANDB_TAGS": ",".join(
            [
                *(str(cfg[root].name) for root in ("gpu", "mode", "algo")),
                model_tag(cfg.actor_rollout_ref.model.path, cfg.llm.path, cfg.llm.name),
            ]
        ),
        "WANDB_DIR": str(run_dir),
        "WANDB_MODE": wandb_mode(cfg, facts),
        # the job points this at metrics/attempt-<n>.jsonl per attempt (verl's file logger truncates on start)
        "VERL_FILE_LOGGER_PATH": str(attempt_log_path(run_dir, 1)),
    }


def sync_command(plan: Plan) -> str | None:
    """The one command that uploads an offline run once the job is done (offline runs of all attempts share the
    run id, so W&B files them under one run)."""
    if plan.worker_env.get("WANDB_MODE") != "offline":
        return None
    return f"wandb sync {shlex.quote(plan.run_dir)}/wandb/offline-run-*"


def make_verl_config(resolved: dict[str, Any], run_dir: Path, worker_env: dict[str, str]) -> dict[str, Any]:
    """Our roots stripped from the resolved config (taken over: the caller's own copy), paths made absolute (Ray
    actors run elsewhere)."""
    verl = resolved
    for root in (*RLAUNCH_ROOTS, "hydra"):
        verl.pop(root, None)
    trainer = verl["trainer"]
    if not Path(trainer["default_local_dir"]).is_absolute():
        trainer["default_local_dir"] = str(run_dir / "checkpoints")
    # what verl's workers write under a relative path would land in the code snapshot, where they start
    # (docs/facts.md#ray): the run directory instead
    outputs = [(trainer, "rollout_data_dir"), (trainer, "validation_data_dir")]
    if (verl.get("global_profiler") or {}).get("tool"):  # each role's profiler copies the global save_path
        outputs += [(parent, "save_path") for parent in profiler_configs(verl)]
    for parent, name in outputs:
        if parent.get(name) and not Path(str(parent[name])).expanduser().is_absolute():
            parent[name] = str(run_dir / str(parent[name]))
    runtime_env = verl["ray_kwargs"]["ray_init"].setdefault("runtime_env", {}) or {}
    verl["ray_kwargs"]["ray_init"]["runtime_env"] = runtime_env
    runtime_env["env_vars"] = {**worker_env, **(runtime_env.get("env_vars") or {})}
    return verl


def profiler_configs(tree: dict[str, Any]) -> list[dict[str, Any]]:
    """verl's global_profiler and each role's `profiler` section (actor, ref, rollout, critic)."""
    found = [tree["global_profiler"]] if isinstance(tree.get("global_profiler"), dict) else []
    for key, value in tree.items():
        if isinstance(value, dict):
            found += [value] if key == "profiler" else profiler_configs(value)
    return found


def checkpoint_cadence(cfg: DictConfig, overrides: list[str], time: StepTime | None) -> tuple[int, str] | None:
    """mode.checkpoint_every_min as the trainer.save_freq that saves that often at the plan's step time, and the
    layer's label; None where the mode's (or the user's) save_freq in steps stands. A save_freq in steps saves a 30 s
    step every ten minutes and a 90 min one every 30 hours, past a day's attempt, whose requeue would start over: a
    checkpoint never comes later than one attempt allows with the step-time model's margin. The user's own
    trainer.save_freq wins."""
    minutes = cfg.mode.get("checkpoint_every_min")
    if minutes is None or time is None or find(overrides, "trainer.save_freq") is not None:
        return None
    every_min = min(float(minutes), (float(cfg.mode.time_budget_min) - STARTUP_MIN) / (1 + STEP_TIME_MARGIN))
    save_freq = max(1, int(every_min * 60 // time.step_s))
    return save_freq, (
        f"mode={cfg.mode.name}: a checkpoint every {every_min:.0f} min (mode.checkpoint_every_min={minutes}) "
        f"at {time.step_s:.0f} s/step"
    )


def make_verl_command(python: str, run_dir: Path) -> list[str]:
    """verl's own entry point on the dumped config: verl receives exactly the config the plan validated."""
    return hydra_entry_command(python, "verl.trainer.main_ppo", run_dir, VERL_CONFIG_NAME, str(run_dir / "verl_hydra"))


def driver_of(cfg: DictConfig) -> Driver:
    return "rft" if cfg.algo.name == "rft" else "ppo"


def make_driver_command(driver: Driver, python: str, run_dir: Path) -> list[str]:
    """What the job runs once Ray is up: verl's PPO driver, or for algo=rft the three-stage pipeline (algos/rft/)
    that runs verl's generation server and SFT trainer."""
    if driver == "rft":
        from algos.rft import pipeline_command

        return pipeline_command(python, run_dir)
    return make_verl_command(python, run_dir)


def megatron_not_modelled(verl: dict[str, Any]) -> list[str]:
    """verl's Megatron backend: the memory preflight judges it to first order (launch/megatron_memory.py, its rough
    line says where) and the step time with assumed communication overheads (launch/steptime.py's Megatron model);
    the plan says both are rougher than FSDP's."""
    if verl["actor_rollout_ref"]["actor"].get("strategy") != "megatron":
        return []
    return [
        "backend=megatron: the step time is the Megatron model, rougher than FSDP's (TP/CP/EP communication "
        "assumed, not fitted to measured runs; calibrated only by this cluster's Megatron runs); the time check and "
        "the hang watch use it; the memory preflight is first order (its `rough` line says where)"
    ]


def as_given(value: float) -> str:
    """A number as one would write it on the command line: 1000000000000, not 1e+12."""
    return f"{value:.0f}" if value == int(value) else f"{value:g}"


def hang_window_warnings(plan: Plan) -> list[str]:
    """The hang window the job starts with where it cannot work: shorter than a start-up (a normal start would be
    stopped as a start-up hang), or longer than the job's time limit (the limit would end a hang first, without
    stacks). One line each, naming the key, its value and the value that would make sense; only where the user
    changed the defaults, which never start shorter than a start-up (where a step alone nears the time limit, the
    time check says so and the job's log says the window passes the time left)."""
    settings = plan.cluster_settings
    factor, floor_s = settings.hang_factor, settings.hang_floor_s
    defaults = HangWatchdog()
    if watchdog.watch_off_reason(plan) or (factor, floor_s) == (defaults.factor, defaults.floor_s):
        return []
    step_s = watchdog.predicted_step_s(plan)
    validations = watchdog.Validations.of(plan)
    first_s = validations.before_next_record(None) * validations.predicted_s  # a validation before the first record
    warnings = []
    start_window = watchdog.hang_window_s(step_s, factor, floor_s, first_s)
    # the first record comes after the start-up (model and engine load), the validation before training and a step
    first_record_s = STARTUP_MIN * 60 + (step_s or 0.0) + first_s
    if start_window < first_record_s:
        warnings.append(
            f"launch.hang.floor_s={as_given(floor_s)}: the hang window before the first step is "
            f"{start_window:.0f} s from the driver's start, while a start-up alone is planned at {STARTUP_MIN} min "
            f"and the first record at {first_record_s:.0f} s: a normal start-up would be stopped as a hang; give "
            f"launch.hang.floor_s={math.ceil(first_record_s / 60) * 60} or more"
        )
    limit_s = plan.resources.time_min * 60
    window = watchdog.hang_window_s(step_s, factor, floor_s)
    # a step planned at the time limit or longer is the time check's to say (readiness): no factor (> 1) fits it
    if limit_s and window > limit_s and (step_s or 0.0) < limit_s:
        if floor_s >= window or not step_s:
            key, within = f"launch.hang.floor_s={as_given(floor_s)}", f"launch.hang.floor_s below {limit_s}"
        else:
            largest = math.floor(limit_s / step_s * 10) / 10
            key, within = f"launch.hang.factor={as_given(factor)}", f"launch.hang.factor up to {largest:g}"
        warnings.append(
            f"{key}: the hang window (max({factor:g} x {step_s or 0:.0f} s, {floor_s:.0f} s) = {window:.0f} s) is "
            f"longer than the job's time limit ({limit_s} s): the limit would end a hang first, without stacks; "
            f"{within} keeps it within"
        )
    return warnings


def decide_execution(cfg: DictConfig, facts: Facts) -> tuple[str, str]:
    """What the run would do once planned, and why; a dry run says that it stops at the plan."""
    shown = "" if str(cfg.launch.dry_run).lower() == "false" else " (launch.dry_run: planned only, nothing started)"
    if cfg.cluster.name == "ray":
        return "submit", f"cluster=ray: one Ray job per run through the job API at {cfg.cluster.address}{shown}"
    if cfg.cluster.name == "slurm":
        partition = facts.partition.name if facts.partition is not None else cfg.cluster.partition
        where = partition or "(default)"
        return "submit", f"cluster=slurm: one job array per resource shape on partition {where}{shown}"
    if facts.gpus.present:
        return (
            "run-local",
            f"cluster=local with {facts.gpus.count}x {facts.gpus.name}: Ray on this node, then verl{shown}",
        )
    return "plan-only", f"cluster=local and no GPU on this machine ({facts.gpus.source}): planning only"


def runs_dir_of(cfg: DictConfig, working_dir: Path) -> Path:
    runs_dir = Path(str(cfg.launch.runs_dir)).expanduser()
    return runs_dir if runs_dir.is_absolute() else working_dir / runs_dir


def checkpoint_dir(cfg: DictConfig, working_dir: Path) -> str | None:
    """Where verl's checkpoints will go (make_verl_config puts a relative trainer.default_local_dir under the run
    directory), when the job writes where this machine sees: not a Ray cluster's own disks."""
    if cfg.cluster.name == "ray":
        return None
    local_dir = Path(str(cfg.trainer.default_local_dir)).expanduser()
    return str(local_dir if local_dir.is_absolute() else runs_dir_of(cfg, working_dir))


def make_plan(
    cfg: DictConfig,
    facts: Facts,
    overrides: list[str],
    working_dir: Path,
    python: str,
    job_name: str = "",
    resolved: dict[str, Any] | None = None,
    verdict: Verdict | None = None,
    calibration_records: tuple[StoreRecord, ...] = (),
    typical: TypicalLengths | None = None,
) -> Plan:
    """`job_name`: the readable name a sweep gives the job (launch/overrides.py); a single run is named by its
    profile. `calibration_records`: the cluster's measured runs, and `typical`: the job's typical lengths
    (launch/calibration.py), both read once by the caller before the preflight."""
    sweep_id = str(cfg.launch.sweep_id)
    run_id = make_run_id(sweep_id, overrides)
    runs_dir = runs_dir_of(cfg, working_dir)
    run_dir = runs_dir / sweep_id / run_id
    llm, warnings = llm_architecture(cfg, facts, overrides)
    if cfg.cluster.name == "ray" and facts.partition is not None and facts.partition.gpus_per_node == 0:
        warnings.append(
            f"{facts.partition.name} reports no GPU now: verl will stop at its GPU check unless the cluster adds "
            "GPU nodes on demand (an autoscaling KubeRay cluster does)"
        )
    worker_env = make_worker_env(cfg) | tracking_env(cfg, facts, sweep_id, run_id, run_dir)
    execution, reason = decide_execution(cfg, facts)
    host_ram_gib = verdict.host_ram_gib_per_node if verdict is not None else None
    resources = make_resources(cfg, facts, host_ram_gib)
    warnings += node_size_warnings(cfg, facts, resources)
    verl = make_verl_config(resolved if resolved is not None else full_resolution(cfg), run_dir, worker_env)
    code_dir = None
    if cfg.cluster.get("snapshot") and facts.code is not None:
        code_dir = str(snapshot.code_dir(runs_dir, facts.code.digest))
        verl = snapshot.relocate(verl, facts.code.source, code_dir)
    container = resolve_container(cfg, str(runs_dir), code_dir)
    time = planned_forecast(cfg, verl, llm, calibration_records, typical)
    cadence = checkpoint_cadence(cfg, overrides, time)
    if cadence is not None:
        verl["trainer"]["save_freq"] = cadence[0]
    changes = changed_from_verl(cfg, overrides, verl)
    # readiness's repair raised these after the layers (launch/run.py prepares before it plans): the gpu layer's tree
    # sets them, the value is the repair's
    changes = relabel(changes, raised_budgets(cfg, overrides), READINESS_REPAIR)
    if verdict is not None and verdict.changed:  # the preflight's policy set these, after the layers did
        changes = relabel(changes, list(verdict.changed), f"launch.preflight={cfg.launch.preflight}")
    if cadence is not None:
        changes = relabel(changes, ["trainer.save_freq"], cadence[1])
    python = container["python"] if container else python  # the job's driver runs inside the container
    plan = Plan(
        sweep_id=sweep_id,
        run_id=run_id,
        job_name=job_name or str(cfg.gpu.name),
        run_dir=str(run_dir),
        cluster=str(cfg.cluster.name),
        execution=execution,
        execution_reason=reason,
        gpu_profile=str(cfg.gpu.name),
        gpu_selected_by=str(cfg.gpu.selected_by),
        llm=llm,
        resources=resources,
        slurm=make_slurm_parameters(cfg, resources, code_dir, container),
        verl=verl,
        driver=driver_of(cfg),
        driver_command=make_driver_command(driver_of(cfg), python, run_dir),
        worker_env=worker_env,
        cluster_settings=JobSettings(
            int(cfg.cluster.max_requeues),
            int(cfg.cluster.ray_timeout_s),
            cfg.cluster.ray_auth_token_file,
            hang_enabled=bool(cfg.launch.hang.enabled),
            hang_factor=float(cfg.launch.hang.factor),
            hang_floor_s=float(cfg.launch.hang.floor_s),
            calibrate_after_step=int(cfg.launch.calibrate_after_step) if cfg.launch.calibration == "auto" else None,
        ),
        overrides=list(overrides),
        warnings=warnings
        + megatron_not_modelled(verl)
        + ignored_batch_knobs(cfg, overrides)
        + unread_keys(cfg, overrides)
        + repeated_keys(overrides, own_config_keys.made)
        + algo_suggestion(cfg, overrides, changes)
        + single_task_warning(cfg)
        + slurm_unreachable_warning(cfg, facts),
        code_dir=code_dir,
        container=container,
        changed_from_verl=changes,
        preflight=verdict,
        time=time,
        cluster_identity=cluster_identity(cfg),
        node_short_of_host_ram_gib=node_short_of_host_ram(cfg, facts, host_ram_gib),
        host_ram_limit_is_mem_gb=bool(cfg.cluster.get("mem_gb")),
    )
    return dataclasses.replace(plan, warnings=plan.warnings + hang_window_warnings(plan))
