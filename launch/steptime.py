"""How long one PPO/GRPO step takes, phase by phase, from the model's shape, the card and verl's knobs.

Runs on: the login node (planning), and wherever the calibration store is read (launch/calibration.py re-runs this
model at a run's measured lengths, so that the ratio it stores is the model's error and not the lengths').

A step of verl's hybrid engine is four phases in sequence on the same GPUs (verl's `timing_s/*` metrics, see
docs/facts.md#verl):
- generate (`timing_s/gen`): the engine prefills the prompts, compute-bound, then decodes. Decode is bound by memory
  bandwidth: every decode step reads the engine's weight shard and the KV cache of the sequences in flight, so a step
  costs max(bytes / bandwidth, FLOPs / peak) plus the engine's per-step overhead (scheduling, sampling, launches).
  Sequences in flight are min(max_num_seqs, the engine's share of the batch, what its KV room holds at the typical
  length). GRPO waits for its longest response: after the bulk, the tail decodes at a small batch.
- log_prob (`timing_s/old_log_prob` + `timing_s/ref` + `timing_s/values`): forward passes of the actor, the reference
  and (gae) the critic over every token of the batch, and each pass's padded batch through verl's driver.
- update (`timing_s/update_actor` + `timing_s/update_critic`): forward + backward (+ recomputation) at the preflight's
  achievable MFU (its micro-batch read against the card's roofline ridge), ppo_epochs times; offloaded states cross
  PCIe both ways; the padded batch crosses the driver once per trained model.
- other: the weight sync from trainer to engine (an all-gather of bf16 weights plus the engine's reload), the
  engine's wake/sleep, rewards, and verl's bookkeeping.
The typical lengths (the user's launch.expect.*, the calibration store's measured mean, else half the maximum) drive
every phase; the memory verdict keeps the worst case. Constants marked "fitted" were fitted on the published step
times of tests/data/step_time_cases.yaml (bench/step_time.py prints each case's error per phase).

verl's Megatron backend (actor.strategy megatron) times generate and other as above (the engine and the weight sync do
not depend on the trainer) and its log_prob and update from the trainer's parallel layout (megatron_memory's
MegatronKnobs): the FLOPs of the active parameters (a MoE token passes through experts_per_token experts) over all
GPUs, at the MFU of the micro-batch one rank packs (after CP's split), slowed by the pipeline bubble of the step's
micro-batches, the most loaded stage's share of the layers, TP/CP/EP communication (MEGATRON_*_OVERHEAD, assumed) and
the recomputation the config asks for; offloaded states cross PCIe as FSDP's do, per phase that loads them. Rougher
than the FSDP model: its constants are assumed, not fitted (MEGATRON_SOURCE says so in the plan).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from algos.pcgrad_checks import selects_pcgrad
from launch.megatron_memory import BF16_BYTES, FP32_BYTES, Layout, MegatronKnobs, packing, paired, states
from launch.memory import (
    Architecture,
    Knobs,
    engine_memory,
    flops_per_token,
    holds_a_reference,
    kv_per_sequence_gib,
    micro_batch_tokens,
    predicted_mfu,
)

PHASES = ("generate", "log_prob", "update", "other")
# PCGrad's update over the plain one: bench/pcgrad.py on one H100 (bench/results/pcgrad_h100.txt, qwen2_5_0_5b, six
# tasks: x1.037 wall). One GPU only: the per-task gradient reductions and the Gram all-reduce of several GPUs are
# unmeasured, so the plan says so where it applies the factor.
PCGRAD_UPDATE_FACTOR = 1.037
PCGRAD_UPDATE_SOURCE = (
    f"model x {PCGRAD_UPDATE_FACTOR:.2f} for PCGrad (measured on 1 GPU, bench/results/pcgrad_h100.txt; its cost on "
    "several GPUs is unmeasured)"
)
GIB = 1024**3

# Fractions of the datasheet figures a phase reaches (fitted).
DECODE_BANDWIDTH_EFFICIENCY = 0.70  # HBM reads of a decode step: weights + KV, at large batch
PREFILL_MFU = 0.45  # the engine's prefill matmuls
FORWARD_MFU_CEILING = 0.55  # log-prob passes: the training heuristic's ceiling, without recomputation
# An engine's decode step has a host side beside the GPU's work: a fixed part (scheduling, kernel launches of a
# CUDA-graphed step, small at small batch) and a part per sequence in flight (the scheduler's bookkeeping, sampling
# over the vocabulary, detokenization and stop checks). vLLM measured its GPU idle for most of a step from exactly
# these (https://blog.vllm.ai/2024/09/05/perf-update.html); both engines overlap the host side with the GPU's only
# in part, so the two add. Fitted on the short-response cases, where a step's GPU work is small: ~120 us per
# sequence caps an engine near 8k tokens/s, the rate the GSM8K logs of tests/data/step_time_cases.yaml show.
DECODE_STEP_OVERHEAD_S = 0.004  # per decode step of an engine (fitted)
DECODE_SEQUENCE_OVERHEAD_S = 120e-6  # per sequence in flight per decode step (fitted)
# The training heuristic's MFU curve (memory.predicted_mfu: half its ceiling at 2,048 tokens a micro-batch) is an
# H100's: a matmul over m tokens is compute-bound once m passes the card's ridge point, peak FLOP/s over bytes/s
# (roofline). A card with fewer FLOPs per byte saturates at fewer tokens: an H20 (148 TFLOPS on 4 TB/s, 37 FLOP/B)
# at an eighth of an H100's (295 FLOP/B). The micro-batch's tokens are scaled by the ridge ratio before the curve.
RIDGE_REFERENCE_FLOP_PER_BYTE = 989e12 / 3350e9  # H100 SXM's datasheet bf16 dense over HBM3
TP_ALLREDUCE_S = {"nvlink": 12e-6, "pcie": 40e-6}  # per all-reduce, two per layer per decode step at TP > 1
# GRPO's step ends with its longest response. Reasoning lengths spread roughly exponentially about their mean (the
# long-CoT runs clip at their maximum every step), and the expected longest of S exponential draws is the mean times
# the harmonic number H_S ~ ln S + Euler's gamma: a batch of 8k sequences runs ~9.6x its mean, never beyond the
# maximum. (A narrower task, GSM8K, stops near 3x, but there the tail's steps are few and cheap.)
EULER_GAMMA = 0.5772
TAIL_BATCH = 8  # sequences still decoding in the tail
# Bytes/s that the weight sync and offload copies reach (effective, not peak)
INTERCONNECT_GBS = {"nvlink": 150.0, "pcie": 12.0}
INTER_NODE_GBS = 20.0  # per GPU over InfiniBand/RoCE between nodes
HOST_TO_GPU_GBS = 12.0  # pinned copies over PCIe 4/5, as offload and the sleeping engine's reload see them
ENGINE_WAKE_SLEEP_S = 4.0  # vLLM/SGLang wake_up + sleep per step: allocator remaps, CUDA graphs kept
BOOKKEEPING_S = 2.0  # verl's per-step driver work: data loading, metrics, the reward manager's dispatch (fitted)
# Rule-based scorers on the driver: GSM8K's regex and DAPO's string match take well under a millisecond a response,
# math_verify's parse a few (fitted between them; the logs put all of `other` at 1-6 s for 1-8k responses)
REWARD_CPU_S_PER_RESPONSE = 0.0005
# An attempt's minutes before its first step, besides the validation before training: Ray bring-up, model and engine
# load (assumed)
STARTUP_MIN = 10


def budget_reaching(before_training_min: float, then_min: float) -> int:
    """The mode.time_budget_min that reaches past the job's start-up, the validation before training and then
    `then_min` more (a first step, or the first checkpoint), with a minute to spare."""
    return math.ceil(STARTUP_MIN + before_training_min + then_min) + 1


# The step-time model's accuracy on published runs (bench/step_time.py counts a step within +-35 % as right): a
# checkpoint planned closer than this to the end of an attempt may not come in time
STEP_TIME_MARGIN = 0.35
# verl's single controller moves every phase's batch through its driver as padded tensors: prompts left-padded to
# data.max_prompt_length, responses right-padded to data.max_response_length (verl's rollout and agent loop pad to
# them), so the bytes follow the maxima, not the typical lengths. Per padded token: input_ids, attention_mask and
# position_ids (int64) and the response-side tensors (responses, masks, log-probs, advantages) the phase reads or
# returns. Ray serializes them on the driver and each worker deserializes its chunk: an effective rate (fitted),
# well below any link's, that shows only where batch x maximum length is large (the 28k-token DAPO runs, whose
# log-prob and update phases stop shrinking as GPUs are added)
DRIVER_BYTES_PER_PADDED_TOKEN = 40
DRIVER_GBS = 0.5


@dataclass(frozen=True)
class Lengths:
    """Typical lengths per sequence, in tokens, and where they came from."""

    prompt_tokens: float
    response_tokens: float
    source: str


@dataclass(frozen=True)
class StepTime:
    """One step's predicted seconds per phase (PHASES), the inputs each figure used, and where each came from."""

    step_s: float
    phases_s: dict[str, float]
    source: str  # model | calibrated: model x ratio per phase from N runs of this shape
    lengths: Lengths
    inputs: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # phase -> "model" or "model x 0.83 from 3 runs ..."

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepTime:
        return cls(**{**data, "lengths": Lengths(**data["lengths"])})

    def scaled(self, ratios: dict[str, float], origin: str, said: dict[str, str] | None = None) -> StepTime:
        """This forecast with each phase multiplied by its measured ratio (phases without one keep the model); `said`
        replaces a phase's "model x R <origin>" where there is more to say."""
        phases = {phase: seconds * ratios.get(phase, 1.0) for phase, seconds in self.phases_s.items()}
        said = said or {}
        sources = {
            phase: said.get(phase) or f"model x {ratios[phase]:.2f} {origin}"
            if phase in ratios
            else self.sources.get(phase, "model")
            for phase in self.phases_s
        }
        return StepTime(
            step_s=round(sum(phases.values()), 1),
            phases_s={phase: round(seconds, 1) for phase, seconds in phases.items()},
            source=f"calibrated: {origin}" if ratios else self.source,
            lengths=self.lengths,
            inputs=self.inputs,
            sources=sources,
        )


@dataclass(frozen=True)
class Card:
    """What the step-time model reads of a GPU profile."""

    bf16_tflops: float
    mem_bandwidth_gbs: float
    interconnect: str
    usable_gib: float

    @classmethod
    def of(cls, gpu: Any) -> Card:
        return cls(float(gpu.bf16_tflops), float(gpu.mem_bandwidth_gbs), str(gpu.interconnect), float(gpu.usable_gib))


def engine_concurrency(arch: Architecture, knobs: Knobs, card: Card, sequences_per_engine: float, tokens: float) -> int:
    """Sequences one engine decodes at once: its scheduler's limit, its share of the batch, and what its KV room
    holds at `tokens` per sequence (vLLM admits by blocks in use, so the typical length sets it, not the maximum)."""
    kv_room = engine_memory(arch, knobs, card.usable_gib)[3]
    per_sequence = kv_per_sequence_gib(arch, knobs, int(tokens))
    by_kv = int(kv_room / per_sequence) if per_sequence > 0 else knobs.max_num_seqs
    return max(1, min(knobs.max_num_seqs, int(sequences_per_engine), by_kv))


def decode_step_s(arch: Architecture, knobs: Knobs, card: Card, batch: float, context: float) -> float:
    """One decode step of one engine (its TP GPUs in parallel): read the weight shard and the batch's KV cache."""
    weight_bytes = arch.params * 2 / knobs.rollout_tp
    kv_bytes = batch * context * arch.kv_bytes_per_token / knobs.rollout_tp
    memory_s = (weight_bytes + kv_bytes) / (card.mem_bandwidth_gbs * 1e9 * DECODE_BANDWIDTH_EFFICIENCY)
    compute_s = 2 * arch.params / knobs.rollout_tp * batch / (card.bf16_tflops * 1e12 * PREFILL_MFU)
    allreduce_s = 2 * arch.layers * TP_ALLREDUCE_S.get(card.interconnect, 40e-6) if knobs.rollout_tp > 1 else 0.0
    host_s = DECODE_STEP_OVERHEAD_S + DECODE_SEQUENCE_OVERHEAD_S * batch
    return max(memory_s, compute_s) + allreduce_s + host_s


def generate_s(arch: Architecture, knobs: Knobs, card: Card, sequences: int, lengths: Lengths) -> tuple[float, dict]:
    engines = max(1, knobs.n_gpus // knobs.rollout_tp)
    per_engine = sequences / engines
    prompt, response = lengths.prompt_tokens, lengths.response_tokens
    concurrency = engine_concurrency(arch, knobs, card, per_engine, prompt + response)
    prefill_flops = 2 * arch.params * prompt * per_engine
    prefill = prefill_flops / (knobs.rollout_tp * card.bf16_tflops * 1e12 * PREFILL_MFU)
    bulk_steps = per_engine * response / concurrency
    bulk = bulk_steps * decode_step_s(arch, knobs, card, concurrency, prompt + response / 2)
    longest = min(float(knobs.response_length), response * (math.log(max(2, sequences)) + EULER_GAMMA))
    tail_steps = max(0.0, longest - bulk_steps)
    tail = tail_steps * decode_step_s(arch, knobs, card, min(TAIL_BATCH, concurrency), prompt + longest)
    inputs = {
        "engines": engines,
        "sequences_per_engine": round(per_engine, 1),
        "concurrency": concurrency,
        "decode_steps": round(bulk_steps + tail_steps),
        "longest_response": round(longest),
    }
    return prefill + bulk + tail, inputs


def validation_s(arch: Architecture, knobs: Knobs, card: Card, step: StepTime, batches: list[int]) -> float:
    """One of verl's validations (trainer.test_freq, val_before_train): each validation batch of `batches`
    sequences generated in turn (verl 0.9.1's data.val_batch_size defaults to the whole set: one batch), the engines
    woken and put back to sleep, every response scored; the weights are the step's, nothing is synced. The step's
    generate phase, where it was calibrated, scales the model's validation by the same ratio."""
    model_generate, _ = generate_s(arch, knobs, card, int(step.inputs["sequences"]), step.lengths)
    ratio = step.phases_s["generate"] / model_generate if model_generate > 0 else 1.0
    generate = sum(generate_s(arch, knobs, card, sequences, step.lengths)[0] for sequences in batches if sequences)
    return ratio * generate + ENGINE_WAKE_SLEEP_S + sum(batches) * REWARD_CPU_S_PER_RESPONSE


def verl_validations(steps: int, test_freq: int, to_the_end: bool = True) -> int:
    """verl 0.9.1's validations in its fit loop (trainer/ppo/ray_trainer.py): every test_freq-th step and the last,
    none where test_freq <= 0. `to_the_end`: those of a run of `steps` steps; else those before the checkpoint of
    step `steps` (saved inside the step, before that step's validation)."""
    if test_freq <= 0:
        return 0
    if not to_the_end:
        return (steps - 1) // test_freq
    return every_and_last(steps, test_freq)


def every_and_last(steps: int, freq: int) -> int:
    """How often verl's fit loop acts in a run of `steps` steps when it acts every freq-th step and at the last (its
    validations, its checkpoints); never where freq <= 0."""
    return 0 if freq <= 0 else steps // freq + int(steps % freq != 0)


def spent_s(steps: int, step_s: float, validation_s: float, test_freq: int, to_the_end: bool = True) -> float:
    """Seconds of `steps` steps with the validations verl runs among them: `to_the_end` of a run of that many steps,
    else up to the last step's checkpoint."""
    return steps * step_s + verl_validations(steps, test_freq, to_the_end) * validation_s


def steps_within(minutes: float, step_s: float, validation_s: float, test_freq: int, to_the_end: bool = False) -> int:
    """The most steps that fit in `minutes` (spent_s's)."""
    steps = int(minutes * 60 // step_s)
    while steps > 0 and spent_s(steps, step_s, validation_s, test_freq, to_the_end) > minutes * 60:
        steps -= 1
    return steps


def ridge_scaled(card: Card, tokens: int) -> int:
    """A micro-batch of `tokens` on this card, as the H100-shaped MFU curve should read it (RIDGE_REFERENCE)."""
    ridge = card.bf16_tflops * 1e12 / (card.mem_bandwidth_gbs * 1e9)
    return max(1, int(tokens * RIDGE_REFERENCE_FLOP_PER_BYTE / ridge))


def forward_mfu(tokens: int) -> float:
    """predicted_mfu's curve without recomputation: a forward pass of `tokens` tokens per micro-batch."""
    return FORWARD_MFU_CEILING * tokens / (tokens + 2048)


def tokens_per_pass(knobs: Knobs, budget: int, micro_batch: int | None, sequence: float, share_tokens: float) -> int:
    """A micro-batch's tokens on one GPU: the token budget under dynamic batching, else micro-batch x the typical
    sequence (verl removes the padding before the model sees it; the memory verdict's micro-batch x maximum is the
    worst case), never more than the GPU's share of the batch."""
    tokens = budget if knobs.dynamic_bsz or not micro_batch else micro_batch * sequence
    return max(1, int(min(tokens, share_tokens)))


def driver_s(sequences: int, knobs: Knobs, passes: int) -> float:
    """`passes` dispatches of the padded batch through verl's driver (DRIVER_GBS)."""
    padded = sequences * (knobs.prompt_length + knobs.response_length)
    return passes * padded * DRIVER_BYTES_PER_PADDED_TOKEN / (DRIVER_GBS * 1e9)


def log_prob_s(arch: Architecture, knobs: Knobs, card: Card, tokens: float, sequence: float, passes: int) -> float:
    """`passes` forward passes over the batch's tokens: a third of verl's forward + backward FLOPs per token."""
    per_gpu = tokens / knobs.n_gpus
    packed = tokens_per_pass(knobs, knobs.logprob_tokens, knobs.logprob_micro_batch, sequence, per_gpu)
    mfu = forward_mfu(ridge_scaled(card, packed))
    compute = passes * per_gpu * flops_per_token(arch, int(sequence)) / 3 / (card.bf16_tflops * 1e12 * mfu)
    # verl's FSDP reference is CPU-offloaded (memory.actor_resident_state): each micro-batch's forward copies its
    # shard onto the card again
    micro_batches = math.ceil(per_gpu / max(1, packed))
    reference = (
        micro_batches * arch.params * knobs.ref_dtype_bytes / knobs.shard_group if holds_a_reference(knobs) else 0
    )
    return compute + reference / (HOST_TO_GPU_GBS * 1e9) + driver_s(round(tokens / sequence), knobs, passes)


def update_s(
    arch: Architecture, knobs: Knobs, card: Card, tokens: float, sequence: float, epochs: int, models: int
) -> float:
    """Forward + backward of `models` (actor, and the critic under gae) over the batch, ppo_epochs times, at the
    preflight's MFU for the micro-batch the GPU's share really packs."""
    per_gpu = tokens / knobs.n_gpus
    packed = tokens_per_pass(knobs, knobs.train_tokens, knobs.micro_batch, sequence, per_gpu)
    mfu = predicted_mfu(replace(knobs, train_tokens=ridge_scaled(card, packed)))
    compute = models * epochs * per_gpu * flops_per_token(arch, int(sequence)) / (card.bf16_tflops * 1e12 * mfu)
    return compute + models * offload_s(arch, knobs) + driver_s(round(tokens / sequence), knobs, models)


def offload_s(arch: Architecture, knobs: Knobs) -> float:
    """Offloaded parameters (fp32) and AdamW states come onto the card for the update and go back after it."""
    shard = arch.params / knobs.shard_group
    moved = (knobs.model_dtype_bytes * shard if knobs.param_offload else 0.0) + (
        8 * shard if knobs.optimizer_offload else 0.0
    )
    return 2 * moved / (HOST_TO_GPU_GBS * 1e9)


def other_s(arch: Architecture, knobs: Knobs, card: Card, sequences: int) -> float:
    """Weight sync (bf16 weights all-gathered across the FSDP group, then loaded by each engine), the engine's wake
    and sleep, rewards, and verl's own per-step work."""
    weights = arch.params * 2
    link = INTERCONNECT_GBS.get(card.interconnect, 12.0) if knobs.n_gpus <= knobs.gpus_per_node else INTER_NODE_GBS
    sync = weights / (link * 1e9) + weights / knobs.rollout_tp / (HOST_TO_GPU_GBS * 1e9 * 4)
    rewards = sequences * REWARD_CPU_S_PER_RESPONSE
    return sync + ENGINE_WAKE_SLEEP_S + rewards + BOOKKEEPING_S


# --- verl's Megatron backend ---------------------------------------------------------------------------------------

MEGATRON_SOURCE = (
    "Megatron model, rougher than FSDP's: pipeline bubble, stage split and recomputation derived, TP/CP/EP "
    "communication assumed"
)
# Communication a Megatron group leaves on the critical path, as a fraction of the compute it slows (assumed: no
# Megatron step time was fitted; bench/step_time.py prints the published ones beside the model). TP with sequence
# parallelism all-gathers and reduce-scatters the activations twice per layer, forward and backward, and Megatron
# overlaps them only in part: a share per doubling of the group. CP passes keys and values around its ring, mostly
# behind the attention's compute. A MoE layer dispatches and combines its tokens with two all-to-alls over its
# EP x expert-TP group, and its grouped expert GEMMs run below a dense GEMM's efficiency: one share for both.
MEGATRON_TP_OVERHEAD = 0.08  # per doubling of TP (assumed)
MEGATRON_CP_OVERHEAD = 0.05  # per doubling of CP (assumed)
MEGATRON_EP_OVERHEAD = 0.25  # a MoE model whose experts spread over more than one rank (assumed)
# A group wider than a node runs its collectives over InfiniBand/RoCE instead of NVLink (INTER_NODE_GBS against
# INTERCONNECT_GBS is 7.5x in bandwidth; part of it overlaps): its share is multiplied by this (assumed)
CROSS_NODE_OVERHEAD = 3.0
# Selective recomputation of modules other than the attention core (mlp, moe, moe_act, layernorm, mla_up_proj):
# each re-runs a part of the layer's forward (assumed share of the step's FLOPs per module)
SELECTIVE_MODULE_SHARE = 0.05
# Megatron's HybridDeviceOptimizer (optimizer_cpu_offload) steps its CPU share of the parameters with torch's Adam
# on the host, one process per GPU sharing the node's cores (assumed rate per process)
CPU_ADAM_PARAMS_PER_S = 0.5e9


def pipeline_bubble(layout: Layout, micro_batches: int) -> float:
    """The share of a pipeline flush its stages sit idle: (pp - 1) / (m x vpp + pp - 1) for m micro-batches
    through pp stages of vpp virtual chunks each (Narayanan et al. 2021, https://arxiv.org/abs/2104.04473, sec.
    2.2: the bubble is (p - 1) / (v m) of the ideal time)."""
    return (layout.pp - 1) / (micro_batches * layout.vpp + layout.pp - 1)


def stage_imbalance(arch: Architecture, layout: Layout) -> float:
    """The most loaded pipeline stage's layers over the average: the pipeline runs at its slowest stage's pace."""
    split = layout.stage_layers(arch.layers)
    return max(split) * layout.pp / max(1, sum(split))


def group_overhead(per_doubling: float, size: int, spans_nodes: bool) -> float:
    if size <= 1:
        return 0.0
    return per_doubling * math.log2(size) * (CROSS_NODE_OVERHEAD if spans_nodes else 1.0)


def communication_factor(arch: Architecture, layout: Layout, gpus_per_node: int) -> float:
    """1 + the TP, CP and (MoE) EP shares of MEGATRON_*_OVERHEAD; a group spanning nodes pays CROSS_NODE_OVERHEAD."""
    tensor = group_overhead(MEGATRON_TP_OVERHEAD, layout.tp, layout.tp > gpus_per_node)
    context = group_overhead(MEGATRON_CP_OVERHEAD, layout.cp, layout.tp * layout.cp > gpus_per_node)
    expert_ranks = layout.ep * layout.etp
    experts = 0.0
    if arch.is_moe and expert_ranks > 1:
        experts = MEGATRON_EP_OVERHEAD * (CROSS_NODE_OVERHEAD if expert_ranks > gpus_per_node else 1.0)
    return 1 + tensor + context + experts


def recompute_factor(arch: Architecture, megatron: MegatronKnobs, sequence: float) -> float:
    """The update's FLOPs with recomputation over verl's count: full recomputation runs each recomputed layer's
    forward again (a forward is a third of forward + backward: 4/3, memory.predicted_mfu's 1.33), the block method
    only recompute_num_layers of a stage's; selective recomputation of the attention core re-runs its forward (a
    third of flops_per_token's attention term)."""
    recompute = megatron.recompute
    if recompute.full:
        per_stage = max(megatron.actor.stage_layers(arch.layers))
        share = min(1.0, recompute.num_layers / per_stage) if recompute.method == "block" else 1.0
        return 1 + share / 3
    if recompute.granularity != "selective":
        return 1.0
    attention = 12 * sequence * arch.head_dim * arch.heads * arch.layers / flops_per_token(arch, int(sequence))
    others = len([module for module in recompute.modules if module != "core_attn"])
    return 1 + attention / 3 * ("core_attn" in recompute.modules) + SELECTIVE_MODULE_SHARE * others


def megatron_pass_s(
    arch: Architecture, knobs: Knobs, card: Card, layout: Layout, flops: float, mfu: float, micro_batches: int
) -> float:
    """`flops` over all the run's GPUs (TP x PP x CP x DP of them) at `mfu`, at the slowest stage's pace, with the
    layout's communication, through a pipeline that idles its bubble."""
    ideal = flops / (knobs.n_gpus * card.bf16_tflops * 1e12 * mfu)
    slowed = ideal * stage_imbalance(arch, layout) * communication_factor(arch, layout, knobs.gpus_per_node)
    return slowed / (1 - pipeline_bubble(layout, micro_batches))


def megatron_offload_s(
    arch: Architecture, knobs: Knobs, megatron: MegatronKnobs, optimizer_steps: int = 1
) -> tuple[float, float]:
    """(log_prob, update) seconds of host copies on the worst stage: param_offload brings the actor's parameters on
    and off for each phase, the reference's param_offload its own for its pass, optimizer_offload the optimizer
    state for the update (once: verl loads it before the update and offloads it after); the hybrid CPU optimizer,
    at each of the update's `optimizer_steps` (one per mini-batch and epoch), sends its share's fp32 gradients down,
    its bf16 parameters back and steps them on the host (CPU_ADAM_PARAMS_PER_S)."""
    log_prob = update = 0.0
    link = HOST_TO_GPU_GBS * 1e9
    for actor_stage, ref_stage in paired(arch, megatron):
        held = states(megatron, actor_stage, ref_stage)
        params = held.params if megatron.param_offload else 0.0
        ref_params = held.ref_params if knobs.ref_model and megatron.ref_param_offload else 0.0
        optimizer = held.optimizer if megatron.optimizer_offload else 0.0
        on_host = held.optimizer_shard * megatron.optimizer_cpu_fraction
        hybrid = optimizer_steps * (on_host * (FP32_BYTES + BF16_BYTES) / link + on_host / CPU_ADAM_PARAMS_PER_S)
        log_prob = max(log_prob, 2 * (params + ref_params) / link)
        update = max(update, 2 * (params + optimizer) / link + hybrid)
    return log_prob, update


def megatron_micro_batches(
    knobs: Knobs, layout: Layout, dynamic_budget: int, micro_batch: int | None, sequences: int, lengths: Lengths
) -> tuple[int, int]:
    """(tokens one rank packs per micro-batch, micro-batches per data-parallel rank) at the typical lengths, as
    megatron_memory.packing cuts `sequences`: the token budget (x CP for the group) or micro-batch x sequence."""
    typical = replace(
        knobs, prompt_length=round(lengths.prompt_tokens), response_length=max(1, round(lengths.response_tokens))
    )
    budget = micro_batch_tokens(knobs.dynamic_bsz, dynamic_budget, micro_batch, typical.sequence)
    pack = packing(typical, layout, budget, sequences)
    return pack.tokens, pack.micro_batches


def megatron_trainer_s(
    arch: Architecture,
    knobs: Knobs,
    card: Card,
    megatron: MegatronKnobs,
    sequences: int,
    lengths: Lengths,
    epochs: int,
    critic: bool,
) -> tuple[float, float, dict[str, Any]]:
    """(log_prob, update, their inputs) of a Megatron trainer: the actor's and (gae) the critic's passes on the
    actor's layout, the reference's on its own; the update once per mini-batch, each a pipeline flush of its
    micro-batches (a critic's counted on the actor's layout: verl's Megatron critic is not modelled apart)."""
    sequence = lengths.prompt_tokens + lengths.response_tokens
    tokens = sequences * sequence
    per_token = flops_per_token(arch, int(sequence))
    layouts = [megatron.actor] + [megatron.ref] * knobs.ref_model + [megatron.actor] * critic
    log_prob = 0.0
    for layout in layouts:
        packed, count = megatron_micro_batches(
            knobs, layout, knobs.logprob_tokens, knobs.logprob_micro_batch, sequences, lengths
        )
        mfu = forward_mfu(ridge_scaled(card, packed))
        log_prob += megatron_pass_s(arch, knobs, card, layout, tokens * per_token / 3, mfu, count)
    mini_batch = knobs.mini_batch_sequences or sequences
    train_packed, train_count = megatron_micro_batches(
        knobs, megatron.actor, knobs.train_tokens, knobs.micro_batch, mini_batch, lengths
    )
    mfu = predicted_mfu(replace(knobs, train_tokens=ridge_scaled(card, train_packed), checkpointing=False))
    recompute = recompute_factor(arch, megatron, sequence)
    models = 1 + int(critic)
    flops = models * epochs * tokens * per_token * recompute
    update = megatron_pass_s(arch, knobs, card, megatron.actor, flops, mfu, train_count)
    optimizer_steps = epochs * max(1, math.ceil(sequences / mini_batch))
    offload_log_prob, offload_update = megatron_offload_s(arch, knobs, megatron, optimizer_steps)
    log_prob += offload_log_prob + driver_s(sequences, knobs, len(layouts))
    update += offload_update + driver_s(sequences, knobs, models)
    inputs = {
        "active_params_b": round(arch.active_params / 1e9, 2),
        "micro_batches_per_update": train_count,
        "pipeline_bubble": round(pipeline_bubble(megatron.actor, train_count), 3),
        "stage_imbalance": round(stage_imbalance(arch, megatron.actor), 3),
        "communication_factor": round(communication_factor(arch, megatron.actor, knobs.gpus_per_node), 3),
        "recompute_factor": round(recompute, 3),
    }
    return log_prob, update, inputs


def megatron_of(verl: dict[str, Any]) -> MegatronKnobs | None:
    """The Megatron trainer's knobs of a config on verl's Megatron backend, else None (FSDP)."""
    return MegatronKnobs.from_verl(verl) if verl["actor_rollout_ref"]["actor"].get("strategy") == "megatron" else None


def forecast(
    arch: Architecture,
    knobs: Knobs,
    card: Card,
    verl: dict[str, Any],
    lengths: Lengths,
    critic: bool = False,
) -> StepTime:
    """The model's step time for a resolved verl config at `lengths` (pure): FSDP's, or on verl's Megatron backend
    the trainer's phases from its parallel layout (megatron_trainer_s)."""
    data, arr = verl["data"], verl["actor_rollout_ref"]
    sequences = int(data["train_batch_size"]) * int(arr["rollout"]["n"])
    sequence = lengths.prompt_tokens + lengths.response_tokens
    tokens = sequences * sequence
    epochs = int(arr["actor"].get("ppo_epochs") or 1)
    passes = 1 + int(knobs.ref_model) + int(critic)
    generate, generate_inputs = generate_s(arch, knobs, card, sequences, lengths)
    megatron = megatron_of(verl)
    trainer_inputs: dict[str, Any] = {}
    if megatron is None:
        log_prob = log_prob_s(arch, knobs, card, tokens, sequence, passes)
        update = update_s(arch, knobs, card, tokens, sequence, epochs, 1 + int(critic))
    else:
        log_prob, update, trainer_inputs = megatron_trainer_s(
            arch, knobs, card, megatron, sequences, lengths, epochs, critic
        )
    sources = dict.fromkeys(PHASES, "model")
    if selects_pcgrad(verl):  # one forward-backward per task and the surgery, against one for the whole batch
        update *= PCGRAD_UPDATE_FACTOR
        sources["update"] = PCGRAD_UPDATE_SOURCE
    phases = {
        "generate": generate,
        "log_prob": log_prob,
        "update": update,
        "other": other_s(arch, knobs, card, sequences),
    }
    inputs = {
        "sequences": sequences,
        "tokens": round(tokens),
        "forward_passes": passes,
        "ppo_epochs": epochs,
        **generate_inputs,
        **trainer_inputs,
    }
    return StepTime(
        step_s=round(sum(phases.values()), 1),
        phases_s={phase: round(seconds, 1) for phase, seconds in phases.items()},
        source="model" if megatron is None else MEGATRON_SOURCE,
        lengths=lengths,
        inputs=inputs,
        sources=sources,
    )
