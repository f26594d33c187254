"""Per-GPU memory of each phase of a verl GRPO step whose actor (and reference policy) run on verl's Megatron engine,
predicted from the plan: a first-order model, rougher than FSDP's (ROUGH says where).

Runs on: the login node. Pure arithmetic on the model's architecture (launch/memory.py's Architecture, experts
included) and verl's own Megatron keys (verl/trainer/config/engine/megatron.yaml, optim/megatron.yaml,
actor/megatron_actor.yaml, ref/megatron_ref.yaml). Each phase is memory.py's Phase: a sum of named terms, each
figure's inputs in its note, judged against the card's capacity.

How verl 0.9.1 runs a Megatron role (verl/workers/engine/megatron/transformer_impl.py, utils/megatron_utils.py):
- Every rank of a pipeline stage holds bf16 parameters in Megatron's contiguous buffer (2 B/param) and a gradient
  buffer of the same size in fp32 (4 B/param: verl sets DDP grad_reduce_in_fp32 unless the precision-aware
  optimizer asks for bf16 main grads). Dense weights are split over TP, the routed experts over EP x expert-TP.
- Megatron's distributed optimizer shards the fp32 master weights and both Adam moments (12 B/param) over the
  data-parallel group (with context parallel) and, for expert weights, over the expert-data-parallel group, and
  shards neither parameters nor gradients: bf16 params with fp32 grads cost 6 + 12/d B/param
  (https://docs.nvidia.com/megatron-core/developer-guide/latest/api-guide/dist_optimizer.html).
  override_optimizer_config.optimizer_cpu_offload keeps optimizer_offload_fraction of that on the CPU for good
  (Megatron's HybridDeviceOptimizer, stepped on the CPU).
- megatron.param_offload moves params and frees grads, optimizer_offload moves the optimizer state, to host RAM
  between phases; training brings all of them back (grads included), a log-prob pass only the params
  (verl/workers/engine/base.py BaseEngineCtx). The reference policy is a forward-only engine with its own
  parallel sizes and param_offload, and no gradient buffer.
- Activations follow Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
  (https://arxiv.org/abs/2205.05198): with sequence parallelism every saved tensor of a layer is split over TP.
  Their per-layer count is redone here for flash attention (no score matrix), SwiGLU, grouped-query or latent
  attention and routed experts (each token's k copies, the expert MLP's inputs and its activation). Full
  recomputation keeps each recomputed group's input only.
- Pipeline parallelism: with 1F1B the first stage holds the activations of p micro-batches in flight, stage i
  of p - i; with a virtual pipeline of v chunks the first stage holds 2(p - 1) + (v - 1)p + 1 chunk passes
  (Megatron-core's pipeline schedules). The last stage holds the vocabulary head and its logits. Every stage is
  judged; a phase reports the stage whose peak is highest.
- The rollout engine sleeps while the trainer works and wakes beside whatever the trainer did not offload: the
  same engine arithmetic as FSDP's (memory.rollout_phase), with this trainer's resident state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from launch.memory import (
    FRAGMENTATION,
    GIB,
    NON_TORCH_GIB,
    OUTSIDE_TORCH_TERMS,
    STATE_TERMS,
    Architecture,
    Edge,
    Knobs,
    Phase,
    Term,
    TrainerBeside,
    dtype_bytes,
    entropy_bytes,
    holds_a_reference,
    logits_bytes,
    node_terms,
    rollout_phase,
    trains_critic,
)
from launch.overrides import as_overrides
from launch.verdict import Predicted, Verdict

# bytes of one parameter in Megatron's buffers (verl: dtype bfloat16; DDP grad_reduce_in_fp32 by default)
PARAM_BYTES = 2
FP32_BYTES = 4
BF16_BYTES = 2
# Megatron-core's vocab-parallel cross-entropy upcasts its logits shard to fp32 and keeps the softmax for backward
# (megatron/core/tensor_parallel/cross_entropy.py): the bf16 logits beside their fp32 copy in the forward, the
# saved fp32 softmax beside the bf16 gradient it becomes in the backward; per token x vocab / TP, (training,
# forward-only log-prob pass)
VOCAB_PARALLEL_LOGITS_BYTES = (6.0, 6.0)
# verl's vocab_parallel_entropy clones the logits and keeps their softmax for backward (both bf16), per token x
# vocab / TP (verl/utils/megatron/tensor_parallel.py)
VOCAB_PARALLEL_ENTROPY_BYTES = 4.0
# verl's own Megatron runs sized to fill their card land on both sides of it in this model: shipped runs that ran at
# 97-107 % of the card, runs that ran out of memory at 99-105 % (tests/data/megatron_cases.yaml; verl's examples as
# tests/test_megatron.py pastes them). Nearer the card than this the model cannot call a run: it is queued with a
# warning, never refused; beyond it, on either side, the verdict stands.
EDGE_FRACTION = 0.10
EDGE = Edge(below=EDGE_FRACTION, above=EDGE_FRACTION, checked_by="verl's own Megatron runs went either way")
# Megatron's hybrid CPU optimizer: the whole optimizer state kept and stepped on the CPU, as verl's
# examples/grpo_trainer/run_qwen3moe-30b_megatron_96gb.sh sets it (megatron.optimizer_offload brings the state back for
# the update; this lowers the update's own peak, for a slower step). `++`: verl's config holds none of these keys.
# The preflight's fix search tries it (launch/preflight.py megatron_changes).
HYBRID_OPTIMIZER = "actor_rollout_ref.actor.optim.override_optimizer_config"
HYBRID_VALUES = {
    f"++{HYBRID_OPTIMIZER}.optimizer_cpu_offload": True,
    f"++{HYBRID_OPTIMIZER}.optimizer_offload_fraction": 1.0,
    f"++{HYBRID_OPTIMIZER}.use_precision_aware_optimizer": True,
}
HYBRID = "the hybrid CPU optimizer (" + " ".join(as_overrides(HYBRID_VALUES)) + ")"
# Megatron's own fixes in words, named where the preflight's search (launch/preflight.py megatron_search: PP, TP and
# EP up to x4, offloads, full recompute, the hybrid CPU optimizer, on the run's own GPUs) finds no change that fits
FIXES = (
    "more pipeline or tensor parallel ranks (actor_rollout_ref.actor.megatron.pipeline_model_parallel_size / "
    "tensor_model_parallel_size; expert_model_parallel_size for experts), param_offload/optimizer_offload=true, "
    "full recompute (override_transformer_config.recompute_granularity=full), "
    f"{HYBRID}, or a smaller training micro-batch "
    "(actor_rollout_ref.actor.ppo_max_token_len_per_gpu, or ppo_micro_batch_size_per_gpu without use_dynamic_bsz)"
)


def fixes_beyond(knobs: MegatronKnobs) -> str:
    """FIXES for this run: what it has already set left out, and more GPUs, which the search does not try (a larger
    data-parallel group holds a smaller share of the distributed optimizer and its gradient buffer)."""
    offloads = [name for name in ("param_offload", "optimizer_offload") if not getattr(knobs, name)]
    parts = [
        "more pipeline or tensor parallel ranks (actor_rollout_ref.actor.megatron.pipeline_model_parallel_size / "
        "tensor_model_parallel_size; expert_model_parallel_size for experts)",
        "more GPUs (trainer.nnodes: each data-parallel rank holds a smaller share of the distributed optimizer)",
    ]
    if offloads:
        parts.append(f"actor_rollout_ref.actor.megatron.{'/'.join(offloads)}=true")
    if knobs.recompute.granularity != "full":
        parts.append("full recompute (override_transformer_config.recompute_granularity=full)")
    if knobs.optimizer_cpu_fraction < 1.0:
        parts.append(HYBRID)
    parts.append(
        "a smaller training micro-batch (actor_rollout_ref.actor.ppo_max_token_len_per_gpu, or "
        "ppo_micro_batch_size_per_gpu without use_dynamic_bsz)"
    )
    return ", ".join(parts[:-1]) + ", or " + parts[-1]


# What this model does not see, said with every Megatron verdict
ROUGH = (
    "Megatron preflight, first order: activations are counted from the tensors Megatron keeps per layer "
    "(Korthikanti et al. 2022, redone for flash attention, SwiGLU and routed experts), not measured on a GPU as "
    "FSDP's coefficients are; routed tokens are assumed balanced over the experts (verl turns Megatron's "
    "load-balancing loss off, so a skewed batch sends more tokens to one rank); NCCL buffers count the groups "
    "that run large collectives (TP, DP, expert DP and TP, the engine's TP) at the GPU profile's figure, without "
    "DeepEP's or TransformerEngine's own workspaces; the multi-token-prediction layer is not counted"
)


@dataclass(frozen=True)
class Layout:
    """One Megatron engine's parallel layout over the run's GPUs (verl's engine/megatron.yaml keys)."""

    n_gpus: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1  # expert_tensor_parallel_size; verl's null means Megatron-core takes TP
    vpp: int = 1
    sequence_parallel: bool = True
    # override_transformer_config's pipeline split: layers on the first / last stage, the embedding and the loss
    # counted as a layer each
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    embedding_in_split: bool = False
    loss_in_split: bool = False

    @classmethod
    def from_megatron(cls, megatron: Mapping[str, Any], n_gpus: int) -> Layout:
        transformer = megatron.get("override_transformer_config") or {}
        tp = int(megatron.get("tensor_model_parallel_size") or 1)
        etp = megatron.get("expert_tensor_parallel_size")
        first, last = (transformer.get(f"num_layers_in_{end}_pipeline_stage") for end in ("first", "last"))
        return cls(
            n_gpus=n_gpus,
            tp=tp,
            pp=int(megatron.get("pipeline_model_parallel_size") or 1),
            cp=int(megatron.get("context_parallel_size") or 1),
            ep=int(megatron.get("expert_model_parallel_size") or 1),
            etp=int(etp) if etp is not None else tp,
            vpp=int(megatron.get("virtual_pipeline_model_parallel_size") or 1),
            sequence_parallel=bool(megatron.get("sequence_parallel", True)),
            first_stage_layers=None if first is None else int(first),
            last_stage_layers=None if last is None else int(last),
            embedding_in_split=bool(transformer.get("account_for_embedding_in_pipeline_split")),
            loss_in_split=bool(transformer.get("account_for_loss_in_pipeline_split")),
        )

    @property
    def dp(self) -> int:
        """Data-parallel ranks: the GPUs over TP x PP x CP."""
        return max(1, self.n_gpus // (self.tp * self.pp * self.cp))

    @property
    def optimizer_shards(self) -> int:
        """The distributed optimizer's group for dense weights: data parallel with context parallel."""
        return max(1, self.n_gpus // (self.tp * self.pp))

    @property
    def expert_dp(self) -> int:
        """The expert-data-parallel group: the GPUs over expert TP x EP x PP."""
        return max(1, self.n_gpus // (self.etp * self.ep * self.pp))

    @property
    def hidden_split(self) -> int:
        """How many ways a hidden-wide activation is split: over TP with sequence parallelism, else replicated."""
        return self.tp if self.sequence_parallel else 1

    def stage_layers(self, layers: int) -> list[int]:
        """Decoder layers on each pipeline stage, as Megatron-core splits them: stated first/last-stage counts,
        the rest even; or the embedding and the loss taking a layer's place on the first and last stage."""
        if self.pp == 1:
            return [layers]
        if self.first_stage_layers is not None or self.last_stage_layers is not None:
            middle_stages = self.pp - (self.first_stage_layers is not None) - (self.last_stage_layers is not None)
            rest = layers - (self.first_stage_layers or 0) - (self.last_stage_layers or 0)
            middle = math.ceil(rest / max(middle_stages, 1))
            split = [middle] * self.pp
            if self.first_stage_layers is not None:
                split[0] = self.first_stage_layers
            if self.last_stage_layers is not None:
                split[-1] = self.last_stage_layers
            return split
        slots = layers + self.embedding_in_split + self.loss_in_split
        per_stage = math.ceil(slots / self.pp)
        split = [per_stage] * self.pp
        split[0] -= self.embedding_in_split
        split[-1] -= self.loss_in_split
        return split

    def in_flight(self, stage: int, micro_batches: int) -> int:
        """Chunk passes (a micro-batch through one virtual chunk) whose activations stage `stage` holds at once:
        1F1B warms up with pp - stage - 1 forwards, the interleaved schedule with 2(pp - stage - 1) + (vpp - 1)pp
        (Megatron-core pipeline_parallel/schedules.py), then holds one more; never more than the mini-batch has."""
        warmup = self.pp - stage - 1
        if self.vpp > 1:
            warmup = 2 * warmup + (self.vpp - 1) * self.pp
        return max(1, min(warmup + 1, micro_batches * self.vpp))


@dataclass(frozen=True)
class Recompute:
    """override_transformer_config's activation recomputation (Megatron's recompute_* arguments)."""

    granularity: str | None = None  # null (verl's default: none) | full | selective
    method: str | None = None  # uniform: checkpoint each group of num_layers | block: the first num_layers
    num_layers: int = 1
    modules: tuple[str, ...] = ("core_attn",)  # selective: what is recomputed

    @classmethod
    def from_transformer(cls, transformer: Mapping[str, Any]) -> Recompute:
        return cls(
            granularity=transformer.get("recompute_granularity"),
            method=transformer.get("recompute_method"),
            num_layers=max(1, int(transformer.get("recompute_num_layers") or 1)),
            modules=tuple(transformer.get("recompute_modules") or ("core_attn",)),
        )

    @property
    def full(self) -> bool:
        return self.granularity == "full"


# Megatron-Bridge's LoRA targets as verl 0.9.1 ships them (trainer/config/model/hf_model.yaml lora.target_modules):
# every linear of a Megatron layer, the fused ones (canonical LoRA names linear_q/k/v, linear_fc1_up/gate instead)
LORA_TARGETS = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")
MLP_LINEARS = ("linear_fc1", "linear_fc1_up", "linear_fc1_gate", "linear_fc2")


@dataclass(frozen=True)
class Lora:
    """model.lora as verl 0.9.1's Megatron engine applies it (Megatron-Bridge PEFT, workers/config/megatron_peft.py):
    the base model frozen, a rank-r pair (linear_in, linear_out) beside each target linear. Both adapter linears are
    tensor-parallel layers (megatron/bridge/peft/utils.py ParallelLinearAdapter), so a rank holds 1/TP of a dense
    linear's adapter and 1/(EP x expert TP) of the experts'; they are bf16, the model's dtype."""

    rank: int
    targets: tuple[str, ...] = LORA_TARGETS

    @classmethod
    def from_verl(cls, lora: Mapping[str, Any] | None) -> Lora | None:
        lora = lora or {}
        if int(lora.get("rank") or 0) <= 0:
            return None
        # a wildcard target ('*.layers.0.*.linear_qkv') is counted on every layer: an upper bound
        named = [str(target).rsplit(".", 1)[-1] for target in lora.get("target_modules") or ()]
        excluded = {str(target).rsplit(".", 1)[-1] for target in lora.get("exclude_modules") or ()}
        return cls(int(lora["rank"]), tuple(named or (t for t in LORA_TARGETS if t not in excluded)))

    def linears(self, arch: Architecture, width: int) -> dict[str, tuple[int, int]]:
        """(fan_in, fan_out) of each linear Megatron-Bridge can adapt: the attention's, and a SwiGLU of `width`.
        Latent attention's own projections are not named here (its output projection is)."""
        q_out, kv_out = arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
        attention_out = arch.heads * arch.v_head_dim if arch.latent_attention else q_out
        linears = {
            "linear_proj": (attention_out, arch.hidden),
            "linear_fc1": (arch.hidden, 2 * width),
            "linear_fc1_up": (arch.hidden, width),
            "linear_fc1_gate": (arch.hidden, width),
            "linear_fc2": (width, arch.hidden),
        }
        if not arch.latent_attention:
            linears |= {
                "linear_qkv": (arch.hidden, q_out + 2 * kv_out),
                "linear_q": (arch.hidden, q_out),
                "linear_k": (arch.hidden, kv_out),
                "linear_v": (arch.hidden, kv_out),
            }
        return linears

    def params(self, arch: Architecture, width: int, attention: bool) -> int:
        """Adapter parameters beside one SwiGLU of `width` (0: none) and, where `attention`, one attention block."""
        linears = self.linears(arch, width)
        adapted = [
            linears[target]
            for target in self.targets
            if target in linears and (width if target in MLP_LINEARS else attention)
        ]
        return sum(self.rank * (fan_in + fan_out) for fan_in, fan_out in adapted)


@dataclass(frozen=True)
class MegatronKnobs:
    """What verl's Megatron keys decide about memory, beside the engine and batch knobs memory.Knobs reads."""

    actor: Layout
    ref: Layout
    recompute: Recompute
    param_offload: bool = False
    optimizer_offload: bool = False
    ref_param_offload: bool = False
    distributed_optimizer: bool = True
    grad_bytes: int = FP32_BYTES  # the DDP gradient buffer: fp32 main grads unless asked otherwise
    optimizer_bytes: float = 12.0  # per parameter: the fp32 master weight and Adam's two moments
    optimizer_cpu_fraction: float = 0.0  # the share Megatron's HybridDeviceOptimizer keeps on the CPU
    critic: bool = False  # verl's need_critic
    # a Megatron critic's own engine (its layout, offload and optimizer), counted with the actor's architecture: a
    # value model is its base model with a one-wide head. None: no critic, or one not on Megatron (not modelled)
    critic_engine: MegatronKnobs | None = None
    lora: Lora | None = None  # model.lora: only its adapters train (None: the whole model)

    @classmethod
    def from_verl(cls, verl: Mapping[str, Any]) -> MegatronKnobs:
        arr, trainer = verl["actor_rollout_ref"], verl["trainer"]
        n_gpus = int(trainer["nnodes"]) * int(trainer["n_gpus_per_node"])
        actor, ref = arr["actor"]["megatron"], (arr.get("ref") or {}).get("megatron") or arr["actor"]["megatron"]
        critic = verl.get("critic") or {}
        on_megatron = trains_critic(verl) and critic.get("strategy") == "megatron" and critic.get("megatron")
        return cls(
            **engine_knobs(actor, arr["actor"].get("optim") or {}, n_gpus),
            lora=Lora.from_verl(arr["model"].get("lora")),
            ref=Layout.from_megatron(ref, n_gpus),
            ref_param_offload=bool(ref.get("param_offload")),
            critic=trains_critic(verl),
            critic_engine=cls(
                **engine_knobs(critic["megatron"], critic.get("optim") or {}, n_gpus),
                ref=Layout.from_megatron(critic["megatron"], n_gpus),
                ref_param_offload=True,  # a critic has no reference of its own
            )
            if on_megatron
            else None,
        )


def engine_knobs(megatron: Mapping[str, Any], optim: Mapping[str, Any], n_gpus: int) -> dict[str, Any]:
    """One training engine's MegatronKnobs fields from its megatron block and its optim block."""
    settings = {**optim, **(optim.get("override_optimizer_config") or {})}  # verl lets the override win
    return {
        "actor": Layout.from_megatron(megatron, n_gpus),
        "recompute": Recompute.from_transformer(megatron.get("override_transformer_config") or {}),
        "param_offload": bool(megatron.get("param_offload")),
        "optimizer_offload": bool(megatron.get("optimizer_offload")),
        "distributed_optimizer": bool(megatron.get("use_distributed_optimizer", True)),
        "grad_bytes": main_grad_bytes(optim, megatron.get("override_ddp_config") or {}),
        "optimizer_bytes": adam_bytes(settings),
        "optimizer_cpu_fraction": float(settings.get("optimizer_offload_fraction") or 0.0)
        if settings.get("optimizer_cpu_offload")
        else 0.0,
    }


def main_grad_bytes(optim: Mapping[str, Any], override_ddp: Mapping[str, Any]) -> int:
    """The DDP gradient buffer's dtype as verl resolves it (MegatronEngine._resolve_override_ddp_config): fp32
    unless actor.optim.use_precision_aware_optimizer asks for a lower main_grads_dtype; override_ddp_config's
    grad_reduce_in_fp32 wins."""
    if "grad_reduce_in_fp32" in override_ddp:
        return FP32_BYTES if override_ddp["grad_reduce_in_fp32"] else BF16_BYTES
    if optim.get("use_precision_aware_optimizer"):
        return dtype_bytes(optim.get("main_grads_dtype", "fp32"))
    return FP32_BYTES


def adam_bytes(settings: Mapping[str, Any]) -> float:
    """Bytes per parameter of the optimizer state: the fp32 master weight and Adam's two moments; the
    precision-aware optimizer stores the moments in exp_avg_dtype / exp_avg_sq_dtype and, by Megatron-core's
    default store_param_remainders, only the 16 bits of the master weight that bf16 lacks."""
    if not settings.get("use_precision_aware_optimizer"):
        return 3.0 * FP32_BYTES
    master = BF16_BYTES if settings.get("store_param_remainders", True) else FP32_BYTES
    return (
        master
        + dtype_bytes(settings.get("exp_avg_dtype", "fp32"))
        + dtype_bytes(settings.get("exp_avg_sq_dtype", "fp32"))
    )


# --- the model, split over a layout -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Stage:
    """One pipeline stage's share of the model: its layers and its parameters on one rank (dense weights over TP,
    routed experts over EP x expert TP)."""

    index: int
    dense_layers: int
    moe_layers: int
    dense_params: float  # per rank
    expert_params: float  # per rank
    # LoRA's adapters on this rank (Lora), beside the frozen weights above: dense over TP, experts over EP x ETP
    dense_adapters: float = 0.0
    expert_adapters: float = 0.0

    @property
    def layers(self) -> int:
        return self.dense_layers + self.moe_layers

    @property
    def params(self) -> float:
        return self.dense_params + self.expert_params

    @property
    def adapters(self) -> float:
        return self.dense_adapters + self.expert_adapters


def stages(arch: Architecture, layout: Layout, lora: Lora | None = None) -> list[Stage]:
    """Each pipeline stage's layers (a MoE model's dense layers lead) and parameters on one of its ranks: the
    first stage also holds the embedding (and a vision tower, counted as split over TP like the rest), the last the
    final norm and the vocabulary head (a tied head is a copy there when the pipeline has several stages); with
    `lora`, the adapters beside its layers."""
    result, start = [], 0
    head = arch.vocab * arch.hidden if (not arch.tied_embeddings or layout.pp > 1) else 0
    for index, count in enumerate(layout.stage_layers(arch.layers)):
        count = max(0, min(count, arch.layers - start))
        dense = max(0, min(count, arch.dense_layers - start)) if arch.is_moe else count
        moe = count - dense
        weights = dense * arch.dense_layer_params + moe * (arch.moe_layer_params - arch.expert_params_per_layer)
        weights += arch.vocab * arch.hidden + arch.vision_params if index == 0 else 0
        weights += head + arch.hidden if index == layout.pp - 1 else 0
        experts = moe * arch.expert_params_per_layer / (layout.ep * layout.etp)
        adapters = (0.0, 0.0)
        if lora is not None:
            beside_dense = dense * lora.params(arch, arch.intermediate, attention=True)
            beside_moe = moe * lora.params(arch, arch.shared_expert_intermediate, attention=True)
            routed = moe * arch.experts * lora.params(arch, arch.moe_intermediate, attention=False)
            adapters = ((beside_dense + beside_moe) / layout.tp, routed / (layout.ep * layout.etp))
        result.append(Stage(index, dense, moe, weights / layout.tp, experts, *adapters))
        start += count
    return result


def paired(arch: Architecture, megatron: MegatronKnobs) -> list[tuple[Stage, Stage]]:
    """Each actor stage with the reference's stage of the same index: verl builds both on the process groups the
    first engine created (MegatronEngine._init_device_mesh), so their layouts agree in a run that starts."""
    ref = stages(arch, megatron.ref)
    return [(actor, ref[min(actor.index, len(ref) - 1)]) for actor in stages(arch, megatron.actor, megatron.lora)]


# --- activations, per token of a micro-batch on one rank --------------------------------------------------------


def attention_activation(arch: Architecture, layout: Layout) -> float:
    """What one layer's attention keeps for backward, per token on one rank (bf16): the norm's input and output
    (hidden-wide), then the head-split tensors flash attention and the projections keep: q, k, v and the output
    (latent attention: its low-rank inputs too)."""
    hidden = 2 * BF16_BYTES * arch.hidden / layout.hidden_split
    if arch.latent_attention:
        query_rank = 2 * arch.q_lora_rank  # the query's low-rank norm input and up-projection input
        latent = (arch.kv_lora_rank + arch.qk_rope_head_dim) + arch.kv_lora_rank
        heads = arch.heads * (2 * (arch.head_dim + arch.qk_rope_head_dim) + 2 * arch.v_head_dim)  # q, k, v, output
        return hidden + BF16_BYTES * (query_rank + latent) + BF16_BYTES * heads / layout.tp
    heads = 2 * arch.heads * arch.head_dim + 2 * arch.kv_heads * arch.head_dim  # q and output, k and v
    return hidden + BF16_BYTES * heads / layout.tp


def mlp_activation(arch: Architecture, layout: Layout, moe: bool) -> float:
    """What one layer's MLP keeps for backward, per token on one rank (bf16): the norm's input and output, then
    SwiGLU's two linear inputs and the activation's input (gate and up). A MoE layer keeps that for each of the
    token's experts_per_token copies (an expert tensor-parallel group gathers its ranks' tokens and splits the
    width), and for the shared experts."""
    hidden = 2 * BF16_BYTES * arch.hidden / layout.hidden_split
    if not moe:
        return hidden + BF16_BYTES * 3 * arch.intermediate / layout.tp
    routed = arch.experts_per_token * (arch.hidden * layout.etp + 3 * arch.moe_intermediate)
    shared = 3 * arch.shared_expert_intermediate
    return hidden + BF16_BYTES * (routed + shared) / layout.tp


def layer_activation(arch: Architecture, layout: Layout, moe: bool) -> float:
    """One layer's saved activations per token on one rank, without recomputation."""
    return attention_activation(arch, layout) + mlp_activation(arch, layout, moe)


def layer_input(arch: Architecture, layout: Layout) -> float:
    """A checkpointed layer's input per token on one rank: the hidden states (split over TP with SP)."""
    return BF16_BYTES * arch.hidden / layout.hidden_split


def selective_saving(arch: Architecture, layout: Layout, moe: bool, modules: tuple[str, ...]) -> float:
    """Bytes per token selective recomputation drops from a layer: an MLP or MoE block keeps only its input,
    moe_act drops the experts' activation outputs. core_attn saves nothing with flash attention (there is no
    score matrix to drop); the other modules are small and not counted."""
    dropped = 0.0
    block = mlp_activation(arch, layout, moe) - 2 * BF16_BYTES * arch.hidden / layout.hidden_split
    if ("moe" in modules and moe) or ("mlp" in modules and not moe):
        return block
    if "moe_act" in modules and moe:
        dropped += BF16_BYTES * arch.experts_per_token * arch.moe_intermediate / layout.tp
    return dropped


@dataclass(frozen=True)
class Activations:
    """One stage's activations in its update: what its in-flight micro-batches keep, and what one backward adds."""

    saved: float  # bytes: all in-flight chunk passes
    transient: float  # bytes: one layer group recomputed and back-propagated
    in_flight: int
    per_pass: float  # bytes one chunk pass keeps


def stage_activations(
    arch: Architecture, layout: Layout, recompute: Recompute, stage: Stage, tokens: int, micro_batches: int
) -> Activations:
    """The update's activations on one stage: each chunk pass keeps its layers' activations (full recomputation:
    the input of each recomputed group only), the stage holds `in_flight` of them; a backward then rebuilds one
    recomputed group and carries its gradients (about one more layer's activations)."""
    dense, moe = (layer_activation(arch, layout, kind) for kind in (False, True))
    largest = moe if stage.moe_layers else dense
    full = stage.dense_layers * dense + stage.moe_layers * moe
    chunk_layers = max(1, math.ceil(stage.layers / layout.vpp))
    if recompute.full and recompute.method == "block":
        kept_layers = min(recompute.num_layers, chunk_layers) * layout.vpp
        per_micro_batch = kept_layers * layer_input(arch, layout) + full * (1 - kept_layers / max(stage.layers, 1))
        rebuilt = largest
    elif recompute.full:  # uniform (Megatron's default method)
        groups = math.ceil(chunk_layers / recompute.num_layers) * layout.vpp
        per_micro_batch = groups * layer_input(arch, layout)
        rebuilt = min(recompute.num_layers, chunk_layers) * largest
    elif recompute.granularity == "selective":
        per_micro_batch = full - sum(
            count * selective_saving(arch, layout, kind, recompute.modules)
            for count, kind in ((stage.dense_layers, False), (stage.moe_layers, True))
        )
        rebuilt = largest
    else:
        per_micro_batch, rebuilt = full, 0.0
    in_flight = layout.in_flight(stage.index, micro_batches)
    per_pass = per_micro_batch / layout.vpp * tokens
    return Activations(in_flight * per_pass, (rebuilt + largest) * tokens, in_flight, per_pass)


def logits(arch: Architecture, knobs: Knobs, layout: Layout, tokens: int, backward: bool) -> dict[str, float]:
    """The vocabulary head's log-prob computation on the last stage, one micro-batch at a time: verl's fused
    kernel works in chunks (memory.py's fused figures over the vocabulary shard), else Megatron's vocab-parallel
    cross-entropy; entropy beside it when computed."""
    shard = arch.vocab / layout.tp
    if knobs.fused_kernels:
        return {
            "logits": logits_bytes("fused", tokens, math.ceil(shard), backward),
            "entropy": entropy_bytes(knobs, tokens, math.ceil(shard), backward),
        }
    training, forward = VOCAB_PARALLEL_LOGITS_BYTES
    entropy = VOCAB_PARALLEL_ENTROPY_BYTES * tokens * shard if knobs.entropy else 0.0
    return {"logits": (training if backward else forward) * tokens * shard, "entropy": entropy}


# --- batches ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Packing:
    """How verl cuts one data-parallel rank's share into micro-batches (engine utils prepare_micro_batches)."""

    tokens: int  # per rank of the context-parallel group
    micro_batches: int  # in one mini-batch (or the batch, for log-probs); a large number when the share is unknown
    known: bool  # whether the batch size (and so the number of micro-batches) was known


UNKNOWN_MICRO_BATCHES = 1 << 20  # no batch size known: assume enough micro-batches to fill the pipeline


def packing(knobs: Knobs, layout: Layout, budget: int, sequences: int) -> Packing:
    """A micro-batch: the token budget x CP for the group (verl's Megatron engine passes CP as sp_size), or
    micro-batch x sequence length, at most the rank's share of `sequences` at full length; split over CP."""
    sequence = knobs.sequence
    group = budget * layout.cp if knobs.dynamic_bsz else budget
    share = sequences // layout.dp if sequences else 0
    if share:
        group = min(group, max(1, share) * sequence)
        count = max(1, math.ceil(share * sequence / max(group, 1)))
    else:
        count = UNKNOWN_MICRO_BATCHES
    return Packing(max(1, group // layout.cp), count, bool(share))


# --- states per rank ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class States:
    """Bytes one rank of a stage holds of the actor's model states (all on the card) and of the reference's."""

    params: float
    grads: float
    optimizer: float  # the part on the GPU; the CPU share of a hybrid optimizer is host RAM's
    optimizer_on_host: float
    ref_params: float
    optimizer_shard: float  # parameters (not bytes) in this rank's optimizer shard


def states(megatron: MegatronKnobs, stage: Stage, ref_stage: Stage) -> States:
    """The bf16 params and the gradient buffer whole on every rank of the stage; the optimizer state over the
    distributed optimizer's groups (dense weights over DP x CP, experts over the expert-data-parallel group). Under
    LoRA only the adapters train: Megatron's DDP gives a gradient buffer, and its optimizer a state, to the
    parameters that require grad, none to the frozen base."""
    layout = megatron.actor
    dense_shards = layout.optimizer_shards if megatron.distributed_optimizer else 1
    expert_shards = layout.expert_dp if megatron.distributed_optimizer else 1
    dense, experts = (
        (stage.dense_adapters, stage.expert_adapters)
        if megatron.lora is not None
        else (stage.dense_params, stage.expert_params)
    )
    shard = dense / dense_shards + experts / expert_shards
    optimizer = megatron.optimizer_bytes * shard
    return States(
        params=PARAM_BYTES * (stage.params + stage.adapters),
        grads=megatron.grad_bytes * trained(megatron, stage),
        optimizer=optimizer * (1 - megatron.optimizer_cpu_fraction),
        optimizer_on_host=optimizer * megatron.optimizer_cpu_fraction,
        ref_params=PARAM_BYTES * ref_stage.params,
        optimizer_shard=shard,
    )


def resident(knobs: Knobs, megatron: MegatronKnobs, held: States) -> dict[str, float]:
    """The states that stay on the card outside their own phases: what param_offload / optimizer_offload /
    the ref's param_offload leave (param_offload frees the gradient buffer too)."""
    return {
        "params": 0.0 if megatron.param_offload else held.params,
        "grads": 0.0 if megatron.param_offload else held.grads,
        "optimizer": 0.0 if megatron.optimizer_offload else held.optimizer,
        "ref params": held.ref_params if holds_a_reference(knobs) and not megatron.ref_param_offload else 0.0,
    }


# --- memory outside torch -------------------------------------------------------------------------------------


def communicator_groups(arch: Architecture, knobs: Knobs, layout: Layout) -> list[tuple[str, int, int]]:
    """The NCCL groups of several ranks one GPU runs large collectives in, as (name, ranks, stride between them in
    Megatron-core's default tp-cp-ep-dp-pp order): TP (sequence-parallel gathers), the data-parallel group with CP
    (the gradient reduce-scatter and parameter gather), a MoE model's expert-data-parallel and expert-TP groups,
    and the engine's TP group twice (its own communicator and its torch group). Pipeline and expert all-to-all
    traffic is point-to-point and not counted."""
    groups = [("TP", layout.tp, 1)] * (layout.tp > 1) + [("DP", layout.optimizer_shards, layout.tp)] * (
        layout.optimizer_shards > 1
    )
    if arch.is_moe:
        groups += [("expert DP", layout.expert_dp, layout.etp * layout.ep)] * (layout.expert_dp > 1)
        groups += [("expert TP", layout.etp, 1)] * (layout.etp > 1)
    engine = [("engine TP", knobs.rollout_tp, 1), ("engine TP (torch)", knobs.rollout_tp, 1)]
    return groups + engine * (knobs.rollout_tp > 1)


def outside(arch: Architecture, knobs: Knobs, layout: Layout) -> tuple[Term, ...]:
    """The CUDA context and each communicator's buffers at its span (memory.Knobs.group_gib)."""
    context, nccl = OUTSIDE_TORCH_TERMS
    groups = communicator_groups(arch, knobs, layout)
    names = [
        name + (" across nodes, no NVLS" if knobs.group_gib(ranks, stride) != knobs.communicator_gib else "")
        for name, ranks, stride in groups
    ]
    gib = sum(knobs.group_gib(ranks, stride) for _, ranks, stride in groups)
    buffers = Term(nccl, gib, f"{len(groups)} communicators ({', '.join(names)})")
    return (Term(context, NON_TORCH_GIB), *((buffers,) if knobs.communicator_gib and groups else ()))


def with_margins(
    name: str,
    values: dict[str, float],
    notes: dict[str, str],
    extra: tuple[Term, ...],
    capacity_gib: float,
    *lines: str,
) -> Phase:
    """A phase from its byte terms: fragmentation on what it allocates and frees (memory.FRAGMENTATION), then
    the memory outside torch; each term's inputs follow the phase's own lines among its notes."""
    terms = [Term(term, value / GIB, notes.get(term, "")) for term, value in values.items()]
    transient = sum(value for term, value in values.items() if term not in STATE_TERMS)
    terms.append(Term("fragmentation", transient / GIB * FRAGMENTATION))
    inputs = [f"{term.name}: {term.note}" for term in (*terms, *extra) if term.note and term.gib >= 0.05]
    return Phase(name, (*terms, *extra), capacity_gib, (*lines, *inputs))


def gib_text(value: float) -> str:
    return f"{value / GIB:.2f} GiB"


# --- phases ---------------------------------------------------------------------------------------------------


def stage_note(stage: Stage, layout: Layout) -> str:
    kinds = f"{stage.layers} layers" + (f", {stage.moe_layers} MoE" if stage.moe_layers else "")
    return f"pipeline stage {stage.index + 1} of {layout.pp} ({kinds})"


def training_phase(
    arch: Architecture,
    knobs: Knobs,
    megatron: MegatronKnobs,
    capacity_gib: float,
    name: str = "training",
    beside: Mapping[str, float] | None = None,
) -> Phase:
    """The actor's update (or, with the critic's knobs, the critic's) on its worst stage: every state on the card
    (training loads what is offloaded), the in-flight micro-batches' activations, then the larger of one recomputed
    group's backward and, on the last stage, the logits' backward; `beside`: the other engines' resident states
    (bytes)."""
    layout = megatron.actor
    beside = dict(critic_beside(arch, knobs, megatron) if beside is None else beside)
    pack = packing(knobs, layout, knobs.train_tokens, knobs.mini_batch_sequences)
    candidates = []
    for stage, ref_stage in paired(arch, megatron):
        held = states(megatron, stage, ref_stage)
        acts = stage_activations(arch, layout, megatron.recompute, stage, pack.tokens, pack.micro_batches)
        head = logits(arch, knobs, layout, pack.tokens, backward=True) if stage.index == layout.pp - 1 else {}
        values = {
            "params": held.params,
            "grads": held.grads,
            "optimizer": held.optimizer,
            "ref params": resident(knobs, megatron, held)["ref params"],
            "activations": acts.saved,
            **beside,
        }
        if acts.transient > sum(head.values()):
            values["recomputed layers" if megatron.recompute.granularity else "layer backward"] = acts.transient
        else:
            values |= head
        notes = {
            "params": f"bf16 x {(stage.params + stage.adapters) / 1e9:.2f}B params on this rank"
            + (f" ({stage.adapters / 1e9:.3f}B of them LoRA adapters)" if megatron.lora else ""),
            "grads": f"{megatron.grad_bytes} B x {trained(megatron, stage) / 1e9:.2f}B (the DDP buffer, unsharded"
            + (", the adapters only)" if megatron.lora else ")"),
            "optimizer": optimizer_note(megatron, layout),
            "activations": f"in flight {acts.in_flight} x {gib_text(acts.per_pass)} per pass "
            f"({pack.tokens} tokens per micro-batch)",
        }
        candidates.append((sum(values.values()), stage, values, notes))
    _, stage, values, notes = max(candidates, key=lambda candidate: candidate[0])
    batches = f"{pack.micro_batches} micro-batches" if pack.known else "a mini-batch of unknown size: the pipeline full"
    lines = (stage_note(stage, layout), f"{pack.tokens} tokens per micro-batch on a rank, {batches}")
    return with_margins(name, values, notes, outside(arch, knobs, layout), capacity_gib, *lines)


def trained(megatron: MegatronKnobs, stage: Stage) -> float:
    """Parameters on this rank that train: the adapters under LoRA, else all."""
    return stage.adapters if megatron.lora is not None else stage.params


def optimizer_note(megatron: MegatronKnobs, layout: Layout) -> str:
    shards = (
        f"dense / {layout.optimizer_shards} DP x CP, experts / {layout.expert_dp} expert DP"
        if megatron.distributed_optimizer
        else "not sharded (use_distributed_optimizer false)"
    )
    on_host = f", {megatron.optimizer_cpu_fraction:.0%} kept on the CPU" if megatron.optimizer_cpu_fraction else ""
    return f"{megatron.optimizer_bytes:g} B/param, {shards}{on_host}"


def forward_working_set(arch: Architecture, layout: Layout, stage: Stage, tokens: int) -> float:
    """A forward without grad holds one layer's tensors at a time (its saved set is an upper bound) beside the
    hidden states that pass between layers."""
    largest = layer_activation(arch, layout, moe=stage.moe_layers > 0)
    return (largest + 2 * layer_input(arch, layout)) * tokens


def logprob_phase(arch: Architecture, knobs: Knobs, megatron: MegatronKnobs, capacity_gib: float) -> Phase:
    """The old log-probs (the actor, params loaded) and the reference's (its params loaded), each forward-only
    over its micro-batches, beside what the other role keeps resident; the worse pass on the worse stage."""
    candidates = []
    for role, layout in (("actor", megatron.actor), ("ref", megatron.ref)):
        if role == "ref" and not holds_a_reference(knobs):
            continue
        pack = packing(knobs, layout, knobs.logprob_tokens, knobs.batch_sequences)
        for actor_stage, ref_stage in paired(arch, megatron):
            stage = actor_stage if role == "actor" else ref_stage
            held = states(megatron, actor_stage, ref_stage)
            kept = resident(knobs, megatron, held)
            values = kept | ({"params": held.params} if role == "actor" else {"ref params": held.ref_params})
            values |= critic_beside(arch, knobs, megatron)
            working = {"layer working set": forward_working_set(arch, layout, stage, pack.tokens)}
            if stage.index == layout.pp - 1:
                head = logits(arch, knobs, layout, pack.tokens, backward=False)
                working = head if sum(head.values()) > working["layer working set"] else working
            values |= working
            candidates.append((sum(values.values()), role, stage, layout, pack, values))
    _, role, stage, layout, pack, values = max(candidates, key=lambda candidate: candidate[0])
    lines = (f"the {role}'s pass, {stage_note(stage, layout)}", f"{pack.tokens} tokens per micro-batch on a rank")
    return with_margins("log-prob", values, {}, outside(arch, knobs, megatron.actor), capacity_gib, *lines)


def worst_resident(arch: Architecture, knobs: Knobs, megatron: MegatronKnobs) -> float:
    """Bytes of the trainer's resident state on its worst stage (what the engine wakes beside)."""
    return max(
        sum(resident(knobs, megatron, states(megatron, actor, ref)).values()) for actor, ref in paired(arch, megatron)
    )


def critic_resident(arch: Architecture, knobs: Knobs, critic: MegatronKnobs) -> float:
    """Bytes of the critic's states left on the card outside its update (its own param/optimizer offload), on its
    worst stage."""
    return max(sum(resident(knobs, critic, states(critic, stage, stage)).values()) for stage, _ in paired(arch, critic))


def critic_beside(arch: Architecture, knobs: Knobs, megatron: MegatronKnobs) -> dict[str, float]:
    """The critic's resident states as a term of the actor's phases (none without a Megatron critic)."""
    if megatron.critic_engine is None:
        return {}
    return {"critic states": critic_resident(arch, knobs, megatron.critic_engine)}


def critic_phase(arch: Architecture, knobs: Knobs, megatron: MegatronKnobs, capacity_gib: float) -> Phase:
    """The critic's update: training_phase at the critic's own layout and token budget (verl's v1 trainer gives its
    engine critic.ppo_infer_max_token_len_per_gpu, memory.critic_knobs), beside the actor's resident states."""
    critic = megatron.critic_engine
    assert critic is not None
    critic_knobs = replace(
        knobs,
        train_tokens=knobs.critic_tokens,
        dynamic_bsz=knobs.critic_dynamic_bsz,
        mini_batch_sequences=knobs.critic_mini_batch_sequences or knobs.mini_batch_sequences,
        ref_model=False,
    )
    actor = {"actor states": worst_resident(arch, knobs, megatron)}
    return training_phase(arch, critic_knobs, critic, capacity_gib, name="critic update", beside=actor)


def engine_phase(arch: Architecture, knobs: Knobs, megatron: MegatronKnobs, capacity_gib: float) -> Phase:
    """Generation: memory.py's engine arithmetic beside this trainer's resident state (the critic's too) and
    communicators."""
    held = worst_resident(arch, knobs, megatron) + sum(critic_beside(arch, knobs, megatron).values())
    beside = TrainerBeside(held / GIB, outside(arch, knobs, megatron.actor))
    return rollout_phase(arch, knobs, capacity_gib, beside)


def estimate(arch: Architecture, knobs: Knobs, megatron: MegatronKnobs, capacity_gib: float) -> list[Phase]:
    """Every phase a Megatron GRPO step has on one GPU, in verl's order: the update, the log-prob passes, then
    generation. `knobs`: memory.Knobs.from_verl of the same config (the engine, lengths, batch and token knobs,
    the profile's NCCL figure); `megatron`: MegatronKnobs.from_verl."""
    critic = [critic_phase(arch, knobs, megatron, capacity_gib)] if megatron.critic_engine is not None else []
    return [
        training_phase(arch, knobs, megatron, capacity_gib),
        *critic,
        logprob_phase(arch, knobs, megatron, capacity_gib),
        engine_phase(arch, knobs, megatron, capacity_gib),
    ]


def host_ram_terms(arch: Architecture, knobs: Knobs, megatron: MegatronKnobs) -> tuple[Term, ...]:
    """Host RAM one node needs, by what holds it (GiB per node; each term's note the setting that removes or shrinks
    it): what each GPU offloads at the worst stage (its params, optimizer state, the hybrid optimizer's CPU share with
    its fp32 gradient copy, the ref's params), the sleeping engines' weights, one process per GPU, and the node's
    share (Ray, the driver, the loader)."""
    per_node = knobs.gpus_per_node
    worst: list[tuple[str, float, str]] = []
    for actor, ref in paired(arch, megatron):
        held = states(megatron, actor, ref)
        # the hybrid optimizer steps its share on the CPU, from an fp32 copy of that share's gradients
        hybrid = held.optimizer_on_host + FP32_BYTES * held.optimizer_shard * megatron.optimizer_cpu_fraction
        stage = [
            (
                "the actor's offloaded params",
                held.params if megatron.param_offload else 0.0,
                "actor_rollout_ref.actor.megatron.param_offload=false",
            ),
            (
                "the actor's offloaded optimizer state",
                held.optimizer if megatron.optimizer_offload else 0.0,
                "actor_rollout_ref.actor.megatron.optimizer_offload=false",
            ),
            (
                "the hybrid optimizer's CPU share",
                hybrid,
                "a smaller actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_offload_fraction",
            ),
            (
                "the reference's offloaded params",
                held.ref_params if holds_a_reference(knobs) and megatron.ref_param_offload else 0.0,
                "actor_rollout_ref.ref.megatron.param_offload=false",
            ),
        ]
        if sum(part for _, part, _ in stage) > sum(part for _, part, _ in worst):
            worst = stage
    terms = [Term(name, per_node * per_gpu / GIB, setting) for name, per_gpu, setting in worst if per_gpu]
    critic = megatron.critic_engine
    if critic is not None and (critic.param_offload or critic.optimizer_offload):
        # a Megatron critic's own offloads (critic.megatron) park its states in host RAM between its phases too
        offloaded = max(
            critic.param_offload * held.params + critic.optimizer_offload * held.optimizer
            for held in (states(critic, stage, stage) for stage, _ in paired(arch, critic))
        )
        setting = "critic.megatron.param_offload / optimizer_offload=false"
        terms.append(Term("the critic's offloaded states", per_node * offloaded / GIB, setting))
    engine_weights = per_node * arch.params * PARAM_BYTES / knobs.rollout_tp / GIB
    return (*terms, *node_terms(per_node, engine_weights if knobs.engine_weights_in_host_ram else 0.0))


def not_modelled(knobs: Knobs, megatron: MegatronKnobs) -> list[str]:
    """What a Megatron verdict leaves out entirely, said beside it."""
    missing = []
    if megatron.critic and megatron.critic_engine is None:
        missing.append("the critic's engine (a critic not on Megatron beside a Megatron actor is not modelled)")
    if knobs.reward_model:
        missing.append("the colocated reward model's engine")
    return missing


def summarize(
    arch: Architecture, knobs: Knobs, megatron: MegatronKnobs, capacity_gib: float, bf16_tflops: float, policy: str
) -> Verdict:
    """The verdict on a Megatron job: each phase's worst stage against the card, `at_the_edge` the phases too near
    the card to call, `rough` where this model is rougher than FSDP's, `not_counted` what it leaves out. The
    throughput is FSDP's MFU curve at these knobs (Megatron's own is not modelled)."""
    phases = estimate(arch, knobs, megatron, capacity_gib)
    return Verdict.of(
        phases,
        host_ram_terms(arch, knobs, megatron),
        Predicted.at(arch, knobs, bf16_tflops),
        policy,
        not_counted=tuple(not_modelled(knobs, megatron)),
        edge=EDGE,
        rough=(ROUGH,),
    )
