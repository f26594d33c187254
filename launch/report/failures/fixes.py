"""What to change for each failure kind: a generic fix per kind, and for the kinds whose numbers the plan knows
(GPU and host memory, the engine's share, the time limit) a fix computed from the run's plan.

Runs on: any machine that sees the run directories (login node, laptop with the shared filesystem). The plan-aware
numbers a fix quotes (the preflight's prediction, the steps an attempt reached) come in a `FixContext` that
launch/report/doctor.py builds, so this module needs only the plan. A fix never changes the `Failure` it is given:
`with_plan_fix` returns a new one with the fix and the numbers the fix read.
"""

from __future__ import annotations

import math
import pwd
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from launch.report.failures.signatures import (
    BATCH_ARITHMETIC,
    CONFIG_LIBRARY_FRAME,
    DATALOADER_SHM,
    DATASET_GENERATION_FRAME,
    DUPLICATE_GPU,
    EMPTY_HEAD,
    EXCEPTION_LINE,
    GLOO_TIMEOUT,
    GPU_HELD,
    GRES_REFUSED,
    HYDRA_FULL_KEY,
    HYDRA_LOAD_CAUSE,
    HYDRA_OVERRIDE_GRAMMAR,
    HYDRA_TARGET_MISSING,
    IB_COMPLETION_ERROR,
    IMPORT_FAILED,
    INTERPRETER,
    JSON_DECODE_ERROR,
    KEY_ERROR,
    LORA_RANK_REFUSED,
    MODEL_CONFIG_NOT_JSON,
    MODULE_NAMED,
    NCCL_NO_INTERFACE,
    NO_ROUTE,
    NODES_WAIT,
    OBJECT_STORE_FULL,
    OMEGACONF_SETTER,
    PARQUET_NO_MAGIC,
    PROMPT_FILLS_CONTEXT,
    RECORD_FIELD,
    REDIS_RETRY,
    REWARD_FILE_MISSING,
    REWARD_MODULE_FAILED,
    REWARD_NAME_MISSING,
    RUN_MODULE_FAILED,
    SAVED_DATASET_INCOMPLETE,
    SCRIPT_NOT_OPENED,
    SEGFAULT,
    SGLANG_NO_SLOTS,
    SLURM_MEM_REFUSED,
    SLURM_TIME_REFUSED,
    UNEQUAL_CHUNK,
    VERL_CONFIG_CHECK,
    VERL_FORMAT_REFUSED,
    VLLM_NO_DEVICE,
    WRAPPED_OOM,
    ZERO_DIVISION,
    Failure,
    code_wrote_struct_key,
    died_connecting,
    gpus_asked_and_had,
    is_source,
    phase_of,
    raised_by,
    raised_in,
    strip_prefix,
    tracebacks,
    unlabelled,
)
from launch.rundir import Plan, gib_text, requeue_signal_at_start

Details = dict[str, float | str]  # what Failure.details holds: numbers parsed from the evidence, the phase

ENGINE_FRACTION = "actor_rollout_ref.rollout.gpu_memory_utilization"  # vLLM's fraction, SGLang's mem_fraction_static
OFFLOAD_KEYS = (
    "actor_rollout_ref.actor.fsdp_config.param_offload",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
)

GENERIC_FIXES = {
    "preempted": "nothing to change: SLURM gave the node to a higher-priority job and the run was requeued; if "
    "attempts lose much work, save more often (lower trainer.save_freq)",
    "time_limit": "the attempt ran out of time: raise mode.time_budget_min or lower trainer.save_freq so that a "
    "requeued attempt resumes from a checkpoint",
    "host_oom": "the node ran out of host RAM: raise --mem (cluster.mem_gb) or offload less "
    "(actor_rollout_ref.actor.fsdp_config.{param,optimizer}_offload=false)",
    "disk_full": "a write found its filesystem full (or the quota used): free space there, or move what fills it; "
    "for verl's checkpoints keep fewer (trainer.max_actor_ckpt_to_keep) or save less often (a larger "
    "trainer.save_freq)",
    "engine_memory": f"the rollout engine cannot fit the weights and KV cache in its share: {ENGINE_FRACTION} "
    "(raise it when the engine asks for more KV cache, lower it when the card had less free) or raise "
    "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "cuda_oom": "a GPU ran out of memory: halve actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (or "
    "ppo_max_token_len_per_gpu with dynamic batch size), or set actor_rollout_ref.actor.fsdp_config.param_offload "
    "and optimizer_offload to true; "
    "launch.preflight=fix applies the preflight's fixes",
    "gpu_unavailable": "fewer GPUs than trainer.nnodes x trainer.n_gpus_per_node: lower those to what the job has, or "
    "run on a partition whose nodes have GPUs (check --gres and that nvidia-smi works in the job)",
    "model_not_cached": "the nodes cannot load the model offline: download it into the HF cache the nodes read "
    "(HF_HOME) with `hf download <model>` on a machine with internet, or point actor_rollout_ref.model.path at a "
    "local directory",
    "data_missing": "a data file does not exist where the nodes look: fix data.train_files / data.val_files (absolute "
    "paths on the shared filesystem)",
    "data_error": "a data file cannot be read as verl expects: check it is parquet with verl's columns (prompt, "
    "data_source, reward_model.ground_truth)",
    "ray_start_failed": "Ray did not start on every node: read that node's ray_start log in the run directory "
    "(ports taken, auth token, a node that never ran its task)",
    "reward_error": "the reward function raised: fix the scoring code for that data source (rewards/, "
    "reward.custom_reward_function.path) or the data source's name",
    "config_error": "verl refused its config: fix the override the error names (python launch/run.py ... --cfg job "
    "shows the composed config)",
    "ray_node_lost": "a Ray node died during the run: look at that node (host OOM, hardware, preemption of a node) "
    "and resubmit; the run resumes from its last checkpoint",
    "nccl_timeout": "a collective timed out: one rank stopped (read the other ranks' errors first) or the "
    "interconnect failed; set cluster.env.NCCL_DEBUG=INFO and rerun",
    "hang": "the hang watchdog stopped the attempt: read the stacks in the run directory's hang/ folder",
    "unknown": "no known cause: read the log around the evidence",
}

# verl's forks, and the other trainers on the same stack (vLLM, Ray, torch), print the same library messages but spell
# their options otherwise: a fix for their logs must not name verl's keys. Each: how its log shows it (frame paths, its
# Ray actor and worker names, its progress bars), its own options.
FORKS: dict[str, tuple[re.Pattern[str], dict[str, str]]] = {
    "OpenRLHF": (
        re.compile(r"openrlhf[/.]|\b(?:LLMRayActor|ActorModelRayActor|ReferenceModelRayActor|CriticModelRayActor)\b"),
        {
            "engine_fraction": "--vllm_gpu_memory_utilization",
            "offload": "--adam_offload / --ref_reward_offload",
            "micro_batch": "--micro_train_batch_size (training) / --micro_rollout_batch_size (log-probs)",
            "gpus": "--actor_num_nodes x --actor_num_gpus_per_node (and --vllm_num_engines x "
            "--vllm_tensor_parallel_size)",
            "rollout_tp": "--vllm_tensor_parallel_size",
        },
    ),
    "EasyR1": (
        re.compile(r"EasyR1/|easyr1|\bCompute log probs:|BatchFunctionRewardManager"),
        {
            "engine_fraction": "worker.rollout.gpu_memory_utilization",
            "offload": "worker.actor.offload.offload_params / offload_optimizer",
            "micro_batch": "worker.actor.micro_batch_size_per_device_for_update (training) / "
            "micro_batch_size_per_device_for_experience (log-probs)",
            "gpus": "trainer.nnodes x trainer.n_gpus_per_node",
            "rollout_tp": "worker.rollout.tensor_parallel_size",
        },
    ),
    "NeMo-RL": (
        re.compile(
            r"nemo_rl[/.]|nemo_reinforcer[/.]|NeMo-Reinforcer/"
            r"|\b(?:MegatronPolicyWorker|DTensorPolicyWorker\w*|RayVirtualCluster|VllmGenerationWorker)\b"
        ),
        {
            "engine_fraction": "policy.generation.vllm_cfg.gpu_memory_utilization",
            "offload": "policy.dtensor_cfg.cpu_offload=true",
            "micro_batch": "policy.train_micro_batch_size (training) / policy.logprob_batch_size (log-probs)",
            "gpus": "cluster.num_nodes x cluster.gpus_per_node",
            "rollout_tp": "policy.generation.vllm_cfg.tensor_parallel_size",
        },
    ),
}
GPU_COUNT_KEYS = "trainer.nnodes x trainer.n_gpus_per_node"
ROLLOUT_TP = "actor_rollout_ref.rollout.tensor_model_parallel_size"


def fork_of(log_text: str) -> str | None:
    """The verl fork (or other trainer) a log comes from (its own option names), or None for verl itself."""
    return next((name for name, (pattern, _) in FORKS.items() if pattern.search(log_text)), None)


def rollout_tp_key(fork: str | None) -> str:
    """The rollout engine's tensor-parallel option in the trainer's own name."""
    return FORKS[fork][1]["rollout_tp"] if fork else ROLLOUT_TP


# --- what the log itself says: numbers a fix can quote ----------------------------------------------------------------

NUMBER = r"(-?[\d.]+)"
ENGINE_FRACTION_CAP = 0.9  # the engine's share a fix raises to at most: the trainer's tensors need the rest of the card


def first_float(pattern: str, text: str) -> float | None:
    match = re.search(pattern, text)
    return float(match.group(1)) if match else None


def moved(key: str, fraction: float | None, step: float, raise_it: bool) -> str:
    """`raise key=0.6 (now 0.5)`, or without a known value `raise key by about 0.1`."""
    verb = "raise" if raise_it else "lower"
    if fraction is None:
        return f"{verb} {key} by about {step:g}"
    target = min(ENGINE_FRACTION_CAP, round(fraction + step, 2)) if raise_it else max(0.1, round(fraction - step, 2))
    return f"{verb} {key}={target:g} (now {fraction:g})"


# vLLM's check that the card's free memory did not change while it profiled (GiB since 0.7, bytes before)
PROFILE_MOVED = re.compile(
    r"Error in memory profiling\. Initial free memory (?P<before>[\d.]+)(?: (?P<unit>GiB))?, current free memory "
    r"(?P<after>[\d.]+)"
)
# vLLM's warm-up of its sampler (or pooler) at its largest batch, max_num_seqs dummy requests
WARMUP_OOM = re.compile(
    r"out of memory occurred when warming up (?:the )?(?P<part>sampler|pooler) with (?P<requests>\d+)"
)


def engine_fix_from_log(log_text: str, fraction: float | None, key: str = ENGINE_FRACTION) -> tuple[str, Details]:
    """The engine's memory fix from its own message: which way to move its fraction, and to what when the log gives
    the numbers (vLLM's free/desired memory, its KV cache shortfall, SGLang's memory saver). `fraction` is the plan's
    value when there is one, else what the log printed."""
    logged = (
        first_float(r"gpu_memory_utilization[=:]\s*" + NUMBER, log_text)
        or first_float(r"desired GPU memory utilization \(" + NUMBER, log_text)
        or first_float(r"mem_fraction_static[=:]\s*" + NUMBER, log_text)  # SGLang's name for the same share
        or first_float(r"x gpu_memory_utilization \(" + NUMBER + r"\)", log_text)  # vLLM 0.7's profile summary
    )
    fraction = fraction if fraction is not None else logged
    found: Details = {"gpu_memory_utilization": fraction} if fraction is not None else {}
    profiled = PROFILE_MOVED.search(log_text)
    if profiled:
        before, after = float(profiled.group("before")), float(profiled.group("after"))
        scale = 1 if profiled.group("unit") else 2**30  # older vLLM prints bytes
        return (
            f"the card's free memory moved from {before / scale:.2f} to {after / scale:.2f} GiB while vLLM measured "
            "its share: another process on the same GPU allocated or released memory meanwhile (a trainer colocated "
            "with the engine, another job on a shared GPU); not a shortage, so changing "
            f"{key} cannot help: run the job on GPUs of its own (set sbatch's --exclusive, or use a partition whose "
            "GPUs are not shared), "
            "and where the trainer shares the card keep its memory still while the engine starts (no offload or "
            "reload in that window)"
        ), found | {"free_before_gib": round(before / scale, 2), "free_after_gib": round(after / scale, 2)}
    warmup = WARMUP_OOM.search(log_text)
    if warmup:
        seqs = int(warmup.group("requests"))
        now = f" (now {fraction:g})" if fraction is not None else ""
        return (
            f"vLLM ran out of CUDA memory warming up its {warmup.group('part')} with {seqs} requests, its "
            f"max_num_seqs: the activations of that batch did not fit beside the engine's share; lower "
            f"actor_rollout_ref.rollout.max_num_seqs to {max(seqs // 2, 1)} (now {seqs}), or lower {key} by about "
            f"0.05{now} to leave them room; raising the share cannot help"
        ), found | {"max_num_seqs": seqs}
    free = re.search(r"Free memory on device \(" + NUMBER + "/" + NUMBER + r" GiB\)", log_text)
    if free:  # vLLM reserves the fraction of the WHOLE card and refuses to start if less is free
        free_gib, total_gib = float(free.group(1)), float(free.group(2))
        fits = math.floor((free_gib / total_gib - 0.02) * 100) / 100
        found |= {"free_gib": free_gib, "total_gib": total_gib}
        now = f" (now {fraction:g})" if fraction is not None else ""
        return (
            f"the card had {free_gib:g} of {total_gib:g} GiB free when the engine started, less than its fraction "
            f"asks: lower {key}={fits:g}{now}, or free the card (set the trainer's fsdp offloads to true)"
        ), found
    needed = re.search(
        NUMBER + r" GiB KV cache is needed, which is larger than the available KV cache memory \(" + NUMBER + " GiB",
        log_text,
    )
    kv_available = first_float(r"Available KV cache memory: " + NUMBER + " GiB", log_text)
    if kv_available is None:  # vLLM 0.7's summary of the same profile
        kv_available = first_float(r"the rest of the memory reserved for KV Cache is " + NUMBER + " ?GiB", log_text)
    shortfall = None
    if needed:
        shortfall = float(needed.group(1)) - float(needed.group(2))
    elif kv_available is not None and kv_available <= 0:
        shortfall = -kv_available
    profiled = sglang_profile_fix(log_text, fraction, key)
    if profiled:
        return profiled[0], found | profiled[1]
    asks_more = (
        r"No available memory for the cache blocks|increase --mem-fraction|larger than the maximum number of tok"
        r"|To serve at least one request with the"
    )
    if shortfall is not None or re.search(asks_more, log_text):
        total = first_float(r"total capacity of " + NUMBER + " GiB", log_text) or first_float(
            r"total_gpu_memory \(" + NUMBER + r" ?GiB\)", log_text
        )
        step = math.ceil((shortfall / total + 0.02) * 100) / 100 if shortfall is not None and total else 0.1
        what = f"KV cache {-shortfall:+.1f} GiB" if shortfall is not None else "the engine's share holds too little"
        # vLLM's message cut after its first number: what one request of the max length needs
        needs = first_float(r"max seq len \(\d+\),\s*\(?" + NUMBER + r" GiB KV cach", log_text) if not needed else None
        if needs is not None:
            what = (
                f"the engine's share holds too little (one request of the max length needs {needs:g} GiB of KV cache)"
            )
            found["kv_needed_gib"] = needs
        where = f" at {key.rsplit('.', 1)[-1].lstrip('-')} {fraction:g}" if fraction is not None else ""
        # vLLM's longest length that fits: its estimate, or (older wording) the tokens its KV cache holds
        longest = first_float(r"estimated maximum model length is " + NUMBER, log_text) or first_float(
            r"maximum number of tokens that can be stored in KV cache \(" + NUMBER + r"\)", log_text
        )
        max_len = first_float(r"max seq len \(" + NUMBER + r"\)", log_text)
        now = f" (now {int(max_len)})" if max_len else ""
        instead = f"lower max_model_len to {int(longest)}{now}" if longest else "lower max_num_seqs (or max_model_len)"
        if max_len and not longest:  # vLLM's message cut before its estimate: the length alone is what to lower
            instead = f"lower max_model_len{now}"
        if shortfall is not None:
            found["kv_shortfall_gib"] = round(shortfall, 2)
        if longest:
            found["max_model_len_fits"] = int(longest)
        at_cap = fraction is not None and fraction >= ENGINE_FRACTION_CAP
        if at_cap and longest:  # the fraction cannot go higher: only a shorter length fits
            fix = (
                f"{what}{where} for weights + KV cache: {instead} ({key} is already {fraction:g}, the most a fix sets)"
            )
        else:
            fix = f"{what}{where} for weights + KV cache: {moved(key, fraction, step, True)} or {instead}"
        if max_len:  # vLLM checks one request of the model's max length: fewer requests at a time leave it as big
            fix += "; lowering max_num_seqs cannot help, one sequence of that length alone does not fit"
        return fix, found
    slots = SGLANG_NO_SLOTS.search(log_text)
    if slots:
        asked = f" ({slots.group('tokens')} tokens asked)" if slots.group("tokens") else ""
        return (
            f"SGLang's KV cache had no room for a {slots.group('stage').lower()} batch{asked} even after evicting its "
            f"prefix cache: {moved(key, fraction, 0.1, True)} (more KV cache), or lower "
            "actor_rollout_ref.rollout.max_num_seqs (SGLang's max_running_requests) so fewer requests share it"
        ), found | ({"tokens_asked": int(slots.group("tokens"))} if slots.group("tokens") else {})
    if re.search(r"torch_memory_saver|cumem_allocator|wake_up|out of memory", log_text, re.I):
        return (
            "the engine could not map its memory (the card was taken when it allocated or woke up): "
            f"{moved(key, fraction, 0.1, False)}, or free the card during rollout (set the trainer's fsdp offloads "
            "to true)"
        ), found
    return GENERIC_FIXES["engine_memory"], found


# SGLang's memory profile after loading the weights: the tokens left for the KV cache, and the weights' share
SGLANG_PROFILED = re.compile(r"larger than the profiled value (-?\d+)|\bmax_total_num_tokens=(-\d+)")
SGLANG_WEIGHTS = re.compile(r"Load weight end\..*?avail mem=([\d.]+) GB, mem usage=([\d.]+) GB")


def sglang_profile_fix(log_text: str, fraction: float | None, key: str) -> tuple[str, Details] | None:
    """SGLang's profile that left no token for the KV cache: the weights took the card, so the share to raise, or
    more tensor parallelism to spread them, where the log says how much they took."""
    profiled = SGLANG_PROFILED.search(log_text)
    tokens = int(next(group for group in profiled.groups() if group)) if profiled else None
    if tokens is None or tokens > 0:
        return None
    found: Details = {"profiled_kv_tokens": tokens}
    weights = SGLANG_WEIGHTS.search(log_text)
    held = ""
    if weights:
        found |= {"weights_gb": float(weights.group(2)), "left_after_weights_gb": float(weights.group(1))}
        held = f" (the weights took {float(weights.group(2)):g} GB per GPU, {float(weights.group(1)):g} GB left)"
    at_cap = fraction is not None and fraction >= ENGINE_FRACTION_CAP
    share = "" if at_cap else f"{moved(key, fraction, 0.05, True)}, or "
    tp = rollout_tp_key(fork_of(log_text))
    return (
        f"SGLang's memory profile left {tokens} tokens for the KV cache after loading the weights{held}: {share}raise "
        f"{tp} so that each GPU holds fewer of the weights (a lower max_total_tokens cannot help, the budget is below "
        "zero)"
    ), found


RAY_OOM_TASK = re.compile(
    r"where the (?:task|actor) \([^)]*?name=(?P<name>[^,]+), pid=\d+, memory used=(?P<used>[\d.]+)GB\) was running "
    r"was (?P<node_used>[\d.]+)GB / (?P<node_total>[\d.]+)GB"
)
RAY_MEMORY_LOW = re.compile(
    r"(?:Used memory \(|of the memory on node \S+ is used \()(?P<node_used>[\d.]+) ?(?:GB\) / total capacity \(|/ )"
    r"(?P<node_total>[\d.]+) ?GB\)"
)  # Ray 2's memory monitor, and Ray 1's "More than 95% of the memory on node X is used (30.47 / 31.3 GB)"
DRIVER_TASK = re.compile(r"TaskRunner|main_task|driver", re.I)  # verl's driver runs as the TaskRunner actor


def host_fix_from_log(log_text: str, fork: str | None) -> tuple[str, Details] | None:
    """What Ray's memory monitor says about who held the node's memory: the driver itself (then --mem only delays
    it), a small victim (the memory is elsewhere), or a worker; None when it says nothing."""
    task = RAY_OOM_TASK.search(log_text)
    low = task or RAY_MEMORY_LOW.search(log_text)
    if not low:
        return None
    node_used, node_total = float(low.group("node_used")), float(low.group("node_total"))
    found: Details = {"node_used_gb": node_used, "node_total_gb": node_total}
    if task:
        name, used = task.group("name").strip(), float(task.group("used"))
        found |= {"killed_task": name, "killed_task_gb": used}
        if DRIVER_TASK.search(name) and used >= 0.5 * node_used:
            return (
                f"the driver ({name}) itself held {used:g} of the node's {node_used:g} GB: its own RSS grows, so more "
                "--mem cannot help, it only delays the kill; find what the driver accumulates (py-spy dump / memray on "
                "the TaskRunner) and keep less there (lower trainer.log_val_generations, data.dataloader_num_workers)"
            ), found
        if used < 0.01 * node_used:  # a bystander: Ray kills the newest task, not the biggest
            return (
                f"the killed task ({name}) held only {used:g} of the node's {node_used:g} GB: the memory is held "
                "elsewhere on the node (Ray's top memory users in raylet.out); lower what those keep, or raise the "
                f"job's host memory above {node_total:g} GB"
            ), found
    keys = FORKS[fork][1]["offload"] if fork else "actor_rollout_ref.actor.fsdp_config.{param,optimizer}_offload=false"
    return (
        f"the node's host RAM ran out ({node_used:g} of {node_total:g} GB in use): raise the job's memory "
        f"(--mem, rlaunch: cluster.mem_gb) above {node_total:g} GB or offload less ({keys})"
    ), found


# the kernel's OOM killer names its victim and what it held: anon-rss is the process's own resident memory
OOM_KILLER_RSS = re.compile(r"(?:Killed process \d+ \((?P<name>[^)]*)\),? )?total-vm:\d+kB, anon-rss:(?P<rss>\d+)kB")


def oom_killer_fix(log_text: str, fork: str | None) -> tuple[str, Details] | None:
    """The kernel's OOM killer's report: which process it killed and how much resident memory that one held."""
    killed = OOM_KILLER_RSS.search(log_text)
    if not killed:
        return None
    rss_gib = round(int(killed.group("rss")) / 1024**2, 1)
    who = f"process {killed.group('name')}" if killed.group("name") else "a process"
    keys = FORKS[fork][1]["offload"] if fork else "actor_rollout_ref.actor.fsdp_config.{param,optimizer}_offload=false"
    return (
        f"the kernel's OOM killer killed {who} holding {rss_gib:g} GiB resident (anon-rss): the job's processes "
        "together needed more host RAM than the node or the job's limit had; raise the job's memory (--mem, rlaunch: "
        f"cluster.mem_gb) above what they hold together, or offload less ({keys})"
    ), {"killed_rss_gib": rss_gib}


NCCL_WORK = re.compile(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)")


# torch's TCPStore: the rendezvous host counting the ranks that joined it, and a rank that never reached that host
STORE_WAIT = re.compile(
    r"Timed out after (?P<seconds>\d+) seconds waiting for clients\. (?P<joined>\d+)/(?P<world>\d+)"
)
STORE_UNREACHED = re.compile(
    r"The client socket has timed out after (?P<time>\d+)(?P<unit>m?s) while trying to connect to "
    r"\((?P<host>[^,\s]+)\s*, (?P<port>\d+)\)"
)


# a process group forming over the store: each rank's key ends in its rank (torch's Gloo and NCCL groups)
STORE_KEY_WAIT = re.compile(r"wait timeout after (?P<ms>\d+) ?ms, keys: (?P<key>\S*?/(?P<rank>\d+))(?=[\s,\]']|$)")


# verl's and OpenRLHF's workers take the rendezvous address from the Ray node they run on
UNDER_RAY = "; under Ray, verl and OpenRLHF take it from the node's Ray address: start Ray with --node-ip-address=<IP>"


def rendezvous_fix(log_text: str) -> tuple[str, Details] | None:
    """torch's rendezvous (its TCPStore at MASTER_ADDR:MASTER_PORT) timed out before any collective: not every rank
    reached it. How many did, or which address a rank could not reach, and what each means."""
    waited = STORE_WAIT.search(log_text)
    if waited:
        joined, world = int(waited.group("joined")), int(waited.group("world"))
        return (
            f"only {joined} of {world} ranks reached torch's rendezvous within {waited.group('seconds')} s, so no "
            "collective ever ran: the others started late, died first (read their errors: an import error, an OOM) "
            "or could not reach MASTER_ADDR:MASTER_PORT (an address every node reaches, not a loopback or container "
            f"bridge one; the port open between nodes{UNDER_RAY}); a longer timeout helps only when they were merely "
            "late"
        ), {"ranks_joined": joined, "world_size": world}
    awaited = STORE_KEY_WAIT.search(log_text)
    if awaited:
        peer, seconds = awaited.group("rank"), int(awaited.group("ms")) / 1000
        return (
            f"a process group never formed: its store waited {seconds:g} s for the key of rank {peer} (key "
            f"{awaited.group('key')}), so rank {peer} never reached the group: it started late, died first (read its "
            "own error: an import error, an OOM, a failed start of its node), is stuck in an earlier call (its stack "
            "shows which: a deadlock in the engine's start-up) or could not reach MASTER_ADDR:MASTER_PORT "
            f"(an address every node reaches; the port open between nodes{UNDER_RAY}); a longer timeout helps only "
            "when it was merely late"
        ), {"rank_missing": int(peer), "store_wait_s": seconds}
    unreached = STORE_UNREACHED.search(log_text)
    if unreached:
        host, port = unreached.group("host"), unreached.group("port")
        seconds = int(unreached.group("time")) / (1000 if unreached.group("unit") == "ms" else 1)
        loopback = LOOPBACK.match(host) or host.startswith("172.17.")
        why = (
            f"{host} is a loopback or docker-bridge address, which other nodes cannot reach: set MASTER_ADDR to the "
            f"rank-0 node's own IP on a network the nodes share{UNDER_RAY}"
            if loopback
            else f"check that {host} is the rank-0 node's IP on a network the nodes share, that port {port} is open "
            "between nodes, and that the rank-0 process was up (its own error first)"
        )
        return (
            f"a rank could not reach torch's rendezvous at {host}:{port} within {seconds:g} s, so the ranks never "
            f"connected: {why}"
        ), {"rendezvous": f"{host}:{port}"}
    return None


# verbs refusing to pin NCCL's buffers (src/misc/ibvwrap.cc): the memlock limit, not the node's memory
PINNED_MEMORY_REFUSED = re.compile(r"Call to ibv_reg_mr failed with error Cannot allocate memory")


def nccl_network_fix(log_text: str) -> tuple[str, Details] | None:
    """The network NCCL or Gloo could not use, where their own message says which failure it was."""
    if NCCL_NO_INTERFACE.search(log_text):
        return (
            "NCCL found no network interface to bootstrap on: NCCL_SOCKET_IFNAME names one this node does not have "
            "(or that is down): set cluster.env.NCCL_SOCKET_IFNAME to the interface the nodes share (`ip -br addr` on "
            "a node; a prefix such as ib or eth matches all of its ports), or unset it to let NCCL choose"
        ), {"nccl": "no interface"}
    if PINNED_MEMORY_REFUSED.search(log_text):
        return (
            "InfiniBand could not pin NCCL's buffers (ibv_reg_mr: Cannot allocate memory): the processes' "
            "locked-memory limit (ulimit -l) is too low, not the node's RAM; make it unlimited where the job starts "
            "(SLURM's PropagateResourceLimits and the slurmd's own limit, a container's --ulimit memlock=-1)"
        ), {"nccl": "memlock"}
    completion = IB_COMPLETION_ERROR.search(log_text)
    if completion:
        status = int(completion.group("status"))
        peer = f" to {completion.group('peer')}" if completion.group("peer") else ""
        why = "retries exceeded: the peer's port, a link or a switch stopped answering" if status == 12 else "an error"
        return (
            f"NCCL's InfiniBand transport{peer} got a work completion with status {status} ({why}): a fault of the "
            "fabric between the nodes, not of the run's settings; check the ports (ibstat) and the switch, keep the "
            "job off a node whose port flaps (+cluster.sbatch_extra.exclude=<node>), and resubmit; "
            "cluster.env.NCCL_IB_TIMEOUT=22 waits longer on a congested fabric"
        ), {"ib_status": status}
    gloo = GLOO_TIMEOUT.search(log_text)
    if gloo:
        waited = int(gloo.group("ms")) / 1000
        return (
            f"a Gloo collective (a CPU process group: a barrier, an object gather) waited {waited:g} s to "
            f"{gloo.group('op')} from a rank that never came: that rank stopped or was busy alone (read its own error "
            "first: an OOM, a dead actor, a long save or evaluation on one rank)"
        ), {"op": f"gloo {gloo.group('op')}", "timeout_s": waited}
    return None


def nccl_fix_from_log(log_text: str) -> tuple[str, Details]:
    """A collective that never completed: the very first one means the ranks never connected (network config), a
    later one that some rank stopped coming."""
    # a rank that never reached a rendezvous explains the collectives that then waited for it
    rendezvous = rendezvous_fix(log_text) or nccl_network_fix(log_text)
    if rendezvous:
        return rendezvous
    works = [(int(seq), op) for seq, op in NCCL_WORK.findall(log_text)]
    if not works:
        return unnumbered_collective_fix(log_text) or (GENERIC_FIXES["nccl_timeout"], {})
    seq, op = min(works)
    found: Details = {"seq_num": seq, "op": op}
    if seq <= 2:
        return (
            f"the first collective ({op}, SeqNum={seq}) never completed: the ranks never connected, no rank stopped "
            "mid-run; point NCCL at the network the nodes share (cluster.env.NCCL_SOCKET_IFNAME=<interface>, "
            "NCCL_IB_HCA=<device> or NCCL_IB_DISABLE=1 where InfiniBand does not reach), check the nodes reach each "
            "other on it, rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"
        ), found
    timeout_ms = first_float(r"WorkNCCL\([^)]*Timeout\(ms\)=(\d+)", log_text)
    now = ""
    if timeout_ms is not None:
        found["timeout_s"] = timeout_ms / 1000
        now = f" (now {timeout_ms / 1000:g})"
    return (
        f"collective {seq} ({op}) timed out after earlier ones completed: a rank stopped coming (read the other "
        "ranks' errors first: an OOM or a dead actor there is the cause) or the interconnect failed; set "
        "cluster.env.NCCL_DEBUG=INFO and rerun; raise actor_rollout_ref.nccl_timeout (s)"
        f"{now} only if that rank was slow, not stopped"
    ), found


# torch's older watchdog line names the collective and its timeout, not its sequence number
NCCL_WORK_UNNUMBERED = re.compile(r"WorkNCCL\(OpType=(?P<op>\w+), Timeout\(ms\)=(?P<timeout>\d+)\)")


def unnumbered_collective_fix(log_text: str) -> tuple[str, Details] | None:
    """A collective that timed out where the log does not say which one it was: the wait, and who to read first."""
    work = NCCL_WORK_UNNUMBERED.search(log_text)
    if not work:
        return None
    op, timeout_s = work.group("op"), int(work.group("timeout")) / 1000
    return (
        f"the ranks waited {timeout_s:g} s in a {op} that some rank never joined: it stopped (read the other ranks' "
        "errors first: an OOM or a dead actor there is the cause) or worked alone for longer than that (evaluation, "
        "checkpointing or data on one rank only: move it out of the collective's way); set cluster.env.NCCL_DEBUG=INFO "
        f"and rerun; raise actor_rollout_ref.nccl_timeout (s) (now {timeout_s:g}) only if that rank was slow, not "
        "stopped"
    ), {"op": op, "timeout_s": timeout_s}


# `ray start --address` on a worker that never reached the head (GCS since Ray 1.11, Redis before), and the GCS
# client's own line (gcs_rpc_client.h: "Failed to connect to GCS at address ... within N seconds")
HEAD_UNREACHABLE = re.compile(
    r"(?:Unable|Failed) to connect to (?P<what>GCS|Redis)(?: \(ray head\))? at (?:address )?"
    r"(?P<address>[^\s.]+(?:\.[^\s.]+)*?)\.?(?:\s|$)"
)
LOOPBACK = re.compile(r"^(?:127\.|localhost\b)")
# Ray's SLURM template's echo of the node it starts Ray on, the name empty
EMPTY_NODE = re.compile(r"(?im)^\s*starting (?P<role>head|worker \d+) at\s*$")


def empty_node_fix(log_text: str) -> tuple[str, Details] | None:
    """The script's node name for the head (or a worker) came out empty: Ray never started where it is looked for."""
    empty = EMPTY_NODE.search(log_text)
    if not empty:
        return None
    role = empty.group("role").lower()
    return (
        f"the script's {role} node name is empty ('{empty.group(0).strip()}' names none): the variable that should "
        "hold it (head_node=${nodes_array[0]} in Ray's SLURM template) came out empty, so Ray was not started where "
        "the driver then looks (ray.init(address='auto') finds none); no port, token or --mem change can help: set it "
        'from the job\'s nodes (scontrol show hostnames "$SLURM_JOB_NODELIST"; rlaunch computes it itself)'
    ), {"empty_node": role}


CONNECTING_TO = re.compile(r"Connecting to existing Ray cluster at address: (?P<address>[^\s.]+(?:\.[^\s.]+)*?)\.*\s*$")
ADDRESS_GIVEN = re.compile(r"--(?:ray[-_])?address[= ](?P<address>[\w.-]+:\d+)")
SIGNAL_NAME = re.compile(r"Aborted|Segmentation fault")


def died_connecting_fix(log_text: str) -> tuple[str, Details] | None:
    """The driver killed by a signal while ray.init joined a running cluster: the address it used, and where that is
    not the one the command line gave."""
    lines = log_text.splitlines()
    died = died_connecting(lines)
    if not died:
        return None
    connecting = CONNECTING_TO.search(died[0])
    address = connecting.group("address") if connecting else "the head's address"
    signal = SIGNAL_NAME.search(died[1])
    found: Details = {"head_address": address} if connecting else {}
    given = ADDRESS_GIVEN.search(log_text)
    other = ""
    if given and connecting and given.group("address") != address:
        found["address_given"] = given.group("address")
        other = (
            f"; the command line gives {given.group('address')}, not {address}: RAY_ADDRESS in the environment (or a "
            "typo) overrides it, pass the head's own address"
        )
    return (
        f"the driver was killed ({signal.group(0) if signal else 'a signal'}) right after ray.init began joining the "
        f"cluster at {address}, before Ray printed an error: it could not reach the cluster there; check that a Ray "
        f"head runs at that address (ray status --address {address} from the same node), that this node (or its "
        "container's network) reaches that address and port, and that it runs the head's Ray and Python versions; run "
        f"the script by hand on that node to see Ray's own error{other}"
    ), found


# Ray's check_version_info (ray/_private/utils.py): the cluster's Ray and Python, then this process's
RAY_VERSIONS = re.compile(
    r"Version mismatch: The cluster was started with:\s*Ray: (?P<cluster_ray>\S+)\s*Python: (?P<cluster_python>\S+)\s*"
    r"This process on (?:node )?(?P<node>\S+) was started with:\s*Ray: (?P<ray>\S+)\s*Python: (?P<python>\S+)"
)
# strip_prefix's Ray prefix on each line of the message, which spans several
RAY_LINE_PREFIX = re.compile(r"(?m)^\([^)]*\)\s?")


def ray_version_fix(log_text: str) -> tuple[str, Details] | None:
    """A process (the driver, a node's `ray start`) whose Ray or Python is not the cluster's: one environment for
    all."""
    found = RAY_VERSIONS.search(RAY_LINE_PREFIX.sub("", log_text))
    if not found:
        return None
    differs = [
        f"{name} {found.group(mine)} here, {found.group(theirs)} on the cluster"
        for name, mine, theirs in (("Ray", "ray", "cluster_ray"), ("Python", "python", "cluster_python"))
        if found.group(mine) != found.group(theirs)
    ]
    return (
        f"the process on {found.group('node')} runs another Ray than the cluster it joined ({'; '.join(differs)}): "
        "start every node's Ray and the driver from one environment (the same venv or container: cluster.setup, "
        "cluster.python), or stop the Ray cluster left from another environment (ray stop) before the job starts "
        "its own"
    ), {"ray": found.group("ray"), "cluster_ray": found.group("cluster_ray")}


def head_unreachable_fix(log_text: str) -> tuple[str, Details] | None:
    """A worker's `ray start` that could not reach the head at the address it was given: name the address, and say
    when it can never work (a loopback address reaches only the worker's own node)."""
    found = HEAD_UNREACHABLE.search(log_text)
    if not found and REDIS_RETRY.search(log_text):
        return (
            "a worker's `ray start` kept failing to reach the head's Redis (Ray's GCS of that version), then crashed: "
            "start the head first and wait until it is up (its ray_start log), give the workers the head's own IP "
            "(--address=<head IP>:6379, never a loopback one) on a network the nodes share with that port open, and "
            "run the same Ray version on every node"
        ), {"head": "unreachable"}
    if not found:
        return None
    address = found.group("address")
    details: Details = {"head_address": address}
    if LOOPBACK.match(address):
        return (
            f"the head address given is {address}, a loopback address: from any other node it reaches only that "
            "node itself, so a worker there can never join and no port or firewall change helps; pass the head node's "
            "own IP (hostname --ip-address on the head; rlaunch computes it from SLURM_JOB_NODELIST), and on the "
            "head's own node check that the head came up (its ray_start log)"
        ), details
    return (
        f"a worker could not reach the Ray head's {found.group('what')} at {address}: start the head first and wait "
        "until it is up (its ray_start log), check that address is the head's IP on a network the nodes share and "
        "that its port is open between nodes, and run the same Ray version on every node"
    ), details


GCS_REDIS = re.compile(
    r"Could not establish connection to Redis (?P<address>[^\s(]+)|Failed to connect to Redis at "
    r"(?P<at>\S+?)[.,]?\s"
)
PORT_TAKEN = re.compile(
    r"Failed to start the grpc server\. The specified port is (?P<a>\d+)|but is already running at \S*?:(?P<b>\d+)"
    r"|trying to use a port number (?P<c>\d+) that is used by other components"
)


# gRPC's own error when a server cannot bind its port ("Address already in use" follows, often wrapped)
GRPC_BIND_FAILED = re.compile(r"Failed to add any wildcard listeners|No address added out of total \d+ resolved")


def gcs_start_fix(log_text: str) -> tuple[str, Details] | None:
    """The head's GCS that did not start: the external Redis it could not reach, or a port another process holds."""
    redis = GCS_REDIS.search(log_text)
    if redis and re.search(r"Failed to start GCS|gcs_server", log_text):
        address = redis.group("address") or redis.group("at")
        return (
            f"the head's GCS could not reach the external Redis at {address} it was told to use (RAY_REDIS_ADDRESS, "
            "for GCS fault tolerance), so it never started: unset RAY_REDIS_ADDRESS (rlaunch's Ray keeps its state in "
            "the GCS itself), or point it at a Redis that listens there and that the head node reaches"
        ), {"redis_address": address}
    taken = PORT_TAKEN.search(log_text)
    if taken or GRPC_BIND_FAILED.search(log_text):
        port = next(group for group in taken.groups() if group) if taken else ""
        which = f"port {port}" if port else "the port a Ray daemon's gRPC server asked for (Address already in use)"
        return (
            f"{which} was already taken when Ray started on the node (a Ray left by an earlier job, another "
            "service, or two components given one port): `ray stop` there, or start on free ports (rlaunch picks a "
            "port block per job; keep the job off a node whose old Ray still runs: +cluster.sbatch_extra.exclude="
            "<node>)"
        ), {"port": int(port)} if port else {"port": "in use"}
    if re.search(r"Failed to start GCS\b", log_text):
        return (
            "the head's GCS exited while starting: the lines under 'Failed to start GCS' are from its error file; read "
            "gcs_server.out / gcs_server.err in the head's Ray log directory (session_latest/logs) for the cause "
            "(a port taken, a Redis it cannot reach, a full /tmp)"
        ), {}
    return None


NODE_STARTUP_TIMEOUT = re.compile(
    r"Timed out (?:after (?P<seconds>\d+) seconds )?while waiting for node to startup(?:\. Did not find socket name "
    r"(?P<socket>\S+))?|The current node timed out during startup"
)
LOCAL_NODE_IP = re.compile(r"Local node IP: (?P<ip>\S+)")
GCS_ADDRESS_UNKNOWN = re.compile(r"No entry found for GcsServerAddress")
UNIX_SOCKET_PATH_MAX = 107  # sun_path is 108 bytes with its NUL


RAYLET_SOCKET = re.compile(
    r"(?:Could not connect to socket|Retrying to connect to socket for pathname) (?P<path>\S*/sockets/raylet)"
)


def raylet_socket_fix(log_text: str) -> tuple[str, Details] | None:
    """A core worker that cannot reach its node's raylet socket: the raylet never came up, or the socket sits where a
    Unix socket does not work."""
    found = RAYLET_SOCKET.search(log_text)
    if not found:
        return None
    path = found.group("path")
    local = path.startswith("/tmp/")
    where = (
        "its raylet never came up: read raylet.out / raylet.err in that session's logs (a port taken, a daemon that "
        "died at start)"
        if local
        else f"{path} is not under /tmp: on a shared filesystem (NFS, Lustre, GPFS) a Unix socket does not work, so "
        "start Ray with a node-local --temp-dir (e.g. /tmp/ray; rlaunch starts Ray under node-local /tmp)"
    )
    return (f"the driver could not reach this node's raylet socket at {path}: {where}; a longer wait cannot help"), {
        "raylet_socket": path
    }


def node_startup_fix(log_text: str) -> tuple[str, Details] | None:
    """`ray start` whose own daemons never registered: a wrong node address, a socket path no Unix socket can have, a
    filesystem that holds none, or a node too busy for Ray's fixed 30 s."""
    if GCS_ADDRESS_UNKNOWN.search(log_text):
        return (
            "the node's core worker never found the GCS's address: the head registered an address the node cannot "
            "use (it resolved its own IP wrongly, often 127.0.0.1 on a private network); start every node with "
            "--node-ip-address=<its reachable IP> (rlaunch sets it from the allocation) and the same Ray version"
        ), {}
    timed_out = NODE_STARTUP_TIMEOUT.search(log_text)
    if not timed_out:
        return None
    ip = LOCAL_NODE_IP.search(log_text)
    if ip and ip.group("ip") in ("0.0.0.0", "127.0.0.1"):
        return (
            f"`ray start` picked {ip.group('ip')} as the node's IP and its own daemons could not register there: pass "
            "--node-ip-address=<the node's real IP> (hostname --ip-address) to every `ray start`"
        ), {"node_ip": ip.group("ip")}
    socket_path = timed_out.group("socket") or ""
    found: Details = {"socket": socket_path} if socket_path else {}
    if len(socket_path) > UNIX_SOCKET_PATH_MAX:
        return (
            f"Ray's socket path is {len(socket_path)} bytes, over the {UNIX_SOCKET_PATH_MAX} a Unix socket allows: "
            "give `ray start` a short --temp-dir on the node's local disk (e.g. /tmp/ray)"
        ), found
    temp = f" ({socket_path.split('/session_')[0]})" if "/session_" in socket_path else ""
    # Ray 2's "current node timed out" is its fixed 30 s wait; Ray 1's bare "Timed out while waiting" gives no figure
    seconds = timed_out.group("seconds") or ("30" if "current node" in timed_out.group(0) else None)
    waited = f"Ray's fixed {seconds} s" if seconds else "Ray's start-up wait"
    return (
        f"the node's own Ray daemons (raylet, object store) did not register within {waited}: put --temp-dir"
        f"{temp} on the node's local disk (its Unix sockets do not work on NFS/Lustre and paths must stay under "
        f"{UNIX_SOCKET_PATH_MAX} bytes), and read its raylet.out there; a node too loaded to start its daemons in "
        "time (other jobs, a full /dev/shm) starts on a retry"
    ), found


def nodes_never_joined_fix(log_text: str) -> tuple[str, Details] | None:
    """A launcher that waited for nodes to join its head, and the log ends before they all did."""
    waits = NODES_WAIT.findall(log_text)
    if not waits:
        return None
    up, asked = (int(count) for count in waits[-1])
    return (
        f"only {up} of {asked} nodes joined the Ray head: the others' `ray start --address` never reached it; read "
        "a missing node's own log for its error (the head's address and port from that node, a firewall between "
        "them, a different Ray version or auth token), and give the head the address the other nodes reach"
    ), {"nodes_up": up, "nodes_asked": asked}


def after_node_loss(failure: Failure) -> str:
    """What to do about an attempt a lost node ended: resubmit, unless SLURM already requeued the job (it does itself
    after a NODE_FAIL, the job being --requeue), whose next attempt resumes on its own (classify.run_failures sets
    `requeued_as` from the attempt that followed, or from SLURM holding the job again)."""
    after = failure.details.get("requeued_as")
    if after is None:
        return "resubmit (the run resumes from its last checkpoint)"
    return f"SLURM requeued the job (attempt {after}), which resumes from the last checkpoint: nothing to resubmit"


def requeued_node_loss_fix(failure: Failure) -> tuple[str, Details] | None:
    """The generic fix of a lost node, for an attempt SLURM requeued (GENERIC_FIXES' says to resubmit)."""
    if "requeued_as" not in failure.details:
        return None
    return f"a Ray node died during the run: look at that node (host OOM, hardware); {after_node_loss(failure)}", {}


def node_died_fix(failure: Failure) -> tuple[str, Details] | None:
    """A Ray node that died under the run, where the log names it: what to read on it."""
    if not failure.node:
        return None
    return (
        f"Ray lost the node {failure.node} during the run: read that node's raylet.out in the run's ray_logs and its "
        "kernel log for the OOM killer (then raise the job's memory: --mem, rlaunch: cluster.mem_gb) or a crash; "
        f"{after_node_loss(failure)}; keep the job off a node that fails again "
        "(+cluster.sbatch_extra.exclude=<its host>)"
    ), {"node_address": failure.node}


SLURM_NODE_FAILED = re.compile(r"Node failure on (?P<nodes>[\w.\[\],-]+)|ON (?P<node>\S+) CANCELLED AT \S+ DUE TO NODE")


# SLURM's record of why it set a node down or drained it (`scontrol show node`'s Reason=, with who set it and when, as
# an admin's `scontrol update state=down reason=...` or slurmctld's own "Not responding" leaves it)
NODE_REASON = re.compile(r"\bReason=(?P<reason>.+?)(?:\s+\[(?P<by>[^\]@]+)@[^\]]*\])?\s*$", re.M)


def slurm_node_fail_fix(failure: Failure, log_text: str) -> tuple[str, Details] | None:
    """SLURM lost a node of the job (NODE_FAIL): the node went down under it, nothing in the run's config did it. Why
    it went down is the node's Reason in SLURM, where the log holds it; else where to read it (a log alone cannot tell
    an admin's `scontrol update state=down` from a crash)."""
    if not (SLURM_NODE_FAILED.search(log_text) or re.search(r"\bNODE_FAIL\b", log_text)):
        return None
    named = SLURM_NODE_FAILED.search(log_text)
    node = (named.group("nodes") or named.group("node")) if named else failure.node
    where = f" {node}" if node else ""
    reason = NODE_REASON.search(log_text)
    details: Details = {"node_failed": node} if node else {}
    if reason:
        said = reason.group("reason").strip()
        by = f", set by {reason.group('by')}" if reason.group("by") else ""
        why = f"its Reason in SLURM says why: {said}{by}"
        details["node_reason"] = said
    else:
        why = (
            f"the log does not say why, its Reason in SLURM does: `sinfo -R -n {node or '<node>'}` (an admin's "
            "`scontrol update state=down reason=...`, or `Not responding` where its slurmd stopped answering)"
        )
    return (
        f"SLURM lost the job's node{where} (NODE_FAIL: SLURM marked it down; {why}): no setting of the run caused it; "
        f"{after_node_loss(failure)}; keep the job off that node if it fails again "
        f"(+cluster.sbatch_extra.exclude={node or '<node>'})"
    ), details


HEARTBEAT_LAG = re.compile(r"Last heartbeat was sent (\d+) ms ago")


def heartbeat_fix(log_text: str) -> tuple[str, Details] | None:
    """A raylet whose heartbeats lagged before it was marked dead: the node was starved (CPU, memory, a stalled
    process), not cut off, so the load on it, or Ray's tolerance, is what to change."""
    lags = [int(ms) for ms in HEARTBEAT_LAG.findall(log_text)]
    if not lags:
        return None
    worst = max(lags)
    return (
        f"the raylet's heartbeats lagged up to {worst} ms before the GCS marked the node dead: the node was under "
        "resource pressure (CPU or host memory taken by the job), not lost; lower the load on it (fewer "
        "data.dataloader_num_workers or reward workers) or raise Ray's tolerance "
        "(cluster.env.RAY_health_check_failure_threshold, or RAY_num_heartbeats_timeout before Ray 2)"
    ), {"heartbeat_lag_ms": worst}


# Ray's memory monitor lists the node's top memory users under its "PID  MEM(GB)  COMMAND" header: pid, GB, command
TOP_MEMORY_HEADER = re.compile(r"PID\s+MEM\(GB\)\s+COMMAND")
TOP_MEMORY_ROW = re.compile(r"^\s*\d+\s+(\d+\.\d+)\s+(\S+)")


def top_memory_holders(log_text: str) -> tuple[str, Details] | None:
    """The command that held most of the node's memory in Ray's top-users list: `6 x ray::LLMRayActor (82.3 GB)`.
    Rows count under the list's header, or anywhere when they name a Ray task (a log cut the header off)."""
    held: dict[str, list[float]] = {}
    in_list = False
    for line in log_text.splitlines():
        if TOP_MEMORY_HEADER.search(line):
            in_list = True
            continue
        row = TOP_MEMORY_ROW.match(line)
        in_list = in_list and row is not None
        if row and (in_list or row.group(2).startswith("ray::")):
            held.setdefault(row.group(2).rsplit("/", 1)[-1], []).append(float(row.group(1)))
    if not held:
        return None
    command, sizes = max(held.items(), key=lambda item: sum(item[1]))
    total = round(sum(sizes), 1)
    return f"{len(sizes)} x {command} ({total:g} GB together)", {"top_holder": command, "top_holder_gb": total}


# what to change in verl per phase: the micro-batch that holds the activations there, or in rollout the engine's
# share that leaves the rest of the card to the trainer's tensors
PHASE_ACTIONS = {
    "log-prob": "halve actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu (and actor_rollout_ref.ref's), or "
    "log_prob_max_token_len_per_gpu with dynamic batch size",
    "training": "halve actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (or ppo_max_token_len_per_gpu with "
    "dynamic batch size)",
    "rollout": f"lower {ENGINE_FRACTION} by about 0.1 (the engine's share leaves the rest of the card too little)",
}


def cuda_oom_fix_from_log(failure: Failure, log_text: str) -> tuple[str, Details]:
    """A torch OOM without a plan: the phase's own key (a fork's own option), and the sizes torch printed. An
    allocation larger than the whole card is one tensor no offload can make room for: only fewer tokens per
    micro-batch shrink it."""
    phase = phase_of(log_text)
    fork = fork_of(log_text)
    tried, capacity = failure.details.get("tried_gib"), failure.details.get("capacity_gib")
    free = failure.details.get("free_gib")
    where = f"the {phase} phase ran out of GPU memory" if phase else "a GPU ran out of memory"
    if tried is not None:
        where += f": one allocation of {tried:g} GiB failed"
        where += f" with {free:g} of {capacity:g} GiB free" if free is not None and capacity else ""
    found: Details = {"phase": phase} if phase else {}
    if fork:
        found["fork"] = fork
        action = f"halve {fork}'s {FORKS[fork][1]['micro_batch']}"
        offload = f"offload ({FORKS[fork][1]['offload']})"
    else:
        action = PHASE_ACTIONS[phase or "training"]
        offload = (
            "set actor_rollout_ref.actor.fsdp_config.param_offload and optimizer_offload to true; "
            "launch.preflight=fix applies the preflight's fixes"
        )
    if tried is not None and capacity and float(tried) >= float(capacity) and phase != "rollout":
        return (
            f"{where}, more than the card's {capacity:g} GiB: offloading cannot make room for one tensor that size; "
            f"fewer tokens per micro-batch can: {action}"
        ), found
    return f"{where}: {action}, or {offload}", found


PLACEMENT_SPECS = re.compile(r"specs=(\[[^\]]*\])")
RAY_GPU_TOTAL = re.compile(r"\b[\d.]+/([\d.]+) GPU\b")  # `ray status`: used/total per resource


def placement_group_fix(log_text: str) -> tuple[str, Details] | None:
    """vLLM's placement group that never formed: how many GPUs its bundles ask for, and what Ray has, where shown."""
    specs = PLACEMENT_SPECS.search(log_text)
    if not specs or not re.search(r"placement group", log_text):
        return None
    per_bundle = [float(gpus) for gpus in re.findall(r"'GPU': ([\d.]+)", specs.group(1))]
    if not per_bundle:
        return None
    wanted = sum(per_bundle)
    found: Details = {"gpus_requested": wanted, "bundles": len(per_bundle)}
    total = RAY_GPU_TOTAL.search(log_text)
    has = ""
    if total:
        found["gpus_in_ray"] = float(total.group(1))
        has = f" and Ray's cluster shows {float(total.group(1)):g}"
    return (
        f"vLLM's placement group of {len(per_bundle)} bundles asks for {wanted:g} GPU(s) (tensor x pipeline parallel "
        f"size){has}, so it never formed: lower actor_rollout_ref.rollout.tensor_model_parallel_size to the GPUs Ray "
        "shows, or make every node register its GPUs with Ray (`ray status`; ray start --num-gpus=<n> on a node whose "
        "GPUs are missing or counted as another resource)"
    ), found


# hydra's and omegaconf's refusals name the key
OVERRIDE_REFUSED = re.compile(r"Could not override '(?P<key>[^']+)'")
NOT_IN_STRUCT = re.compile(r"Key '(?P<key>[^']+)' is not in struct")
FULL_KEY = re.compile(r"full_key: (?P<key>\S+)")


SETUP_FAILED = re.compile(
    r"rlaunch: error: cluster\.setup\[(?P<index>\d+)\] failed \(exit (?P<code>\d+)\): (?P<line>.+)"
)
SNAPSHOT_GONE = re.compile(r"rlaunch: error: the code snapshot (?P<dir>\S+) is gone")


INSTALLED = re.compile(r"/(?:site|dist)-packages/")
RAISED_FROM = re.compile(r'File "(?P<path>[^"]+)", line \d+')


def import_failure_fix(failure: Failure, python_path: str | None = None) -> tuple[str, Details] | None:
    """The job died importing its own software (signatures.died_importing): which module, and where Python found it
    instead: a file outside the environment's site-packages (the traceback's deepest frame) shadows the installed
    package; a dotted module missing ('verl.trainer') means a package of the first name without it came first on
    sys.path; an undotted one is not installed. `python_path`: the PYTHONPATH the plan gave the job (plan.worker_env),
    whose entries are the likely shadows."""
    said = next(
        (
            line
            for line in failure.evidence
            if RUN_MODULE_FAILED.search(strip_prefix(line)) or IMPORT_FAILED.match(strip_prefix(line))
        ),
        None,
    )
    named = MODULE_NAMED.search(said) if said else None
    if said is None or named is None:
        return None
    module = named.group("module") or named.group("source")
    package = module.split(".")[0]
    interpreter = INTERPRETER.search(strip_prefix(said))
    python = f" ({interpreter.group('python')})" if interpreter else ""
    details: Details = {"module": module}
    raised = [found.group("path") for line in failure.evidence if (found := RAISED_FROM.search(line))]
    shadow = next(
        (path for path in raised if not INSTALLED.search(path) and re.search(rf"/{package}(?:/|\.py$)", path)), None
    )
    # the PYTHONPATH entries that hold a package of that name: they come before site-packages on sys.path
    entries = [entry for entry in (python_path or "").split(":") if entry]
    holding = [
        entry for entry in entries if (Path(entry) / package).exists() or (Path(entry) / f"{package}.py").exists()
    ]
    held = f": {', '.join(holding)} holds one" if holding else ""
    where = f" (the plan gives the job PYTHONPATH={python_path}{held})" if entries else ""
    if shadow:
        directory = shadow[: shadow.rindex(f"/{package}")]
        details["shadowed_by"] = directory
        return (
            f"{package} is not importable in the job{python}: Python imported it from {shadow}, outside the "
            f"environment's site-packages: a PYTHONPATH entry (cluster.env.PYTHONPATH) or the working directory "
            f"that shadows the installed {package}{where}: drop {directory} from it"
        ), details
    if "." in module:
        if holding:
            details["shadowed_by"] = holding[0]
        return (
            f"{package} is not importable in the job{python}: No module named '{module}': a '{package}' without it "
            f"came first on sys.path, another {package} that shadows the installed one (a PYTHONPATH entry: "
            f"cluster.env.PYTHONPATH, or a {package}/ folder in the working directory){where}: drop "
            + (f"{holding[0]} from cluster.env.PYTHONPATH" if holding else "it")
        ), details
    return (
        f"the module {module} is not installed in the job's Python{python}: install it in the environment the "
        f"nodes run (the venv or container), or fix the PYTHONPATH (cluster.env.PYTHONPATH) that should hold it{where}"
    ), details


def script_missing_fix(failure: Failure) -> tuple[str, Details] | None:
    """Python could not open the script the job runs (SCRIPT_NOT_OPENED): the path, and where to look for it."""
    opened = next((found for line in failure.evidence if (found := SCRIPT_NOT_OPENED.search(line))), None)
    if opened is None:
        return None
    path, details = opened["path"], {"script": opened["path"]}
    if opened["errno"] != "2":
        return f"{opened['python']} could not open the job's script {path}: {opened['reason']}", details
    relative = "" if path.startswith("/") else " (a relative path resolves against the job's working directory)"
    return (
        f"the job's script {path} does not exist where the job ran ({opened['python']}): fix its path{relative} in "
        "the job's command, and keep it on a filesystem every node sees (not a login node's local disk or /tmp)"
    ), details


def hydra_target_fix(failure: Failure, log_text: str) -> tuple[str, Details] | None:
    """Hydra could not instantiate a `_target_` (HYDRA_TARGET_MISSING): the target and the config key holding it, and
    what importing it raised where the log holds Hydra's chain: a module of the target's own path missing (not
    installed, or not on PYTHONPATH), no object of that name in its module, or a module the target's module imports
    missing."""
    located = next((found for line in failure.evidence if (found := HYDRA_TARGET_MISSING.search(line))), None)
    if located is None:
        return None
    target = located["target"]
    details: Details = {"target": target}
    full_key = HYDRA_FULL_KEY.search(log_text)
    key = f"{full_key['key']}._target_" if full_key else "the _target_"
    cause = next((found for line in failure.evidence if (found := HYDRA_LOAD_CAUSE.match(strip_prefix(line)))), None)
    named = MODULE_NAMED.search(cause["message"]) if cause else None
    module = named["module"] if named else None
    said = f"Hydra could not locate the _target_ {target}" + (f" ({key})" if full_key else "")
    if cause is None:
        return (
            f"{said}: no module or object of that name is importable in the job's Python: check its spelling, and that "
            "its package is installed in the nodes' environment or its directory is on PYTHONPATH "
            "(cluster.env.PYTHONPATH); HYDRA_FULL_ERROR=1 shows the import error"
        ), details
    if module is None:
        return f"{said}: importing it raised {cause['error']}({cause['message']}): fix that module", details
    details["module"] = module
    if module == target:  # Hydra tried the whole path as a module last: the object is not in its module
        owner, name = target.rsplit(".", 1) if "." in target else (target, target)
        return (f"{said}: {owner} has no {name}: fix the name (or the module path) in {key}", details)
    if target.startswith(f"{module}."):
        return (
            f"{said}: the module {module} is not importable in the job's Python: install its package in the nodes' "
            f"environment, or put the directory that holds {module.split('.')[0]} on PYTHONPATH "
            "(cluster.env.PYTHONPATH)"
        ), details
    return (
        f"{said}: its module imports {module}, which is not installed in the job's Python: install it in the "
        "environment the nodes run (the venv or container)"
    ), details


def model_json_fix(failure: Failure) -> tuple[str, Details] | None:
    """The model's config.json that transformers could not parse (configuration_utils.py get_config_dict re-raises
    json's JSONDecodeError as this OSError; signatures.unparsable_model_config puts both in the evidence): the file, and
    where json stopped."""
    broken = next((found for line in failure.evidence if (found := MODEL_CONFIG_NOT_JSON.search(line))), None)
    if broken is None:
        return None
    path = broken.group("path")
    decode = next((found for line in failure.evidence if (found := JSON_DECODE_ERROR.search(line))), None)
    where = f" ({decode.group('message')})" if decode else ""
    return (
        f"the model's config file {path} is not valid JSON{where}: restore it (copy or download the model again) or "
        "point actor_rollout_ref.model.path at a whole copy of the model"
    ), {"model_config": path}


def config_fix_from_log(log_text: str) -> tuple[str, Details] | None:
    """The key verl's config refused, and what to do with its override; or the job script's own stop."""
    setup = SETUP_FAILED.search(log_text)
    if setup:
        line = setup.group("line").strip()
        return (
            f"the job stopped at its setup: cluster.setup[{setup.group('index')}] ({line}) failed with exit "
            f"{setup.group('code')} on the node: fix or drop that line (a module or file the node lacks), or end it "
            "with `|| true` where its failure is harmless"
        ), {"config_key": "cluster.setup"}
    gone = SNAPSHOT_GONE.search(log_text)
    if gone:
        return (
            f"the code snapshot {gone.group('dir')} was removed while the job waited, so it stopped rather than run "
            "other code: resubmit (the submission writes a new snapshot), and keep <runs dir>/code while jobs queue"
        ), {"config_key": "cluster.snapshot"}
    refused = OVERRIDE_REFUSED.search(log_text)
    if refused:
        key = refused.group("key")
        return (
            f"verl's config has no key {key} (renamed or removed in this verl version): drop the override {key}=..., "
            f"or fix its name against the composed config (--cfg job); +{key}=... adds it only if some code reads it"
        ), {"config_key": key}
    parsed = hydra_fix(log_text) or parser_refusal_fix(log_text)
    if parsed:
        return parsed
    missing = NOT_IN_STRUCT.search(log_text)
    if missing:
        full = FULL_KEY.search(log_text)
        key = full.group("key") if full else missing.group("key")
        return (
            f"the composed config has no key '{key}' where it was read or set: fix or drop the override that names it "
            "(--cfg job shows the composed config), or run the entry point whose config has it"
        ), {"config_key": key}
    return (
        slurm_refusal_fix(log_text)
        or rollout_dtype_fix(log_text)
        or prompt_length_fix(log_text)
        or unequal_chunk_fix(log_text)
        or generations_fix(log_text)
        or engine_batching_fix(log_text)
        or chat_template_fix(log_text)
        or resume_world_size_fix(log_text)
        or split_dimension_fix(log_text)
        or engine_length_fix(log_text)
        or lora_rank_fix(log_text)
        or train_batch_fix(log_text)
        or divisible_fix(log_text)
        or deepspeed_batch_fix(log_text)
        or zero_batch_fix(log_text)
        or verl_check_fix(log_text)
        or pydantic_fix(log_text)
    )


# vLLM's dtype check (vllm/platforms/cuda.py): bfloat16 needs compute capability 8.0 (Ampere)
BF16_REFUSED = re.compile(
    r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0\. Your (?P<gpu>.+?) GPU "
    r"(?:has compute capability (?P<capability>[\d.]+?)|does not have a compute capability)\.?(?:\s|$)"
)


def slurm_refusal_fix(log_text: str) -> tuple[str, Details] | None:
    """SLURM refused to queue the job for its time or memory: the rlaunch key that sets it."""
    if SLURM_TIME_REFUSED.search(log_text):
        return (
            "SLURM refused the job's --time: it is above the partition's MaxTime (sinfo -o '%P %l' lists them); "
            "lower mode.time_budget_min (rlaunch asks it plus cluster.time_margin_min), or set cluster.partition to "
            "one whose limit is longer; checkpoints and requeues carry a run across several jobs"
        ), {"config_key": "mode.time_budget_min"}
    if SLURM_MEM_REFUSED.search(log_text):
        return (
            "SLURM refused the job's --mem: no node of the partition has that much memory (sinfo -o '%P %m' lists "
            "their RealMemory in MB); lower cluster.mem_gb below it, or leave it null (rlaunch then asks the "
            "profile's host RAM per GPU, capped at the node)"
        ), {"config_key": "cluster.mem_gb"}
    return None


# the engine's max_model_len above what the model's config.json allows: vLLM's _get_and_verify_max_len, and verl's own
# check before it (vllm_async_server.py _validate_configs)
ENGINE_LENGTH_REFUSED = (
    re.compile(
        r"User-specified max_model_len \((?P<asked>\d+)\) is greater than the derived max_model_len \((?:[^)]*?=)?"
        r"(?P<derived>\d+)(?:\.0)?\b"
    ),
    re.compile(
        r"max_model_len \((?P<asked>\d+)\) should be less than or equal to max_position_embeddings \((?P<derived>\d+)\)"
    ),
)


def lora_rank_fix(log_text: str) -> tuple[str, Details] | None:
    """The actor's LoRA rank above the largest vLLM serves: the rank that fits."""
    refused = LORA_RANK_REFUSED.search(log_text)
    if not refused:
        return None
    most, rank = int(refused.group("most")), int(refused.group("rank"))
    return (
        f"the actor's LoRA rank {rank} is above the largest vLLM serves ({most}): set "
        f"actor_rollout_ref.model.lora_rank to {most} or less"
    ), {"config_key": "actor_rollout_ref.model.lora_rank", "value": rank, "limit": most}


def engine_length_fix(log_text: str) -> tuple[str, Details] | None:
    """The rollout engine's context asked longer than the model's: the length that fits."""
    refused = next((found for pattern in ENGINE_LENGTH_REFUSED if (found := pattern.search(log_text))), None)
    if not refused:
        return None
    asked, derived = int(refused.group("asked")), int(refused.group("derived"))
    return (
        f"the rollout engine was asked for a context of {asked} tokens and the model's config.json allows {derived}: "
        f"set actor_rollout_ref.rollout.max_model_len={derived} (or leave it null: verl then uses the model's), and "
        f"keep data.max_prompt_length + data.max_response_length within {derived}; a longer context needs the model's "
        "own rope scaling (its config.json), not vLLM's override"
    ), {"config_key": "actor_rollout_ref.rollout.max_model_len", "value": asked, "limit": derived}


def unequal_chunk_fix(log_text: str) -> tuple[str, Details] | None:
    """A batch verl splits over its workers that their count does not divide: the sizes that it would."""
    refused = UNEQUAL_CHUNK.search(log_text)
    if not refused:
        return None
    size, chunks = int(refused.group("size")), int(refused.group("chunks"))
    lower, upper = size // chunks * chunks, (size // chunks + 1) * chunks
    multiples = " or ".join(str(multiple) for multiple in (lower, upper) if multiple > 0)
    return (
        f"verl split a batch of {size} over {chunks} workers, which does not divide it: the batch it dispatches "
        "(data.train_batch_size x actor_rollout_ref.rollout.n sequences, or the validation set, data.val_batch_size) "
        f"must be a multiple of {GPU_COUNT_KEYS} ({chunks}): make it {multiples}, or change the GPU count to a "
        f"divisor of {size}"
    ), {"config_key": "data.train_batch_size", "batch": size, "workers": chunks}


def rollout_dtype_fix(log_text: str) -> tuple[str, Details] | None:
    """vLLM refusing bfloat16 on a card older than Ampere: the rollout's dtype, and the actor's, must be float16."""
    refused = BF16_REFUSED.search(log_text)
    if not refused:
        return None
    capability = refused.group("capability")
    card = f"{refused.group('gpu')} (compute capability {capability})" if capability else refused.group("gpu")
    return (
        f"vLLM refuses bfloat16 on the {card}: bfloat16 needs compute capability 8.0 (Ampere or newer); set "
        "actor_rollout_ref.rollout.dtype=float16, and the actor's to match "
        "(actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp16, the ref's likewise), or run on an "
        "Ampere or newer card (gpu=a100_80, h100, ...)"
    ), {"config_key": "actor_rollout_ref.rollout.dtype"} | ({"compute_capability": capability} if capability else {})


def prompt_length_fix(log_text: str) -> tuple[str, Details] | None:
    """A prompt as long as the engine's context: verl keeps such prompts unless it filters them."""
    refused = next((found for pattern in PROMPT_FILLS_CONTEXT if (found := pattern.search(log_text))), None)
    if not refused:
        return None
    prompt, context = int(refused.group("prompt")), int(refused.group("context"))
    return (
        f"a prompt of {prompt} tokens fills the rollout engine's context of {context} tokens, leaving none to "
        "generate: set data.filter_overlong_prompts=true (verl then drops prompts longer than data.max_prompt_length) "
        f"and keep data.max_prompt_length + data.max_response_length within actor_rollout_ref.rollout.max_model_len "
        "(null: the model's max_position_embeddings), or raise that where the model allows"
    ), {"config_key": "data.filter_overlong_prompts", "prompt_tokens": prompt, "context_tokens": context}


# where each of verl's config modules sits in the composed config (verl/workers/config/<module>.py)
VERL_CONFIG_SECTIONS = {
    "actor": "actor_rollout_ref.actor",
    "critic": "critic",
    "rollout": "actor_rollout_ref.rollout",
    "model": "actor_rollout_ref.model (critic.model for a critic)",
    "optimizer": "actor_rollout_ref.actor.optim (critic.optim)",
    "engine": "actor_rollout_ref.actor.fsdp_config / megatron (the same under ref and critic)",
    "reward": "reward",
    "distillation": "distillation",
}
VERL_CHECK_WRAPPED = re.compile(r"Error in call to target 'verl\.\w+\.config\.(?P<module>\w+)\.\w+':")


PYDANTIC_REFUSED = re.compile(
    r"ValidationError: (?P<count>\d+) validation errors? for (?P<model>\w+)\s*\n(?P<body>(?:.*\n?){0,40})"
)
PYDANTIC_FIELD = re.compile(r"^(?P<field>[A-Za-z_][\w.\[\]-]*)\s*$")


def pydantic_fix(log_text: str) -> tuple[str, Details] | None:
    """A trainer's pydantic config class refusing values: the class, and the fields it names (each on a line of its
    own, its reason indented under it)."""
    refused = PYDANTIC_REFUSED.search(log_text)
    if not refused:
        return None
    body = [strip_prefix(line) for line in refused.group("body").splitlines()]
    fields = [found.group("field") for line in body if (found := PYDANTIC_FIELD.match(line))]
    named = ", ".join(fields[:6]) or "the fields listed under it"
    return (
        f"{refused.group('model')} refused {refused.group('count')} value(s) of the config it was given: {named}; "
        "fix them as pydantic's line under each says (the type or value it expects), or drop them if they belong to "
        "another entry point's config (a config file written for another trainer)"
    ), {"config_class": refused.group("model")} | ({"config_fields": ",".join(fields[:6])} if fields else {})


def verl_check_fix(log_text: str) -> tuple[str, Details] | None:
    """One of verl's own config checks refused a value: its message, and the section of the config it checks."""
    lines = [line for line in log_text.splitlines() if line.strip()]
    raised = raised_in(lines, VERL_CONFIG_CHECK)
    wrapped = VERL_CHECK_WRAPPED.search(log_text)
    if raised:
        module = re.search(r"verl/(?:workers|trainer|utils)/config(?:/(\w+))?\.py", raised[0])
        section = VERL_CONFIG_SECTIONS.get(module.group(1) or "", "") if module else ""
        message = strip_prefix(raised[1]).strip()
    elif wrapped:
        section = VERL_CONFIG_SECTIONS.get(wrapped.group("module"), "")
        following = lines[lines.index(next(line for line in lines if wrapped.group(0) in line)) + 1 :]
        message = strip_prefix(following[0]).strip() if following else ""
    else:
        return None
    where = f" (a check of {section})" if section else ""
    return (
        f"verl's own config check refused a value{where}: {message[:200]}; change the value it names (python "
        "launch/run.py ... --cfg job shows the composed config; rlaunch runs the same checks before it queues a run, "
        "so a run it planned does not meet this)"
    ), {"verl_check": message[:200]} | ({"config_section": section} if section else {})


# DeepSpeed's batch check, its message wrapped or not: "train_batch_size is not equal to micro_batch_per_gpu *
# gradient_acc_step * world_size 64 != 4 * 8 * 1"
DEEPSPEED_BATCH = re.compile(
    r"micro_batch_per_gpu\s+\*\s+gradient_acc_step\s+\*\s+world_size\s+(?P<train>\d+)\s*!=\s*(?P<micro>\d+)\s*\*\s*"
    r"(?P<acc>\d+)\s*\*\s*(?P<world>\d+)"
)


def deepspeed_batch_fix(log_text: str) -> tuple[str, Details] | None:
    """DeepSpeed's three batch keys against the world size it ran with: the values that make the product hold."""
    found = DEEPSPEED_BATCH.search(log_text)
    if not found:
        return None
    train, micro, acc, world = (int(found.group(name)) for name in ("train", "micro", "acc", "world"))
    product = micro * acc * world
    options = [f"train_batch_size={product}"]
    if micro * world and train % (micro * world) == 0:
        options.append(f"gradient_accumulation_steps={train // (micro * world)}")
    if micro * acc and train % (micro * acc) == 0 and train // (micro * acc) != world:
        options.append(f"{train // (micro * acc)} GPUs (world size; it ran with {world})")
    return (
        f"DeepSpeed's batch keys disagree: train_batch_size {train} != micro_batch_per_gpu {micro} x "
        f"gradient_accumulation_steps {acc} x world size {world} = {product}; set {' or '.join(options)} (or leave "
        'train_batch_size to "auto" and let the trainer derive it)'
    ), {
        "train_batch_size": train,
        "micro_batch_per_gpu": micro,
        "gradient_accumulation_steps": acc,
        "world_size": world,
    }


# the batch keys a ZeroDivisionError's source line divides by, as verl spells them: verl normalises each
# *_batch_size by the data-parallel size (and multiplies by rollout.n), so a value below the GPU count becomes 0
BATCH_KEY = re.compile(r"\b\w*(?:micro_batch|mini_batch|batch_size)\w*\b")


def zero_batch_fix(log_text: str) -> tuple[str, Details] | None:
    """A batch size that came out 0 where code divides by it: which key, and why it is 0."""
    hits = raised_by(log_text.splitlines(), ZERO_DIVISION, BATCH_ARITHMETIC)
    if not hits:
        return None
    source = strip_prefix(hits[0])
    divided = re.split(r"[%/]{1,2}", source, maxsplit=1)
    keys = BATCH_KEY.findall(divided[1] if len(divided) > 1 else source) or BATCH_KEY.findall(source)
    key = keys[0] if keys else "a batch size"
    return (
        f"{key} is 0 where the code divides by it ({source[:120]}): verl divides each *_batch_size by the "
        f"data-parallel size (the GPUs over the sequence-parallel size), so a {key} below the GPU count becomes 0; "
        "set it to at least the number of GPUs (a multiple of it), or set its _per_gpu form instead (e.g. "
        "ppo_micro_batch_size_per_gpu=1)"
    ), {"config_key": key}


# TRL's GRPO: every prompt's completions must fit in one global batch, (processes x per-device batch) a multiple of
# num_generations ("must be evenly divisible by the number of generations per prompt (8)", TRL <= 0.17; "(2 * 4) must
# be divisible by the number of generations used for evaluation (3)" later), and the values that fit where it lists
# them
GENERATIONS = re.compile(
    r"The global (?P<which>train|eval) batch size \((?P<processes>\d+) [x*] (?P<per_device>\d+)\) must be (?:evenly )?"
    r"divisible by the number of generations[^(]*\((?P<generations>\d+)\)"
)
GENERATIONS_VALID = re.compile(r"valid values for the number of generations are: \[(?P<valid>[\d, ]*)\]")


def generations_fix(log_text: str) -> tuple[str, Details] | None:
    """TRL's GRPO batch that does not hold whole groups of generations: the num_generations that fit, or the per-device
    batch size that makes the global batch a multiple of it."""
    refused = GENERATIONS.search(log_text)
    if not refused:
        return None
    processes, per_device = int(refused.group("processes")), int(refused.group("per_device"))
    generations = int(refused.group("generations"))
    key = f"per_device_{refused.group('which')}_batch_size"
    listed = GENERATIONS_VALID.search(log_text)
    valid = listed.group("valid").replace(" ", "") if listed else ""
    step = generations // math.gcd(processes, generations)  # the per-device sizes that fit are its multiples
    fits = max(step, math.ceil(per_device / step) * step)
    instead = f" (the values that fit, as TRL lists them: [{valid}])" if valid else ""
    return (
        f"the global {refused.group('which')} batch ({processes} processes x {key}={per_device}) is not a multiple of "
        f"num_generations={generations}, so a prompt's completions would not fit in one batch: set num_generations "
        f"to a divisor of {processes * per_device}{instead}, or {key}={fits} (now {per_device})"
    ), {"config_key": "num_generations", "value": generations, "global_batch": processes * per_device}


HYDRA_OPTION_MISSING = re.compile(r"In '[^']+': Could not (?:find|load) '(?P<option>[^']+)'")
HYDRA_APPEND_EXISTING = re.compile(r"Could not append to config\. An item is already at '(?P<key>[^']+)'")
HYDRA_DELETE_MISSING = re.compile(r"Could not delete from config\. '(?P<key>[^']+)' does not exist")
HYDRA_PRIMARY_MISSING = re.compile(r"Cannot find primary config '(?P<name>[^']+)'")


def hydra_fix(log_text: str) -> tuple[str, Details] | None:
    """Hydra's refusals of the command line other than an unknown key: a config group option or primary config it
    cannot find, a + on a key that exists, a ~ on one that does not, an override that does not parse."""
    option = HYDRA_OPTION_MISSING.search(log_text)
    if option:
        group, _, name = option.group("option").rpartition("/")
        return (
            f"Hydra found no config {name!r} in the config group {group or '(root)'}: pick one of the options listed "
            f"under 'Available options' (or add {option.group('option')}.yaml to the config directory)"
        ), {"config_key": group or name}
    appended = HYDRA_APPEND_EXISTING.search(log_text)
    if appended:
        key = appended.group("key")
        return f"{key} is already in the config: set it without the + ({key}=...), or with ++ to add or override", {
            "config_key": key
        }
    deleted = HYDRA_DELETE_MISSING.search(log_text)
    if deleted:
        key = deleted.group("key")
        return f"{key} is not in the config, so ~{key} has nothing to delete: drop that override", {"config_key": key}
    primary = HYDRA_PRIMARY_MISSING.search(log_text)
    if primary:
        name = primary.group("name")
        return (
            f"Hydra found no primary config {name!r} on its search path: fix --config-name (or --config-path) to a "
            "config that exists"
        ), {"config_name": name}
    if HYDRA_OVERRIDE_GRAMMAR.search(log_text):
        return (
            "a command-line override does not parse in Hydra's override grammar (the line above names where): quote a "
            "value with brackets, commas, spaces or '=' in it ('key=\"[1,2]\"'), and close every bracket"
        ), {}
    return None


# the options a script's argument parser refused, in each parser's words: the list HfArgumentParser did not use,
# argparse's (and jsonargparse's) unrecognized arguments, tyro's, click's and typer's unknown option, draccus' fields
PARSER_UNUSED = (
    re.compile(r"not used by the HfArgumentParser: \[(?P<options>[^\]]*)\]"),
    re.compile(r"error: unrecognized arguments: (?P<options>.+)"),
    re.compile(r"Unrecognized (?:options|arguments): (?P<options>[^│]+)"),
    re.compile(r"No such option:? '?(?P<options>-[\w.-]+)"),
    re.compile(r"Option '(?P<options>[^']+)' is not accepted"),
    re.compile(r"The fields? (?P<options>`[^`]+`(?:, `[^`]+`)*) (?:are|is) not valid for"),
)
# a value the parser could not read for an option it knows: argparse's, click's, tyro's, draccus'
PARSER_BAD_VALUE = re.compile(
    r"argument (?P<a>[\w/-]+): invalid|Invalid value for '(?P<b>-[^']+|[A-Z][A-Z_]*)'|Error parsing (?P<c>--[\w.-]+):"
    r"|DecodingError: `(?P<d>[^`]+)`: "
)
PARSER_REQUIRED = re.compile(
    r"the following arguments are required: (?P<options>.+)|Missing option '(?P<option>[^']+)'"
)
# pydantic prints the field above its "Extra inputs are not permitted" (v2) / "extra fields not permitted" (v1) line
PYDANTIC_EXTRA = re.compile(
    r"^(?P<field>[\w.]+)\n\s+(?:Extra inputs are not permitted|extra fields not permitted)", re.M
)


def parser_refusal_fix(log_text: str) -> tuple[str, Details] | None:
    """The command line a script's argument parser (or a pydantic config) refused: which options, and what to do."""
    for pattern in PARSER_UNUSED:
        unused = pattern.search(log_text)
        if unused:
            options = [
                name.lstrip("`")
                for name in re.findall(r"[`'\"]?(-{0,2}[A-Za-z_][\w.-]*)", unused.group("options"))
                if name.startswith("-") or pattern is PARSER_UNUSED[-1]
            ]
            named = ", ".join(dict.fromkeys(options)) or unused.group("options").strip()
            return (
                f"the script's argument parser has no option {named} (renamed or removed in this version of the "
                "script): drop them from the command (and their values), or fix their names against the script's "
                "--help"
            ), {"refused_options": named}
    bad = PARSER_BAD_VALUE.search(log_text)
    if bad:
        option = next(group for group in bad.groups() if group)
        return (
            f"the script's argument parser could not read the value given to {option}: fix its value on the command "
            "line (the message says the type it expects)"
        ), {"config_key": option}
    required = PARSER_REQUIRED.search(log_text)
    if required:
        options = (required.group("options") or required.group("option")).strip()
        return f"the script requires {options} and the command does not give it: set it on the command line", {
            "config_key": options
        }
    extra = PYDANTIC_EXTRA.search(log_text)
    if extra:
        field = extra.group("field")
        return (
            f"the config model has no field {field} and forbids extra ones: drop {field} from the config or the "
            "command line, or fix its name"
        ), {"config_key": field}
    return None


# "<key> (<value>) must be divisible by <key or phrase> (<value>)": verl's batch checks and other libraries' own
NOT_DIVISIBLE = re.compile(
    r"(?P<key>[\w.]+) \((?P<value>\d+)\) (?:must be|should be|is not) (?:(?:evenly )?divisible by|a multiple of) "
    r"(?P<by>[\w. ]+?) \((?P<divisor>\d+)\)"
)


def nearest_divisors(number: int, near: int) -> list[int]:
    """The divisors of `number` just below and just above `near` (those that exist, `near` itself excluded)."""
    below = [d for d in range(min(near - 1, number), 0, -1) if number % d == 0][:1]
    above = [d for d in range(near + 1, number + 1) if number % d == 0][:1]
    return below + above


# vLLM's and Megatron's check that a model dimension (attention or KV heads, experts, a vocabulary) splits evenly over
# the tensor-parallel ranks: bare numbers, the engine's frame says whose degree it is
SPLIT_REFUSED = re.compile(r"AssertionError: (?P<size>\d+) is not divisible by (?P<ranks>\d+)")
SPLIT_FRAME = re.compile(r"(?P<engine>vllm|sglang|megatron)/\S+\.py\S*, line \d+, in (?:ensure_divisibility|divide)\b")
SPLIT_KEYS = {
    "vllm": "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "sglang": "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "megatron": "actor_rollout_ref.actor.megatron.tensor_model_parallel_size",
}


# vLLM's own check of the model against its parallel config (vllm/config/model.py verify_with_parallel_config)
ENGINE_HEADS_REFUSED = re.compile(
    r"Total number of attention heads \((?P<size>\d+)\) must be divisible by tensor parallel size \((?P<ranks>\d+)\)"
)


def split_dimension_fix(log_text: str) -> tuple[str, Details] | None:
    """A model dimension the tensor-parallel degree does not divide: the degrees that would."""
    refused, frame = SPLIT_REFUSED.search(log_text), SPLIT_FRAME.search(log_text)
    heads = ENGINE_HEADS_REFUSED.search(log_text)
    if heads:  # vLLM's rollout engine saying so in its own words: its tensor parallel size is the rollout's
        refused, key = heads, SPLIT_KEYS["vllm"]
    elif refused and frame:
        key = SPLIT_KEYS[frame.group("engine")]
    else:
        return None
    size, ranks = int(refused.group("size")), int(refused.group("ranks"))
    fitting = [degree for degree in range(1, min(size, 64) + 1) if size % degree == 0]
    return (
        f"the model has a dimension of {size} (attention or KV heads, experts) that tensor parallelism {ranks} cannot "
        f"split evenly: set {key} to a divisor of {size} ({', '.join(map(str, fitting))}) that the GPUs per engine "
        "allow"
    ), {"config_key": key, "value": ranks, "dimension": size}


# vLLM's SchedulerConfig with chunked prefill off: one step must hold a whole sequence
ENGINE_BATCHING = re.compile(
    r"max_num_batched_tokens \((?P<tokens>\d+)\) is smaller than max_model_len \((?P<length>\d+)\)"
)


def engine_batching_fix(log_text: str) -> tuple[str, Details] | None:
    refused = ENGINE_BATCHING.search(log_text)
    if not refused:
        return None
    tokens, length = int(refused.group("tokens")), int(refused.group("length"))
    rollout = "actor_rollout_ref.rollout"
    return (
        f"vLLM's step budget of {tokens} tokens cannot hold one {length}-token sequence with chunked prefill off: "
        f"raise {rollout}.max_num_batched_tokens to {length} or more, or lower {rollout}.max_model_len to {tokens} "
        f"(it must still exceed data.max_prompt_length), or set {rollout}.enable_chunked_prefill=true"
    ), {"config_key": f"{rollout}.max_num_batched_tokens", "value": tokens, "needed": length}


CHAT_TEMPLATE_KEY = "actor_rollout_ref.model.custom_chat_template"


def chat_template_fix(log_text: str) -> tuple[str, Details] | None:
    if "chat_template is not set and no template argument was passed" not in log_text:
        return None
    return (
        "the model's tokenizer has no chat template (a base model's?), and verl applies one to every prompt: set "
        f"{CHAT_TEMPLATE_KEY} to a Jinja chat template, or use the model's chat (instruct) version"
    ), {"config_key": CHAT_TEMPLATE_KEY}


def resume_world_size_fix(log_text: str) -> tuple[str, Details] | None:
    """verl's FSDP checkpoint is a file per rank named by the world size that wrote it: another GPU count finds none."""
    from launch.readiness import SHARD_FILE, start_from_merged

    missing = re.search(rf"No such file or directory: '(?P<actor>[^']*)/{SHARD_FILE}'", log_text)
    if not missing:
        return None
    actor, world = missing.group("actor"), int(missing.group("world"))
    return (
        f"the checkpoint in {actor} lacks a shard for this run's {world} ranks: it was written by another GPU count "
        "(verl's FSDP checkpoint loads only on the world size W in its model_world_size_<W>_rank_*.pt files), or "
        "its save was cut short: run on W GPUs (trainer.nnodes x trainer.n_gpus_per_node), or "
        f"{start_from_merged(actor)}"
    ), {"config_key": "trainer.n_gpus_per_node", "value": world}


# verl's own batch check (utils/config.py) names two quantities, not keys: the prompts' samples and the GPUs they
# are spread over (under Megatron, its data-parallel size x ppo_micro_batch_size_per_gpu)
TRAIN_BATCH_REFUSED = re.compile(
    r"real_train_batch_size \((?P<samples>\d+)\) must be divisible by minimal possible batch size \((?P<by>\d+)\)"
)


def train_batch_fix(log_text: str) -> tuple[str, Details] | None:
    refused = TRAIN_BATCH_REFUSED.search(log_text)
    if not refused:
        return None
    samples, by = int(refused.group("samples")), int(refused.group("by"))
    if by <= 0:
        return None
    totals = " or ".join(str(total) for total in (samples // by * by, (samples // by + 1) * by) if total > 0)
    counts = nearest_divisors(samples, by)
    fix = (
        f"data.train_batch_size x actor_rollout_ref.rollout.n = {samples} samples per step do not split over {by} "
        f"(the GPUs, trainer.n_gpus_per_node x trainer.nnodes; under Megatron its data-parallel size x "
        f"ppo_micro_batch_size_per_gpu): set data.train_batch_size so that the product is a multiple of {by} "
        f"(e.g. {totals})"
    )
    if counts:
        fix += f", or use a GPU count that divides {samples} ({' or '.join(map(str, counts))})"
    return fix, {"config_key": "data.train_batch_size", "value": samples, "divisor": by}


def divisible_fix(log_text: str) -> tuple[str, Details] | None:
    """A value that must be a multiple of another: the multiples next to it, and the divisors that would fit it."""
    refused = NOT_DIVISIBLE.search(log_text)
    if not refused:
        return None
    key, by = refused.group("key"), refused.group("by").strip()
    value, divisor = int(refused.group("value")), int(refused.group("divisor"))
    if divisor <= 0:
        return None
    lower, upper = value // divisor * divisor, (value // divisor + 1) * divisor
    multiples = " or ".join(str(m) for m in (lower, upper) if m > 0)
    fix = f"{key}={value} is not a multiple of {by}={divisor}: set {key} to {multiples}"
    divisors = nearest_divisors(value, divisor) if re.fullmatch(r"[\w.]+", by) else []
    if divisors:
        fix += f", or {by} to a divisor of {value} ({' or '.join(map(str, divisors))})"
    return fix + "; --cfg job shows the composed config", {"config_key": key, "value": value, "divisor": divisor}


REWARD_NOT_IMPLEMENTED = re.compile(
    r"Reward function is not implemented for data_source(?:=(?P<source>'[^']*'|\"[^\"]*\"|[^\s'\",]+))?"
)
MATH_VERIFY_SIGNAL = re.compile(r"signal only works in main thread")
MATH_VERIFY_TIMEOUT = re.compile(r"(?:TimeoutError|TimeoutException): Operation timed out")
# Python's TypeError for a call that does not fit a function's signature (the signature rule names the reward ones)
REWARD_CALL = re.compile(
    r"TypeError: (?P<function>[\w.]*(?i:reward|compute_score)[\w.]*)\(\) (?:"
    r"missing \d+ required (?:positional|keyword-only) arguments?: (?P<missing>.+)"
    r"|got an unexpected keyword argument '(?P<unexpected>\w+)'"
    r"|got multiple values for argument '(?P<multiple>\w+)'"
    r"|takes (?P<takes>.+))"
)


def reward_call_fix(log_text: str) -> tuple[str, Details] | None:
    """A reward function called with arguments its signature does not take: the function and the argument."""
    call = REWARD_CALL.search(log_text)
    if not call:
        return None
    function = call.group("function")
    found: Details = {"reward_function": function}
    if call.group("missing"):
        names = re.findall(r"'(\w+)'", call.group("missing"))
        found["missing_argument"] = ", ".join(names)
        quoted = " and ".join(f"'{name}'" for name in names)
        return (
            f"the reward function {function}() was called without {quoted}: the trainer passes each sample's fields "
            f"to it by name, so the data has no field {quoted}; add it to every sample of the data, or make the "
            "function not require it (a default, or **kwargs)"
        ), found
    if call.group("unexpected"):
        name = call.group("unexpected")
        found["unexpected_argument"] = name
        return (
            f"the trainer passes '{name}' to the reward function {function}(), whose signature does not take it: add "
            f"{name}=None (or **kwargs) to the function (reward.custom_reward_function.path)"
        ), found
    what = (
        f"got two values for '{call.group('multiple')}'" if call.group("multiple") else f"takes {call.group('takes')}"
    )
    return (
        f"the reward function {function}() {what}: make its signature match how the trainer calls it (verl: "
        "compute_score(data_source, solution_str, ground_truth, extra_info), by name)"
    ), found


# a remote reward server's client that gave up: OpenRLHF's remote_rm_utils and urllib3's connection error (the URL
# split into host, port and path)
REWARD_SERVER_DOWN = re.compile(
    r"HTTPConnectionPool\(host='(?P<host>[^']+)', port=(?P<port>\d+)\): Max retries exceeded with url: (?P<path>\S+)"
)
REWARD_SERVER_GAVE_UP = re.compile(r"Request error for \S+ times|Please check the API server")


def reward_server_fix(log_text: str) -> tuple[str, Details] | None:
    """The reward came from a server the scorer could not reach: which address, and that the server is the fix."""
    if not (REWARD_SERVER_GAVE_UP.search(log_text) or re.search(r"remote_rm", log_text)):
        return None
    down = REWARD_SERVER_DOWN.search(log_text)
    if not down:
        return None
    url = f"http://{down.group('host')}:{down.group('port')}{down.group('path')}"
    tries = re.search(r"Request error for (\d+) times", log_text)
    gave_up = f" (it gave up after {tries.group(1)} tries)" if tries else ""
    loopback = (
        "; 127.0.0.1 is whichever node the scorer ran on (a Ray worker may run on another node than the server): "
        "give the server's host name"
        if down.group("host") in ("127.0.0.1", "localhost")
        else ""
    )
    return (
        f"the reward server at {url} refused the scorer's requests{gave_up}: start the server before training and "
        "wait until it answers (curl it), or fix the reward URL the run was given (OpenRLHF: --remote_rm_url)"
        f"{loopback}; no batch or memory setting can help"
    ), {"reward_url": url}


REWARD_FRAME_AT = re.compile(r'File "(?P<path>[^"]+)", line \d+, in (?P<function>\w+)')
RAISED_AT_LINE = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')


def reward_file_fix(log_text: str) -> tuple[str, Details] | None:
    """The custom reward function verl could not load (signatures.REWARD_FILE_MISSING, REWARD_NAME_MISSING): the path
    or the name to fix; a scorer that raised is reward_fix_from_log's."""
    missing = REWARD_FILE_MISSING.search(log_text)
    if missing:
        path = missing.group("path")
        return (
            f"verl found no reward file {path} on the node that loaded it: point reward.custom_reward_function.path "
            "at the file where every node reads it (an absolute path on the shared filesystem; rlaunch copies a "
            "reward file inside the repository into the run's code snapshot)"
        ), {"config_key": "reward.custom_reward_function.path", "path": path}
    unnamed = REWARD_NAME_MISSING.search(log_text)
    if unnamed:
        name, path = unnamed.group("name"), unnamed.group("path")
        return (
            f"the reward file {path} defines no {name}: set reward.custom_reward_function.name to the scorer's "
            "function name in that file (verl's default is compute_score)"
        ), {"config_key": "reward.custom_reward_function.name", "function": name}
    return None


UNSHOWN_CAUSE = "the traceback above verl's line says what"


# a reward frame in a library's code, installed or a checkout of it (verl's scorers and managers, math-verify), not in
# a user's own reward file
LIBRARY_SCORER = re.compile(r"/(?:site|dist)-packages/|/reward_score/|/reward_manager/|/reward_loop/|/math_verify/")


def reward_module_fix(failure: Failure) -> tuple[str, Details] | None:
    """A custom reward file that raised as verl loaded it (signatures.module_load_cause puts its exception and its
    frame in the evidence): an import the job's environment lacks, or the file's own error; not a scorer that raised."""
    loader = next((found for line in failure.evidence if (found := REWARD_MODULE_FAILED.search(line))), None)
    if loader is None:
        return None
    path = loader.group("path")
    details: Details = {"config_key": "reward.custom_reward_function.path", "path": path}
    cause = next(
        (
            strip_prefix(line)
            for line in failure.evidence
            if EXCEPTION_LINE.match(strip_prefix(line)) and not REWARD_MODULE_FAILED.search(line)
        ),
        None,
    )
    frame = next((found for line in failure.evidence if (found := RAISED_AT_LINE.search(line)) and path in line), None)
    at = f"line {frame.group('line')}: " if frame else ""
    named = MODULE_NAMED.search(cause) if cause and IMPORT_FAILED.match(cause) else None
    if cause and named:
        module = named.group("module") or named.group("source")
        details["module"] = module
        return (
            f"the reward module {path} fails to import ({at}{cause.split(': ', 1)[-1]}): install "
            f"{module.split('.')[0]} in the job's environment (the venv or container the nodes run), or fix "
            "reward.custom_reward_function.path where it names the wrong file"
        ), details
    return (
        f"the reward module {path} raised as verl loaded it ({at}{cause or UNSHOWN_CAUSE}): "
        "fix the file (every reward worker runs it as it imports it), or reward.custom_reward_function.path where it "
        "names the wrong file"
    ), details


def reward_fix_from_log(failure: Failure, log_text: str) -> tuple[str, Details] | None:
    """Which scorer raised: a data source verl has no scorer for, math-verify's timeout off the main thread, else the
    deepest reward frame of the evidence."""
    unscored = REWARD_NOT_IMPLEMENTED.search(log_text)
    if unscored:
        source = unscored.group("source")
        return (
            f"verl's default scorer has no function for data_source={source or '<the one in the data>'}: point "
            "reward.custom_reward_function.path (and .name) at a scorer that handles it, or fix the data_source "
            "column of the data"
        ), ({"data_source": source} if source else {})
    in_math_verify = "/math_verify/" in log_text
    if in_math_verify and MATH_VERIFY_SIGNAL.search(log_text):
        return (
            "math-verify's timeout uses SIGALRM, which works only in a process's main thread, and the reward ran in "
            "another thread: call it with its timeouts off (parse(..., parsing_timeout=None), verify(..., "
            "timeout_seconds=None); math-verify >= 0.8.0) and bound the time outside, or score in a process pool"
        ), {"scorer": "math_verify"}
    if in_math_verify and MATH_VERIFY_TIMEOUT.search(log_text):
        return (
            "math-verify's own timeout fired (its SIGALRM handler raised TimeoutError) and the exception left the "
            "scorer: one answer took longer to parse or verify than its limit, and this math-verify lets that "
            "escape (0.9 scores it False unless raise_on_error=True); upgrade math-verify, or catch TimeoutError in "
            "the scorer and return 0; a longer timeout_seconds / parsing_timeout only moves the limit (some "
            "expressions never finish in sympy)"
        ), {"scorer": "math_verify"}
    call = reward_call_fix(log_text)
    if call:
        return call
    frames = [frame for line in failure.evidence if (frame := REWARD_FRAME_AT.search(line))]
    if not frames:
        return None
    path, function = frames[-1].group("path"), frames[-1].group("function")
    line = RAISED_AT_LINE.search(frames[-1].group(0))
    if LIBRARY_SCORER.search(path):  # a library's scorer (verl's reward_score, math-verify): its package-relative name
        where = "/".join(path.split("/")[-2:])
        code = "rewards/, reward.custom_reward_function.path"
    else:  # the user's own file, by the absolute path the node ran; rlaunch's rewards/ only where it lives there
        where = f"{path}:{line.group('line')}" if line else path
        code = "rewards/" if "/rewards/" in path else "the file reward.custom_reward_function.path names"
    return (
        f"the reward function raised in {where} ({function}): make the scorer for that data source catch it "
        f"(return 0 on a parse failure or a timeout: one exception there ends the run) or fix its code ({code})"
    ), {"reward_frame": f"{where}:{function}"}


AGENT_FAILED = re.compile(
    r"The raylet exited immediately because (?:one Ray agent failed, agent_name = (?P<agent>[\w-]+)|the runtime env "
    r"agent timed out)|(?P<abnormal>Agent is working abnormally)"
    r"|Some Ray subprocesses exited unexpectedly:\s*\n\s*(?P<process>dashboard\w*) \[exit code=(?P<code>-?\d+)\]"
)


def agent_failed_fix(log_text: str) -> tuple[str, Details] | None:
    """The raylet exits with its dashboard or runtime-env agent: the agent's own log says why it failed."""
    found = AGENT_FAILED.search(log_text)
    if not found:
        return None
    agent = found.group("agent") or found.group("process") or ("dashboard_agent" if found.group("abnormal") else "")
    agent = agent or "runtime_env_agent"
    code = found.group("code")
    died = f" (exit code {code}{', a segmentation fault' if code == '-11' else ''})" if code else ""
    return (
        f"Ray's {agent} failed{died}, and the raylet fate-shares with its agents, so the node went down or never came "
        f"up: read {agent}.log and .err in that node's Ray log directory (session_latest/logs); the usual causes are "
        "a grpcio version outside Ray's requirement (pip freeze | grep grpcio: install the one Ray pins), a port the "
        "agent could not bind (start Ray on free ports: --dashboard-agent-listen-port / --runtime-env-agent-port), or "
        "the agent killed for host memory (raise --mem, rlaunch: cluster.mem_gb); a dashboard the job does not need "
        "can be left out (--include-dashboard=false)"
    ), {"agent": agent}


MARKED_DEAD = re.compile(
    r"The node with (?:node id:? \S+(?: and address: (?P<address>[^\s,]+))?|client ID \S+).*? has been marked dead "
    r"because the (?:detector|monitor) has missed too many heartbeats"
)


def marked_dead_fix(log_text: str) -> tuple[str, Details] | None:
    """The GCS stopped hearing a raylet: it died, or it was too busy to answer; the log alone does not say which."""
    dead = MARKED_DEAD.search(log_text)
    if not dead:
        return None
    address = dead.group("address")
    node = f"the node at {address}" if address else "a node"
    return (
        f"the GCS marked {node} dead after it missed too many heartbeats: either its raylet died (read that node's "
        "raylet.out in the run's ray_logs and its kernel log for the OOM killer; then raise the job's memory, --mem) "
        "or it was too busy to answer (lower the load on it, or raise Ray's tolerance: "
        "cluster.env.RAY_health_check_failure_threshold, or RAY_num_heartbeats_timeout before Ray 2)"
    ), ({"node_address": address} if address else {})


# Ray's message for a worker process that vanished (SIGKILL, a crash): it lists causes and decides none
WORKER_DIED = re.compile(r"Worker unexpectedly exits with a connection error code \d+")


def unknown_fix_from_log(failure: Failure, log_text: str) -> tuple[str, Details] | None:
    """An unknown cause whose log still narrows it down to a choice: say what decides it and the fix of each side."""
    where = f" on {failure.node}" if failure.node else ""
    written = struct_write_fix(log_text) or bare_cancel_fix(log_text)
    if written:
        return written
    if WRAPPED_OOM.search(log_text):
        return (
            f"an OutOfMemoryError came through Ray's wrapper{where} from a ray.get of another task, and the log stops "
            "before its message: if the worker's own log (the run's ray_logs) says CUDA out of memory, the GPU: halve "
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu; if it says the node was running low on memory, "
            "host RAM: raise the job's memory (--mem, rlaunch: cluster.mem_gb)"
        ), {"oom_of": "gpu or host"}
    crashed = (
        device_fault_fix(failure, log_text) or native_crash_fix(failure, log_text) or extension_build_fix(log_text)
    )
    if crashed:
        return crashed
    killed = sigkill_fix(log_text)
    if killed:
        return killed
    if WORKER_DIED.search(log_text):
        return (
            f"a Ray worker process{where} vanished (SIGKILL or a crash) and Ray cannot say which: look for the OOM "
            "killer in that node's kernel log (dmesg -T | grep -i 'killed process') and in its raylet.out; if it is "
            "there, raise the job's memory (--mem, rlaunch: cluster.mem_gb) or offload less, else read the worker's "
            "own log in the run's ray_logs for the crash"
        ), {}
    return None


# the dynamic loader refusing a compiled extension: it was built against another torch (C++ ABI, version) or CUDA
UNDEFINED_SYMBOL = re.compile(r"ImportError: (?P<library>\S+\.so[\d.]*): undefined symbol: (?P<symbol>\S+)")


def extension_build_fix(log_text: str) -> tuple[str, Details] | None:
    refused = UNDEFINED_SYMBOL.search(log_text)
    if not refused:
        return None
    library = refused.group("library").rsplit("/", 1)[-1]
    fix = (
        f"the compiled extension {library} does not match the job's torch or CUDA (undefined symbol "
        f"{refused.group('symbol')[:60]}): install the build of that package made for the job's torch (pip install "
        "--no-build-isolation --force-reinstall <package>, or the wheel for its torch and CUDA)"
    )
    if library.startswith("flash_attn"):
        fix += (
            ", or run without flash-attn: uninstall it, set +actor_rollout_ref.model.override_config."
            "attn_implementation=sdpa and cluster.flash_attn=false"
        )
    return fix, {"library": library}


# a CUDA kernel that faulted, as the runtime reports it to whoever synchronises next (NCCL's watchdog included): no
# memory size or timeout, so none of the kinds; a kernel's own assertion is the usual index out of range
DEVICE_FAULT = re.compile(
    r"CUDA error: (?P<fault>an illegal memory access was encountered|misaligned address|an illegal instruction was "
    r"encountered|unspecified launch failure)|\bcudaErrorIllegalAddress\b|\bCUDA_ERROR_ILLEGAL_ADDRESS\b"
)
DEVICE_ASSERT = re.compile(r"device-side assert(?:ion)? triggered|Assertion `(?P<condition>[^`]+)` failed")


def device_fault_fix(failure: Failure, log_text: str) -> tuple[str, Details] | None:
    """A kernel that faulted or asserted: what finds the kernel, and what usually causes each."""
    where = f" on {failure.node}" if failure.node else ""
    asserted = DEVICE_ASSERT.search(log_text)
    if asserted:
        condition = asserted.group("condition")
        return (
            f"a CUDA kernel's own assertion failed{where}"
            + (f" (`{condition}`)" if condition else "")
            + ": an index out of range, most often a token id past the model's embedding (the tokenizer and the model "
            "disagree on the vocabulary, or a pad or label id out of range); check the data's token ids against the "
            "model's vocab_size, and rerun with cluster.env.CUDA_LAUNCH_BLOCKING=1 to name the kernel; no memory or "
            "timeout setting can help"
        ), {"device_fault": "assertion"}
    fault = DEVICE_FAULT.search(log_text)
    if not fault:
        return None
    what = fault.group("fault") or "an illegal memory access"
    return (
        f"a CUDA kernel faulted{where} ({what}); NCCL's watchdog or the next call only reported it, so this is no "
        "collective timeout and no memory size or timeout setting can help: rerun with "
        "cluster.env.CUDA_LAUNCH_BLOCKING=1 to name the kernel; a build that does not match the others (flash-attn, "
        "vLLM or SGLang against torch) is the usual cause, and a fault on one node only is its hardware (its kernel "
        "log's Xid lines: dmesg -T | grep -i xid; keep the job off it with +cluster.sbatch_extra.exclude=<node>)"
    ), {"device_fault": what}


# where a native crash (signatures.SEGFAULT) happened, by the frames the log shows
GRAPH_CAPTURE_FRAME = re.compile(r"\bcapture_(?:begin|model)\b|cuda/graphs\.py|CUDAGraph")
NCCL_FRAME = re.compile(r"\bnccl\w*\(|\bpynccl\b|addProxyOp|libnccl")


def native_crash_fix(failure: Failure, log_text: str) -> tuple[str, Details] | None:
    """A segmentation fault in native code: the part its frames name, and the switch that avoids it."""
    if not SEGFAULT.search(log_text):
        return None
    where = f" on {failure.node}" if failure.node else ""
    if GRAPH_CAPTURE_FRAME.search(log_text):
        return (
            f"a segmentation fault{where} while the rollout engine captured CUDA graphs: run the engine eagerly "
            "(actor_rollout_ref.rollout.enforce_eager=True; slower decoding, no capture) and check that vLLM or SGLang "
            "matches the torch and driver it runs on; no memory setting can help"
        ), {"native_crash": "cuda graph capture"}
    if NCCL_FRAME.search(log_text):
        return (
            f"a segmentation fault{where} inside NCCL: mismatched NCCL builds across the nodes (the one torch bundles "
            "against a system or plugin one), or a network plugin crashing; rerun with cluster.env.NCCL_DEBUG=INFO to "
            "see which NCCL and transport each rank loads, and try cluster.env.NCCL_IB_DISABLE=1 or "
            "NCCL_P2P_DISABLE=1 to isolate the transport"
        ), {"native_crash": "nccl"}
    return (
        f"a process crashed in native code{where} (a segmentation fault): a library built for another torch, CUDA or "
        "driver than the one it runs with; the frames below the fault name it; no configuration value can help"
    ), {"native_crash": "segmentation fault"}


# a process killed by SIGKILL as the launchers report it: torch's elastic agent ("exitcode  : -9", "Signal 9 (SIGKILL)
# received by PID"), Python's subprocess and multiprocessing ("died with <Signals.SIGKILL: 9>", "exit status -9"), the
# shell's and srun's "Killed"
SIGKILLED = re.compile(
    r"exitcode\s*:\s*-9\b|Signal 9 \(SIGKILL\) received by PID|<Signals\.SIGKILL: 9>|non-zero exit status -9\b"
    r"|exit(?:ed|s)? with (?:exit |return )?code (?:= )?-9\b|\btasks? [\d,-]+: Killed\s*$|^\S*: line \d+: +\d+ Killed\b"
)
ELASTIC_HOST = re.compile(r"^\s*host\s*:\s*(?P<host>\S+)", re.MULTILINE)


def sigkill_fix(log_text: str) -> tuple[str, Details] | None:
    """A process killed by SIGKILL, with no line saying who sent it: the kernel's OOM killer, SLURM's memory limit or
    a cancel; each leaves its own record, which the fix names."""
    killed = next((found for line in log_text.splitlines() if (found := SIGKILLED.search(line))), None)
    if not killed:
        return None
    host = ELASTIC_HOST.search(log_text)
    where = f" on {host.group('host')}" if host else ""
    return (
        f"a process{where} was killed by SIGKILL (signal 9), which no program sends on its own error, and the log does "
        "not say who sent it: the kernel's OOM killer (dmesg -T | grep -i 'killed process' on that node) or SLURM's "
        "memory limit (sacct -j <job> --format=JobID,State,MaxRSS,ReqMem: MaxRSS at ReqMem, or State OUT_OF_MEMORY): "
        "raise the job's memory (--mem, rlaunch: cluster.mem_gb) or offload less; a State of CANCELLED or PREEMPTED "
        "there: a cancel, nothing to change in the run"
    ), {"signal": "SIGKILL"} | ({"node": host.group("host")} if host else {})


# slurmstepd's cancel line without a reason ("DUE TO ..."): scancel, a preemption under PreemptMode=CANCEL, or the batch
# script ending while the step ran, which only SLURM's record of the job tells apart
BARE_CANCEL = re.compile(r"\*\*\* (?:JOB|STEP) (?P<job>\d+)(?:\.\w+)? ON \S+ CANCELLED AT \S+ \*\*\*")


def bare_cancel_fix(log_text: str) -> tuple[str, Details] | None:
    """A step SLURM cancelled without saying why: the job's state in sacct says which cause it was."""
    cancelled = BARE_CANCEL.search(log_text)
    if not cancelled:
        return None
    job = cancelled.group("job")
    return (
        f"SLURM cancelled job {job} without a reason in the log (scancel, a preemption, or the batch script ending "
        f"while the step ran): `sacct -j {job} --format=JobID,State,Reason,Elapsed,Timelimit` tells which; PREEMPTED: "
        "nothing to change (the run resumes from its last checkpoint: lower trainer.save_freq if attempts lose much "
        "work), TIMEOUT: raise mode.time_budget_min, CANCELLED by a user: resubmit"
    ), {"slurm_job": job}


def who_cancelled(state: str) -> str:
    """sacct's 'CANCELLED by 1000' as the user it names: 'user alice (uid 1000)' where this machine knows the uid."""
    uid = state.removeprefix("CANCELLED").strip().removeprefix("by").strip()
    if not uid.isdigit():
        return "a user"
    try:
        return f"user {pwd.getpwuid(int(uid)).pw_name} (uid {uid})"
    except KeyError:
        return f"the user with uid {uid}"


def cancelled_fix(scheduler: str, state: str, when: str, sweep_id: str | None, saved: int | None = None) -> str:
    """A job ended through its scheduler (scancel; Ray's stop_job: sweep.py cancel, `ray job stop`): nothing in the run
    to fix, and how to carry on where that was not meant. `when`: '' for a job it stopped as it ran, else when it came
    (' before it started')."""
    if scheduler == "SLURM":
        how = f"SLURM says {state}: cancelled by {who_cancelled(state)}"
    else:
        how = "stopped through Ray's job API (sweep.py cancel, ray job stop, the dashboard)"
    return (
        f"{how}{when}: nothing to fix in the run; if that was not meant, submit its overrides again with "
        f"launch.sweep_id={sweep_id or '<its sweep id>'}: the same run directory, {resumes_from(saved)}"
    )


def resumes_from(saved: int | None) -> str:
    """Where a resubmitted run starts: `saved` is the step of the run's last checkpoint (0: none; None: not known)."""
    if saved is None:
        return "where verl resumes from its last checkpoint"
    if saved == 0:
        return "where the run starts over from step 0 (no checkpoint was written)"
    return f"where verl resumes from its checkpoint of step {saved}"


def saved_step(run_dir: Path) -> int | None:
    """The step of the run's last checkpoint: verl's latest_checkpointed_iteration.txt, or the latest an attempt
    started from (attempts.jsonl); 0 for none, None where the run directory has no plan to say where verl saves."""
    from launch.rundir import attempts, load_plan

    try:
        plan = load_plan(run_dir)
        started = [int(record.get("checkpointed_step") or 0) for record in attempts(run_dir)]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return max([checkpoint_written(plan), *started])


# the frame above OmegaConf's setter: the code that wrote the key
SETTER_CALLER = re.compile(r'File "(?P<path>[^"]+)", line \d+, in (?P<function>\w+)')


def struct_write_fix(log_text: str) -> tuple[str, Details] | None:
    """Code (not an override) set a key a struct-mode OmegaConf config lacks: a bug of that code's version."""
    lines = log_text.splitlines()
    if not code_wrote_struct_key(lines):
        return None
    full = FULL_KEY.search(log_text) or NOT_IN_STRUCT.search(log_text)
    key = full.group("key") if full else "?"
    callers = [
        frames[index - 1]
        for frames, _ in tracebacks(lines)
        for index, frame in enumerate(frames)
        if index and OMEGACONF_SETTER.search(frame) and not CONFIG_LIBRARY_FRAME.search(frames[index - 1])
    ]
    caller = SETTER_CALLER.search(callers[0]) if callers else None
    where = f" in {'/'.join(caller.group('path').split('/')[-2:])} ({caller.group('function')})" if caller else ""
    return (
        f"code{where} wrote the key {key} into a struct-mode config that does not declare it: a bug of that code's "
        "version, not of the overrides; upgrade it (a later version declares the key) or turn "
        f"off the feature that writes it; adding +{key}=null to the command line declares the key and may let the "
        "write through"
    ), {"config_key": key}


# SLURM's cgroup OOM handler: "Detected N oom-kill event(s) in StepId=<job>.<step>" (older: "in step <job>.<step>")
SLURM_CGROUP_OOM = re.compile(
    r"Detected (?P<events>\d+) oom[-_]kill event\(s\) in (?:StepId=|step )(?P<job>\d+)\.(?P<step>\w+)"
)


def slurm_cgroup_fix(log_text: str, fork: str | None) -> tuple[str, Details] | None:
    """SLURM killed a process at the job's own memory limit (its cgroup), which is --mem, not the node's RAM: the
    job's peak in sacct says how far to raise it."""
    killed = SLURM_CGROUP_OOM.search(log_text)
    if not killed:
        return None
    job, step = killed.group("job"), killed.group("step")
    keys = FORKS[fork][1]["offload"] if fork else "actor_rollout_ref.actor.fsdp_config.{param,optimizer}_offload=false"
    return (
        f"SLURM's cgroup killed a process of job {job} (step {step}) at the job's own memory limit, not the node's "
        f"RAM: raise --mem (rlaunch: cluster.mem_gb) above the peak `sacct -j {job} --format=MaxRSS,ReqMem` shows, "
        f"or offload less ({keys})"
    ), {"slurm_job": job, "slurm_step": step, "oom_kill_events": int(killed.group("events"))}


# a SLURM job id as the tools that report its state name it: Snakemake's "SLURM-job '123'", submitit's "Job 123 (task:",
# scontrol's "JobId=123", the first column of a sacct row
SLURM_JOB_ID = re.compile(r"SLURM-job '(\d+)'|\bJob (\d+) \(task:|\bJobId=(\d+)|^\s*(\d+)(?:_\d+)?(?:\.\w+)?\s", re.M)
SLURM_OOM_STATE = re.compile(r"\bOUT_OF_ME(?:MORY|\+)")


def slurm_oom_state_fix(log_text: str, fork: str | None) -> tuple[str, Details] | None:
    """SLURM ended the job in state OUT_OF_MEMORY: its cgroup limit (--mem), whose peak sacct shows."""
    if not SLURM_OOM_STATE.search(log_text):
        return None
    job_id = SLURM_JOB_ID.search(log_text)
    job = next((group for group in job_id.groups() if group), None) if job_id else None
    keys = FORKS[fork][1]["offload"] if fork else "actor_rollout_ref.actor.fsdp_config.{param,optimizer}_offload=false"
    sacct = f"`sacct -j {job} --format=MaxRSS,ReqMem`" if job else "`sacct -j <job> --format=MaxRSS,ReqMem`"
    return (
        f"SLURM ended the job{f' {job}' if job else ''} in state OUT_OF_MEMORY: a process passed the job's own memory "
        f"limit (--mem), not the node's RAM: raise --mem (rlaunch: cluster.mem_gb) above the peak {sacct} shows, or "
        f"offload less ({keys})"
    ), ({"slurm_job": job} if job else {})


# the size of a host allocation the process was refused: torch's CPU allocator (bytes), numpy's (with its unit)
REFUSED_ALLOCATION = re.compile(
    r"DefaultCPUAllocator: [^:]*: you tried to allocate (?P<bytes>\d+) bytes"
    r"|Unable to allocate (?P<size>[\d.]+) (?P<unit>[KMGTP])i?B for an array"
)
UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}


def refused_allocation_fix(log_text: str) -> tuple[str, Details] | None:
    """One allocation the process asked the host for and was refused: its size, and what can make room."""
    refused = REFUSED_ALLOCATION.search(log_text)
    if not refused:
        return None
    size = (
        int(refused.group("bytes"))
        if refused.group("bytes")
        else float(refused.group("size")) * UNITS[refused.group("unit")]
    )
    gib = size / 2**30
    return (
        f"the process was refused {gib:.1f} GiB of host memory in one allocation (the node's or the job's limit was "
        f"reached): raise the job's memory above what it held plus {gib:.1f} GiB (--mem, rlaunch: cluster.mem_gb), or "
        "keep that tensor off the host (offload less: actor_rollout_ref.actor.fsdp_config.{param,optimizer}_offload="
        "false; load checkpoints shard by shard); a per-process limit (ulimit -v) refuses it too: check it is unset"
    ), {"refused_gib": round(gib, 2)}


def shared_memory_fix(log_text: str) -> tuple[str, Details] | None:
    """/dev/shm ran out under the DataLoader's workers or Ray's object store: its own size, not the job's --mem."""
    if DATALOADER_SHM.search(log_text):
        return (
            "the DataLoader's worker processes ran out of shared memory (/dev/shm, host RAM with a size of its own: a "
            "container's default is 64 MB): lower data.dataloader_num_workers (verl's default is 8; 0 loads in the "
            "trainer's process), or give the job a larger /dev/shm (docker/apptainer --shm-size, the site's tmpfs)"
        ), {"shared_memory": "dataloader"}
    if OBJECT_STORE_FULL.search(log_text):
        return (
            "Ray's object store (in /dev/shm, 30 % of the node's RAM by default) was full and could not spill the "
            "object: raise the job's memory (--mem, rlaunch: cluster.mem_gb) so Ray sizes a larger store, give "
            "/dev/shm more room, or keep spilling on (a writable, non-full RAY_TMPDIR); a batch that large is a "
            "rollout of data.train_batch_size x actor_rollout_ref.rollout.n sequences: fewer make it smaller"
        ), {"shared_memory": "object_store"}
    return None


def host_oom_fix_from_log(log_text: str, fork: str | None) -> tuple[str, Details] | None:
    """Ray's memory monitor, the kernel's OOM killer or SLURM's cgroup on who held the memory, else a fork's own
    options; Ray's list of the node's top memory users says which processes held it, whichever of those spoke."""
    found = (
        host_fix_from_log(log_text, fork)
        or shared_memory_fix(log_text)
        or refused_allocation_fix(log_text)
        or oom_killer_fix(log_text, fork)
        or slurm_cgroup_fix(log_text, fork)
        or slurm_oom_state_fix(log_text, fork)
    )
    holders = top_memory_holders(log_text)
    held = f"Ray's top memory users: {holders[0]}" if holders else ""
    if found is None and fork:
        who = f" ({held})" if held else ""
        fix = (
            f"the node ran out of host RAM{who}: raise the job's memory (--mem) or offload less in {fork}'s own "
            f"options ({FORKS[fork][1]['offload']})"
        )
        found = fix, {"fork": fork}
    elif held:
        found = f"{found[0] if found else GENERIC_FIXES['host_oom']}; {held}", found[1] if found else {}
    if found is None or holders is None:
        return found
    return found[0], found[1] | holders[1]


# pandas' list of columns it did not find, Arrow's column whose type changed between rows
PANDAS_MISSING_COLUMNS = re.compile(r"None of \[Index\(\[(?P<columns>.*?)\]", re.S)
ARROW_MIXED_TYPES = re.compile(
    r"Column\((?P<column>[^)]*)\) changed from (?P<was>\w+) to (?P<now>\w+) in row (?P<row>\d+)"
)
VERL_COLUMN_MISSING = re.compile(r"KeyError: '(?P<column>prompt|data_source|reward_model|ground_truth|extra_info)'")


# Arrow's reader on an empty file (signatures.PARQUET_NO_MAGIC: on one that is no parquet)
PARQUET_EMPTY = re.compile(r"Parquet file size is 0 bytes")


QUOTED_PARQUET = re.compile(r"'(?P<path>[^'\s]+\.parquet)'")


def data_error_fix(log_text: str) -> tuple[str, Details] | None:
    """Which column of the data the reader could not use (missing, or of two types), or a file that is no parquet."""
    unread = VERL_FORMAT_REFUSED.search(log_text)
    if unread:
        path = unread.group("path")
        return (
            f"verl reads only .parquet, .json and .jsonl files, each named, and was given {path}: point "
            "data.train_files / data.val_files at the files themselves (a list: [a.parquet,b.parquet]; a directory is "
            "not expanded), or convert the data to parquet"
        ), {"data_path": path}
    if PARQUET_EMPTY.search(log_text) or PARQUET_NO_MAGIC.search(log_text):
        empty = PARQUET_EMPTY.search(log_text) is not None
        what = "empty (0 bytes)" if empty else "not parquet (no magic bytes in its footer)"
        details: Details = {"parquet": "empty" if empty else "no magic bytes"}
        # the file the reader named on the failing line (pyarrow's "Failed to read schema from '<path>'"), else where
        # to look for it
        named = next(
            (
                found.group("path")
                for line in log_text.splitlines()
                if (PARQUET_EMPTY.search(line) or PARQUET_NO_MAGIC.search(line))
                and (found := QUOTED_PARQUET.search(line))
            ),
            None,
        )
        if named:
            details["data_path"] = named
        which = f"the data file {named} is" if named else "a data file is"
        find = "" if named else "find it (`find <data dir> -name '*.parquet' -size -2k`), "
        return (
            f"{which} {what}: a Git LFS pointer never pulled (`git lfs pull` in the dataset's repository), a "
            f"download cut short, or another format named .parquet; {find}fetch or rewrite it, and point "
            "data.train_files / data.val_files only at whole parquet files"
        ), details
    missing = PANDAS_MISSING_COLUMNS.search(log_text)
    if missing:
        columns = re.findall(r"'([^']+)'", missing.group("columns"))
        quoted = ", ".join(f"'{column}'" for column in columns)
        return (
            f"the data file has no column {quoted}, which the code reads: rewrite the file with it, or point the key "
            "that names it at a column the file has (data.prompt_key for verl's prompt; verl's own preprocessing "
            "keeps the raw fields inside extra_info)"
        ), {"missing_columns": ", ".join(columns)}
    mixed = ARROW_MIXED_TYPES.search(log_text)
    if mixed:
        column, was, now = mixed.group("column"), mixed.group("was"), mixed.group("now")
        return (
            f"the column {column} holds {was}s in some rows and {now}s in others (from row {mixed.group('row')}), and "
            "Arrow gives a column one type: write that field as one type in every row where the file is made (e.g. "
            "all strings); no setting of the loader or of verl reads mixed types"
        ), {"column": column}
    verl = VERL_COLUMN_MISSING.search(log_text)
    if verl:
        column = verl.group("column")
        # the one column verl 0.9.1 reads through a key of its own; its reward managers read data_source by name
        named_by = {"prompt": "data.prompt_key"}.get(column)
        instead = f", or point {named_by} at the column that holds it" if named_by else ""
        return (
            f"a row of the data has no '{column}', a field verl reads: rewrite the parquet with verl's columns "
            f"(prompt, data_source, reward_model.ground_truth; its examples/data_preprocess scripts){instead}"
        ), {"missing_columns": column}
    return (
        dataset_generation_fix(log_text)
        or record_field_fix(log_text)
        or unfinished_save_fix(log_text)
        or empty_dataloader_fix(log_text)
    )


EMPTY_DATALOADER = re.compile(r"(?P<which>Train|Validation) dataloader is empty")


def empty_dataloader_fix(log_text: str) -> tuple[str, Details] | None:
    """verl's trainer found no batch in the data: too few rows, or rows its prompt-length filter dropped."""
    empty = EMPTY_DATALOADER.search(log_text)
    if not empty:
        return None
    if empty.group("which") == "Train":
        return (
            "the training data gives no full batch: verl's train loader drops a last partial batch, so a file with "
            "fewer rows than data.train_batch_size (after data.filter_overlong_prompts drops the prompts longer than "
            "data.max_prompt_length) leaves it empty; check data.train_files has rows (did its preprocessing run?), "
            "then lower data.train_batch_size or raise data.max_prompt_length"
        ), {"dataloader": "train"}
    return (
        "the validation data gives no batch: data.val_files has no rows left after data.filter_overlong_prompts "
        "(prompts longer than data.max_prompt_length are dropped); check the file, or raise data.max_prompt_length"
    ), {"dataloader": "validation"}


RECORD_KEY = re.compile(r"KeyError(?:KeyError)?\s*:\s*:?\s*(?P<key>'[^']+'|\"[^\"]+\")")


def record_field_fix(log_text: str) -> tuple[str, Details] | None:
    """A KeyError raised reading a field of a data record: the column the rows lack, and where it is read."""
    hits = raised_by(log_text.splitlines(), KEY_ERROR, RECORD_FIELD)
    if not hits:
        return None
    key = RECORD_KEY.search(hits[1])
    read = RECORD_FIELD.search(hits[0])
    column = key.group("key").strip("'\"") if key else (read.group(0) if read else "?")
    return (
        f"rows of the data have no '{column}', which the code reads ({read.group(0) if read else 'a record field'}): "
        "a split prepared differently from the others (an eval set not tokenized or mapped like the train set), or a "
        f"column named otherwise; give every split the column '{column}' (run the same preprocessing on each), or "
        "point the code's key at the column the data has"
    ), {"missing_columns": column}


SAVED_DATASET_FILE = re.compile(r"(?P<dir>/[^\s'\"]*?)/(?:state|dataset_info|dataset_dict)\.json")
SAVED_DATASET_READ = re.compile(r"DATASET_(?:STATE_JSON|INFO|DICT_JSON)_FILENAME")


def unfinished_save_fix(log_text: str) -> tuple[str, Details] | None:
    """A dataset directory written by save_to_disk without its state or info file: the save never finished."""
    named = SAVED_DATASET_INCOMPLETE.search(log_text)
    if named:
        return (
            f"{named.group('dir')} exists but holds no saved dataset (no state.json / dataset_info.json, or no "
            "dataset_dict.json for splits): a save_to_disk that did not finish (a job killed while saving, a disk that "
            "filled), or a path one level off (a split's parent or child); point at the directory save_to_disk wrote, "
            "or delete it and save the dataset again"
        ), {"data_path": named.group("dir")}
    found = SAVED_DATASET_FILE.search(log_text)
    if not (found or SAVED_DATASET_READ.search(log_text)) or not re.search(r"FileNotFoundError|No such file", log_text):
        return None
    where = found.group("dir") if found else "the saved dataset's directory"
    return (
        f"the saved dataset in {where} has no state/info file: its save_to_disk did not finish (a job killed while "
        "saving, or a disk that filled); delete that directory and save the dataset again (or load it from its "
        "source files), then rerun"
    ), {"data_path": where}


# the datasets loader (packaged_modules/<format>/) whose reader raised while datasets generated a split
GENERATING_READER = re.compile(r"datasets/packaged_modules/(?P<reader>\w+)/\w+\.py\", line \d+, in _generate_")


def dataset_generation_fix(log_text: str) -> tuple[str, Details] | None:
    """datasets could not read a data file while generating a split: which reader, and how to get a whole file."""
    if not any(DATASET_GENERATION_FRAME.search(line) for line in log_text.splitlines()):
        return None
    named = GENERATING_READER.search(log_text)
    reader = named.group("reader") if named else None
    which = f"its {reader} reader" if reader else "its reader"
    return (
        f"datasets could not read a data file while generating the split ({which} raised; the exception under it names "
        "the file): a file cut short or corrupt, most often a download that stopped; fetch it again "
        "(load_dataset(..., download_mode='force_redownload'), or delete the dataset's folder under HF_DATASETS_CACHE) "
        "or rewrite a local file whole, then point data.train_files / data.val_files at files that read"
    ), ({"reader": reader} if reader else {})


# where a loader says which data file it did not find
MISSING_PATH = re.compile(
    r"Unable to find '(?P<a>[^'\s]+)'?|No such file or directory: '(?P<b>[^']+)'|FileNotFoundError: .*?'(?P<c>[^']+)'"
    r"|\bFile ['\"]?(?P<d>[^'\"\s]+)['\"]? (?:not found|does not exist)"
    r"|Couldn't find (?:any data file|a dataset script) at (?P<e>\S+?)\.?(?:\s|$)"
    r"|FileNotFoundError: (?P<f>[^\s'\"\[][^\s'\"]*)\s*$"  # Ray Data's path expansion names the path unquoted
)
# datasets given a directory, or a pattern, under which it found no file it reads
NO_DATA_FILES = re.compile(
    r"The directory at (?P<a>\S+) doesn't contain any data files|No \(supported\) data files (?:or dataset script )?"
    r"found in (?P<b>\S+)"
)
# a Ray task (Ray Data's read or sampling task) that raised FileNotFoundError: it ran on some node of the cluster, while
# the driver expanded the path on its own
RAY_TASK_MISSING = re.compile(r"RayTaskError\(FileNotFoundError\)|Task failed with retryable exception")
RAY_DATA_FRAME = re.compile(r"ray/data/")


# datasets (before 2.x) looked a dataset's loading script up by URL: none there is a name it does not know
DATASETS_SCRIPT_URL = re.compile(r"Couldn't find file at (?P<url>https?://\S+/(?P<name>[\w.-]+)\.py)\b")
HUB_DATASET_MISSING = re.compile(
    r"Dataset '(?P<name>[^']+)' doesn't exist on the Hub"
    r"|Repository Not Found for url: https?://[^/\s]+/(?:api/)?datasets/(?P<repo>[\w.-]+/[\w.-]+)"
)


def data_missing_fix(failure: Failure, log_text: str) -> tuple[str, Details] | None:
    """The data file the log names (the evidence first; never a traceback's source line, whose f-string only names a
    variable), and where a relative path is looked for."""
    script = DATASETS_SCRIPT_URL.search(log_text) or HUB_DATASET_MISSING.search(log_text)
    if script:
        name = script.group("name") or script.group("repo")
        return (
            f"datasets knows no dataset '{name}' (no loading script or Hub repository by that name): check its name "
            f"and configuration on the Hub (a dataset of several parts is often a configuration of another one, e.g. "
            f"load_dataset('<family>', '<config>')), log in if it is gated, or write it to local files and point "
            "data.train_files / data.val_files at them"
        ), {"dataset": name}
    lines = [*failure.evidence, *(line for line in log_text.splitlines() if not is_source(line))]
    empty = next((found for line in lines if (found := NO_DATA_FILES.search(line))), None)
    if empty:
        where = (empty.group("a") or empty.group("b")).rstrip(".")
        return (
            f"datasets found no data file it can read in {where}: the files are not there yet on the node that ran "
            "it (write them first, or put them on the shared filesystem), or their extension is none datasets reads "
            "(.parquet, .json/.jsonl, .csv, .arrow); point data.train_files / data.val_files at the files themselves"
        ), {"data_path": where}
    missing = next((found for line in lines if (found := MISSING_PATH.search(line))), None)
    path = next(group for group in missing.groups() if group) if missing else None
    if RAY_TASK_MISSING.search(log_text) and RAY_DATA_FRAME.search(log_text):
        return (
            f"Ray Data's read task could not open {path or 'the data file'} on the node it ran on: its tasks run on "
            "any node of the cluster, not only on the driver's, so a local path (a relative one most of all) must "
            "exist on every node; put the file on the shared filesystem and read it by its absolute path "
            "(data.train_files / data.val_files), or read it on the driver and pass the rows (ray.data.from_pandas)"
        ), ({"data_path": path} if path else {}) | {"read_by": "ray task"}
    if path is None:
        return None
    relative = (
        ""
        if path.startswith(("/", "~", "hdfs://", "s3://", "gs://"))
        else (
            f"; {path} is a relative path, looked for from each node's working directory: give an absolute path on "
            "the shared filesystem"
        )
    )
    return (
        f"the data file {path} does not exist where the job looked: create it first (run the preprocessing that "
        f"writes it) or point data.train_files / data.val_files at the file that exists{relative}"
    ), {"data_path": path}


# huggingface_hub's offline mode (HF_HUB_OFFLINE=1, local_files_only) and the model a loader names
HUB_OFFLINE = re.compile(r"outgoing traffic has been disabled|OfflineModeIsEnabled|HF_HUB_OFFLINE")
MODEL_NAMED = re.compile(
    r"it looks like (?P<a>[\w.-]+(?:/[\w.-]+)?) is not the path|Incorrect path_or_model_id: '(?P<b>[^']+)'"
    r"|repo_id=['\"]?(?P<c>[\w.-]+/[\w.-]+)"
    r"|Can't load (?:tokenizer|feature extractor|image processor|processor) for '(?P<d>[^']+)'"
    r"|Can't load the configuration of '(?P<e>[^']+)'"
    r"|(?:huggingface\.co|with url:) ?/(?!datasets/|api/)(?P<f>[\w.-]+/[\w.-]+)/resolve/"  # a file's URL on the Hub
)


# transformers handing a path that is no directory on this node to the Hub, which refuses it as a repo id
LOCAL_PATH_AS_REPO = re.compile(
    r"Repo id must be in the form 'repo_name' or 'namespace/repo_name': '(?P<path>(?:/|~|\./|\.\./)[^']*)'"
)


# the Hub answering that it has no repository by that id for this caller (transformers' rewording, huggingface_hub's
# own), or one gated behind an access request; the id as each names it
HUB_REPO_REFUSED = re.compile(
    r"(?P<missing>\S+) is not a local folder and is not a valid model identifier"
    r"|Repository Not Found for url: https?://[^/\s]+/(?:api/models/)?(?P<url_missing>[\w.-]+/[\w.-]+)"
    r"|have access to it at https?://[^/\s]+/(?P<gated>[\w.-]+/[\w.-]+?)\.?(?:\s|$)"
    r"|Cannot access gated repo for url https?://[^/\s]+/(?P<url_gated>[\w.-]+/[\w.-]+)/"
)


def local_model_path_fix(path: str, state: str, hint: str = "") -> tuple[str, Details]:
    """A model path that is no model on the node that loaded it, which transformers then asked the Hub for."""
    return (
        f"the model path {path} {state} on the node that loaded it, so transformers asked the Hub for it as a repo "
        "id: fix the path (actor_rollout_ref.model.path, and critic.model.path for a critic), or copy the model to the "
        f"shared filesystem every node reads{hint}"
    ), {"model_path": path}


# a model that is there but lacks a file it needs: transformers' weights in a local directory and a file in a
# repository or snapshot (modeling_utils.py, utils/hub.py), vLLM's path check (transformers_utils/config.py), and the
# Hub's answer for a revision it does not have (huggingface_hub/utils/_http.py)
NO_WEIGHTS_IN = re.compile(r"Error no file named (?P<files>.+?) found in directory (?P<dir>\S+?)\.?$", re.M)
LACKS_FILE = re.compile(r"(?P<model>\S+) does not appear to have a file named (?P<file>[\w.-]+?)\.?(?:\s|$)")
VLLM_PATH_REFUSED = re.compile(r"Invalid repository ID or local directory specified: '(?P<path>[^']+)'")
REVISION_MISSING = re.compile(
    r"Revision Not Found for url: https?://[^/\s]+/api/models/(?P<model>[^/\s]+/[^/\s]+)/revision/(?P<rev>[^\s]+?)\.?"
    r"(?:\s|$)"
)
IS_PATH = ("/", "~", "./", "../")


def model_directory_fix(directory: str, lacking: str) -> tuple[str, Details]:
    """A local model path whose directory lacks what the loader reads: a path to fix or a copy to finish."""
    return (
        f"the model directory {directory} has no {lacking} on the node that loaded it: a download or copy cut short, "
        "or a path one level off; point actor_rollout_ref.model.path at the directory that holds config.json and the "
        "*.safetensors shards, on the filesystem every node reads, or fetch it again (`hf download <model> "
        f"--local-dir {directory}`)"
    ), {"model_path": directory}


def model_files_fix(log_text: str) -> tuple[str, Details] | None:
    """A model directory, repository or revision without what the loader needs: the path or id to fix, as the log
    names it; a download into the cache does not help a directory the path names."""
    weights = NO_WEIGHTS_IN.search(log_text)
    if weights:
        return model_directory_fix(weights.group("dir"), f"weights ({weights.group('files').rstrip(',')})")
    lacking = LACKS_FILE.search(log_text)
    refused = VLLM_PATH_REFUSED.search(log_text)
    if lacking and lacking.group("model").strip("'\"").startswith(IS_PATH):
        return model_directory_fix(lacking.group("model").strip("'\""), lacking.group("file"))
    if lacking:
        model, file = lacking.group("model").strip("'\""), lacking.group("file")
        return (
            f"{model} has no {file} on the Hub or in the cache the job reads: a repository of another kind (an "
            "adapter, a GGUF or a dataset) or a misspelt id; point actor_rollout_ref.model.path at the full model's "
            "repository, downloaded with `hf download <that id>` into the HF_HOME the nodes read"
        ), {"model": model, "missing_file": file}
    if refused and refused.group("path").startswith(IS_PATH):
        return model_directory_fix(refused.group("path"), "config.json vLLM recognises")
    revision = REVISION_MISSING.search(log_text)
    if revision:
        model, rev = revision.group("model"), revision.group("rev")
        return (
            f"the Hub has {model} but no revision {rev} (a branch, tag or commit): fix the revision the job asks for, "
            f"or drop it to use main; then `hf download {model} --revision <rev>` into the HF_HOME the nodes read"
        ), {"model": model, "revision": rev}
    return None


def hub_refused_fix(log_text: str) -> tuple[str, Details] | None:
    """The Hub has no repository by that id that this job may read: a typo or a local path that does not exist, a
    private repository without a token, or a gated one without access. No download helps until that is fixed."""
    found = HUB_REPO_REFUSED.search(log_text)
    if not found:
        return None
    model = found.group("missing") or found.group("url_missing") or found.group("gated") or found.group("url_gated")
    model = model.strip("'\"")
    if model.startswith(("/", "~", "./", "../")):
        return local_model_path_fix(model, "does not exist")
    if found.group("gated") or found.group("url_gated"):
        return (
            f"{model} is a gated repository and this job's token has no access: request access on "
            f"https://huggingface.co/{model}, then download it once with a token that has it (HF_TOKEN=... `hf "
            "download " + model + "`) into the HF cache the nodes read (HF_HOME), so the job needs no token"
        ), {"model": model, "hub": "gated"}
    return (
        f"the Hub has no model {model} that this job may read: check the id's spelling "
        "(actor_rollout_ref.model.path, organisation/name); for a private repository download it with a token that "
        f"reads it (HF_TOKEN=... `hf download {model}`) into the HF cache the nodes read (HF_HOME); a "
        "longer timeout or HF_HUB_OFFLINE cannot help"
    ), {"model": model, "hub": "not found"}


SUBMITIT_NO_REQUEUE = re.compile(r"Job not requeued because: timed-out (?P<why>and not checkpointable|too many times)")


# rlaunch's own refusal to requeue (launch/job.py VerlJob.checkpoint, called on submitit's time-out or preemption
# signal): submitit then says "timed-out too many times" whatever the reason, so rlaunch's line is the one that tells
RLAUNCH_NOT_REQUEUED = re.compile(r"rlaunch: not requeued: (?P<reason>.+?)\s*$", re.M)
REQUEUES_USED = re.compile(r"requeued (?P<times>\d+) times: cluster\.max_requeues=(?P<limit>\d+) reached")


def rlaunch_requeue_fix(log_text: str) -> tuple[str, Details] | None:
    """rlaunch's job declined the requeue a time-out asked for: its reason, and the key that decides it."""
    refused = RLAUNCH_NOT_REQUEUED.search(log_text)
    if not refused:
        return None
    reason = refused.group("reason")
    used = REQUEUES_USED.search(reason)
    if used is None:  # a hang requeued once already, or attempts that never reached a checkpoint: the reason says
        return f"the job reached its time limit and rlaunch did not requeue it: {reason}", {"requeue": reason}
    limit = int(used.group("limit"))
    return (
        f"the job reached its time limit after {int(used.group('times')) + 1} attempt(s) and rlaunch did not requeue "
        f"it: cluster.max_requeues={limit} reached; raise cluster.max_requeues so a timed-out attempt is requeued and "
        "resumes from verl's last save (a trainer.save_freq that saves within an attempt), or raise the time limit "
        "(mode.time_budget_min)"
    ), {"requeue": "cluster.max_requeues reached", "max_requeues": limit}


def submitit_requeue_fix(log_text: str) -> tuple[str, Details] | None:
    """submitit ended a timed-out job instead of requeuing it: the function it ran has no checkpoint, or the job used
    up its requeues. Which of submitit's settings decides each."""
    refused = SUBMITIT_NO_REQUEUE.search(log_text)
    if not refused:
        return None
    if refused.group("why") == "and not checkpointable":
        return (
            "the job reached its time limit and submitit did not requeue it: it requeues a timed-out job only when "
            "the function it runs is a submitit.helpers.Checkpointable (a checkpoint() method); give it one, or "
            "raise the time limit (timeout_min; rlaunch: mode.time_budget_min); rlaunch's own jobs are Checkpointable "
            "and resume from verl's last save (trainer.save_freq)"
        ), {"requeue": "not checkpointable"}
    return (
        "the job reached its time limit once more than submitit allows (max_num_timeout, 3 by default): each "
        "attempt ended before the run did, so raise the time limit (timeout_min; rlaunch: mode.time_budget_min) or "
        "save more often (trainer.save_freq lower) so each attempt moves the run on; raise max_num_timeout only if "
        "each attempt does"
    ), {"requeue": "timed out too many times"}


def model_fix_from_log(log_text: str) -> tuple[str, Details] | None:
    """The model to download where the log names it; with the Hub switched off, that switching it on helps only
    where the nodes reach huggingface.co. A local path that is no directory is a path to fix, not a download."""
    refused = hub_refused_fix(log_text) or model_files_fix(log_text)
    if refused:
        return refused
    if NO_ROUTE.search(log_text) and not MODEL_NAMED.search(log_text):
        return (
            "a process had no route to the network ([Errno 101] Network is unreachable) and its request is past the "
            "log's cut: on a compute node that is a fetch from the Hub (a model, tokenizer or config the nodes' cache "
            "lacks; a save that re-reads the base model's config.json): download it with `hf download <model>` where "
            "the Hub is reachable, into the HF_HOME the nodes read, and run with HF_HUB_OFFLINE=1; no retry helps"
        ), {"network": "unreachable"}
    local = LOCAL_PATH_AS_REPO.search(log_text)
    if local:
        path = local.group("path")
        home = "; a path starting with ~ is not expanded there: give it absolute" if path.startswith("~") else ""
        return local_model_path_fix(path, "is no directory with a config.json", home)
    named = MODEL_NAMED.search(log_text)
    model = next((group for group in named.groups() if group), None) if named else None
    offline = HUB_OFFLINE.search(log_text) is not None
    if model is None and not offline:
        return None
    found: Details = {"model": model} if model else {}
    download = f"`hf download {model}`" if model else "`hf download <model>`"
    fix = (
        f"the model{f' {model}' if model else ''} is not in the HF cache the job reads"
        + (" and the Hub is switched off (HF_HUB_OFFLINE=1 or local_files_only)" if offline else "")
        + f": download it into that cache (HF_HOME) with {download} on a machine with internet, or point "
        "actor_rollout_ref.model.path at a local copy"
    )
    if offline:
        found["hub_offline"] = "yes"
        fix += "; HF_HUB_OFFLINE=0 helps only where the nodes reach huggingface.co (compute nodes often do not)"
    return fix, found


# the raylet's warning for a task or actor it cannot place: what it asks, what the node has left, what waits
RAY_DEMAND = re.compile(r"(?:Required resources for this actor or task: |It requires )\{[^}]*?\bGPU: (?P<gpus>[\d.]+)")
RAY_NODE_GPUS = re.compile(r"Available resources on this node: \{[^}]*?(?P<free>[\d.]+)/(?P<total>[\d.]+) GPU\b")
RAY_PENDING = re.compile(r"In total there are (?P<tasks>\d+) pending tasks and (?P<actors>\d+) pending actors")


def ray_demand_fix(log_text: str) -> tuple[str, Details] | None:
    """A GPU request the node cannot place now because others hold its GPUs: fewer GPU actors, or more GPUs."""
    demand = RAY_DEMAND.search(log_text)
    if not demand:
        return None
    gpus = float(demand.group("gpus"))
    found: Details = {"gpus_requested": gpus}
    node = RAY_NODE_GPUS.search(log_text)
    has = ""
    if node:
        free, total = float(node.group("free")), float(node.group("total"))
        found |= {"gpus_free": free, "gpus_total": total}
        has = f" and the node has {free:g} of {total:g} free"
    pending = RAY_PENDING.search(log_text)
    if pending and int(pending.group("actors")):
        found["pending_actors"] = int(pending.group("actors"))
        has += f" ({pending.group('actors')} actors waiting)"
    return (
        f"a Ray actor asks for {gpus:g} GPU(s){has}: other actors hold the GPUs Ray sees (this run's own, or on a "
        "standing cluster a previous job's still alive: `ray list actors --filter state=ALIVE`); Ray counts whole "
        "GPUs, so a lower gpu_memory_utilization cannot help: create fewer GPU actors (lower trainer.n_gpus_per_node "
        "x trainer.nnodes or actor_rollout_ref.rollout.tensor_model_parallel_size) or give the cluster more GPUs"
    ), found


def vllm_no_device_fix(log_text: str, fork: str | None) -> tuple[str, Details] | None:
    """vLLM saw no GPU where it builds its engine: in a Ray actor, one created without a GPU."""
    if not VLLM_NO_DEVICE.search(log_text):
        return None
    tp = rollout_tp_key(fork)
    return (
        "vLLM found no GPU in the process that builds its engine: in a Ray actor, that actor was created without "
        "one (num_gpus=0: with tensor parallelism some trainers give the GPUs to the engine's workers, not to the "
        f"actor that builds it, which this vLLM cannot do): set {tp}=1 (the actor then holds its GPU), or give that "
        "actor a GPU; outside Ray, SLURM gave the job no GPU or CUDA_VISIBLE_DEVICES hid them"
    ), {"gpus_seen": 0}


# torch finding no device among those the process may use
NO_GPU_SEEN = re.compile(r"No CUDA GPUs are available|no CUDA-capable device is detected|cudaErrorNoDevice")


def gpu_count_fix(log_text: str, fork: str | None) -> tuple[str, Details] | None:
    """The GPUs a run asked for against those its cluster has: the count to fit, in the trainer's own keys."""
    counted = gpus_asked_and_had(log_text)
    if not counted:
        return None
    asked, had = counted
    keys = FORKS[fork][1]["gpus"] if fork else GPU_COUNT_KEYS
    if had == 0:
        return no_gpu_registered(asked)
    return (
        f"the run asks for {asked:g} GPUs and its cluster has {had:g}: lower {keys} to fit {had:g}, or give the job "
        "more GPUs (--gres, more nodes; every node's GPUs registered with Ray: `ray status`)"
    ), {"gpus_requested": asked, "gpus_available": had}


def no_gpu_registered(asked: float) -> tuple[str, Details]:
    """No GPU count fits 0: nothing registered a GPU with Ray."""
    return (
        f"the run asks for {asked:g} GPUs and Ray saw none on any node: SLURM gave the job none (set "
        "cluster.partition to a GPU partition; rlaunch asks --gres=gpu:<n>), or the node's GPUs were not visible to "
        "the job (CUDA_VISIBLE_DEVICES empty, the NVIDIA driver down: run nvidia-smi on the node); no smaller GPU "
        "count or memory setting can help (on a machine without GPUs this is where every CPU run ends)"
    ), {"gpus_requested": asked, "gpus_available": 0}


# the CUDA driver failing torch's device count (c10/cuda/CUDAFunctions.cpp), with its error's code and words
CUDA_DRIVER_ERROR = re.compile(
    r"Unexpected error from cudaGetDeviceCount\(\)\..*? Error (?P<code>(?!2:)\d+): (?P<what>.+?)(?: \(Triggered|$)",
    re.M,
)
KEEP_OFF_NODE = "keep the job off it (+cluster.sbatch_extra.exclude=<node>) and tell its admins"


def unusable_gpu_fix(failure: Failure, log_text: str) -> tuple[str, Details] | None:
    """GPUs that are there but cannot be used by this job: what stops them, and the setting or node to change."""
    where = f" on {failure.node}" if failure.node else ""
    driver = CUDA_DRIVER_ERROR.search(log_text)
    if driver:
        code, what = driver.group("code"), driver.group("what").strip()
        why = {
            "802": "an NVSwitch node (HGX, DGX) whose nvidia-fabricmanager is not running or not matching the driver",
            "803": "a driver older than the CUDA runtime the job's torch was built for",
            "804": "CUDA's forward compatibility package loaded on a card it does not support",
        }.get(code, "the node's driver or device state")
        return (
            f"the CUDA driver{where} could not count its GPUs (error {code}: {what}): {why}; no batch size or memory "
            f"setting can help: {KEEP_OFF_NODE}"
        ), {"cuda_error": int(code)}
    if GPU_HELD.search(log_text):
        return (
            f"a GPU{where} is in exclusive-process compute mode and another process holds it (a process left from an "
            "earlier job, another job sharing the node): nvidia-smi on that node shows it; ask for whole nodes "
            f"(cluster.exclusive=true), or {KEEP_OFF_NODE}"
        ), {"gpu_held": "exclusive-process"}
    duplicate = DUPLICATE_GPU.search(log_text)
    if duplicate:
        return (
            f"NCCL found ranks {duplicate.group('first')} and {duplicate.group('second')} on the same GPU: the "
            "processes see fewer distinct GPUs than the job has ranks; trainer.n_gpus_per_node above the GPUs each "
            "node has, or a CUDA_VISIBLE_DEVICES set by hand over the one SLURM and Ray give each worker (unset it "
            f"in cluster.env); lower {GPU_COUNT_KEYS} to the GPUs the job has"
        ), {"duplicate_gpu": f"{duplicate.group('first')},{duplicate.group('second')}"}
    if GRES_REFUSED.search(log_text):
        return (
            "SLURM refused the job's --gres: the partition's nodes have no GPU of that type name; set the name this "
            "cluster uses for the card in cluster.gres_types (sinfo -o '%P %G' lists them), or an untyped --gres "
            "with cluster.gres_types empty"
        ), {"gres": "invalid"}
    return None


def no_driver_fix(failure: Failure, log_text: str) -> tuple[str, Details] | None:
    """nvidia-smi in the job found no GPU: a node without one (or without its driver), or SLURM gave the job none."""
    if "NVIDIA-SMI has failed" not in log_text and not re.search(r"(?m)^No devices were found$", log_text):
        return None
    where = f" on {failure.node}" if failure.node else ""
    return (
        f"nvidia-smi in the job{where} found no GPU: the job ran on a node without GPUs, or SLURM gave it none "
        "(set cluster.partition to a GPU partition; rlaunch asks --gres=gpu:<trainer.n_gpus_per_node> there), or "
        "that node's NVIDIA driver is down (keep the job off it: +cluster.sbatch_extra.exclude=<node>, and tell its "
        "admins); no batch size or memory setting can help"
    ), {"gpus_seen": 0}


FULL_PATH = re.compile(r"(?:No space left on device|Disk quota exceeded): '(?P<path>[^']+)'")
CHECKPOINT_PATH = re.compile(r"(?P<path>/\S*?global_step_\d+)")
CHECKPOINT_SAVE = re.compile(r"checkpoint_manager\.py|\bsave_checkpoint\b|_save_checkpoint\b")
RAY_SESSION = re.compile(r"(?P<path>/\S*?/session_[\w-]+)")
# Ray's own disk monitor names the directory it found full: its session directory or a spilling directory
RAY_DISK_FULL = re.compile(
    r"(?P<path>/\S+) (?:is over (?P<percent>[\d.]+)% full|has no capacity), (?:available space|object creation)",
    re.I,
)
RAY_PROCESS = re.compile(r"\((?:gcs_server|raylet|plasma_store)\)|Failed to start GCS|object spilling", re.I)
HF_CACHE = re.compile(r"(?P<path>/\S*?/huggingface/(?:hub|datasets|modules))")


def disk_monitor_words(found: re.Match[str]) -> str:
    """What Ray's file system monitor said of the directory: past its capacity threshold (95 % by default), or none."""
    if found.group("percent"):
        return f"over {found.group('percent')}% full, where it stops creating objects that need spilling"
    return "no capacity at all"


# NCCL's shared-memory transport growing its segment (src/misc/shmutils.cc ncclShmOpen)
SHM_SEGMENT_FULL = re.compile(r"failed to extend /dev/shm/\S+ to \d+ bytes")


def disk_fix_from_log(log_text: str) -> tuple[str, Details] | None:
    """What filled up, as far as the log says: verl's checkpoints (its checkpoint manager in the frames, or a
    global_step_N directory), Ray's session directory (object spilling, logs) or the Hugging Face cache."""
    named = FULL_PATH.search(log_text)
    path = named.group("path") if named else ""
    if SHM_SEGMENT_FULL.search(log_text):
        return (
            "/dev/shm is full: NCCL could not grow the shared-memory segment its ranks on one node talk through (a "
            "container's /dev/shm is 64 MB unless given more); give the job a larger /dev/shm (docker/apptainer "
            "--shm-size, the site's tmpfs), or set cluster.env.NCCL_SHM_DISABLE=1 to talk through the GPUs' P2P or "
            "sockets instead"
        ), {"filled": "/dev/shm"}
    if CHECKPOINT_SAVE.search(log_text) or CHECKPOINT_PATH.search(path):
        where = CHECKPOINT_PATH.search(path or log_text)
        at = f" under {where.group('path').rsplit('/', 1)[0]}" if where else ""
        return (
            f"a checkpoint save ran out of disk{at}: verl keeps every checkpoint unless told (set "
            "trainer.max_actor_ckpt_to_keep, and max_critic_ckpt_to_keep with a critic), save less often (a larger "
            "trainer.save_freq), or put launch.runs_dir on a larger filesystem; rlaunch's `disk` check compares them "
            "with the free space before submission"
        ), {"filled": "checkpoints"}
    ray_full = RAY_DISK_FULL.search(log_text)
    session = RAY_SESSION.search(path or (ray_full.group("path") if ray_full else log_text))
    if ray_full and not session:  # Ray's monitor on a spilling directory of its own
        return (
            f"Ray's spilling directory {ray_full.group('path')} is on a full disk (Ray's disk monitor: "
            f"{disk_monitor_words(ray_full)}; object spilling then fails and the workers that need it die): free "
            "space there, or point object_spilling_directory at a larger disk"
        ), {"filled": "ray session"}
    if session or ray_full or "OutOfDiskError" in log_text or RAY_PROCESS.search(log_text):
        at = f" ({session.group('path')})" if session else ""
        said = f"; Ray's disk monitor: {disk_monitor_words(ray_full)}" if ray_full else ""
        return (
            f"Ray's session directory{at} is on a full disk (Ray writes its logs, sockets and spilled objects there, "
            f"and its GCS and raylet stop when they cannot{said}): free space there, or give Ray a larger disk for it "
            "(ray start --temp-dir) and for spilling (object_spilling_directory)"
        ), {"filled": "ray session"}
    cache = HF_CACHE.search(path or log_text)
    if cache:
        return (
            f"the Hugging Face cache ({cache.group('path')}) filled its filesystem: set HF_HOME on a larger one "
            "(cluster.env.HF_HOME), or download the model there before the job"
        ), {"filled": "hf cache"}
    return None


def specific_fix(failure: Failure, log_text: str) -> tuple[str, Details] | None:
    """A fix read from the log alone (no plan): the key, the direction and the numbers the log holds."""
    fork = fork_of(log_text)
    if failure.kind == "disk_full":
        return disk_fix_from_log(log_text)
    if failure.kind == "engine_memory":
        key = FORKS[fork][1]["engine_fraction"] if fork else ENGINE_FRACTION
        return engine_fix_from_log(log_text, None, key)
    if failure.kind == "host_oom":
        return host_oom_fix_from_log(log_text, fork)
    if failure.kind == "cuda_oom":
        return cuda_oom_fix_from_log(failure, log_text)
    if failure.kind == "config_error":
        return (
            script_missing_fix(failure)
            or hydra_target_fix(failure, log_text)
            or import_failure_fix(failure)
            or model_json_fix(failure)
            or config_fix_from_log(log_text)
        )
    if failure.kind == "reward_error":
        return (
            reward_server_fix(log_text)
            or reward_file_fix(log_text)
            or reward_module_fix(failure)
            or reward_fix_from_log(failure, log_text)
        )
    if failure.kind == "unknown":
        return unknown_fix_from_log(failure, log_text)
    if failure.kind == "time_limit":
        return rlaunch_requeue_fix(log_text) or submitit_requeue_fix(log_text)
    if failure.kind == "preempted" and failure.details.get("requeued_by"):
        return (
            "nothing to change: the job was requeued through SLURM (scontrol requeue, by an admin or by you; not a "
            "higher-priority job), so the run starts again from its last checkpoint; if attempts lose much work, save "
            "more often (lower trainer.save_freq)"
        ), {"requeued_by": "scontrol requeue"}
    if failure.kind == "nccl_timeout":
        return nccl_fix_from_log(log_text)
    if failure.kind == "ray_start_failed":
        empty = EMPTY_HEAD.search(log_text)
        if empty:
            return (
                f"the head address is empty ('{empty.group(1)}'): the head node's IP was never resolved, so no port, "
                "token or --mem change can help; the script must pass the head's host (hostname --ip-address on the "
                "head node; rlaunch computes it from SLURM_JOB_NODELIST)"
            ), {"head_address": empty.group(1)}
        return (
            empty_node_fix(log_text)
            or ray_version_fix(log_text)
            or agent_failed_fix(log_text)
            or died_connecting_fix(log_text)
            or gcs_start_fix(log_text)
            or head_unreachable_fix(log_text)
            or raylet_socket_fix(log_text)
            or node_startup_fix(log_text)
            or nodes_never_joined_fix(log_text)
        )
    if failure.kind == "ray_node_lost":
        return (
            heartbeat_fix(log_text)
            or agent_failed_fix(log_text)
            or marked_dead_fix(log_text)
            or slurm_node_fail_fix(failure, log_text)
            or node_died_fix(failure)
            or requeued_node_loss_fix(failure)
        )
    if failure.kind == "data_error":
        return data_error_fix(log_text)
    if failure.kind == "data_missing":
        return data_missing_fix(failure, log_text)
    if failure.kind == "model_not_cached":
        return model_fix_from_log(log_text)
    if failure.kind == "gpu_unavailable" and "Ray does not allocate any GPUs on the driver node" in log_text:
        return (
            "vLLM's engine process runs on a node where Ray's placement group gave it no GPU (its driver sits on a "
            "CPU-only node, such as a login or head node started with no GPUs): start it on a GPU node (in verl the "
            "engine runs inside the GPU workers; rlaunch starts the head on a GPU node of the job), or give that node "
            "its GPUs in Ray (ray start --num-gpus=<n>)"
        ), {"driver_gpus": 0}
    if failure.kind == "gpu_unavailable" and (placed := placement_group_fix(log_text)):
        return placed
    if failure.kind == "gpu_unavailable" and (pending := ray_demand_fix(log_text)):
        return pending
    if failure.kind == "gpu_unavailable" and (no_driver := no_driver_fix(failure, log_text)):
        return no_driver
    if failure.kind == "gpu_unavailable" and (unusable := unusable_gpu_fix(failure, log_text)):
        return unusable
    if failure.kind == "gpu_unavailable" and (counted := gpu_count_fix(log_text, fork)):
        return counted
    if failure.kind == "gpu_unavailable" and (no_device := vllm_no_device_fix(log_text, fork)):
        return no_device
    if failure.kind == "gpu_unavailable" and NO_GPU_SEEN.search(log_text):
        keys = FORKS[fork][1]["gpus"] if fork else GPU_COUNT_KEYS
        return (
            "the process saw no GPU at all: SLURM gave the job none (run on a GPU partition, cluster.partition; "
            f"rlaunch asks --gres=gpu:<n> from {keys}) or CUDA_VISIBLE_DEVICES hid them (unset it, or set it to the "
            "job's GPUs); no batch size or memory setting can help"
        ), {"gpus_seen": 0}
    if failure.kind == "gpu_unavailable" and "The number of required GPUs exceeds" in log_text:
        # vLLM's Ray executor: its world size (tensor x pipeline parallel) against the GPUs Ray shows it
        local = "Started a local Ray instance" in log_text
        return (
            "vLLM's engine needs tensor_parallel_size x pipeline_parallel_size GPUs and Ray showed it fewer: lower "
            "actor_rollout_ref.rollout.tensor_model_parallel_size to the GPUs one node has, or give the job more GPUs"
            + (
                "; the engine started its own local Ray instance, which sees one node only: set RAY_ADDRESS to the "
                "cluster's head before it starts"
                if local
                else ""
            )
        ), {"ray_local_instance": "yes"} if local else {}
    if failure.kind == "gpu_unavailable":
        counts = re.search(r"Total available GPUs (\S+) is less than total desired GPUs (\S+)", log_text)
        if counts:
            have, want = counts.group(1), counts.group(2)
            if float(have) == 0:
                return no_gpu_registered(float(want))
            return (
                f"verl wanted {want} GPUs (trainer.nnodes x trainer.n_gpus_per_node) and Ray had {have}: lower "
                f"trainer.n_gpus_per_node or trainer.nnodes to fit {have}, or request more (--gres, nodes)"
            ), {"gpus_available": have, "gpus_desired": want}
        asked = re.search(r"'GPU': ([\d.]+)|\{GPU,([\d.]+)\}", log_text)
        if asked:
            gpus = asked.group(1) or asked.group(2)
            return (
                f"a Ray request for {float(gpus):g} GPU(s) that no node of the cluster can give (it waits forever): "
                "lower the GPUs one actor asks for (actor_rollout_ref.rollout.tensor_model_parallel_size, "
                "trainer.n_gpus_per_node) or give the job nodes with that many GPUs"
            ), {"gpus_requested": gpus}
    return None


def generic_fix(failure: Failure, log_text: str = "") -> str:
    before = failure.details.get("before")
    found = specific_fix(failure, log_text) if log_text else None
    fix = found[0] if found else GENERIC_FIXES[failure.kind]
    if found:
        failure.details.update({key: value for key, value in found[1].items() if value is not None})
    return fix + (f" (before it, the log shows {before})" if before else "")


@dataclass(frozen=True)
class PhaseFix:
    """One of the preflight's fixes for a phase: its overrides and how much it lowers that phase's predicted peak."""

    overrides: list[str]
    saves_gib: float  # the predicted peak now less with the fix (the preflight's own model)
    description: str = ""


@dataclass(frozen=True)
class FixContext:
    """What the plan and the run's files say, for fixes with numbers (launch/report/doctor.py builds it)."""

    plan: Plan
    predicted_peaks_gib: dict[str, float] = field(default_factory=dict)  # phase -> the preflight's predicted peak
    # phase -> every preflight fix that lowers its predicted peak, cheapest first (preflight.candidate_fixes' order)
    phase_fixes: dict[str, list[PhaseFix]] = field(default_factory=dict)
    steps_reached: dict[int, int] = field(default_factory=dict)  # attempt -> training steps it logged past its start
    checkpointed_step: dict[int, int] = field(default_factory=dict)  # attempt -> the checkpoint it started from
    saves_per_attempt: int = 2
    # attempt -> its attempts.jsonl record (launch/job.py record_attempt: the GPUs NVML saw, SLURM's variables)
    attempt_records: dict[int, dict[str, Any]] = field(default_factory=dict)


def save_freq_that_fits(steps_reached: int, saves_per_attempt: int) -> int:
    """The trainer.save_freq that saves `saves_per_attempt` times in the steps one attempt reaches (at least 1)."""
    return max(1, steps_reached // saves_per_attempt)


def verl_value(plan: Plan, dotted: str) -> Any:
    node: Any = plan.verl
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


# Beyond this ratio of measured need to predicted peak the preflight's memory model misses a term for this run (its
# tested error is within 15 %): the savings it predicts for its fixes are then sizes in a model that was 2x off, and
# no single one can be trusted to close the gap it did not foresee.
PREDICTION_FAR_OFF = 2.0


def oom_remedy(phase: str, fixes: list[PhaseFix], needed: float, predicted: float | None, short: float | None) -> str:
    """Which of the preflight's fixes for `phase` covers what the attempt lacked: the cheapest whose predicted saving
    frees the measured shortfall (the allocation torch could not place, beyond the card), else why none does and the
    biggest lever."""
    biggest = max(fixes, key=lambda fix: fix.saves_gib) if fixes else None
    lever = (
        f"the biggest lever the preflight knows for {phase}: {' '.join(biggest.overrides)} (frees "
        f"{biggest.saves_gib:.1f} GiB by its model)"
        if biggest
        else "halve the micro-batch or token budget per GPU, or offload (launch.preflight=fix)"
    )
    if predicted and needed / predicted > PREDICTION_FAR_OFF:
        return (
            f"no single preflight fix covers a gap that large: the preflight's prediction for {phase} was "
            f"{needed - predicted:.1f} GiB short, so the savings it predicts are sizes in a model that does not "
            f"describe this run; find what it misses first (the run's memory against the plan: doctor's "
            f"memory_calibration, bench/gpu_memory.py); {lever}"
        )
    if short is None or biggest is None:
        return f"the preflight's next fix for it: {' '.join(fixes[0].overrides)}" if fixes else lever
    covering = next((fix for fix in fixes if fix.saves_gib >= short), None)
    if covering is not None:
        return (
            f"the preflight's cheapest fix that frees the {short:.1f} GiB it lacked: {' '.join(covering.overrides)} "
            f"(frees {covering.saves_gib:.1f} GiB by its model)"
        )
    return (
        f"no single preflight fix frees the {short:.1f} GiB it lacked; {lever}, and launch.preflight=fix applies "
        "several together"
    )


def fix_cuda_oom(failure: Failure, context: FixContext, log_text: str) -> tuple[str, Details]:
    phase = phase_of(log_text)
    peaks = context.predicted_peaks_gib
    # no phase in the traceback: compare with the phase the preflight expected to peak
    phase_or_peak = phase or (max(peaks, key=peaks.__getitem__) if peaks else None)
    found: Details = {"phase": phase or "?"}
    parts = [f"{phase} phase ran out of GPU memory" if phase else "a GPU ran out of memory (no verl phase in the log)"]
    details = failure.details
    needed = float(details.get("in_use_gib", details.get("torch_allocated_gib", 0.0))) + float(
        details.get("tried_gib", 0.0)
    )
    predicted = peaks.get(phase_or_peak) if phase_or_peak else None
    if predicted and needed > 0:
        found |= {"predicted_gib": round(predicted, 2), "needed_gib": round(needed, 2)}
        parts.append(
            f"it needed at least {needed:.1f} GiB where the preflight predicted {predicted:.1f} GiB "
            f"for {phase_or_peak} ({needed / predicted:.2f}x)"
        )
    # what the card lacked: the allocation beyond what was free (torch prints both), else the need beyond the card
    short: float | None = None
    if "tried_gib" in details and "free_gib" in details:
        short = float(details["tried_gib"]) - float(details["free_gib"])
    elif needed > 0 and "capacity_gib" in details:
        short = needed - float(details["capacity_gib"])
    if short is not None:
        short = max(0.0, short)
        found["short_gib"] = round(short, 2)
    fixes = context.phase_fixes.get(phase_or_peak, []) if phase_or_peak else []
    if phase_or_peak is None:
        parts.append("halve the micro-batch or token budget per GPU, or offload (launch.preflight=fix)")
    else:
        parts.append(oom_remedy(phase_or_peak, fixes, needed, predicted if needed > 0 else None, short))
    return "; ".join(parts), found


def fix_engine_memory(failure: Failure, context: FixContext, log_text: str) -> tuple[str, Details]:
    fraction = verl_value(context.plan, ENGINE_FRACTION)
    tp = verl_value(context.plan, "actor_rollout_ref.rollout.tensor_model_parallel_size")
    gpus = context.plan.resources.gpus_per_node
    fix, found = engine_fix_from_log(log_text, float(fraction) if fraction is not None else None)
    if fix.startswith(("KV cache", "the engine's share")) and tp is not None and (not gpus or int(tp) * 2 <= gpus):
        fix += f", or actor_rollout_ref.rollout.tensor_model_parallel_size={int(tp) * 2} (now {tp})"
    return fix, found


def fix_host_oom(failure: Failure, context: FixContext, log_text: str) -> tuple[str, Details]:
    fork = fork_of(log_text)
    told = host_fix_from_log(log_text, fork) or shared_memory_fix(log_text)
    if told is not None and not told[0].startswith("the node's host RAM ran out"):
        return told  # the driver itself, or memory held elsewhere: more --mem is not the fix
    mem = context.plan.resources.mem_gb
    options = []
    if mem:
        options.append(f"cluster.mem_gb={int(mem) * 2} (now --mem={mem}G)")
    for key in OFFLOAD_KEYS:
        if verl_value(context.plan, key) and not fork:
            options.append(f"{key}=false")
    predicted = context.plan.preflight.host_ram_gib_per_node if context.plan.preflight is not None else None
    note = f" (the preflight predicted {predicted} GiB per node)" if predicted else ""
    found = told[1] if told else {}
    used = f" ({found['node_used_gb']:g} of {found['node_total_gb']:g} GB in use)" if found else ""
    return f"the node ran out of host RAM{used}{note}: raise --mem or offload less: " + " or ".join(
        options or ["-"]
    ), found


SUBMITIT_STAMP = re.compile(r"\((\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)")  # submitit's `INFO (2026-11-29 12:14:09,798)`


def attempt_wall_s(log_text: str, evidence: list[str]) -> float | None:
    """Seconds from the attempt's first submitit line to its time-limit line (None where either has no stamp)."""
    from datetime import datetime

    def seconds(match: re.Match[str]) -> float:
        return datetime.fromisoformat(f"{match.group(1)} {match.group(2)}").timestamp()

    stamps = [seconds(match) for match in SUBMITIT_STAMP.finditer(log_text)]
    ended = next((seconds(match) for line in evidence if (match := SUBMITIT_STAMP.search(line))), None)
    return ended - min(stamps) if stamps and ended is not None else None


# an attempt that got its time-limit signal within this share of --time did not run out of time: the signal came early
SIGNAL_EARLY_SHARE = 0.5


def signal_at_start(plan: Plan) -> str | None:
    """The requeue signal's delay (cluster.signal_delay_s, sbatch --signal=USR2@<s>) at or past the time limit makes
    SLURM signal the job as it starts, however long --time is: what to change (None where the delay is below it)."""
    delay = plan.slurm.get("signal_delay_s") if plan.slurm else None
    minutes = plan.resources.time_min
    if delay is None or not requeue_signal_at_start(int(delay), minutes):
        return None
    return (
        f"cluster.signal_delay_s={delay} (sbatch --signal=USR2@{delay}) is not below the time limit of {minutes} min "
        f"(--time={minutes}), so SLURM sends the requeue signal as the job starts: set cluster.signal_delay_s below "
        f"{minutes * 60} s, or give the job a longer limit (mode.time_budget_min)"
    )


def signal_before_work(plan: Plan, wall_s: float | None) -> str | None:
    """An attempt signalled far within its time limit (SIGNAL_EARLY_SHARE) by a signal due at the job's start: the
    fix for it (None otherwise)."""
    at_start = signal_at_start(plan)
    minutes = plan.resources.time_min
    if at_start is None or wall_s is None or not minutes or wall_s > SIGNAL_EARLY_SHARE * minutes * 60:
        return None
    return f"the requeue signal came before any work (the attempt was signalled {wall_s:.0f} s in): {at_start}"


def budget_for_a_first_step(plan: Plan) -> str:
    """A mode.time_budget_min that reaches a first step (and the first checkpoint, where readiness counted it): the
    start-up, the validation before training and the steps, as readiness's time check adds them up."""
    from launch.steptime import STARTUP_MIN, budget_reaching

    predicted = plan.readiness.time if plan.readiness is not None else None
    if predicted is not None:
        before = predicted.validation_s / 60 if predicted.validates_before_training else 0.0
        then = min(predicted.first_checkpoint_min or predicted.step_s / 60, 60.0)
        return (
            f"mode.time_budget_min={budget_reaching(before, then)} or more (readiness counted {STARTUP_MIN} min of "
            "start-up"
            + (f", {before:.1f} min of validation" if before else "")
            + f" and {then:.1f} min to the first checkpoint)"
        )
    if plan.time is not None:
        step_min = plan.time.step_s / 60  # a validation before training: one step's time as its floor
        return (
            f"mode.time_budget_min={budget_reaching(step_min, step_min)} or more (the job's start-up takes "
            f"{STARTUP_MIN} min, a step "
            f"~{plan.time.step_s:.0f} s)"
        )
    return f"a longer mode.time_budget_min: the job's start-up alone takes about {STARTUP_MIN} min"


def checkpoint_written(plan: Plan) -> int:
    """The step of the last checkpoint verl wrote for the run (its latest_checkpointed_iteration.txt under
    trainer.default_local_dir, as launch/job.py reads it at a requeue; 0 for none)."""
    root = verl_value(plan, "trainer.default_local_dir")
    try:
        return int((Path(str(root)) / "latest_checkpointed_iteration.txt").read_text().strip()) if root else 0
    except (OSError, ValueError):
        return 0


def passed_save_without_checkpoint(context: FixContext) -> str | None:
    """Attempts that went past trainer.save_freq's step from no checkpoint and still left none: verl did not save
    (not a save_freq too large for the attempts), said with the numbers; None otherwise."""
    save_freq = verl_value(context.plan, "trainer.save_freq")
    if save_freq is None or int(save_freq) <= 0 or checkpoint_written(context.plan):
        return None
    save_freq = int(save_freq)
    passed = [
        attempt
        for attempt, reached in context.steps_reached.items()
        if context.checkpointed_step.get(attempt, 0) == 0 and reached >= save_freq
    ]
    if not passed or any(context.checkpointed_step.get(attempt, 0) for attempt in context.steps_reached):
        return None
    times = f"{len(passed)} times" if len(passed) > 1 else "once"
    return (
        f"passed step {save_freq} (trainer.save_freq) {times} without a checkpoint: verl saved none; check "
        "trainer.default_local_dir and the save's lines in the attempt's log"
    )


def not_requeued_reason(context: FixContext, run_dir: Path | None = None) -> str | None:
    """Why the job stopped requeueing the run (its not_requeued.txt), where the job's own words ('never a first
    checkpoint: lower trainer.save_freq') contradict the attempts' steps, with what the steps show instead; None for
    a run the job did not stop requeueing."""
    path = Path(run_dir or context.plan.run_dir) / "not_requeued.txt"
    try:
        reason = path.read_text().strip()
    except OSError:
        return None
    unsaved = passed_save_without_checkpoint(context)
    if unsaved and "never a first checkpoint" in reason:
        return f"{reason.split(':')[0]}: {unsaved}"
    return reason


def requeue_outcome(context: FixContext, attempt: int) -> str:
    """What came of the requeue after a time-limited attempt: where the next attempt started (from step 0 where no
    checkpoint existed), or why the job was not requeued (not_requeued.txt)."""
    numbers = set(context.attempt_records) | set(context.checkpointed_step) | set(context.steps_reached)
    last = max(numbers, default=attempt)
    if attempt < last:
        resumed = context.checkpointed_step.get(attempt + 1, 0)
        if not resumed:
            return "no checkpoint yet: the requeued attempt started over from step 0"
        return f"requeued: attempt {attempt + 1} resumed from the checkpoint of step {resumed}"
    reason = not_requeued_reason(context)
    if reason:
        return f"not requeued: {reason}"
    saved = checkpoint_written(context.plan)
    if saved:
        return f"the job requeues itself: its next attempt resumes from the checkpoint of step {saved}"
    return "the job requeues itself: no checkpoint yet, so its next attempt starts over from step 0"


def fix_time_limit(failure: Failure, context: FixContext, log_text: str) -> tuple[str, Details]:
    attempt = failure.attempt or 1
    trainer = verl_value(context.plan, "trainer") or {}
    save_freq = trainer.get("save_freq")
    start = context.checkpointed_step.get(attempt, 0)
    reached = context.steps_reached.get(attempt)
    minutes = context.plan.resources.time_min
    limit = f" of {minutes} min" if minutes else ""
    delay = context.plan.slurm.get("signal_delay_s") if context.plan.slurm else None
    # submitit's requeue signal (sbatch --signal=USR2@<delay>) ends the attempt, cluster.signal_delay_s before --time
    came = f"the requeue signal, {delay} s before the time limit{limit}," if delay else f"the time limit{limit}"
    if reached is None:
        return GENERIC_FIXES["time_limit"], {}
    found: Details = {"steps_reached": reached}
    if reached == 0:
        early = signal_before_work(context.plan, attempt_wall_s(log_text, failure.evidence))
        if early:
            return early, found | {"signal_before_work": 1}
        validates = trainer.get("val_before_train")
        fix = "trainer.val_before_train=false" if validates else budget_for_a_first_step(context.plan)
        return f"the attempt reached no training step in its time limit{limit}: {fix}", found
    outcome = requeue_outcome(context, attempt)
    if start == 0 and save_freq is not None and int(save_freq) > reached:
        fits = save_freq_that_fits(reached, context.saves_per_attempt)
        return (
            f"{came} came at step {reached}, before the first checkpoint (trainer.save_freq="
            f"{save_freq}): trainer.save_freq={fits} saves {context.saves_per_attempt}x per attempt; {outcome}"
        ), found
    unsaved = passed_save_without_checkpoint(context) if start == 0 else None
    if unsaved and "not requeued" not in outcome:
        outcome += f" ({unsaved})"
    return f"{came} came at step {start + reached}; {outcome}", found


def fix_disk_full(failure: Failure, context: FixContext, log_text: str) -> tuple[str, Details]:
    """With the plan's disk record (readiness's `disk` check): the checkpoints' size and count, the space the plan saw,
    and the retention that would have fit in it."""
    from launch.readiness import fitting_keep

    told = disk_fix_from_log(log_text)
    readiness = context.plan.readiness
    disk = readiness.disk if readiness is not None else None
    if disk is None or (told is not None and told[1].get("filled") != "checkpoints"):
        return told or (GENERIC_FIXES["disk_full"], {})
    found: Details = {"filled": "checkpoints", "checkpoint_gib": disk.one_gib, "checkpoints_kept": disk.kept}
    seen = f", and planning saw {gib_text(disk.free_gib)} free at {disk.probed}" if disk.free_gib is not None else ""
    keep = fitting_keep(disk) if disk.free_gib is not None else 0
    if disk.free_gib is not None:
        found["planned_free_gib"] = disk.free_gib
    if disk.free_gib is not None and disk.needed_gib <= disk.free_gib:  # other writes took the space since
        remedy = (
            "they fitted in it, so other writes took the space since: free space there, or keep fewer "
            f"(trainer.max_actor_ckpt_to_keep={max(1, min(2, disk.kept - 1))})"
        )
    elif keep >= 1:
        remedy = f"trainer.max_actor_ckpt_to_keep={keep} fits what planning saw"
    else:
        remedy = "free space there, or put launch.runs_dir on a larger filesystem"
    return (
        f"a checkpoint save ran out of disk: verl's checkpoints take {gib_text(disk.one_gib)} each and this run keeps "
        f"up to {disk.kept} of its {disk.saves} (= {gib_text(disk.needed_gib)}){seen}: {remedy}; or a larger "
        "trainer.save_freq"
    ), found


def fix_gpu_unavailable(failure: Failure, context: FixContext, log_text: str) -> tuple[str, Details]:
    """Where the attempt's record shows SLURM granted GPUs (SLURM_GPUS_ON_NODE, CUDA_VISIBLE_DEVICES) that NVML did not
    see (gpus 0), the partition is not the cause: the node's driver, NVML or device files are (the log's own fix
    follows); else the log's fix as it was."""
    record = context.attempt_records.get(failure.attempt or 1, {})
    granted = str(record.get("SLURM_GPUS_ON_NODE") or "").strip()
    visible = str(record.get("CUDA_VISIBLE_DEVICES") or "").strip()
    count = int(granted) if granted.isdigit() else len([d for d in visible.split(",") if d.strip()])
    if record.get("gpus") != 0 or count == 0:
        return failure.fix, {}
    node = record.get("SLURM_JOB_NODELIST") or record.get("host") or "<node>"
    devices = f" (CUDA_VISIBLE_DEVICES={visible})" if visible else ""
    asked = failure.details.get("gpus_requested")
    nodes = str(record.get("SLURM_NNODES") or "1")
    where = f"per node on {nodes} nodes ({node})" if nodes.isdigit() and int(nodes) > 1 else f"on {node}"
    return (
        f"SLURM granted {count} GPU(s){devices} {where} but the process saw none (NVML counted 0 at the attempt's "
        "start): the node's NVIDIA driver, NVML or device files (/dev/nvidia*, a container started without them) "
        f"fail the job: run `srun -w {node} --gres=gpu:1 nvidia-smi` and fix the node; no partition, GPU count or "
        "memory setting can help" + (f" (the run asks for {asked:g} GPU(s))" if isinstance(asked, float | int) else "")
    ), {"gpus_granted": count, "gpus_seen": 0}


# each returns the fix and the numbers it read (they go into the failure's details)
def fix_config_error(failure: Failure, context: FixContext, log_text: str) -> tuple[str, Details]:
    """An import the job died of, with the PYTHONPATH the plan gave the job; a model file planning read that changed
    since; any other config error keeps the fix its log gave."""
    return (
        import_failure_fix(failure, context.plan.worker_env.get("PYTHONPATH"))
        or changed_since_planning(failure, context)
        or (failure.fix, {})
    )


def changed_since_planning(failure: Failure, context: FixContext) -> tuple[str, Details] | None:
    """A data file or model file the failure names that planning read whole (plan.json's readiness record: each data
    file's key and rows, and the model config it read the architecture from): it changed or went after the run was
    planned, so restoring it, not a setting, is the fix."""
    if failure.details.get("config_key") == CHAT_TEMPLATE_KEY:  # no readiness record needed: the directory tells
        return missing_chat_template(context.plan)
    readiness = context.plan.readiness
    if readiness is None:
        return None
    changed = {"planned_input": "changed after planning"}
    data_path = str(failure.details.get("data_path") or "")
    read = next((file for file in readiness.data if data_path and file.path == data_path and file.rows), None)
    if read is not None:
        now = "is not a whole parquet file now" if failure.details.get("parquet") else "no longer reads as planned"
        state = "is gone" if not Path(read.path).exists() else now
        return (
            f"the data file {read.path} ({read.key}) {state}: planning read it whole ({read.rows} rows), so it changed "
            "after the run was planned: restore it (or re-run the preprocessing that writes it), then resubmit"
        ), changed | {"config_key": read.key}
    source = readiness.model_source
    model_config = str(failure.details.get("model_config") or "")
    if source and model_config == source:
        return (
            f"the model's config file {source} is not valid JSON now: planning read the model's architecture from it, "
            "so it changed after the run was planned: restore it (copy or download the model again), then resubmit"
        ), changed | {"config_key": "actor_rollout_ref.model.path"}
    model_path = str(failure.details.get("model_path") or "").rstrip("/")
    if source and model_path and source.startswith(model_path + "/") and not Path(model_path).exists():
        return (
            f"the model directory {model_path} (actor_rollout_ref.model.path) is gone: planning read {source} from "
            "it, so it was removed after the run was planned: restore it, then resubmit"
        ), changed | {"config_key": "actor_rollout_ref.model.path"}
    return None


# where transformers reads a tokenizer's chat template (tokenization_utils_base.py from_pretrained): its own file, or
# the chat_template entry of tokenizer_config.json
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")


def missing_chat_template(plan: Plan) -> tuple[str, Details] | None:
    """A tokenizer with no chat template whose directory, the plan's, holds none of the files a template lives in:
    the files are gone (or the model is a base model's); the directory named, not only the key to set."""
    directory = verl_value(plan, "actor_rollout_ref.model.tokenizer_path") or verl_value(
        plan, "actor_rollout_ref.model.path"
    )
    if not directory or not Path(str(directory)).is_dir():
        return None
    if any((Path(str(directory)) / name).exists() for name in CHAT_TEMPLATE_FILES):
        return None
    return (
        f"the model directory {directory} holds no chat template now (none of {', '.join(CHAT_TEMPLATE_FILES)}), and "
        "verl applies one to every prompt: where the model had them when the run was planned, its tokenizer files "
        f"were removed since: restore them; a base model has none: set {CHAT_TEMPLATE_KEY} to a Jinja chat template"
    ), {"config_key": CHAT_TEMPLATE_KEY, "model_path": str(directory)}


def fix_planned_input(failure: Failure, context: FixContext, log_text: str) -> tuple[str, Details]:
    """A data or model file planning read that changed or went since (changed_since_planning); else the log's fix."""
    return changed_since_planning(failure, context) or (failure.fix, {})


PLAN_FIXES: dict[str, Callable[[Failure, FixContext, str], tuple[str, Details]]] = {
    "config_error": fix_config_error,
    "data_error": fix_planned_input,
    "data_missing": fix_planned_input,
    "model_not_cached": fix_planned_input,
    "cuda_oom": fix_cuda_oom,
    "engine_memory": fix_engine_memory,
    "host_oom": fix_host_oom,
    "time_limit": fix_time_limit,
    "disk_full": fix_disk_full,
    "gpu_unavailable": fix_gpu_unavailable,
}


def with_plan_fix(failure: Failure, context: FixContext | None, log_text: str) -> Failure:
    """The failure with its fix computed from the run's plan where the kind has one (a new Failure: the one given
    is left as it is)."""
    log_text = unlabelled(log_text)  # as classify read it
    if context is not None and failure.kind in PLAN_FIXES:
        before = failure.details.get("before")
        fix, found = PLAN_FIXES[failure.kind](failure, context, log_text)
        fix += f" (before it, the log shows {before})" if before else ""
        return replace(failure, fix=fix, details=failure.details | found)
    if failure.kind == "cuda_oom":
        return replace(failure, details=failure.details | {"phase": phase_of(log_text) or "?"})
    return failure
