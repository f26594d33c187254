"""The memory preflight: a verdict per phase, the cheapest fixes for a misfit, and tuning for a timid configuration.

Runs on: the login node, before the plan is made and at submission. It reads a job's resolved verl config, the
architecture and the GPU profile's usable memory, and returns a verdict plus the typed verl knob values its policy
changes (judge, pure); settle applies them to the config once, before the plan is made from it (the plan takes
--mem from the verdict's host-RAM estimate); gate refuses or warns at submission.
Policies (launch.preflight): fail (refuse a misfit at submission), fix (apply the first set of fixes that fits), tune
(raise micro-batch / token budget and engine concurrency to the largest that fit with TUNE_HEADROOM spare), warn,
off. fix and tune never change a key the user set on the command line; they say so instead.
The verdict is a typed record (launch/verdict.py). The report asks its what-if questions through `WhatIf`: the peaks,
fit, tuning and next fix of the knobs a plan's verdict recorded.
A misfit also gets the cheapest change that fits, searched (fitting_change): whether offloading the trainer's states
(host RAM permitting) or a larger rollout TP fits the run's own GPUs, and the smallest GPU count that fits as it is.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from algos.pcgrad_checks import pcgrad_tasks
from algos.rft import RftConfigError, planned_sft_config
from algos.rft.sft import FOLLOWED
from launch.compose_once import Resolve
from launch.errors import UserError
from launch.facts import Facts, reward_model_config
from launch.job_software import job_software, skipped_engine_check
from launch.layout_checks import (
    ConfigView,
    check_engine_heads,
    check_megatron,
    check_ppo_batches,
    engine_tp_splits_heads,
)
from launch.lengths import TypicalLengths, typical_lengths
from launch.megatron_memory import HYBRID_VALUES, MegatronKnobs, fixes_beyond
from launch.megatron_memory import estimate as megatron_estimate
from launch.megatron_memory import summarize as megatron_summary
from launch.memory import (
    FREE_MEMORY_ENGINES,
    FSDP_EDGE,
    KNOB_KEYS,
    LEGACY_CRITIC_UPDATE_TOKENS,
    Architecture,
    Knobs,
    Phase,
    critic_knobs,
    critic_value_phase,
    engine_context,
    engine_memory,
    estimate,
    foreach_optimizer,
    host_ram_per_node,
    host_ram_terms,
    kv_per_sequence_gib,
    micro_batch_tokens,
    predicted_mfu,
    reward_architecture_knobs,
    rollout_phase,
    trains_critic,
    with_changes,
)
from launch.overrides import as_overrides, key_of, keys_of, parse, render_value
from launch.plan import BATCH_KNOBS, llm_architecture
from launch.readiness import VERL_CRITIC_PLACEHOLDER
from launch.render import host_ram_refusal, refusal, too_close
from launch.rundir import Plan
from launch.schema import select
from launch.steptime import Card, Lengths, forecast
from launch.verdict import (
    Before,
    FittingChange,
    FixReport,
    GpuCount,
    JobSoftwareNotes,
    Predicted,
    SameGpuChange,
    Typical,
    Verdict,
)

Estimator = Callable[[Architecture, Knobs, float], list[Phase]]  # the phases' peaks of knobs on a card of GiB
TUNE_HEADROOM = 0.90  # tune fills at most 90 % of the card: the 10 % absorb what no estimate sees
TOKEN_STEP = 1024  # token budgets are tuned in steps of this many tokens
MAX_ENGINE_SEQS = 1024
TYPICAL_FRACTION = 0.5  # without lengths of the run's own (launch/lengths.py): half the maximum prompt + response
NODE_GPUS = 8  # the usual node a GPU profile describes: a run of a partial node grows to one before adding nodes
MAX_NODES = 64  # the GPU-count search stops here (512 GPUs of 8-GPU nodes)

KEYS = KNOB_KEYS  # verl key of each knob a fix or tune may set

REF_KEYS = {
    "logprob_tokens": "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
    "logprob_micro_batch": "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
}

# algo=rft trains in stage 3 with verl's SFT trainer, whose config (algos/rft/sft.py) follows the PPO actor's knobs
# unless rft.sft sets them: a fix or tune of the knobs stage 3 reads sets them there, where they take effect
SFT_KEYS = {
    "train_tokens": "rft.sft.data.max_token_len_per_gpu",
    "micro_batch": "rft.sft.data.micro_batch_size_per_gpu",
    "checkpointing": "rft.sft.model.enable_gradient_checkpointing",
    "fused_kernels": "rft.sft.model.use_fused_kernels",
    "optimizer_offload": "rft.sft.engine.optimizer_offload",
    "param_offload": "rft.sft.engine.param_offload",
}
NOT_IN_RFT = ("logprob_tokens", "logprob_micro_batch")  # RFT recomputes no log-probs: no such pass to size
RFT_PHASES = ("training", "rollout")  # stage 3's SFT update and stage 1's generation engine


def runs_rft(knobs: Knobs) -> bool:
    """algo=rft's knobs (rft_knobs): the only run whose trainer never shares the card with the engine."""
    return not knobs.trainer_beside_engine


def knob_key(name: str, knobs: Knobs) -> str | None:
    """The key that sets a knob in this run: stage 3's rft.sft key for algo=rft's training knobs, else verl's; None
    where the run has no such knob."""
    if runs_rft(knobs):
        return None if name in NOT_IN_RFT else SFT_KEYS.get(name, KEYS.get(name))
    if name == "critic_tokens" and not knobs.critic_v1:  # the legacy trainer's update budget (memory.critic_batching)
        return LEGACY_CRITIC_UPDATE_TOKENS
    return KEYS.get(name)


def phases_of(arch: Architecture, knobs: Knobs, capacity: float) -> list[Phase]:
    """The estimator's phases that this run has: algo=rft generates (stage 1) and fine-tunes (stage 3), nothing
    else; a PPO step has them all."""
    phases = estimate(arch, knobs, capacity)
    return [phase for phase in phases if phase.name in RFT_PHASES] if runs_rft(knobs) else phases


def rft_knobs(knobs: Knobs, sft: dict[str, Any]) -> Knobs:
    """algo=rft as its stages run (algos/rft/). Stage 1 is verl's generation server: standalone engine replicas alone
    on the card, never asleep (no weights in host RAM), sent every prompt's samples at once (no batch caps their
    concurrency). Stage 3 is verl's SFT trainer with the knobs of its own composed config `sft`: its micro-batch or
    token budget, its batch of kept samples per optimizer step, its engine's offload, sharding and precision. RFT
    has no reference model, critic, reward model or PCGrad, whatever PPO keys the config holds."""
    data, model, engine = sft["data"], sft["model"], sft["engine"]
    dynamic = bool(data["use_dynamic_bsz"])
    micro = data.get("micro_batch_size_per_gpu")
    return with_changes(
        knobs,
        dynamic_bsz=dynamic,
        train_tokens=micro_batch_tokens(dynamic, data.get("max_token_len_per_gpu"), micro, int(data["max_length"])),
        micro_batch=micro,
        checkpointing=bool(model["enable_gradient_checkpointing"]),
        param_offload=bool(engine["param_offload"]),
        optimizer_offload=bool(engine["optimizer_offload"]),
        lora_rank=int(model.get("lora_rank") or 0),
        fused_kernels=bool(model.get("use_fused_kernels")),
        entropy=False,  # verl's SFT loss computes no entropy
        fsdp_size=int(engine.get("fsdp_size", -1)),
        sequence_parallel=max(1, int(engine.get("ulysses_sequence_parallel_size") or 1)),
        model_dtype_bytes=2 if str(engine.get("model_dtype", "fp32")) in ("bf16", "bfloat16", "fp16") else 4,
        optimizer_temporaries=foreach_optimizer(sft.get("optim") or {}),
        mini_batch_sequences=int(data["train_batch_size"]),
        batch_sequences=0,
        ref_model=False,
        pcgrad_tasks=0,
        critic=False,
        reward_model=False,
        trainer_beside_engine=False,
        engine_weights_in_host_ram=False,
    )


def stage3_config(cfg: Any, verl: dict[str, Any]) -> dict[str, Any]:
    """algo=rft's SFT config as the plan composes it; a key of rft.sft that does not compose is the user's one-line
    refusal here, as validation would give it."""
    try:
        return planned_sft_config(verl, OmegaConf.to_container(cfg.rft.sft, resolve=True))  # type: ignore[arg-type]
    except RftConfigError as error:
        raise UserError(str(error)) from None


@dataclass(frozen=True)
class Fix:
    description: str
    changes: dict[str, Any]  # Knobs field -> new value
    short: str = ""  # a few words for `what fits` (the description where none)

    @property
    def words(self) -> str:
        return self.short or self.description


def user_keys(overrides: list[str]) -> set[str]:
    return keys_of(overrides)


def locked_keys(overrides: list[str], knobs: Knobs) -> set[str]:
    """The keys fix and tune leave alone: the user's, and for algo=rft the rft.sft key of each knob whose PPO key
    the user set (stage 3 follows it: that value is theirs too)."""
    locked = user_keys(overrides)
    if runs_rft(knobs):
        locked |= {f"rft.sft.{key}" for key, run_key in FOLLOWED.items() if run_key in locked}
    return locked


def fits(arch: Architecture, knobs: Knobs, capacity: float, headroom: float = 1.0) -> bool:
    return all(phase.fits and phase.peak_gib <= capacity * headroom for phase in phases_of(arch, knobs, capacity))


def fits_clear(arch: Architecture, knobs: Knobs, capacity: float, host_gib_per_gpu: float = 0.0) -> bool:
    """Fits with no phase within the estimate's band around the card (memory.FSDP_EDGE), host RAM permitting: what
    a fix must reach. A fix that lands in the band is no fix: the verdict on it would be `too close to call`."""
    phases = phases_of(arch, knobs, capacity)
    return (
        all(phase.fits for phase in phases)
        and not FSDP_EDGE.phases_at(phases)
        and host_fits(arch, knobs, host_gib_per_gpu)
    )


def sequence_per_gpu_limit(knobs: Knobs, mini_batch_sequences: int = 0) -> int:
    """verl never packs more than a data-parallel rank's share of a mini-batch into one micro-batch (the mini-batch
    x n over GPUs / Ulysses SP: engine_workers.py train_mini_batch)."""
    return max(1, knobs.share(mini_batch_sequences or knobs.mini_batch_sequences))


def with_train_tokens(knobs: Knobs, tokens: int) -> Knobs:
    """The training micro-batch in the knob that is live: the token budget (dynamic) or the micro-batch size."""
    if knobs.dynamic_bsz:
        return with_changes(knobs, train_tokens=tokens)
    micro = max(1, tokens // knobs.sequence)
    return with_changes(knobs, micro_batch=micro, train_tokens=micro * knobs.sequence)


NVLS_KEY = "cluster.env.NCCL_NVLS_ENABLE"
# as a fix writes it: cluster.env holds no such key unless a profile or the user set one, and Hydra refuses to set a
# key that is not there without `+`; `++` adds or overrides, so the printed fix is taken whether or not it exists
NVLS_OVERRIDE = f"++{NVLS_KEY}"


def bare_key(key: str) -> str:
    """A fix's key without Hydra's +/++ prefix: the config's key (what settle sets, what the user's keys hold)."""
    return key.lstrip("+")


def locks(keys: Iterable[str], locked: set[str]) -> list[str]:
    """The keys of a fix that the user set (fix and tune leave them alone), as the user's keys are: without +/++."""
    return sorted(locked & {bare_key(key) for key in keys})


def communicator_gib(cfg: DictConfig) -> tuple[float, float]:
    """One NCCL communicator's buffers on this card, and what they would be with NCCL's NVLink SHARP off (0: it is off
    already, or the card has none). The job's environment turns it off with cluster.env.NCCL_NVLS_ENABLE=0: smaller
    buffers, somewhat slower collectives on NVSwitch."""
    without_nvls = cfg.gpu.get("nccl_gib_per_communicator_without_nvls")
    nvls = str((cfg.cluster.get("env") or {}).get("NCCL_NVLS_ENABLE", "1")).strip().lower()
    if without_nvls is None:
        return float(cfg.gpu.nccl_gib_per_communicator), 0.0
    if nvls in ("0", "false"):
        return float(without_nvls), 0.0
    return float(cfg.gpu.nccl_gib_per_communicator), float(without_nvls)


def candidate_fixes(arch: Architecture, knobs: Knobs, capacity: float) -> list[Fix]:
    """Cheapest first in lost throughput."""
    fixes = []
    rollout = rollout_phase(arch, knobs, capacity)
    if engine_context(arch, knobs) > knobs.sequence and rollout.hard_failure:  # free: no sequence of the run is cut
        changes = {"engine_max_model_len": knobs.sequence}
        words = f"engine context {knobs.sequence}"
        fixes.append(Fix(f"cap the engine's context at prompt + response ({knobs.sequence} tokens)", changes, words))
    if not rollout.fits and knobs.engine not in FREE_MEMORY_ENGINES:
        for step in range(int(knobs.engine_fraction * 20) - 1, 1, -1):
            fraction = step / 20
            lowered = rollout_phase(arch, with_changes(knobs, engine_fraction=fraction), capacity)
            if lowered.fits and not FSDP_EDGE.phases_at([lowered]):  # clear of the band, as every fix must be
                words = f"engine memory fraction {fraction}"
                fixes.append(
                    Fix(f"lower the engine's memory fraction to {fraction}", {"engine_fraction": fraction}, words)
                )
                break
    if not knobs.fused_kernels:
        fused = {"fused_kernels": True}
        fixes.append(Fix("compute log-probs in 512-token chunks (fused kernels)", fused, "fused kernels"))
    if not knobs.checkpointing:
        fixes.append(Fix("turn on gradient checkpointing", {"checkpointing": True}, "gradient checkpointing"))
    if knobs.critic and not knobs.critic_checkpointing:  # the critic's update saves every layer's activations
        changes = {"critic_checkpointing": True}
        fixes.append(Fix("turn on the critic's gradient checkpointing", changes, "critic gradient checkpointing"))
    if knobs.communicators and knobs.communicator_gib_without_nvls:  # slower collectives, no host traffic
        off = {"communicator_gib": knobs.communicator_gib_without_nvls, "communicator_gib_without_nvls": 0.0}
        words = f"NVLS off ({' '.join(change_overrides(off, knobs))})"  # named by its override: no knob of verl's
        fixes.append(Fix("turn NCCL's NVLink SHARP off (smaller communicator buffers)", off, words))
    halved = max(knobs.train_tokens // 2, knobs.sequence)
    if halved < knobs.train_tokens:
        if knobs.dynamic_bsz:
            changes = {"train_tokens": halved, "logprob_tokens": max(knobs.logprob_tokens // 2, knobs.sequence)}
            fixes.append(Fix(f"halve the token budget per GPU to {halved}", changes, f"token budget {halved}"))
        else:
            micro = max(1, (knobs.micro_batch or 1) // 2)
            changes = {
                "micro_batch": micro,
                "train_tokens": micro * knobs.sequence,
                "logprob_micro_batch": max(1, (knobs.logprob_micro_batch or 1) // 2),
            }
            fixes.append(Fix(f"halve the micro-batch to {micro}", changes, f"micro-batch {micro}"))
    if knobs.critic:
        fixes += critic_batch_fixes(arch, knobs, capacity)
    if knobs.critic and not knobs.critic_optimizer_offload:
        changes = {"critic_optimizer_offload": True}
        fixes.append(Fix("offload the critic's optimizer state to host RAM", changes, "critic optimizer offload"))
    if not knobs.optimizer_offload:
        changes = {"optimizer_offload": True}
        fixes.append(Fix("offload the optimizer state to host RAM between updates", changes, "optimizer offload"))
    if knobs.critic and not knobs.critic_param_offload:
        changes = {"critic_param_offload": True}
        fixes.append(Fix("offload the critic's parameters to host RAM", changes, "critic param offload"))
    if not knobs.param_offload:
        fixes.append(Fix("offload the parameters to host RAM between phases", {"param_offload": True}, "param offload"))
    if knobs.rollout_tp * 2 <= knobs.gpus_per_node and engine_tp_fits(arch, knobs.rollout_tp * 2):
        wider = knobs.rollout_tp * 2
        fixes.append(Fix(f"raise rollout TP to {wider}", {"rollout_tp": wider}, f"rollout TP {wider}"))
    chained = knobs
    for fix in fixes:
        chained = with_changes(chained, **fix.changes)
    more = smallest_gpu_count(arch, chained, capacity)
    if more is not None and more.n_gpus > knobs.n_gpus:
        fixes.append(Fix(f"use {gpus_text(more)}", count_changes(more, chained), f"{more.n_gpus} GPUs"))
    return fixes


def largest_divisor_up_to(whole: int, limit: int) -> int:
    """The largest divisor of `whole` no more than `limit` (at least 1): a micro-batch verl can cut `whole` into
    (prepare_micro_batches asserts whole micro-batches)."""
    return next((size for size in range(max(1, limit), 0, -1) if whole % size == 0), 1)


def halved_micro_batch(micro: int, share: int) -> int:
    """Half of what a micro-batch holds of a rank's `share` sequences (one above the share holds only the share,
    Knobs.on_gpu; 0: not known), as the largest size at most that which divides the share."""
    held = min(micro, share) if share else micro
    return largest_divisor_up_to(share, held // 2) if share else max(1, held // 2)


def critic_batch_fixes(arch: Architecture, knobs: Knobs, capacity: float) -> list[Fix]:
    """The critic's micro-batch halved in the knob its engine reads (memory.critic_batching). With dynamic batching
    that is the token budget of what a GPU holds (a budget above the rank's share holds only the share, so halving
    the budget alone may change nothing): under the v1 trainer one key sizes both the update and the value pass, under
    the legacy one the update's own. Without it, the engine's micro_batch_size_per_gpu and
    infer_micro_batch_size_per_gpu, each to a size that still divides the rank's share (verl asserts it)."""
    if knobs.critic_dynamic_bsz:
        halved = max(knobs.critic_train_tokens_on_gpu // 2, knobs.sequence)
        if halved >= knobs.critic_train_tokens_on_gpu:
            return []
        changes = {"critic_tokens": halved} | ({"critic_value_tokens": halved} if knobs.critic_v1 else {})
        words = f"critic token budget {halved}"
        return [Fix(f"halve the critic's token budget per GPU to {halved}", changes, words)]
    share = knobs.share(knobs.critic_mini_batch_sequences or knobs.mini_batch_sequences, knobs.critic_sequence_parallel)
    value_share = knobs.share(knobs.batch_sequences, knobs.critic_sequence_parallel)
    halved_micro = halved_micro_batch(knobs.critic_micro_batch or 1, share)
    if halved_micro >= (knobs.critic_micro_batch or 1):
        return []
    changes: dict[str, Any] = {"critic_micro_batch": halved_micro, "critic_tokens": halved_micro * knobs.sequence}
    if not critic_value_phase(arch, knobs, capacity).fits:  # its own knob: halved only where the value pass misses
        halved_value = halved_micro_batch(knobs.critic_value_micro_batch or 1, value_share)
        changes |= {"critic_value_micro_batch": halved_value, "critic_value_tokens": halved_value * knobs.sequence}
    words = f"critic micro-batch {halved_micro}"
    return [Fix(f"halve the critic's micro-batch to {halved_micro}", changes, words)]


def gpus_text(knobs: Knobs) -> str:
    nodes = knobs.n_gpus // knobs.gpus_per_node
    return f"{knobs.n_gpus} GPUs ({nodes} node(s) x {knobs.gpus_per_node})"


def gpu_counts(knobs: Knobs) -> list[tuple[int, int]]:
    """(nodes, GPUs per node) above the run's count, ascending: a partial node first grows to a whole one (of
    NODE_GPUS), then whole nodes are added."""
    per_node, nodes = knobs.gpus_per_node, max(1, knobs.n_gpus // knobs.gpus_per_node)
    counts = []
    if nodes == 1 and per_node < NODE_GPUS:
        wider = per_node * 2
        while wider <= NODE_GPUS:
            counts.append((1, wider))
            wider *= 2
        per_node, nodes = max(per_node, NODE_GPUS), 1
    return counts + [(more, per_node) for more in range(nodes + 1, MAX_NODES + 1)]


def splits(knobs: Knobs) -> bool:
    """verl can run this GPU count: the mini-batch and the batch split over its data-parallel ranks
    (train_mini_batch asserts it) and rollout TP divides its GPUs."""
    ranks = knobs.data_parallel
    divides = all(not sequences or sequences % ranks == 0 for sequences in (knobs.mini_batch_sequences,))
    return divides and knobs.n_gpus % knobs.rollout_tp == 0 and knobs.n_gpus % knobs.sequence_parallel == 0


def within_host_budget(host_gib_per_node: float, gpus_per_node: int, host_gib_per_gpu: float) -> bool:
    """A node's host RAM within a budget per GPU (0: not checked)."""
    return not host_gib_per_gpu or host_gib_per_node <= host_gib_per_gpu * gpus_per_node


def host_fits(arch: Architecture, knobs: Knobs, host_gib_per_gpu: float) -> bool:
    return within_host_budget(host_ram_per_node(arch, knobs), knobs.gpus_per_node, host_gib_per_gpu)


def host_budget(run_gib_per_node: float, gpus_per_node: int, profile_gib_per_gpu: float) -> float:
    """The host RAM per GPU a fix may take (0: not checked): the profile's share, or what the run as it is already
    takes (`run_gib_per_node`, FSDP's estimate or Megatron's), whichever is more. The run gets --mem of at least
    1.2 x its own estimate whatever the share (plan.make_resources) and the plan judges the node's host RAM itself, so
    a fix that takes no more than the run does is no host-RAM risk; the share held it alone, and Llama-3.1-8B LoRA on
    one A40 (67.8 GiB, share 64) had the free engine-context fix refused and 2 GPUs added to it."""
    if not profile_gib_per_gpu:
        return 0.0
    return max(profile_gib_per_gpu, run_gib_per_node / gpus_per_node)


def host_budget_per_gpu(arch: Architecture, knobs: Knobs, profile_gib_per_gpu: float) -> float:
    """host_budget of an FSDP run as it is."""
    return host_budget(host_ram_per_node(arch, knobs), knobs.gpus_per_node, profile_gib_per_gpu)


def smallest_gpu_count(
    arch: Architecture, knobs: Knobs, capacity: float, host_gib_per_gpu: float = 0.0
) -> Knobs | None:
    """The knobs at the smallest GPU count (gpu_counts) at which these knobs fit clear of the estimate's band
    (fits_clear: a count that lands in it is no fix), with the smallest rollout TP from
    the run's own that fits (the engine's weights alone can outgrow its share of a card at any count), or None up to
    MAX_NODES nodes. Each GPU holds a smaller share of the model states, and of the batch."""
    for nodes, per_node in gpu_counts(knobs):
        tp = knobs.rollout_tp
        while tp <= per_node:
            candidate = with_changes(knobs, n_gpus=nodes * per_node, gpus_per_node=per_node, rollout_tp=tp)
            fitting = fits_clear(arch, candidate, capacity, host_gib_per_gpu)
            if engine_tp_fits(arch, tp) and splits(candidate) and fitting:
                return candidate
            tp *= 2
    return None


def count_changes(more: Knobs, knobs: Knobs) -> dict[str, Any]:
    """The Knobs changes of a GPU count found by smallest_gpu_count."""
    changes: dict[str, Any] = {"n_gpus": more.n_gpus, "gpus_per_node": more.gpus_per_node}
    return changes | ({"rollout_tp": more.rollout_tp} if more.rollout_tp != knobs.rollout_tp else {})


OFFLOADS = {  # cheapest first: the optimizer moves once per update, the parameters once per phase
    "optimizer offload": {"optimizer_offload": True, "critic_optimizer_offload": True},
    "param+optimizer offload": {
        "optimizer_offload": True,
        "param_offload": True,
        "critic_optimizer_offload": True,
        "critic_param_offload": True,
    },
}


def engine_tp_fits(arch: Architecture, tp: int) -> bool:
    """The engine can run at this TP: it splits the model's attention heads (layout_checks.engine_tp_splits_heads)."""
    return engine_tp_splits_heads(tp, arch.heads, arch.kv_heads)


def same_gpu_options(arch: Architecture, knobs: Knobs) -> list[tuple[str, dict[str, Any]]]:
    """Changes that keep the run's GPUs, cheapest first: offloading the trainer's states, then a larger rollout TP
    (each TP that divides a node's GPUs and the model's heads), then both."""
    offloads = [
        (name, {key: value for key, value in changes.items() if getattr(knobs, key) != value})
        for name, changes in OFFLOADS.items()
    ]
    offloads = [(name, changes) for name, changes in offloads if changes]
    wider, tps = knobs.rollout_tp * 2, []
    while wider <= knobs.gpus_per_node and knobs.gpus_per_node % wider == 0:
        if engine_tp_fits(arch, wider):
            tps.append((f"rollout TP {wider}", {"rollout_tp": wider}))
        wider *= 2
    both = [(f"{name} and {tp}", changes | tp_changes) for name, changes in offloads for tp, tp_changes in tps]
    return offloads + tps + both


def change_overrides(changes: dict[str, Any], knobs: Knobs) -> tuple[str, ...]:
    return tuple(as_overrides(overrides_for(changes, knobs)))


def fitting_change(
    arch: Architecture,
    knobs: Knobs,
    capacity: float,
    host_gib_per_gpu: float,
    fixes: list[Fix] | None = None,
) -> FittingChange:
    """The cheapest change that makes a misfit fit clear of the estimate's band: on the run's own GPUs (the minimal
    set of the single `fixes` that keep them, cheapest first: the very set the cheapest fix names, keys the user set
    included, as the plan's `cheapest fix` does; launch.preflight=fix applies it only where it leaves those keys
    alone; else an offload, host RAM permitting, or a larger rollout TP), and the smallest
    GPU count at today's knobs (and, when nothing fits the run's GPUs, with offload). Its `summary` says it in one
    line, e.g. "fits on 8 with param+optimizer offload (host RAM 1.1 TiB/node); without offload needs 32"."""
    mine: SameGpuChange | None = None
    # the fixes of keys the user set count here too, as in the cheapest fix: leaving them out, `what fits` named
    # another change than the cheapest fix (a pasted script set the engine fraction whose lowering fits; `what fits`
    # named NVLS off, "without NVLS off it needs 16 GPUs")
    own = [fix for fix in fixes or () if not GPU_COUNT_CHANGES & fix.changes.keys()]
    chain = minimal_set(arch, knobs, capacity, own, host_gib_per_gpu)
    if chain:
        changes = chained_changes(chain)
        host = round(host_ram_per_node(arch, with_changes(knobs, **changes)), 1)
        words = " and ".join(fix.words for fix in chain)
        mine = SameGpuChange(change=words, overrides=change_overrides(changes, knobs), host_ram_gib_per_node=host)
    for name, changes in [] if mine is not None else same_gpu_options(arch, knobs):
        candidate = with_changes(knobs, **changes)
        if fits_clear(arch, candidate, capacity, host_gib_per_gpu):
            host = round(host_ram_per_node(arch, candidate), 1)
            mine = SameGpuChange(change=name, overrides=change_overrides(changes, knobs), host_ram_gib_per_node=host)
            break
    needed: GpuCount | None = None
    more = smallest_gpu_count(arch, knobs, capacity, host_gib_per_gpu)
    if more is not None:
        needed = GpuCount(more.n_gpus, more.rollout_tp, change_overrides(count_changes(more, knobs), knobs))
    offloaded: GpuCount | None = None
    offload = {key: value for key, value in OFFLOADS["param+optimizer offload"].items() if getattr(knobs, key) != value}
    if mine is None and offload:  # fewer GPUs may do with the states in host RAM
        fewer = smallest_gpu_count(arch, with_changes(knobs, **offload), capacity, host_gib_per_gpu)
        if fewer is not None and (more is None or fewer.n_gpus < more.n_gpus):
            offloaded = GpuCount(
                gpus=fewer.n_gpus,
                rollout_tp=fewer.rollout_tp,
                overrides=change_overrides(offload | count_changes(fewer, knobs), knobs),
                host_ram_gib_per_node=round(host_ram_per_node(arch, fewer), 1),
            )
    # where nothing fits the run's GPUs clear of the band but a set of fixes fits within it, `what fits` says so: the
    # GPUs it names are then for a verdict that can be called, not for memory the run as fixed lacks
    close = [] if mine is not None else minimal_set(arch, knobs, capacity, own, host_gib_per_gpu, clear_of_band=False)
    found = FittingChange(on_your_gpus=mine, gpus_needed=needed, gpus_needed_offloaded=offloaded, summary="")
    return replace(found, summary=fitting_summary(found, knobs, " and ".join(fix.words for fix in close)))


def tib_or_gib(gib: float) -> str:
    return f"{gib / 1024:.1f} TiB" if gib >= 1024 else f"{gib:.0f} GiB"


def fitting_summary(found: FittingChange, knobs: Knobs, too_close: str = "") -> str:
    """One line: what fits the run's GPUs, else the GPU count that fits with offload; then the count without it.
    `too_close`: the fixes that fit the run's GPUs only within the estimate's band around the card."""
    mine, needed, offloaded = found.on_your_gpus, found.gpus_needed, found.gpus_needed_offloaded

    def tp(count: GpuCount) -> str:
        return f" (rollout TP {count.rollout_tp})" if count.rollout_tp != knobs.rollout_tp else ""

    if mine is not None:
        parts = [f"fits on {knobs.n_gpus} with {mine.change} (host RAM {tib_or_gib(mine.host_ram_gib_per_node)}/node)"]
    elif too_close:
        parts = [
            f"on {knobs.n_gpus} only too close to call with {too_close} (within the estimate's band around the card)"
        ]
    else:
        parts = [f"no offload or rollout TP fits it on {knobs.n_gpus}"]
    if offloaded is not None:
        host = tib_or_gib(offloaded.host_ram_gib_per_node or 0.0)
        parts.append(
            f"with param+optimizer offload it needs {offloaded.gpus} GPUs{tp(offloaded)} (host RAM {host}/node)"
        )
    if needed is None:
        parts.append(f"no GPU count up to {MAX_NODES} nodes fits it as it is")
    else:
        without = "as it is" if mine is None else f"without {mine.change}" if " and " not in mine.change else ""
        without = without or "without them"
        parts.append(f"{without} it needs {needed.gpus} GPUs{tp(needed)}")
    return "; ".join(parts)


def overrides_for(changes: dict[str, Any], knobs: Knobs) -> dict[str, Any]:
    """Knobs changes -> verl key overrides."""
    out = {}
    per_node = int(changes.get("gpus_per_node", knobs.gpus_per_node))
    for name, value in changes.items():
        if name == "n_gpus":
            out[KEYS["nnodes"]] = value // per_node if value >= per_node else 1
        elif name == "gpus_per_node":
            if value != knobs.gpus_per_node:
                out[KEYS["gpus_per_node"]] = value
        elif name.startswith("critic_") and not knobs.critic:
            continue  # no critic
        elif name == "train_tokens" and not knobs.dynamic_bsz:
            continue  # follows micro_batch
        elif name == "logprob_tokens" and not knobs.dynamic_bsz:
            continue
        elif name in ("critic_tokens", "critic_value_tokens") and not knobs.critic_dynamic_bsz:
            continue  # follow the critic's micro-batches
        elif name == "communicator_gib":
            out[NVLS_OVERRIDE] = "0"  # the job's environment, as a string (cluster.env reaches NCCL as variables)
        elif (key := knob_key(name, knobs)) is not None:
            out[key] = value
            if name in REF_KEYS and knobs.ref_model:  # the reference model's log-prob pass has the same shape
                out[REF_KEYS[name]] = value
    return out


GPU_COUNT_CHANGES = frozenset({"n_gpus", "gpus_per_node"})  # the Knobs fields of a fix that adds GPUs


def chained_changes(fixes: Iterable[Fix]) -> dict[str, Any]:
    """The Knobs changes of fixes applied in order (a later fix's value of a knob wins)."""
    changes: dict[str, Any] = {}
    for fix in fixes:
        changes.update(fix.changes)
    return changes


def minimal_set(
    arch: Architecture,
    knobs: Knobs,
    capacity: float,
    fixes: list[Fix],
    host_gib_per_gpu: float = 0.0,
    clear_of_band: bool = True,
) -> list[Fix]:
    """The cheapest set of fixes that fits clear of the band (fits_clear), or [] where none does: fixes applied
    cumulatively, cheapest first, until the run fits; then each fix of that chain, dearest first, dropped where the
    rest still fit without it (a backward elimination). So no fix is named that the others do not need: NVLS off and a
    halved token budget tried before optimizer offload are no part of a fix that optimizer offload makes alone.
    `clear_of_band` False: the set that fits at all, the band allowed (what `what fits` says is too close to call)."""

    def reaches(chain: list[Fix]) -> bool:
        candidate = with_changes(knobs, **chained_changes(chain))
        if clear_of_band:
            return fits_clear(arch, candidate, capacity, host_gib_per_gpu)
        return fits(arch, candidate, capacity) and host_fits(arch, candidate, host_gib_per_gpu)

    chain: list[Fix] = []
    for fix in fixes:
        chain.append(fix)
        if reaches(chain):
            break
    else:
        return []
    for fix in list(reversed(chain)):
        rest = [kept for kept in chain if kept is not fix]
        if rest and reaches(rest):
            chain = rest
    return chain


def plan_fixes(
    arch: Architecture, knobs: Knobs, capacity: float, locked: set[str], host_gib_per_gpu: float = 0.0
) -> tuple[tuple[FixReport, ...], list[Fix], tuple[str, ...], dict[str, Any]]:
    """Every single fix with its predicted peaks; the fixes; the minimal set that fits (minimal_set: advice, it may
    touch keys the user set); and the minimal such set among the fixes that leave the user's keys alone, as verl keys
    and typed values."""
    fixes = candidate_fixes(arch, knobs, capacity)
    reports = []
    for fix in fixes:
        keys = overrides_for(fix.changes, knobs)
        phases = phases_of(arch, with_changes(knobs, **fix.changes), capacity)
        reports.append(
            FixReport(
                fix=fix.description,
                overrides=keys,
                peaks_gib={phase.name: round(phase.peak_gib, 1) for phase in phases},
                fits=all(phase.fits for phase in phases),
                you_set=tuple(locks(keys, locked)),
            )
        )
    allowed = [fix for fix in fixes if not locks(overrides_for(fix.changes, knobs), locked)]
    advice = change_overrides(chained_changes(minimal_set(arch, knobs, capacity, fixes, host_gib_per_gpu)), knobs)
    applicable = overrides_for(chained_changes(minimal_set(arch, knobs, capacity, allowed, host_gib_per_gpu)), knobs)
    return tuple(reports), fixes, advice, applicable


def knob_changes(overrides: dict[str, Any], knobs: Knobs) -> dict[str, Any]:
    """overrides_for's inverse: the Knobs changes of a fix's verl keys (the knobs `tune` starts from after it)."""
    given = {bare_key(key): value for key, value in overrides.items()}
    changes: dict[str, Any] = {}
    for name in (*KEYS, *SFT_KEYS):
        key = knob_key(name, knobs)
        if key is not None and bare_key(key) in given and name not in ("nnodes", "gpus_per_node"):
            changes[name] = given[bare_key(key)]
    per_node = int(given.get(KEYS["gpus_per_node"], knobs.gpus_per_node))
    if KEYS["nnodes"] in given or KEYS["gpus_per_node"] in given:
        nodes = int(given.get(KEYS["nnodes"], max(1, knobs.n_gpus // knobs.gpus_per_node)))
        changes |= {"n_gpus": nodes * per_node, "gpus_per_node": per_node}
    if NVLS_KEY in given and knobs.communicator_gib_without_nvls:
        changes |= {"communicator_gib": knobs.communicator_gib_without_nvls, "communicator_gib_without_nvls": 0.0}
    if not knobs.dynamic_bsz:  # the token counts follow the micro-batches
        if "micro_batch" in changes:
            changes["train_tokens"] = changes["micro_batch"] * knobs.sequence
        if "logprob_micro_batch" in changes:
            changes["logprob_tokens"] = changes["logprob_micro_batch"] * knobs.sequence
    if knobs.critic and not knobs.critic_dynamic_bsz:  # the critic's token counts follow its micro-batches
        for micro, tokens in (
            ("critic_micro_batch", "critic_tokens"),
            ("critic_value_micro_batch", "critic_value_tokens"),
        ):
            if micro in changes:
                changes[tokens] = changes[micro] * knobs.sequence
    return changes


def typed_overrides(overrides: Iterable[str]) -> dict[str, Any]:
    """key=value overrides as a fix prints them -> verl key (with its +/++, as printed) -> typed value, as Hydra reads
    them: what settle sets is what was printed."""
    return {
        ("++" if override.startswith("++") else "+" if override.startswith("+") else "") + key_of(parsed): (
            parsed.value()
        )
        for override, parsed in zip(overrides, parse(list(overrides)), strict=True)
    }


TUNABLE = ("train", "logprob", "engine_fraction", "max_num_seqs")


def largest(arch: Architecture, capacity: float, candidates: Iterable[Knobs]) -> Knobs | None:
    """The last of the ascending candidates that fits with TUNE_HEADROOM spare, stopping at the first misfit after
    a fit (below the first fit, e.g. an engine fraction too small for one sequence, nothing stops the walk)."""
    best = None
    for candidate in candidates:
        if fits(arch, candidate, capacity, TUNE_HEADROOM):
            best = candidate
        elif best is not None:
            break
    return best


def budget_limit(knobs: Knobs, share: int) -> int:
    """The largest token budget per GPU that verl can fill from a rank's share: the share's tokens over its Ulysses
    group (a group packs budget x SP)."""
    return share * knobs.sequence // knobs.sequence_parallel


# The candidates are made lazily: a large batch's share holds tens of thousands of budgets, and the walk in `largest`
# stops at the first misfit after a fit (a list of them all made the fit table spend most of its time in replace())
def train_candidates(knobs: Knobs, mini_batch_sequences: int = 0) -> Iterator[Knobs]:
    """Token budgets in TOKEN_STEPs up to the rank's share of a mini-batch, or the micro-batches that divide it (verl
    requires that), ascending."""
    share = sequence_per_gpu_limit(knobs, mini_batch_sequences)
    if knobs.dynamic_bsz:
        top = max(knobs.sequence, budget_limit(knobs, share))
        return (with_changes(knobs, train_tokens=t) for t in range(knobs.sequence, top + 1, TOKEN_STEP))
    return (with_train_tokens(knobs, m * knobs.sequence) for m in range(1, share + 1) if share % m == 0)


def logprob_candidates(knobs: Knobs, batch_sequences: int = 0) -> Iterator[Knobs]:
    """The log-prob pass goes over the whole batch: budgets up to the rank's share of it, or the micro-batches that
    divide it (verl's prepare_micro_batches asserts whole micro-batches), ascending."""
    share = max(1, knobs.share(batch_sequences or knobs.batch_sequences))
    if knobs.dynamic_bsz:
        budgets = range(knobs.sequence, max(knobs.sequence, budget_limit(knobs, share)) + 1, TOKEN_STEP)
        return (with_changes(knobs, logprob_tokens=t) for t in budgets)
    return (
        with_changes(knobs, logprob_micro_batch=m, logprob_tokens=m * knobs.sequence)
        for m in range(1, share + 1)
        if share % m == 0
    )


def engine_sequences(arch: Architecture, knobs: Knobs, capacity: float, typical_tokens: int = 0) -> int:
    """How many typical-length sequences the engine's KV cache holds, at most what one engine replica gets of the
    batch (what max_num_seqs can usefully be)."""
    kv_room = engine_memory(arch, knobs, capacity)[3]
    length = typical_tokens or max(1, int(knobs.sequence * TYPICAL_FRACTION))
    per_sequence = kv_per_sequence_gib(arch, knobs, length)
    held = int(kv_room / per_sequence) if per_sequence > 0 and kv_room > 0 else 0
    return min(held, knobs.engine_share) if knobs.engine_share else held


def tune(
    arch: Architecture,
    knobs: Knobs,
    capacity: float,
    locked: set[str],
    mini_batch_sequences: int = 0,
    batch_sequences: int = 0,
    what: tuple[str, ...] = TUNABLE,
    typical_tokens: int = 0,
) -> dict:
    """Raise what leaves memory idle, in order, each to the largest value that fits with TUNE_HEADROOM spare (so
    one step more does not): the training micro-batch or token budget, the log-prob micro-batch or budget (over
    `batch_sequences`), the engine's memory fraction, then its concurrency (the typical-length sequences its KV cache
    holds, at most one engine replica's share of the batch). Shares: the knobs' own mini-batch and batch, unless
    given. Keys the user set stay. Returns Knobs changes."""
    changes: dict[str, Any] = {}
    train_key = knob_key("train_tokens" if knobs.dynamic_bsz else "micro_batch", knobs)
    if "train" in what and train_key not in locked:
        best = largest(arch, capacity, train_candidates(knobs, mini_batch_sequences))
        if best is not None and best.train_tokens != knobs.train_tokens:
            changes.update(
                {"train_tokens": best.train_tokens} if knobs.dynamic_bsz else {"micro_batch": best.micro_batch}
            )
            knobs = best
    logprob_key = knob_key("logprob_tokens" if knobs.dynamic_bsz else "logprob_micro_batch", knobs)
    if "logprob" in what and (batch_sequences or knobs.batch_sequences) and logprob_key not in (None, *locked):
        best = largest(arch, capacity, logprob_candidates(knobs, batch_sequences))
        if best is not None and best.logprob_tokens != knobs.logprob_tokens:
            changes.update(
                {"logprob_tokens": best.logprob_tokens}
                if knobs.dynamic_bsz
                else {"logprob_micro_batch": best.logprob_micro_batch}
            )
            knobs = best
    if "engine_fraction" in what and KEYS["engine_fraction"] not in locked:
        steps = [with_changes(knobs, engine_fraction=step / 20) for step in range(1, 20)]
        best = largest(arch, capacity, steps)
        if best is not None and best.engine_fraction > knobs.engine_fraction:
            changes["engine_fraction"] = best.engine_fraction
            knobs = best
    if "max_num_seqs" in what and KEYS["max_num_seqs"] not in locked:
        wanted = min(MAX_ENGINE_SEQS, engine_sequences(arch, knobs, capacity, typical_tokens))
        if knobs.engine == "vllm":  # vLLM refuses more sequences at once than batched tokens (check_engine_batching)
            wanted = min(wanted, knobs.max_num_batched_tokens)
        if wanted > knobs.max_num_seqs:
            changes["max_num_seqs"] = wanted
    return changes


def summarize(arch: Architecture, knobs: Knobs, capacity: float, bf16_tflops: float, policy: str) -> Verdict:
    """The verdict's own part: each phase against the card, and the predicted throughput."""
    phases = phases_of(arch, knobs, capacity)
    return Verdict.of(phases, host_ram_terms(arch, knobs), Predicted.at(arch, knobs, bf16_tflops), policy)


def run(
    arch: Architecture,
    knobs: Knobs,
    capacity: float,
    bf16_tflops: float,
    policy: str,
    overrides: list[str],
    lengths: TypicalLengths,
    host_gib_per_gpu: float = 0.0,
) -> tuple[Verdict, dict[str, Any]]:
    """The verdict for the plan as it is, and the verl keys the policy changes with their typed values: `fix` the
    cheapest set that fits, `tune` that set and then the largest knobs that fit (tuned from the fixed plan). A misfit
    also carries `fits_with`: the cheapest change that fits, searched."""
    locked = locked_keys(overrides, knobs)
    verdict = summarize(arch, knobs, capacity, bf16_tflops, policy)
    host_gib_per_gpu = host_budget_per_gpu(arch, knobs, host_gib_per_gpu)
    applicable: dict[str, Any] = {}
    fixed = knobs
    if not verdict.fits:
        reports, fixes, advice, applicable = plan_fixes(arch, knobs, capacity, locked, host_gib_per_gpu)
        verdict = replace(
            verdict,
            fixes=reports,
            first_fitting_fixes=advice,
            fits_with=fitting_change(arch, knobs, capacity, host_gib_per_gpu, fixes),
        )
        # what `fix` applies is the cheapest fix the plan and the refusal name (Verdict.cheapest_fix, verdict.CHEAPEST)
        # where it leaves the user's keys alone; else the minimal set of the fixes that do
        cheapest = verdict.cheapest_fix
        if cheapest and not locks(typed_overrides(cheapest), locked):
            applicable = typed_overrides(cheapest)
        verdict = replace(verdict, unfixable_without_your_keys=not applicable)
        fixed = with_changes(knobs, **knob_changes(applicable, knobs)) if applicable else knobs
    proposed: dict[str, Any] = {}
    if policy in ("fix", "tune") and not verdict.fits:
        proposed = dict(applicable)
    if policy == "tune" and (verdict.fits or applicable):
        tuned = tune(arch, fixed, capacity, locked, typical_tokens=lengths.sequence_tokens)
        proposed.update(overrides_for(tuned, fixed))
    return replace(verdict, typical=typical(arch, knobs, capacity, lengths)), proposed


def at_lengths(knobs: Knobs, prompt_tokens: int, response_tokens: int) -> Knobs:
    """The knobs with every sequence at these lengths: a micro-batch of whole sequences holds shorter ones, a token
    budget holds more of them (up to the rank's share, which Knobs caps)."""
    usual = with_changes(knobs, prompt_length=prompt_tokens, response_length=response_tokens)
    length = usual.sequence
    changes: dict[str, Any] = {}
    if not knobs.dynamic_bsz:
        changes["train_tokens"] = micro_batch_tokens(False, None, knobs.micro_batch, length)
        changes["logprob_tokens"] = micro_batch_tokens(False, None, knobs.logprob_micro_batch, length)
    if knobs.critic and not knobs.critic_dynamic_bsz:  # the critic's engine batches on its own (critic_batching)
        changes["critic_tokens"] = micro_batch_tokens(False, None, knobs.critic_micro_batch, length)
        changes["critic_value_tokens"] = micro_batch_tokens(False, None, knobs.critic_value_micro_batch, length)
    return with_changes(usual, **changes) if changes else usual


def typical(
    arch: Architecture, knobs: Knobs, capacity: float, lengths: TypicalLengths, estimator: Estimator = phases_of
) -> Typical:
    """The peaks when every sequence has the typical lengths (launch/lengths.py: the user's launch.expect.*, measured
    ones, else half the maximum): what a run usually sees. The verdict stays on the worst case (full-length sequences
    filling the micro-batch or the token budget). `estimator`: FSDP's, or a Megatron layout's."""
    prompt = max(0, min(knobs.prompt_length, int(lengths.prompt_tokens)))
    response = max(1, min(knobs.response_length, int(lengths.response_tokens)))
    phases = estimator(arch, at_lengths(knobs, prompt, response), capacity)
    return Typical(
        prompt_tokens=prompt,
        response_tokens=response,
        sequence_tokens=prompt + response,
        source=lengths.source,
        peaks_gib={phase.name: round(phase.peak_gib, 1) for phase in phases},
        fits=all(phase.fits for phase in phases),
    )


def judge(
    cfg: Any,
    verl: dict[str, Any],
    llm: dict[str, Any],
    overrides: list[str],
    packages: dict[str, str],
    lengths: TypicalLengths | None = None,
) -> tuple[Verdict, dict[str, Any]]:
    """The preflight of one job's config (cfg: the composed config; verl: its resolved verl keys; llm: the
    architecture launch/plan.py's llm_architecture finds; packages: the venv's; lengths: the typical lengths for the
    `typical` figures, by default launch/lengths.py's from cfg): the verdict, and the verl keys its policy would set
    with their typed values (settle applies them). Pure, but for reading a local reward model's config.json
    (facts.reward_model_config)."""
    tasks = len(pcgrad_tasks(cfg)) if cfg.algo.pcgrad.enabled else 0
    software = job_software(cfg.cluster, str(verl["actor_rollout_ref"]["rollout"]["name"]), packages)
    communicators, communicators_without_nvls = communicator_gib(cfg)
    knobs = with_changes(
        Knobs.from_verl(verl, pcgrad_tasks=tasks, flash_ce=software.flash_attn),
        engine_weights_in_host_ram=software.engine_weights_in_host_ram,
        communicator_gib=communicators,
        communicator_gib_without_nvls=communicators_without_nvls,
    )
    reward = reward_model_config(verl) if knobs.reward_model else None
    if reward is not None:
        knobs = with_changes(knobs, **reward_architecture_knobs(verl, Architecture.from_llm(reward)))
    if cfg.algo.name == "rft":
        knobs = rft_knobs(knobs, stage3_config(cfg, verl))
    arch, capacity, bf16_tflops = Architecture.from_llm(llm), float(cfg.gpu.usable_gib), float(cfg.gpu.bf16_tflops)
    policy, lengths = str(cfg.launch.preflight), lengths or typical_lengths(cfg)
    host_gib_per_gpu = float(cfg.gpu.host_ram_gib_per_gpu)
    megatron = verl["actor_rollout_ref"]["actor"].get("strategy") == "megatron"
    if megatron and not runs_rft(knobs):
        judged_at = MegatronJudging(arch, knobs, capacity, bf16_tflops, Card.of(cfg.gpu), host_gib_per_gpu, lengths)
        verdict, proposed = megatron_verdict(judged_at, verl, policy, overrides)
    else:
        verdict, proposed = run(arch, knobs, capacity, bf16_tflops, policy, overrides, lengths, host_gib_per_gpu)
    skipped = skipped_engine_check(verl)
    judged = replace(
        verdict,
        job_software=JobSoftwareNotes(
            software,
            tuple(
                software.lines(megatron=megatron and not runs_rft(knobs), engine_sleeps=not runs_rft(knobs))
                + ([skipped] if skipped else [])
            ),
        ),
        knobs=knobs,  # what was judged: the doctor reads it back instead of rebuilding it
        # RFT builds no critic or reward model, whatever the PPO keys say
        not_counted=(*verdict.not_counted, *(() if runs_rft(knobs) else not_counted(verl, llm, knobs))),
    )
    return judged, proposed


@dataclass(frozen=True)
class MegatronJudging:
    """What a Megatron verdict and its fix search judge against: the model, the non-Megatron knobs (memory.Knobs:
    the engine, lengths and batches; a fix changes only the engine's TP among them), the card and the typical
    lengths."""

    arch: Architecture
    knobs: Knobs
    capacity: float
    bf16_tflops: float
    card: Card
    host_gib_per_gpu: float
    lengths: TypicalLengths

    def knobs_of(self, verl: dict[str, Any]) -> Knobs:
        """The knobs with the engine's TP and context and the training micro-batch this config gives them (the
        non-Megatron knobs a fix may change)."""
        arr = verl["actor_rollout_ref"]
        given = {
            "rollout_tp": int(arr["rollout"]["tensor_model_parallel_size"]),
            "train_tokens": micro_batch_tokens(
                self.knobs.dynamic_bsz,
                arr["actor"].get("ppo_max_token_len_per_gpu"),
                arr["actor"].get("ppo_micro_batch_size_per_gpu"),
                self.knobs.sequence,
            ),
            "micro_batch": arr["actor"].get("ppo_micro_batch_size_per_gpu"),
            "engine_max_model_len": int(arr["rollout"].get("max_model_len") or 0),
        }
        changed = {name: value for name, value in given.items() if getattr(self.knobs, name) != value}
        return with_changes(self.knobs, **changed) if changed else self.knobs

    def verdict(self, verl: dict[str, Any], policy: str) -> Verdict:
        return megatron_summary(
            self.arch, self.knobs_of(verl), MegatronKnobs.from_verl(verl), self.capacity, self.bf16_tflops, policy
        )

    def step_s(self, verl: dict[str, Any]) -> float:
        """The step-time model's seconds for this config at the typical lengths (how a fix is ranked)."""
        lengths = Lengths(float(self.lengths.prompt_tokens), float(self.lengths.response_tokens), self.lengths.source)
        return forecast(self.arch, self.knobs_of(verl), self.card, verl, lengths, trains_critic(verl)).step_s


# verl's Megatron keys a fix may set on the actor (the reference's follow where they equal the actor's)
MEGATRON_ACTOR = "actor_rollout_ref.actor.megatron"
MEGATRON_REF = "actor_rollout_ref.ref.megatron"
MEGATRON_SIZE_KEYS = ("pipeline_model_parallel_size", "tensor_model_parallel_size", "expert_model_parallel_size")
FULL_RECOMPUTE = {  # Megatron's full recomputation of every layer (override_transformer_config's own keys)
    "override_transformer_config.recompute_granularity": "full",
    "override_transformer_config.recompute_method": "uniform",
    "override_transformer_config.recompute_num_layers": 1,
}
# the reference's keys a fix moves with the actor's: its layout and its param offload (it has no optimizer, and a
# forward-only pass recomputes nothing)
REF_FOLLOWS = (*MEGATRON_SIZE_KEYS, "param_offload")
MEGATRON_CRITIC = "critic.megatron"
CRITIC_FOLLOWS = (*REF_FOLLOWS, "optimizer_offload", *FULL_RECOMPUTE)
MEGATRON_WIDENING = (1, 2, 4)  # each parallel size is searched at x1, x2 and x4 of the run's own
ENGINE_TP = "actor_rollout_ref.rollout.tensor_model_parallel_size"
MEGATRON_NARROWING = (2, 4)  # a training micro-batch that does not fit is searched at 1/2 and 1/4 of the run's own


def narrower_batches(verl: dict[str, Any], knobs: Knobs) -> list[tuple[str, dict[str, Any]]]:
    """The training micro-batch at 1/2 and 1/4: the token budget down to one whole sequence (verl asserts a budget
    holds the longest, utils/seqlen_balancing.py), or the micro-batch down to one sequence."""
    key = f"actor_rollout_ref.actor.{BATCH_KNOBS[knobs.dynamic_bsz][0]}"  # the training one of verl's batch mode
    now = int(select(verl, key) or 1)
    smallest = knobs.sequence if knobs.dynamic_bsz else 1
    sizes = sorted({now // factor for factor in MEGATRON_NARROWING if now // factor >= smallest}, reverse=True)
    words = "token budget" if knobs.dynamic_bsz else "micro-batch"
    return [(f"{words} {size}", {key: size}) for size in sizes]


@dataclass(frozen=True)
class MegatronChange:
    """One change to a Megatron run's knobs: its words, and the verl keys with their typed values."""

    description: str
    values: dict[str, Any]

    @property
    def keys(self) -> set[str]:
        """The config keys it sets (a `++` key as the config and the user's overrides name it)."""
        return {bare_key(key) for key in self.values}


def with_values(verl: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A copy of the resolved config with these dotted keys (a `++` one added where verl's config lacks it) set
    (parents copied, the rest shared)."""
    changed = dict(verl)
    for key, value in values.items():
        *parents, leaf = bare_key(key).split(".")
        node = changed
        for part in parents:
            node[part] = dict(node.get(part) or {})
            node = node[part]
        node[leaf] = value
    return changed


def megatron_values(verl: dict[str, Any], actor_values: dict[str, Any]) -> dict[str, Any]:
    """The actor's megatron.* values as verl keys, with the reference's same key (REF_FOLLOWS) where the reference
    runs on Megatron and holds the actor's value now (verl's ref.megatron follows the actor's by default), and the
    critic's (its layout, both offloads and recomputation) where a Megatron critic has less of it: a critic is a copy
    of the policy's model, colocated, and misses by the same layout. verl's critic.megatron does not follow the
    actor's (its own engine/megatron.yaml, TP 1 and PP 1), so a pasted script that widens only the actor leaves a
    whole critic on each GPU, in every phase: the critic's size is raised to the actor's new one where smaller, its
    switches set where off (following only a critic that held the actor's value, no fix was found for verl's
    run_qwen2-7b_math_gsm8k_megatron.sh on 8 H100s)."""
    values: dict[str, Any] = {}
    ref_on_megatron = (verl["actor_rollout_ref"].get("ref") or {}).get("strategy") == "megatron"
    critic_on_megatron = trains_critic(verl) and (verl.get("critic") or {}).get("strategy") == "megatron"
    for name, value in actor_values.items():
        values[f"{MEGATRON_ACTOR}.{name}"] = value
        ref_key, critic_key, actor_key = (f"{role}.{name}" for role in (MEGATRON_REF, MEGATRON_CRITIC, MEGATRON_ACTOR))
        if ref_on_megatron and name in REF_FOLLOWS and select(verl, ref_key) == select(verl, actor_key):
            values[ref_key] = value
        if critic_on_megatron and name in CRITIC_FOLLOWS:
            critic_now = select(verl, critic_key)
            critic_value = max(int(critic_now or 1), value) if name in MEGATRON_SIZE_KEYS else value
            if critic_value != critic_now:
                values[critic_key] = critic_value
    return values


def megatron_changes(
    verl: dict[str, Any],
    arch: Architecture,
    knobs: Knobs,
    widen_engine: bool = False,
    narrower: Iterable[tuple[str, dict[str, Any]]] = (),
) -> list[MegatronChange]:
    """The small space a Megatron misfit is searched over: PP, TP (within a node) and, for a MoE model, EP at x1,
    x2, x4 of the run's own; optimizer offload; param offload (the reference's too); full recomputation; with
    `widen_engine` (the rollout phase does not fit) the engine's TP at x1, x2, x4 within a node too, since the
    engine holds its own copy of the weights whatever the trainer's layout, each also with vLLM's context capped at
    prompt + response where the model's whole context (`knobs`: the run's) is what it must hold; the `narrower`
    training micro-batches (when the training phase does not fit: a GPU profile's token budget can be what makes a
    pasted script's run miss); every combination of them (divisibility is megatron_layout_valid's)."""
    megatron = verl["actor_rollout_ref"]["actor"]["megatron"]
    per_node = int(verl["trainer"]["n_gpus_per_node"])
    sizes = {name: int(megatron.get(name) or 1) for name in MEGATRON_SIZE_KEYS}
    options: list[list[tuple[str, dict[str, Any]]]] = []
    for name, short in zip(MEGATRON_SIZE_KEYS, ("PP", "TP", "EP"), strict=True):
        if short == "EP" and not arch.is_moe:
            continue
        widened = [sizes[name] * factor for factor in MEGATRON_WIDENING]
        widened = [size for size in widened if short != "TP" or size <= per_node]
        options.append([(f"{short} {size}" if size != sizes[name] else "", {name: size}) for size in widened])
    engine_tp = int(verl["actor_rollout_ref"]["rollout"]["tensor_model_parallel_size"])
    # the engine's own TP always, widened within a node (one that spans nodes already, as DeepSeek-V3's 32, stays)
    engine_sizes = [engine_tp] + [
        engine_tp * factor for factor in MEGATRON_WIDENING[1:] if engine_tp * factor <= per_node
    ]
    engine_options = [
        (f"engine TP {size}" if size != engine_tp else "", {ENGINE_TP: size})
        for size in (engine_sizes if widen_engine else [engine_tp])
    ]
    if widen_engine and engine_context(arch, knobs) > knobs.sequence:  # vLLM's room for the model's whole context
        capped = {KEYS["engine_max_model_len"]: knobs.sequence}
        cap_words = f"engine context {knobs.sequence}"
        engine_options += [
            (" and ".join(text for text in (words, cap_words) if text), {**values, **capped})
            for words, values in engine_options
        ]
    switches = (
        ("optimizer offload", {"optimizer_offload": True}),
        ("param offload", {"param_offload": True}),
        ("full recompute", FULL_RECOMPUTE),
    )
    for words, values in switches:
        already = all(select(megatron, name) == value for name, value in values.items())
        options.append([("", {})] + ([] if already else [(words, values)]))
    hybrid_already = all(select(verl, bare_key(key)) == value for key, value in HYBRID_VALUES.items())
    hybrid_options = [("", {})] + ([] if hybrid_already else [("hybrid CPU optimizer", HYBRID_VALUES)])
    batch_options = [("", {}), *narrower]
    changes = []
    for combination in itertools.product(*options):
        for beside in itertools.product(engine_options, hybrid_options, batch_options):  # keys outside megatron.*
            words = [text for text, _ in (*combination, *beside) if text]
            if not words:
                continue
            actor_values = {name: value for _, values in combination for name, value in values.items()}
            actor_values = {name: value for name, value in actor_values.items() if select(megatron, name) != value}
            others = {key: value for _, values in beside for key, value in values.items()}
            changed = {key: value for key, value in others.items() if select(verl, bare_key(key)) != value}
            changes.append(MegatronChange(" and ".join(words), {**megatron_values(verl, actor_values), **changed}))
    return changes


def megatron_layout_valid(verl: dict[str, Any], arch: Architecture) -> bool:
    """The checks launch/layout_checks.py makes of a Megatron layout (products over the GPUs, layers over PP, heads over
    TP, experts over EP) and of the mini-batch over the data-parallel ranks, passed."""
    view = ConfigView(verl)
    trainer, data = view.trainer, view.data
    n_gpus = trainer.nnodes * trainer.n_gpus_per_node
    shape = {"layers": arch.layers, "heads": arch.heads, "kv_heads": arch.kv_heads, "experts": arch.experts}
    try:
        check_megatron(view, shape)
        check_engine_heads(view, shape)
        check_ppo_batches(view, f"{n_gpus} GPUs", n_gpus, data.max_prompt_length + data.max_response_length)
    except UserError:
        return False
    return True


@dataclass(frozen=True)
class MegatronFit:
    """A change that fits, with the predicted step it gives and the host RAM it needs."""

    change: MegatronChange
    verdict: Verdict
    step_s: float


def megatron_fitting(
    judged_at: MegatronJudging, verl: dict[str, Any], changes: list[MegatronChange]
) -> MegatronFit | None:
    """The cheapest change (by the step-time model) that fits clearly (no phase within the estimate's margin), else
    the cheapest that fits at all, host RAM permitting."""
    valid = [(change, with_values(verl, change.values)) for change in changes]
    valid = [(change, config) for change, config in valid if megatron_layout_valid(config, judged_at.arch)]
    costs = {change.description: judged_at.step_s(config) for change, config in valid}
    ranked = sorted(valid, key=lambda pair: costs[pair[0].description])
    edge: MegatronFit | None = None
    for change, config in ranked:
        candidate = judged_at.verdict(config, "fail")
        host_ok = within_host_budget(
            candidate.host_ram_gib_per_node, judged_at.knobs.gpus_per_node, judged_at.host_gib_per_gpu
        )
        if not candidate.fits or not host_ok:
            continue
        fit = MegatronFit(change, candidate, costs[change.description])
        if not candidate.at_the_edge:
            return fit
        edge = edge or fit
    return edge


def megatron_single_fixes(
    judged_at: MegatronJudging, verl: dict[str, Any], changes: list[MegatronChange], locked: set[str]
) -> tuple[FixReport, ...]:
    """Each one-knob change (valid on these GPUs) with the peaks it gives: the refusal's `fix:` lines."""
    reports = []
    for change in changes:
        if " and " in change.description:
            continue
        config = with_values(verl, change.values)
        if not megatron_layout_valid(config, judged_at.arch):
            continue
        candidate = judged_at.verdict(config, "fail")
        reports.append(
            FixReport(
                fix=change.description,
                overrides=change.values,
                peaks_gib={name: round(phase.peak_gib, 1) for name, phase in candidate.phases.items()},
                fits=candidate.fits,
                you_set=tuple(sorted(locked & change.keys)),
            )
        )
    return tuple(reports)


def megatron_search(
    judged_at: MegatronJudging, verl: dict[str, Any], verdict: Verdict, locked: set[str]
) -> tuple[Verdict, dict[str, Any]]:
    """A Megatron misfit's fixes: the cheapest fitting change (advice, whatever keys it touches), the cheapest
    among those that change no key the user set (what launch.preflight=fix applies), and the single changes."""
    narrower = [] if verdict.phases["training"].fits else narrower_batches(verl, judged_at.knobs)
    changes = megatron_changes(verl, judged_at.arch, judged_at.knobs, not verdict.phases["rollout"].fits, narrower)
    best = megatron_fitting(judged_at, verl, changes)
    free = [change for change in changes if not locked & change.keys]
    applicable = best if best is None or not locked & best.change.keys else megatron_fitting(judged_at, verl, free)
    found = None
    if best is not None:
        now = judged_at.step_s(verl)
        host = best.verdict.host_ram_gib_per_node
        summary = (
            f"fits on {judged_at.knobs.n_gpus} with {best.change.description} (host RAM {tib_or_gib(host)}/node): "
            f"predicted step {best.step_s:.0f} s against {now:.0f} s as it is"
            + (" (within the estimate's margin of the card)" if best.verdict.at_the_edge else "")
        )
        mine = SameGpuChange(best.change.description, tuple(as_overrides(best.change.values)), host)
        found = FittingChange(on_your_gpus=mine, gpus_needed=None, gpus_needed_offloaded=None, summary=summary)
    searched = replace(
        verdict,
        fixes=megatron_single_fixes(judged_at, verl, changes, locked),
        first_fitting_fixes=tuple(as_overrides(best.change.values)) if best is not None else (),
        unfixable_without_your_keys=applicable is None,
        fits_with=found,
    )
    return searched, dict(applicable.change.values) if applicable is not None else {}


def megatron_verdict(
    judged_at: MegatronJudging, verl: dict[str, Any], policy: str, overrides: list[str]
) -> tuple[Verdict, dict[str, Any]]:
    """backend=megatron: the first-order per-rank estimate (launch/megatron_memory.py) on the worst pipeline stage.
    A misfit is searched for the cheapest change of Megatron knobs that fits (megatron_search); `fix` applies it
    when it changes no key the user set and the misfit is clear (one within the estimate's margin is queued with a
    warning, as under every policy); `tune` raises no Megatron knob."""
    verdict = judged_at.verdict(verl, policy)
    megatron = MegatronKnobs.from_verl(verl)
    arch, knobs, capacity = judged_at.arch, judged_at.knobs, judged_at.capacity
    # a fix may take the host RAM the run as it is takes, as FSDP's search allows (host_budget)
    budget = host_budget(verdict.host_ram_gib_per_node, knobs.gpus_per_node, judged_at.host_gib_per_gpu)
    judged_at = replace(judged_at, host_gib_per_gpu=budget)
    usual = typical(arch, knobs, capacity, judged_at.lengths, lambda a, k, c: megatron_estimate(a, k, megatron, c))
    proposed: dict[str, Any] = {}
    if not verdict.fits:
        verdict, applicable = megatron_search(judged_at, verl, verdict, user_keys(overrides))
        if policy in ("fix", "tune") and not verdict.too_close_to_call:
            proposed = applicable
    untuned = (
        ("launch.preflight=tune raises no Megatron knob (micro-batches, token budgets): only a misfit's fix applies",)
        if policy == "tune"
        else ()
    )
    beyond = fixes_beyond(megatron) if not verdict.fits else ""
    return replace(verdict, typical=usual, rough=(*verdict.rough, *untuned), beyond=beyond), proposed


def check_plan(cfg: Any, plan: Any, packages: dict[str, str], lengths: TypicalLengths | None = None) -> Verdict:
    """The preflight of a planned job (launch.plan.Plan): what-if questions of the fit table and tests."""
    return judge(cfg, plan.verl, plan.llm, plan.overrides, packages, lengths)[0]


def not_counted(verl: dict[str, Any], llm: dict[str, Any], knobs: Knobs | None = None) -> list[str]:
    """What the estimator does not model exactly, said in the plan rather than left out silently."""
    missing = []
    critic_path = str(verl["critic"]["model"].get("path") or "") if critic_knobs(verl, 0) else ""
    # verl's placeholder path becomes the actor's before the job runs (readiness.critic_from_actor)
    if critic_path not in ("", VERL_CRITIC_PLACEHOLDER, str(verl["actor_rollout_ref"]["model"]["path"])):
        missing.append(f"the critic's model {critic_path}: counted with the actor's architecture ({llm.get('name')})")
    reward_model = (verl.get("reward") or {}).get("reward_model") or {}
    read = knobs is not None and knobs.reward_params > 0  # its config.json read (facts.reward_model_config)
    if reward_model.get("enable") and not reward_model.get("enable_resource_pool") and not read:
        missing.append("the reward model's KV cache room (its architecture is not read; its reservation is counted)")
    return missing


def settle(
    cfg: DictConfig,
    resolved: dict[str, Any],
    facts: Facts,
    overrides: list[str],
    resolve: Resolve,
    typical: TypicalLengths | None = None,
) -> tuple[Verdict | None, dict[str, Any]]:
    """The preflight of one job BEFORE its plan is made: (the verdict on the config as it will be planned, that
    config resolved). `fix` and `tune` set their typed knob values in cfg (never a key the user set) first, so the
    plan is made once, from the config that runs; the verdict then says what changed and what it was before. `fail`
    and `warn` change nothing (gate() refuses or warns at submission). None: `off`, or a model nothing here knows."""
    if cfg.launch.preflight == "off":
        return None, resolved
    llm, _ = llm_architecture(cfg, facts, overrides)
    if llm.get("known") is False:
        return None, resolved
    verdict, changes = judge(cfg, resolved, llm, overrides, facts.packages, typical)
    if not changes:
        return verdict, resolved
    with open_dict(cfg):
        for key, value in changes.items():
            OmegaConf.update(cfg, bare_key(key), value, merge=False)  # ++: the fix's own key, added or overridden
    resolved = resolve(cfg)
    settled, _ = judge(cfg, resolved, llm, overrides, facts.packages, typical)
    changed = {bare_key(key): render_value(value) for key, value in changes.items()}
    return replace(settled, changed=changed, before=Before(verdict.fits, verdict.predicted)), resolved


def gate(plans: list[Plan], policy: str) -> list[str]:
    """The preflight's policy for plans that are about to run: `fail` refuses them all where any does not fit, on the
    GPU or in the node's host RAM (one UserError whose first line names every misfit job, then the first one's
    refusal, its cheapest fix first: refused_sweep), `warn` returns each misfit's message as a warning; `fix` and
    `tune` have already changed the config before it was planned (settle) and refuse what still does not fit, `off`
    judged nothing."""
    judged = [(plan.job_name, plan.preflight) for plan in plans if plan.preflight is not None]
    # a Megatron misfit within its estimate's margin is not called: queued with a warning, whatever the policy
    undecided = [too_close(verdict, job) for job, verdict in judged if verdict.too_close_to_call]
    verb = "warns" if policy == "warn" else "refuses"
    misfits = [
        (job, refusal(verdict, job, verb))
        for job, verdict in judged
        if not verdict.fits and not verdict.too_close_to_call
    ]
    # host RAM is no knob fix or tune changes: a node short of it is refused under each, warned under warn
    misfits += [
        (plan.job_name, host_ram_refusal(plan, verb)) for plan in plans if plan.node_short_of_host_ram_gib is not None
    ]
    if policy in ("fail", "fix", "tune") and misfits:
        raise UserError(refused_sweep(misfits, len(plans)))
    return undecided + [message for _, message in misfits] if policy == "warn" else undecided


def refused_sweep(misfits: list[tuple[str, str]], jobs: int) -> str:
    """The refusal of plans with misfits: one misfit's own refusal; several (a sweep) named each in the first line,
    with nothing of the sweep submitted, then the first one's refusal (its arithmetic and fixes below)."""
    named = list(dict.fromkeys(job for job, _ in misfits))
    first = misfits[0][1]
    if len(named) == 1:
        return first
    head, *rest = first.splitlines()
    return "\n".join(
        [
            f"preflight refuses {len(named)} of {jobs} jobs ({', '.join(named)}): nothing of the sweep was submitted; "
            f"the first, {head.removeprefix('preflight refuses ')}",
            *rest,
        ]
    )


# --- what-if questions of the report ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tuning:
    """A larger setting that still fits: the verl keys to set, and the knobs they give."""

    overrides: dict[str, Any]  # verl key -> typed value
    knobs: Knobs

    @property
    def predicted_mfu(self) -> float:
        return predicted_mfu(self.knobs)


@dataclass(frozen=True)
class WhatIf:
    """The preflight's answers about a plan it judged, asked afterwards (launch/report/doctor.py). It starts from the
    knobs the verdict recorded, never rebuilt ones, so every answer starts where the verdict stood. `changes` are
    Knobs field changes, as the fixes and tune make them."""

    arch: Architecture
    knobs: Knobs
    capacity_gib: float

    @classmethod
    def of_plan(cls, plan: Plan) -> WhatIf | None:
        """None for a plan the preflight did not judge (launch.preflight=off), or whose recorded knobs are not this
        launcher's."""
        verdict = plan.preflight
        if verdict is None or verdict.knobs is None:
            return None
        return cls(Architecture.from_llm(plan.llm), verdict.knobs, float(verdict.capacity_gib))

    @property
    def mini_batch_sequences(self) -> int:
        """The sequences of one update (actor.ppo_mini_batch_size x rollout.n), whose rank's share caps a
        micro-batch."""
        return self.knobs.mini_batch_sequences

    def peaks(self, changes: dict[str, Any] | None = None) -> dict[str, float]:
        """phase -> the predicted peak per GPU with these changes."""
        knobs = with_changes(self.knobs, **(changes or {}))
        return {phase.name: phase.peak_gib for phase in phases_of(self.arch, knobs, self.capacity_gib)}

    def fits(self, changes: dict[str, Any], headroom: float = 1.0) -> bool:
        return fits(self.arch, with_changes(self.knobs, **changes), self.capacity_gib, headroom)

    def predicted_mfu(self, changes: dict[str, Any] | None = None) -> float:
        return predicted_mfu(with_changes(self.knobs, **(changes or {})))

    def overrides(self, changes: dict[str, Any]) -> dict[str, Any]:
        """The verl keys and typed values of these changes."""
        return overrides_for(changes, self.knobs)

    def larger_micro_batch(self) -> Tuning | None:
        """The largest training micro-batch (or token budget) that fits with TUNE_HEADROOM spare, where it is larger
        than the plan's: what tune would set."""
        changes = tune(self.arch, self.knobs, self.capacity_gib, set(), what=("train",))
        if not changes:
            return None
        tokens = changes.get("train_tokens") or changes["micro_batch"] * self.knobs.sequence
        return Tuning(self.overrides(changes), with_train_tokens(self.knobs, tokens))

    def more_engine_sequences(self) -> Tuning | None:
        """The engine concurrency its KV cache holds (tune's max_num_seqs), where it is more than the plan's."""
        changes = tune(self.arch, self.knobs, self.capacity_gib, set(), what=("max_num_seqs",))
        if not changes:
            return None
        return Tuning(self.overrides(changes), with_changes(self.knobs, **changes))
