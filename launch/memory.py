"""Per-GPU memory of each phase of a verl GRPO step with the colocated (hybrid) engine, predicted from the plan.

Runs on: the login node. Pure arithmetic on the model's architecture and the knobs in the verl config; every phase
is a sum of named terms so the preflight can print the arithmetic (terms = peak vs capacity). Sources of each term are
in docs/facts.md#memory; the activation and logits coefficients were measured on an H100 with bench/gpu_memory.py
(HF Qwen2 steps; tests/data/gpu_memory_h100.json), the margins with bench/gpu_cases.py (verl's one-GPU LoRA cases
built as verl builds them; tests/data/gpu_cases_h100.json), and are tested against those measurements. The NCCL
buffers of multi-GPU runs are a GPU profile's figure (gpu.nccl_gib_per_communicator), not measured here.

How verl 0.9 uses the card (FSDP engine, hybrid engine): the trainer keeps fp32 master params, fp32 grads and AdamW
state (4 + 4 + 8 B/param) sharded over the FSDP group; `param_offload` / `optimizer_offload` move params / optimizer
state to host RAM BETWEEN phases and back for the phase that needs them. The rollout engine sleeps during training
(weights and KV dropped) and wakes for generation, when whatever trainer state is not offloaded stays resident.

Each phase holds at most what the step gives one GPU: verl 0.9.1 splits the mini-batch (update) and the batch
(log-probs, values) over the data-parallel ranks, GPUs / Ulysses SP (verl/workers/engine_workers.py
TrainingWorker.train_mini_batch: `mini_batch_size // get_data_parallel_size()`; the log-prob pass is dispatched over
the same mesh), and packs a micro-batch or a token budget out of that share only.

A critic (algorithm.adv_estimator=gae) is a second FSDP model on the same GPUs (verl colocates every role in one
resource pool): its resident states sit beside the actor's in every phase, and its value pass and its update are
phases of their own. A colocated reward model (reward.reward_model.enable, no resource pool of its own) is a second
inference engine, woken after generation while the actor's engine sleeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING as MISSING_FIELD
from dataclasses import dataclass, field, fields, replace
from typing import Any

GIB = 1024**3

# --- coefficients (bytes), measured on an H100 by bench/gpu_memory.py (tests/data/gpu_memory_h100.json) -------------
# What one micro-batch adds above the model states: HF Qwen2 in bf16 (FSDP's compute copy), each gradient dropped
# once accumulated (FSDP's reduce-scatter), verl's log-prob code paths.
# The log-prob computation from the logits, per token x vocabulary entry, by the path verl takes (logits_path):
# (training: at the start of backward, after verl's forward step has dropped the model output; log-prob pass).
LOGITS_BYTES_PER_TOKEN_VOCAB = {
    # pure torch: bf16 logits, a log_softmax per row saved for backward, then the rows' grads (measured 4.0 / 2.0)
    "torch": (4.0, 2.0),
    # flash-attn's Triton cross-entropy: keeps only the bf16 logits and writes their grad in place (its code; the
    # bf16 logits themselves measured 2.0 on the torch path). A temperature other than 1 adds a scaled copy.
    "flash": (2.0, 2.0),
    # use_fused_kernels: verl's FusedLinearForPPO, per 512-token chunk upcast to fp32 (measured 12.0 / 8.0)
    "fused": (12.0, 8.0),
}
FLASH_GRAD_COPY_BYTES_PER_TOKEN_VOCAB = 2.0  # ... whose grad then gets its own bf16 buffer (measured 1.9)
# the in-place backward leaves lm_head's bf16 gradient as the largest thing beside the logits (when lm_head trains;
# measured: 3.94 GiB for 8192 tokens of Qwen2.5-7B's shapes = logits 2.32 + this 1.01 + the layers' inputs and output)
FLASH_WEIGHT_GRAD_BYTES_PER_VOCAB_HIDDEN = 2.0
FUSED_CHUNK_TOKENS = 512  # use_fused_kernels: verl's FusedLinearForPPO computes log-probs 512 tokens at a time
# the fused backward accumulates lm_head's gradient in its own buffer next to each chunk's (bf16 + fp32)
FUSED_WEIGHT_GRAD_BYTES_PER_VOCAB_HIDDEN = 6.0
# verl's entropy_from_logits beside the log-probs when computed, (training, log-prob pass), by how verl runs it:
ENTROPY_BYTES_PER_TOKEN_VOCAB = {
    # actor.use_torch_compile=false: eager softmax, product and logsumexp, their grads in training (measured 10.0 /
    # 3.9 on top of the pure-torch log-probs; on flash-attn's, 9.9 beyond its grad copy)
    "eager": (10.0, 4.0),
    # verl's default: torch.compile(entropy_from_logits) fuses the row reductions, so the forward keeps only per-row
    # values and the backward writes one bf16 grad (measured 2.0 / 0.0, torch 2.11 on the H100)
    "compiled": (2.0, 0.0),
}
# recomputation keeps each layer's bf16 input (docs/facts.md#memory: 2·s·b·h; measured 2.24)
CKPT_BYTES_PER_TOKEN_HIDDEN_LAYER = 2.3
# saved activations of one decoder layer without recomputation, per token: a x hidden + b x intermediate (measured)
LAYER_BYTES_PER_TOKEN = (29.0, 7.3)
# one layer recomputed and back-propagated (its activations and their grads), per token (measured)
RECOMPUTE_BYTES_PER_TOKEN = (29.0, 10.6)
FORWARD_BYTES_PER_TOKEN = (2.4, 6.8)  # log-prob pass: one layer's transients without grad, gate + up + act (measured)
OUTPUT_BYTES_PER_TOKEN_HIDDEN = 4.0  # the final hidden states and their norm, alive while log-probs are computed
# torch's AdamW step (foreach, verl's default) beside the states and gradients: the fp32 square root of the second
# moments it allocates whole (torch/optim/adam.py `_foreach_sqrt`). On one GPU, where FSDP does not shard, the
# measured floor of an update is 23.1 B/param (Qwen2.5-1.5B, bench/gpu_cases.py): fp32 params, grads, AdamW state,
# this, and the bf16 copy with its gradients (2 + 2) that NO_SHARD keeps
ADAMW_STEP_BYTES_PER_PARAM = 4.0
# --- margins (README "Memory preflight"), measured by bench/gpu_cases.py (tests/data/gpu_cases_h100.json) -----------
# CUDA context, cuBLAS workspaces, Triton's and inductor's kernels, a one-rank NCCL group: measured 1.30 GiB
NON_TORCH_GIB = 1.3
# the caching allocator on a phase's transient bytes, with the expandable segments verl turns on for training:
# reserved over allocated at the cases' sizes 1.6-5.6 % of the transient bytes, 0.2 % at the one that filled the card
# (without expandable segments the kit measures 15-29 %)
FRAGMENTATION = 0.05
ENGINE_ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 24.0  # vLLM/SGLang prefill working set per batched token (profiled by vLLM)
HOST_BASE_GIB_PER_NODE = 16.0  # Ray head/raylet, the driver, TransferQueue, the data loader
HOST_GIB_PER_GPU_PROCESS = 6.0  # one worker process per GPU: CUDA/torch/vLLM libraries, pinned buffers

# verl key of each knob a fix or tune may set
KNOB_KEYS = {
    "engine_fraction": "actor_rollout_ref.rollout.gpu_memory_utilization",
    "checkpointing": "actor_rollout_ref.model.enable_gradient_checkpointing",
    "fused_kernels": "actor_rollout_ref.model.use_fused_kernels",
    "train_tokens": "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "logprob_tokens": "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
    "micro_batch": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "logprob_micro_batch": "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "optimizer_offload": "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
    "param_offload": "actor_rollout_ref.actor.fsdp_config.param_offload",
    "rollout_tp": "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "max_num_seqs": "actor_rollout_ref.rollout.max_num_seqs",
    "engine_max_model_len": "actor_rollout_ref.rollout.max_model_len",
    "nnodes": "trainer.nnodes",
    "gpus_per_node": "trainer.n_gpus_per_node",
    # verl 0.9.1's critic engine is critic.fsdp; its token budget the CriticConfig field its yaml does not list, its
    # micro-batches the engine's own fields (EngineConfig), which critic.fsdp's yaml does not list either (`++`: Hydra
    # adds it, or overrides it where the user added it with `+`, which a second `+` would refuse); critic_batching
    # says which of them the run's critic reads
    "critic_param_offload": "critic.fsdp.param_offload",
    "critic_optimizer_offload": "critic.fsdp.optimizer_offload",
    "critic_tokens": "++critic.ppo_infer_max_token_len_per_gpu",
    "critic_value_tokens": "++critic.ppo_infer_max_token_len_per_gpu",
    "critic_micro_batch": "++critic.fsdp.micro_batch_size_per_gpu",
    "critic_value_micro_batch": "++critic.fsdp.infer_micro_batch_size_per_gpu",
    "critic_checkpointing": "critic.model.enable_gradient_checkpointing",
}
# verl 0.9.1's legacy trainer (trainer.use_v1=false, trainer/ppo/ray_trainer.py init_workers) gives the critic's
# engine this budget for its update (the v1 trainer gives it ppo_infer_max_token_len_per_gpu for both passes)
LEGACY_CRITIC_UPDATE_TOKENS = "critic.ppo_max_token_len_per_gpu"


@dataclass(frozen=True)
class Architecture:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int  # with latent attention: a query/key head's part without rotary embedding (qk_nope_head_dim)
    intermediate: int  # the dense MLP's width (a MoE model's leading dense layers; Mixtral's experts)
    vocab: int
    tied_embeddings: bool
    # A mixture of experts (all 0 for a dense model, whose figures these leave unchanged): routed experts per MoE
    # layer, how many each token visits, one expert's SwiGLU width, the always-on shared experts' total width, and
    # the leading layers that keep a dense MLP (DeepSeek's first_k_dense_replace)
    experts: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    shared_expert_intermediate: int = 0
    dense_layers: int = 0
    # Multi-head latent attention (DeepSeek-V2/V3, Moonlight; 0 otherwise): the low-rank query and key-value
    # projections, the rotary part of each query/key head (beside head_dim) and the value head
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # the context verl 0.9.1 gives the rollout engine when rollout.max_model_len is null (0: not known)
    max_position_embeddings: int = 0
    # a vision-language model's vision tower (launch/facts.py vision_params_of; 0: none, or not read): trained,
    # stored and served with the decoder, but not on a text token's path
    vision_params: int = 0

    @classmethod
    def from_llm(cls, llm: Mapping[str, Any]) -> Architecture:
        """From an llm.* table; the MoE and latent-attention fields are optional there (None or absent: 0)."""
        values: dict[str, Any] = {}
        for item in fields(cls):
            if item.default is MISSING_FIELD:
                values[item.name] = llm[item.name]
            else:
                values[item.name] = llm.get(item.name) or item.default
        return cls(**values)

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def latent_attention(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def attention_params(self) -> int:
        """One layer's attention projections. Latent attention (DeepSeek-V3's modeling code): the query's optional
        low-rank pair and its norm, the shared key-value down-projection (latent + rotary key), its norm, the
        up-projection to every head's key (nope part) and value, and the output projection."""
        if self.latent_attention:
            query_heads = self.heads * (self.head_dim + self.qk_rope_head_dim)
            query = (
                self.hidden * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * query_heads
                if self.q_lora_rank
                else self.hidden * query_heads
            )
            key_value = (
                self.hidden * (self.kv_lora_rank + self.qk_rope_head_dim)
                + self.kv_lora_rank
                + self.kv_lora_rank * self.heads * (self.head_dim + self.v_head_dim)
            )
            return query + key_value + self.heads * self.v_head_dim * self.hidden
        q, kv = self.hidden * self.heads * self.head_dim, 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        biases = self.heads * self.head_dim + 2 * self.kv_heads * self.head_dim  # Qwen2's qkv bias; tiny elsewhere
        return q + kv + o + biases

    @property
    def dense_layer_params(self) -> int:
        """A decoder layer with a dense SwiGLU MLP: attention, gate/up/down, two norms."""
        return self.attention_params + 3 * self.hidden * self.intermediate + 2 * self.hidden

    @property
    def expert_params_per_layer(self) -> int:
        """The routed experts of one MoE layer (each a SwiGLU of moe_intermediate): what expert parallelism shards."""
        return self.experts * 3 * self.hidden * self.moe_intermediate

    @property
    def moe_layer_params(self) -> int:
        """A MoE decoder layer: attention, the routed experts, the shared experts, the router, two norms."""
        shared = 3 * self.hidden * self.shared_expert_intermediate
        return (
            self.attention_params + self.expert_params_per_layer + shared + self.experts * self.hidden + 2 * self.hidden
        )

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def layer_params(self) -> int:
        """The largest decoder layer (a MoE layer with all its experts): what FSDP gathers as one unit."""
        return self.moe_layer_params if self.is_moe else self.dense_layer_params

    @property
    def decoder_params(self) -> int:
        if not self.is_moe:
            return self.layers * self.layer_params
        return (self.layers - self.moe_layers) * self.dense_layer_params + self.moe_layers * self.moe_layer_params

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def params(self) -> int:
        return self.decoder_params + self.embedding_params + self.hidden + self.vision_params

    @property
    def active_params(self) -> int:
        """Parameters one text token passes through: a MoE layer's routed experts count experts_per_token of
        experts; the vision tower runs on image patches, not on the tokens."""
        text = self.params - self.vision_params
        if not self.is_moe:
            return text
        idle_experts = (self.experts - self.experts_per_token) * 3 * self.hidden * self.moe_intermediate
        return text - self.moe_layers * idle_experts

    @property
    def kv_bytes_per_token(self) -> int:
        """bf16 KV cache of one token. Latent attention caches one latent vector and one rotary key per layer,
        shared by every head (vLLM's MLA cache)."""
        if self.latent_attention:
            return self.layers * (self.kv_lora_rank + self.qk_rope_head_dim) * 2
        return 2 * self.layers * self.kv_heads * self.head_dim * 2

    @property
    def kv_shards_over_tp(self) -> bool:
        """Whether an engine's tensor-parallel ranks split the KV cache (by kv head); the latent cache of MLA has no
        heads to split, so every rank of the group holds all of it."""
        return not self.latent_attention


def trains_critic(config: Mapping[str, Any]) -> bool:
    """verl's need_critic (trainer/ppo/utils.py): critic.enable when set, else algorithm.adv_estimator=gae; on the
    composed config or the resolved verl config alike."""
    enabled = config["critic"].get("enable")
    return bool(enabled) if enabled is not None else str(config["algorithm"]["adv_estimator"]) == "gae"


def micro_batch_tokens(dynamic: bool, budget: int | None, micro_batch: int | None, sequence: int) -> int:
    """A micro-batch's tokens per GPU in verl's batch mode (use_dynamic_bsz): its token budget, or its micro-batch of
    whole sequences at this sequence length."""
    return int(budget or 0) if dynamic else (micro_batch or 1) * sequence


@dataclass(frozen=True)
class Knobs:
    """What the verl config decides about memory, in one place (from_verl reads verl's own keys)."""

    n_gpus: int
    gpus_per_node: int
    prompt_length: int
    response_length: int
    dynamic_bsz: bool
    train_tokens: int  # tokens per training micro-batch per GPU (token budget, or micro-batch x sequence length)
    logprob_tokens: int
    micro_batch: int | None
    logprob_micro_batch: int | None
    checkpointing: bool
    param_offload: bool
    optimizer_offload: bool
    ref_model: bool
    lora_rank: int
    entropy: bool
    fused_kernels: bool
    engine: str
    engine_fraction: float
    rollout_tp: int
    max_num_seqs: int
    max_num_batched_tokens: int
    pcgrad_tasks: int = 0
    fsdp_size: int = -1
    flash_ce: bool = False  # flash-attn in the job's environment: verl's log-probs take its cross-entropy
    # verl compiles entropy_from_logits (actor.use_torch_compile, its default) on the remove-padding path only; its
    # padded path (model.use_remove_padding=false) calls it eagerly
    entropy_compiled: bool = True
    engine_weights_in_host_ram: bool = True  # the sleeping engine keeps its weights in host RAM (launch/job_software)
    sequence_parallel: int = 1  # Ulysses: each GPU of a group holds 1/sp of every sequence's tokens
    model_dtype_bytes: int = 4  # actor.fsdp_config.model_dtype: what FSDP stores the parameters in (fp32 default)
    # PPO's hybrid engine generates while the trainer's state stays on the card; RFT generates (stage 1) before
    # any trainer exists and trains (stage 3) with no engine awake
    trainer_beside_engine: bool = True
    communicator_gib: float = 0.0  # one NCCL communicator's buffers on this GPU (gpu.nccl_gib_per_communicator)
    # the same with NCCL's NVLS off, where it is on now and the card has it (0: nothing to turn off)
    communicator_gib_without_nvls: float = 0.0
    # torch's AdamW as verl builds it: foreach (the default on CUDA) allocates whole-size temporaries in its step;
    # actor.optim.override_optimizer_config {fused: true} or {foreach: false} does not
    optimizer_temporaries: bool = True
    # a step's sequences (prompts x rollout.n), split by verl over the data-parallel ranks: 0 = not known, no cap
    mini_batch_sequences: int = 0  # actor.ppo_mini_batch_size x n: the update
    batch_sequences: int = 0  # data.train_batch_size x n: log-probs, values and the engine's concurrency
    # the critic (verl's need_critic), colocated: FSDP states of its own, offloaded by its own settings
    critic: bool = False
    critic_param_offload: bool = False
    critic_optimizer_offload: bool = False
    critic_dynamic_bsz: bool = True  # verl 0.9.1's critic engine packs by tokens (FSDPEngineConfig default)
    critic_tokens: int = 32768  # its update's micro-batch per GPU: the token budget, or micro-batch x sequence length
    critic_value_tokens: int = 32768  # its value pass's: the token budget, or micro-batch x sequence length
    critic_micro_batch: int | None = None  # without dynamic batching: the engine's micro_batch_size_per_gpu
    critic_value_micro_batch: int | None = None  # and its infer_micro_batch_size_per_gpu
    critic_v1: bool = True  # trainer.use_v1: which budget the critic's update reads (critic_batching)
    critic_checkpointing: bool = True
    critic_sequence_parallel: int = 1
    critic_mini_batch_sequences: int = 0  # critic.ppo_mini_batch_size x n
    critic_lora_rank: int = 0
    critic_model_dtype_bytes: int = 4
    critic_optimizer_temporaries: bool = True
    # a reward model colocated on these GPUs: verl 0.9 serves it with an engine of its own (reward.reward_model.rollout)
    reward_model: bool = False
    reward_engine: str = "vllm"
    reward_engine_fraction: float = 0.0
    engine_max_model_len: int = 0  # rollout.max_model_len as set; 0: null, which verl makes the model's positions
    # the reward model's engine where its architecture was read (reward_architecture_knobs; reward_params 0: not read)
    reward_params: int = 0
    reward_hidden: int = 0
    reward_kv_bytes_per_token: int = 0  # on one rank of its engine (split over its TP where the cache shards)
    reward_context: int = 0  # the sequence its KV cache must hold one of
    reward_tp: int = 1
    reward_batched_tokens: int = 0
    # verl's reference under LoRA (or an adapter) is the actor with its adapters off: no model of its own
    # (trainer/ppo/v1/trainer_base.py ref_in_actor)
    ref_in_actor: bool = False
    ref_dtype_bytes: int = 4  # ref.fsdp_config.model_dtype: what its parameters are stored in (fp32 default)

    @classmethod
    def from_verl(cls, verl: dict[str, Any], pcgrad_tasks: int = 0, flash_ce: bool = False) -> Knobs:
        arr = verl["actor_rollout_ref"]
        actor, rollout, ref, model = arr["actor"], arr["rollout"], arr["ref"], arr["model"]
        trainer, data = verl["trainer"], verl["data"]
        # a Megatron actor has no fsdp_config: its own states are launch/megatron_memory.py's, the rest is read here
        fsdp, ref_fsdp = actor.get("fsdp_config") or {}, ref.get("fsdp_config") or {}
        sequence = data["max_prompt_length"] + data["max_response_length"]
        dynamic = bool(actor["use_dynamic_bsz"])
        micro = actor.get("ppo_micro_batch_size_per_gpu")
        logprob_micro = rollout.get("log_prob_micro_batch_size_per_gpu")
        return cls(
            n_gpus=trainer["nnodes"] * trainer["n_gpus_per_node"],
            gpus_per_node=trainer["n_gpus_per_node"],
            prompt_length=data["max_prompt_length"],
            response_length=data["max_response_length"],
            dynamic_bsz=dynamic,
            train_tokens=micro_batch_tokens(dynamic, actor.get("ppo_max_token_len_per_gpu"), micro, sequence),
            logprob_tokens=micro_batch_tokens(
                dynamic, rollout.get("log_prob_max_token_len_per_gpu"), logprob_micro, sequence
            ),
            micro_batch=micro,
            logprob_micro_batch=logprob_micro,
            checkpointing=bool(model["enable_gradient_checkpointing"]),
            param_offload=bool(fsdp.get("param_offload", False)),
            optimizer_offload=bool(fsdp.get("optimizer_offload", False)),
            ref_model=bool(actor["use_kl_loss"] or verl["algorithm"].get("use_kl_in_reward")),
            lora_rank=trained_lora_rank(model, str(actor.get("strategy"))),
            entropy=bool(actor.get("calculate_entropy") or actor.get("entropy_coeff")),
            fused_kernels=bool(model.get("use_fused_kernels")),
            engine=rollout["name"],
            engine_fraction=float(rollout["gpu_memory_utilization"]),
            rollout_tp=int(rollout["tensor_model_parallel_size"]),
            max_num_seqs=int(rollout["max_num_seqs"]),
            max_num_batched_tokens=int(rollout["max_num_batched_tokens"]),
            engine_max_model_len=int(rollout.get("max_model_len") or 0),
            pcgrad_tasks=pcgrad_tasks,
            fsdp_size=int(fsdp.get("fsdp_size", -1)),
            sequence_parallel=max(1, int(actor.get("ulysses_sequence_parallel_size") or 1)),
            model_dtype_bytes=dtype_bytes(fsdp.get("model_dtype", "fp32")),
            ref_in_actor=reference_in_actor(model),
            ref_dtype_bytes=dtype_bytes(ref_fsdp.get("model_dtype", "fp32")),
            flash_ce=flash_ce,
            entropy_compiled=bool(actor.get("use_torch_compile", True)) and bool(model.get("use_remove_padding", True)),
            optimizer_temporaries=foreach_optimizer(actor.get("optim") or {}),
            mini_batch_sequences=int(actor["ppo_mini_batch_size"]) * int(rollout["n"]),
            batch_sequences=int(data["train_batch_size"]) * int(rollout["n"]),
            **critic_knobs(verl, sequence),
            **reward_model_knobs(verl),
        )

    @property
    def sequence(self) -> int:
        return self.prompt_length + self.response_length

    def tokens_per_gpu(self, tokens: int) -> int:
        """A micro-batch's tokens on one GPU, uncapped. A token budget is per GPU already: verl packs budget x SP
        tokens for a Ulysses group, which splits them (engine utils prepare_micro_batches); a micro-batch of whole
        sequences is split over the group."""
        return tokens if self.dynamic_bsz else tokens // self.sequence_parallel

    @property
    def data_parallel(self) -> int:
        """verl's data-parallel ranks: the GPUs / the Ulysses group that shares each sequence."""
        return max(1, self.n_gpus // self.sequence_parallel)

    def share(self, sequences: int, sequence_parallel: int | None = None) -> int:
        """Sequences one data-parallel rank gets of `sequences` (0: not known)."""
        ranks = max(1, self.n_gpus // (sequence_parallel or self.sequence_parallel))
        return sequences // ranks if sequences else 0

    def on_gpu(self, tokens: int, sequences: int, sequence_parallel: int, dynamic: bool) -> int:
        """A micro-batch's tokens on one GPU: the micro-batch of whole sequences (`tokens` = micro x sequence) or the
        token budget (x SP for the group), at most the rank's share of `sequences`, split over its Ulysses group."""
        group = tokens * sequence_parallel if dynamic else tokens
        share = self.share(sequences, sequence_parallel)
        if share:
            group = min(group, max(1, share) * self.sequence)
        return group // sequence_parallel

    @property
    def train_tokens_on_gpu(self) -> int:
        return self.on_gpu(self.train_tokens, self.mini_batch_sequences, self.sequence_parallel, self.dynamic_bsz)

    @property
    def logprob_tokens_on_gpu(self) -> int:
        return self.on_gpu(self.logprob_tokens, self.batch_sequences, self.sequence_parallel, self.dynamic_bsz)

    @property
    def critic_train_tokens_on_gpu(self) -> int:
        sequences = self.critic_mini_batch_sequences or self.mini_batch_sequences
        return self.on_gpu(self.critic_tokens, sequences, self.critic_sequence_parallel, self.critic_dynamic_bsz)

    @property
    def critic_value_tokens_on_gpu(self) -> int:
        return self.on_gpu(
            self.critic_value_tokens, self.batch_sequences, self.critic_sequence_parallel, self.critic_dynamic_bsz
        )

    @property
    def engine_share(self) -> int:
        """Sequences one engine replica (a TP group) gets of a batch: what its concurrency can use (0: not known)."""
        replicas = max(1, self.n_gpus // max(1, self.rollout_tp))
        return self.batch_sequences // replicas if self.batch_sequences else 0

    @property
    def shard_group(self) -> int:
        return self.n_gpus if self.fsdp_size in (-1, 0, None) else min(self.fsdp_size, self.n_gpus)

    @property
    def communicator_groups(self) -> list[tuple[int, int]]:
        """NCCL communicators of several ranks one GPU joins in verl's hybrid layout, as (ranks, stride between
        them): FSDP's group (and the replica group when fsdp_size shards over fewer GPUs: verl's ("ddp", "fsdp")
        mesh, the fsdp ranks consecutive), Ulysses' ("dp", "sp") mesh (its SP group, and its data-parallel group
        when there are several), and the engine's TP group, twice (vLLM's own NCCL communicator and its torch device
        group; SGLang's likewise). Each holds its buffers for the whole run."""
        groups = [(self.shard_group, 1)] if self.shard_group > 1 else []
        if self.n_gpus > self.shard_group > 0:
            groups.append((self.n_gpus // self.shard_group, self.shard_group))
        data_parallel = self.n_gpus // self.sequence_parallel
        if self.sequence_parallel > 1:
            groups.append((self.sequence_parallel, 1))
            if data_parallel > 1:
                groups.append((data_parallel, self.sequence_parallel))
        return groups + [(self.rollout_tp, 1)] * 2 * (self.rollout_tp > 1)

    @property
    def communicators(self) -> int:
        return len(self.communicator_groups)

    @property
    def communicators_gib(self) -> float:
        return sum(self.group_gib(ranks, stride) for ranks, stride in self.communicator_groups)

    def group_gib(self, ranks: int, stride: int) -> float:
        """One communicator's buffers by where its ranks sit, consecutive ranks filling a node (verl's meshes over
        Ray's placement). NCCL opens NVLink SHARP only where a communicator has more than 2 GPUs on a node
        (src/transport/nvls.cc ncclNvlsInit: no NVLS when its node's GPU count is <= 2, outside multi-node NVLink),
        so one that spans nodes with 1 or 2 GPUs on each holds the card's buffers without NVLS
        (gpu.nccl_gib_per_communicator_without_nvls). A group within one node keeps the profile's figure, calibrated
        on single-node runs whatever their group sizes."""
        on_a_node = 1 if stride >= self.gpus_per_node else min(ranks, self.gpus_per_node // max(stride, 1))
        if ranks > on_a_node and on_a_node <= 2 and self.communicator_gib_without_nvls:
            return self.communicator_gib_without_nvls
        return self.communicator_gib

    @property
    def communicators_note(self) -> str:
        """How many communicators, and how many of them span nodes without NVLS (group_gib)."""
        plain = sum(
            self.group_gib(ranks, stride) != self.communicator_gib for ranks, stride in self.communicator_groups
        )
        spanning = f", {plain} across nodes at {self.communicator_gib_without_nvls:g} GiB (no NVLS)" if plain else ""
        return f"{self.communicators} communicators{spanning}"


VERL_CRITIC_TOKENS = 32768  # verl 0.9.1's CriticConfig.ppo_infer_max_token_len_per_gpu (not in its yaml)


def critic_engine(verl: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The critic's engine block and its key: verl 0.9.1's CriticConfig makes `engine` critic.megatron or
    critic.fsdp by strategy (workers/config/critic.py __post_init__)."""
    critic = verl["critic"]
    name = "megatron" if critic.get("strategy") == "megatron" else "fsdp"
    return f"critic.{name}", critic.get(name) or {}


@dataclass(frozen=True)
class CriticBatching:
    """How verl 0.9.1 cuts the critic's micro-batches (critic_batching)."""

    engine_key: str  # critic.fsdp or critic.megatron
    dynamic: bool  # the engine's use_dynamic_bsz
    v1: bool  # trainer.use_v1
    update_budget: int
    value_budget: int
    micro_batch: int | None  # the engine's micro_batch_size_per_gpu (None: unset)
    value_micro_batch: int | None  # the engine's infer_micro_batch_size_per_gpu (None: unset)


def critic_batching(verl: Mapping[str, Any]) -> CriticBatching:
    """How verl 0.9.1 cuts the critic's micro-batches. Both trainers build a TrainingWorker on the critic's engine
    config (critic.fsdp / critic.megatron), setting only its token budgets: the v1 trainer (trainer.use_v1, verl's
    default; trainer/ppo/v1/trainer_base.py init_workers) critic.ppo_infer_max_token_len_per_gpu for the update and
    the value pass, the legacy one (trainer/ppo/ray_trainer.py init_workers) critic.ppo_max_token_len_per_gpu for the
    update. Everything else is the engine's own (workers/engine_workers.py TrainingWorker.train_batch/infer_batch):
    use_dynamic_bsz (EngineConfig: true), and without it micro_batch_size_per_gpu (the update) and
    infer_micro_batch_size_per_gpu (the value pass), neither in verl's yaml nor copied from anything:
    critic.use_dynamic_bsz, critic.ppo_micro_batch_size_per_gpu and critic.ppo_infer_micro_batch_size_per_gpu never
    reach the engine."""
    critic = verl["critic"]
    engine_key, engine = critic_engine(verl)
    v1 = bool(verl["trainer"].get("use_v1", True))
    value_budget = int(critic.get("ppo_infer_max_token_len_per_gpu") or VERL_CRITIC_TOKENS)
    return CriticBatching(
        engine_key=engine_key,
        dynamic=bool(engine.get("use_dynamic_bsz", True)),
        v1=v1,
        update_budget=value_budget if v1 else int(critic.get("ppo_max_token_len_per_gpu") or VERL_CRITIC_TOKENS),
        value_budget=value_budget,
        micro_batch=engine.get("micro_batch_size_per_gpu"),
        value_micro_batch=engine.get("infer_micro_batch_size_per_gpu"),
    )


def critic_knobs(verl: dict[str, Any], sequence: int) -> dict[str, Any]:
    """The critic's knobs as verl 0.9.1 runs it: a TrainingWorker whose engine is `critic.fsdp` or `critic.megatron`,
    batched as critic_batching says. verl's need_critic (trains_critic) says whether there is one."""

    if not trains_critic(verl):
        return {}
    critic = verl["critic"]
    _, engine = critic_engine(verl)
    model = critic.get("model") or {}
    batching = critic_batching(verl)
    dynamic = batching.dynamic
    rollout_n = int(verl["actor_rollout_ref"]["rollout"]["n"])
    return {
        "critic": True,
        "critic_param_offload": bool(engine.get("param_offload", False)),
        "critic_optimizer_offload": bool(engine.get("optimizer_offload", False)),
        "critic_dynamic_bsz": dynamic,
        "critic_tokens": micro_batch_tokens(dynamic, batching.update_budget, batching.micro_batch, sequence),
        "critic_value_tokens": micro_batch_tokens(dynamic, batching.value_budget, batching.value_micro_batch, sequence),
        "critic_micro_batch": batching.micro_batch,
        "critic_value_micro_batch": batching.value_micro_batch,
        "critic_v1": batching.v1,
        "critic_checkpointing": bool(model.get("enable_gradient_checkpointing", True)),
        "critic_sequence_parallel": max(1, int(engine.get("ulysses_sequence_parallel_size") or 1)),
        "critic_mini_batch_sequences": int(critic.get("ppo_mini_batch_size") or 0) * rollout_n,
        "critic_lora_rank": int(model.get("lora_rank") or 0),
        "critic_model_dtype_bytes": 2 if str(engine.get("model_dtype", "fp32")) in ("bf16", "bfloat16", "fp16") else 4,
        "critic_optimizer_temporaries": foreach_optimizer(critic.get("optim") or {}),
    }


def reward_model_knobs(verl: dict[str, Any]) -> dict[str, Any]:
    """A reward model on the actor's GPUs: reward.reward_model.enable without a resource pool of its own (verl 0.9
    then places it in the global pool, trainer_base.py init_resource_pool_mgr)."""
    reward_model = (verl.get("reward") or {}).get("reward_model") or {}
    if not reward_model.get("enable") or reward_model.get("enable_resource_pool"):
        return {}
    rollout = reward_model.get("rollout") or {}
    return {
        "reward_model": True,
        "reward_engine": str(rollout.get("name") or "vllm"),
        "reward_engine_fraction": float(rollout.get("gpu_memory_utilization") or 0.5),
    }


# the key of model.* an engine reads LoRA's rank from: verl 0.9.1's Megatron engine builds Megatron-Bridge's PEFT from
# model.lora (workers/config/megatron_peft.py get_peft_cls: lora.rank > 0), its FSDP engine reads model.lora_rank
# (workers/engine/fsdp/transformer_impl.py); neither reads the other's key
FSDP_LORA_RANK = "lora_rank"
MEGATRON_LORA_RANK = "lora.rank"


def lora_rank_key(strategy: str) -> str:
    return MEGATRON_LORA_RANK if strategy == "megatron" else FSDP_LORA_RANK


def value_at(model: Mapping[str, Any], key: str) -> Any:
    """model's value at a dotted key, None where a part is missing."""
    node: Any = model
    for part in key.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def trained_lora_rank(model: Mapping[str, Any], strategy: str) -> int:
    """The LoRA rank the actor's engine applies (lora_rank_key)."""
    return int(value_at(model, lora_rank_key(strategy)) or 0)


def reference_in_actor(model: Mapping[str, Any]) -> bool:
    """verl 0.9.1's ref_in_actor (trainer/ppo/ray_trainer.py, v1/trainer_base.py): model.lora.rank, else
    model.lora_rank, above 0, or a LoRA adapter to load: the reference is the actor with its adapters off, no model
    of its own."""
    rank = int(value_at(model, MEGATRON_LORA_RANK) or 0)
    if rank <= 0:
        rank = int(value_at(model, FSDP_LORA_RANK) or 0)
    return rank > 0 or model.get("lora_adapter_path") is not None


def reward_architecture_knobs(verl: Mapping[str, Any], reward: Architecture) -> dict[str, Any]:
    """The reward model's engine knobs from its own architecture (its config.json, read where the path is local):
    verl 0.9.1 serves it with the rollout's replica classes (experimental/reward_loop/reward_model.py), so its vLLM
    gets reward.reward_model.rollout.max_model_len, null meaning the model's max_position_embeddings
    (vllm_async_server), and raises max_num_batched_tokens to that without chunked prefill; SGLang and TRT-LLM hold
    its prompt_length + response_length."""
    rollout = ((verl.get("reward") or {}).get("reward_model") or {}).get("rollout") or {}
    tp = max(1, int(rollout.get("tensor_model_parallel_size") or 1))
    engine = str(rollout.get("name") or "vllm")
    sequence = int(rollout.get("prompt_length") or 0) + int(rollout.get("response_length") or 0)
    context = sequence
    batched = int(rollout.get("max_num_batched_tokens") or 0)
    if engine == "vllm":
        context = int(rollout.get("max_model_len") or 0) or reward.max_position_embeddings or sequence
        if not rollout.get("enable_chunked_prefill", True):
            batched = max(batched, context)
    return {
        "reward_params": reward.params,
        "reward_hidden": reward.hidden,
        "reward_kv_bytes_per_token": reward.kv_bytes_per_token // (tp if reward.kv_shards_over_tp else 1),
        "reward_context": context,
        "reward_tp": tp,
        "reward_batched_tokens": batched,
    }


def foreach_optimizer(optim: dict[str, Any]) -> bool:
    """Whether verl's torch AdamW runs its foreach implementation (torch's default on CUDA)."""
    overrides = optim.get("override_optimizer_config") or {}
    return not overrides.get("fused") and overrides.get("foreach") is not False


@dataclass(frozen=True)
class Term:
    name: str
    gib: float
    note: str = ""


@dataclass(frozen=True)
class Phase:
    name: str
    terms: tuple[Term, ...]
    capacity_gib: float
    notes: tuple[str, ...] = field(default_factory=tuple)
    hard_failure: str = ""  # a failure that is not about the sum (e.g. no room for one sequence's KV cache)

    @property
    def peak_gib(self) -> float:
        return sum(term.gib for term in self.terms)

    @property
    def fits(self) -> bool:
        return self.peak_gib <= self.capacity_gib and not self.hard_failure

    def arithmetic(self) -> str:
        parts = " + ".join(f"{term.name} {term.gib:.1f}" for term in self.terms if term.gib >= 0.05)
        verdict = "fits" if self.fits else "DOES NOT FIT"
        line = f"{self.name}: {parts} = {self.peak_gib:.1f} GiB vs {self.capacity_gib:.1f} GiB -> {verdict}"
        return line + (f" ({self.hard_failure})" if self.hard_failure else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "peak_gib": round(self.peak_gib, 2),
            "capacity_gib": round(self.capacity_gib, 2),
            "fits": self.fits,
            "terms": {term.name: round(term.gib, 3) for term in self.terms},
            "notes": list(self.notes),
            **({"failure": self.hard_failure} if self.hard_failure else {}),
        }


@dataclass(frozen=True)
class Edge:
    """The band around the card in which an estimate cannot call a verdict: a phase whose peak lies at most `below`
    (a fraction of the card) under it or `above` over it, when no phase misses by more (a clear misfit) or fails
    outright. Each estimator states its own band, from what it was checked against."""

    below: float
    above: float
    checked_by: str  # what measured the band, for the plan's words

    def phases_at(self, phases: list[Phase]) -> list[str]:
        def excess(phase: Phase) -> float:
            return phase.peak_gib / phase.capacity_gib - 1

        if any(phase.hard_failure or excess(phase) > self.above for phase in phases):
            return []
        return [phase.name for phase in phases if -self.below <= excess(phase) <= self.above]

    def words(self) -> str:
        return f"{self.below:.1%} under to {self.above:.1%} over the card, where {self.checked_by}"


# The FSDP estimate against the public runs that ran or ran out of memory (bench/preflight_accuracy.py over
# tests/data/public_cases.yaml, bench/results/preflight_accuracy.txt; tests/test_preflight_edges.py recomputes the
# two ends): every run that ran was predicted at most 98.44 % of its card (verl's DAPO on 16 and 32 H20s; 32B LoRA on
# 4 H100s at 98.36 %), every run that ran out of memory at least 102.28 % (72B LoRA on 8 H100s, 24 sequences per
# GPU). Outside 98.5-102.2 % every public run went as the verdict said; inside it none has tested the estimate, and the
# H100 kit (bench/results/gpu_h100.txt) leaves both sides open: its predicted allocations run up to 1 % under and 9 %
# over what torch allocated. Megatron's first-order band is ten times wider (megatron_memory.EDGE).
FSDP_EDGE = Edge(below=0.015, above=0.022, checked_by="no public run has tested the FSDP estimate")


def _gib(value: float) -> float:
    return value / GIB


def trainable_params(arch: Architecture, lora_rank: int) -> int:
    if lora_rank <= 0:
        return arch.params
    # LoRA on every linear of each layer: q, k, v, o, gate, up, down
    q_out, kv_out = arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    shapes = [
        (arch.hidden, q_out),
        (arch.hidden, kv_out),
        (arch.hidden, kv_out),
        (q_out, arch.hidden),
        (arch.hidden, arch.intermediate),
        (arch.hidden, arch.intermediate),
        (arch.intermediate, arch.hidden),
    ]
    return arch.layers * sum(lora_rank * (fan_in + fan_out) for fan_in, fan_out in shapes)


def model_states(arch: Architecture, knobs: Knobs) -> dict[str, float]:
    """Bytes per GPU of each model state, sharded over the FSDP group."""
    shard = knobs.shard_group
    trainable = trainable_params(arch, knobs.lora_rank)
    # the frozen base in verl's model_dtype (fp32 by default: FSDP keeps the loaded dtype; bf16 is the compute copy)
    frozen_base = arch.params * knobs.model_dtype_bytes / shard if knobs.lora_rank > 0 else 0.0
    return {
        "params": (trainable * 4 / shard) + frozen_base,
        "grads": trainable * 4 / shard,
        "optimizer": trainable * 8 / shard,
        "pcgrad": knobs.pcgrad_tasks * trainable * 4 / shard,  # one fp32 gradient shard per task
        "optimizer step": trainable * ADAMW_STEP_BYTES_PER_PARAM / shard if knobs.optimizer_temporaries else 0.0,
    }


def compute_copy(arch: Architecture, knobs: Knobs) -> dict[str, float]:
    """bf16 parameters FSDP holds unsharded at once: the root unit (embeddings, lm_head) plus the current and the
    prefetched decoder layer. On one GPU FSDP does not shard (NO_SHARD) and keeps the bf16 copy of what trains for
    the whole run (measured: 2.0 B/param with full fine-tuning, none beyond the units under LoRA)."""
    if unsharded_training(knobs):
        return {"bf16 model copy": 2.0 * arch.params}
    return {"gathered unit": 2.0 * (arch.embedding_params + 2 * arch.layer_params)}


def unsharded_training(knobs: Knobs) -> bool:
    return knobs.shard_group == 1 and knobs.lora_rank == 0


def saved_activations(arch: Architecture, checkpointing: bool, tokens: int) -> float:
    """What the forward leaves for backward: each layer's input with recomputation, else every layer's activations."""
    if checkpointing:
        return CKPT_BYTES_PER_TOKEN_HIDDEN_LAYER * tokens * arch.hidden * arch.layers
    return per_token(LAYER_BYTES_PER_TOKEN, arch) * tokens * arch.layers


def per_token(coefficients: tuple[float, float], arch: Architecture) -> float:
    by_hidden, by_intermediate = coefficients
    return by_hidden * arch.hidden + by_intermediate * arch.intermediate


def recomputed_layer(arch: Architecture, tokens: int) -> float:
    """One layer brought back by recomputation and back-propagated: after the logits' backward, never with it."""
    return per_token(RECOMPUTE_BYTES_PER_TOKEN, arch) * tokens


def forward_working_set(arch: Architecture, tokens: int) -> float:
    """A layer's transients in a forward without grad (the log-prob pass), before the logits exist."""
    return per_token(FORWARD_BYTES_PER_TOKEN, arch) * tokens


def training_dynamic(
    arch: Architecture, checkpointing: bool, path: str, tokens: int, entropy: float, head_trains: bool = True
) -> dict:
    """Bytes one training micro-batch adds above the model states, by term. With recomputation the logits' backward
    and the recomputed layer come one after the other (the larger counts); without it everything is saved at once.
    head_trains: lm_head gets a gradient (not under LoRA)."""
    logits = logits_bytes(path, tokens, arch.vocab, backward=True)
    if path == "flash" and entropy:  # verl turns the in-place backward off when entropy needs the logits
        logits += FLASH_GRAD_COPY_BYTES_PER_TOKEN_VOCAB * tokens * arch.vocab
    elif path == "flash" and head_trains:  # the in-place backward's peak is lm_head's, beside the final hidden states
        logits += FLASH_WEIGHT_GRAD_BYTES_PER_VOCAB_HIDDEN * arch.vocab * arch.hidden
        logits += OUTPUT_BYTES_PER_TOKEN_HIDDEN * tokens * arch.hidden
    if path == "fused":
        logits += FUSED_WEIGHT_GRAD_BYTES_PER_VOCAB_HIDDEN * arch.vocab * arch.hidden
    terms = {"activations": saved_activations(arch, checkpointing, tokens)}
    layer = recomputed_layer(arch, tokens) if checkpointing else 0.0
    if layer > logits + entropy:
        return terms | {"recomputed layer": layer}
    return terms | {"logits": logits, "entropy": entropy}


def logprob_dynamic(arch: Architecture, path: str, tokens: int, entropy: float) -> dict:
    """Bytes one log-prob micro-batch adds above the model states: the output hidden states, then the larger of a
    layer's transients and the logits."""
    logits = logits_bytes(path, tokens, arch.vocab, backward=False)
    layer = forward_working_set(arch, tokens)
    output = {"output hidden states": OUTPUT_BYTES_PER_TOKEN_HIDDEN * arch.hidden * tokens}
    return output | (
        {"layer working set": layer} if layer > logits + entropy else {"logits": logits, "entropy": entropy}
    )


def logits_path(knobs: Knobs) -> str:
    """Which log-prob code verl runs: its fused chunks when asked, else flash-attn's cross-entropy when the job's
    environment has flash-attn (verl/utils/torch_functional.py), else pure torch."""
    return "fused" if knobs.fused_kernels else "flash" if knobs.flash_ce else "torch"


def logits_bytes(path: str, tokens: int, vocab: int, backward: bool) -> float:
    """The log-prob computation's bytes above the model: one chunk's worth with fused kernels, else every token's."""
    training, forward = LOGITS_BYTES_PER_TOKEN_VOCAB[path]
    counted = min(tokens, FUSED_CHUNK_TOKENS) if path == "fused" else tokens
    return (training if backward else forward) * counted * vocab


def entropy_bytes(knobs: Knobs, tokens: int, vocab: int, backward: bool) -> float:
    if not knobs.entropy:
        return 0.0
    training, forward = ENTROPY_BYTES_PER_TOKEN_VOCAB["compiled" if knobs.entropy_compiled else "eager"]
    counted = min(tokens, FUSED_CHUNK_TOKENS) if knobs.fused_kernels else tokens
    return (training if backward else forward) * counted * vocab


STATE_TERMS = (
    "params",
    "grads",
    "optimizer",
    "pcgrad buffers",
    "ref params",
    "bf16 model copy",
    "bf16 gradients",
    "critic state",
    "actor state",
)


OUTSIDE_TORCH_TERMS = ("non-torch", "NCCL buffers")  # what torch's memory counters never see


def outside_torch(knobs: Knobs) -> list[Term]:
    """What the process holds outside torch's allocator in every phase: CUDA context and libraries, then the NCCL
    communicators' buffers (present from the first collective to the end of the run)."""
    context, nccl = OUTSIDE_TORCH_TERMS
    communicators = Term(nccl, knobs.communicators_gib, knobs.communicators_note)
    return [Term(context, NON_TORCH_GIB), *([communicators] if knobs.communicators_gib else [])]


def margin_terms(values: dict[str, float], knobs: Knobs) -> list[Term]:
    """Fragmentation of what a phase allocates and frees (micro-batch tensors, gathered units), measured as reserved
    over allocated at the peak; the model states are allocated once and add none. Then the memory outside torch."""
    transient = sum(value for name, value in values.items() if name not in STATE_TERMS)
    return [Term("fragmentation", _gib(transient) * FRAGMENTATION), *outside_torch(knobs)]


def update_peak(
    name: str, backward: dict[str, float], step: dict[str, float], knobs: Knobs, tokens: int, capacity_gib: float
) -> Phase:
    """An update's peak: the larger of its backward moment and its optimizer step, with the margins."""
    moment, chosen = ("backward", backward) if sum(backward.values()) >= sum(step.values()) else ("step", step)
    terms = [Term(term, _gib(value)) for term, value in chosen.items()] + margin_terms(chosen, knobs)
    return Phase(name, tuple(terms), capacity_gib, (f"peak at the {moment}; {tokens} tokens per micro-batch",))


def training_phase(arch: Architecture, knobs: Knobs, capacity_gib: float) -> Phase:
    """The larger of two moments: a micro-batch's backward (activations and the logits' backward alive beside the
    gradients the mini-batch's earlier micro-batches left) and the optimizer step (all states and AdamW's
    temporaries, activations gone)."""
    states = model_states(arch, knobs)
    tokens = knobs.train_tokens_on_gpu
    entropy = entropy_bytes(knobs, tokens, arch.vocab, backward=True)
    optimizer_in_backward = 0.0 if knobs.optimizer_offload else states["optimizer"]
    copy = compute_copy(arch, knobs)
    # on one GPU the bf16 copy and its gradients stay through the update; sharded units are resharded by the step
    kept = copy | {"bf16 gradients": 2.0 * arch.params} if unsharded_training(knobs) else {}
    backward = {
        "params": states["params"],
        "grads": states["grads"],
        "optimizer": optimizer_in_backward,
        "pcgrad buffers": states["pcgrad"],
        **copy,
        **kept,
        **training_dynamic(arch, knobs.checkpointing, logits_path(knobs), tokens, entropy, knobs.lora_rank == 0),
    }
    step = {
        "params": states["params"],
        "grads": states["grads"],
        "optimizer": states["optimizer"],
        "pcgrad buffers": states["pcgrad"],
        **kept,
        "optimizer step": states["optimizer step"],
    }
    if knobs.critic:  # the critic's states that are not offloaded sit beside the actor's update
        critic = {"critic state": critic_resident_state(arch, knobs)}
        backward, step = backward | critic, step | critic
    return update_peak("training", backward, step, knobs, tokens, capacity_gib)


def logprob_phase(arch: Architecture, knobs: Knobs, capacity_gib: float) -> Phase:
    """Old (and ref) log-prob recomputation: forward only, its own micro-batch."""
    states = model_states(arch, knobs)
    tokens = knobs.logprob_tokens_on_gpu
    values = {
        "params": states["params"],
        "optimizer": 0.0 if knobs.optimizer_offload else states["optimizer"],
        **({"critic state": critic_resident_state(arch, knobs)} if knobs.critic else {}),
        **compute_copy(arch, knobs),
        **logprob_dynamic(arch, logits_path(knobs), tokens, entropy_bytes(knobs, tokens, arch.vocab, backward=False)),
    }
    terms = [Term(name, _gib(value)) for name, value in values.items()] + margin_terms(values, knobs)
    return Phase("log-prob", tuple(terms), capacity_gib, (f"{tokens} tokens per micro-batch",))


def resident_trainer_state(arch: Architecture, knobs: Knobs) -> float:
    """What the trainer keeps on the card while the engine is awake: the actor's (and ref's) states that are not
    offloaded, and the critic's. Gradients and PCGrad's task buffers are not among it: both are freed after the
    update's last mini-batch (algos/verl_pcgrad.py), and verl empties torch's cache before it wakes the engine
    (engine_workers update_weights)."""
    if not knobs.trainer_beside_engine:
        return 0.0
    return actor_resident_state(arch, knobs) + (critic_resident_state(arch, knobs) if knobs.critic else 0.0)


def actor_resident_state(arch: Architecture, knobs: Knobs) -> float:
    """The actor's states that stay on the card outside their own phases (not offloaded). verl's FSDP reference
    never does: its engine is forward-only, which verl 0.9.1 always wraps with FSDP's CPU offload
    (workers/engine/fsdp/transformer_impl.py: "We force reference policy to use CPUOffload to save memory"; FSDP2's
    CPUOffloadPolicy), whatever ref.fsdp_config.param_offload says: only the unit its forward gathers is on the card,
    the log-prob pass's gathered unit."""
    states = model_states(arch, knobs)
    params = 0.0 if knobs.param_offload else states["params"]
    optimizer = 0.0 if knobs.optimizer_offload else states["optimizer"]
    return params + optimizer


# --- the critic: a value model of the actor's architecture (verl: AutoModelForTokenClassification, one label) -------


def critic_params(arch: Architecture) -> int:
    """The decoder, its embeddings and final norm, and a hidden x 1 value head instead of the vocabulary head."""
    return arch.decoder_params + arch.vocab * arch.hidden + 2 * arch.hidden


def critic_view(knobs: Knobs) -> Knobs:
    """The critic's own knobs in the actor's places, for the state terms they share."""
    return replace(
        knobs,
        param_offload=knobs.critic_param_offload,
        optimizer_offload=knobs.critic_optimizer_offload,
        lora_rank=knobs.critic_lora_rank,
        model_dtype_bytes=knobs.critic_model_dtype_bytes,
        optimizer_temporaries=knobs.critic_optimizer_temporaries,
        pcgrad_tasks=0,
        fsdp_size=-1,
    )


def critic_states(arch: Architecture, knobs: Knobs) -> dict[str, float]:
    """Bytes per GPU of the critic's model states, sharded over all the GPUs (verl's critic.fsdp.fsdp_size -1)."""
    scale = critic_params(arch) / arch.params  # the same decoder without the vocabulary head
    return {name: value * scale for name, value in model_states(arch, critic_view(knobs)).items()}


def critic_resident_state(arch: Architecture, knobs: Knobs) -> float:
    """The critic's states that stay on the card outside its own phases: its params and optimizer unless offloaded."""
    states = critic_states(arch, knobs)
    params = 0.0 if knobs.critic_param_offload else states["params"]
    return params + (0.0 if knobs.critic_optimizer_offload else states["optimizer"])


def critic_unit(arch: Architecture) -> dict[str, float]:
    """bf16 parameters FSDP gathers at once for the critic: the embeddings and two decoder layers."""
    return {"gathered unit": 2.0 * (arch.vocab * arch.hidden + 2 * arch.layer_params)}


def critic_training_phase(arch: Architecture, knobs: Knobs, capacity_gib: float) -> Phase:
    """The critic's update: its states, a micro-batch's saved activations and one recomputed layer (the value head
    has no vocabulary-sized logits), or its optimizer step; the actor's resident states beside it."""
    states = critic_states(arch, knobs)
    tokens = knobs.critic_train_tokens_on_gpu
    resident = {"actor state": actor_resident_state(arch, knobs)}
    activations = {"activations": saved_activations(arch, knobs.critic_checkpointing, tokens)}
    if knobs.critic_checkpointing:
        activations["recomputed layer"] = recomputed_layer(arch, tokens)
    backward = {
        "params": states["params"],
        "grads": states["grads"],
        "optimizer": 0.0 if knobs.critic_optimizer_offload else states["optimizer"],
        **critic_unit(arch),
        **activations,
        **resident,
    }
    step = {
        "params": states["params"],
        "grads": states["grads"],
        "optimizer": states["optimizer"],
        "optimizer step": states["optimizer step"],
        **resident,
    }
    return update_peak("critic update", backward, step, knobs, tokens, capacity_gib)


def critic_value_phase(arch: Architecture, knobs: Knobs, capacity_gib: float) -> Phase:
    """The critic's value pass over the batch: forward only, the same token budget as its update."""
    states = critic_states(arch, knobs)
    tokens = knobs.critic_value_tokens_on_gpu
    values = {
        "params": states["params"],
        "optimizer": 0.0 if knobs.critic_optimizer_offload else states["optimizer"],
        "actor state": actor_resident_state(arch, knobs),
        **critic_unit(arch),
        "output hidden states": OUTPUT_BYTES_PER_TOKEN_HIDDEN * arch.hidden * tokens,
        "layer working set": forward_working_set(arch, tokens),
    }
    terms = [Term(name, _gib(value)) for name, value in values.items()] + margin_terms(values, knobs)
    return Phase("values", tuple(terms), capacity_gib, (f"{tokens} tokens per micro-batch",))


def reward_model_phase(arch: Architecture, knobs: Knobs, capacity_gib: float) -> Phase:
    """A colocated reward model's engine, awake after generation (the actor's engine asleep) beside the resident
    trainer state; its reservation follows its engine's rule (engine_reservation). Where the reward model's own
    architecture was read (knobs.reward_params), its KV cache must hold one sequence of its engine's context, as the
    actor's engine must; else that is not judged."""
    resident = _gib(resident_trainer_state(arch, knobs))
    outside = outside_torch(knobs)
    free = capacity_gib - resident - sum(term.gib for term in outside)
    weights = _gib(knobs.reward_params * 2 / knobs.reward_tp)
    activations = _gib(ENGINE_ACTIVATION_BYTES_PER_TOKEN_HIDDEN * knobs.reward_batched_tokens * knobs.reward_hidden)
    loaded = weights + activations
    reserve = engine_reservation(knobs.reward_engine, knobs.reward_engine_fraction, capacity_gib, free, loaded)
    terms = (
        Term("resident trainer state", resident),
        Term(f"reward model {knobs.reward_engine} reservation", reserve),
        *outside,
    )
    if not knobs.reward_params:
        notes = ("its KV cache room is not judged: its architecture is unread",)
        return Phase("reward model", terms, capacity_gib, notes)
    kv_room = reserve - loaded
    per_context = _gib(knobs.reward_kv_bytes_per_token * knobs.reward_context)
    failure = ""
    if kv_room < per_context:
        failure = (
            f"the reward model's engine's {reserve:.1f} GiB hold its weights {weights:.1f} + activations "
            f"{activations:.1f} but not one {knobs.reward_context}-token sequence of KV cache ({per_context:.2f} GiB)"
        )
    notes = (f"its KV cache room {max(kv_room, 0):.1f} GiB ({knobs.reward_context}-token context: {per_context:.2f})",)
    return Phase("reward model", terms, capacity_gib, notes, failure)


@dataclass(frozen=True)
class TrainerBeside:
    """What the trainer leaves on the card while the engine is awake: its resident states (GiB) and the memory
    outside torch's allocator (CUDA context, NCCL communicators)."""

    resident_gib: float
    outside: tuple[Term, ...]


def fsdp_beside(arch: Architecture, knobs: Knobs) -> TrainerBeside:
    return TrainerBeside(_gib(resident_trainer_state(arch, knobs)), tuple(outside_torch(knobs)))


def engine_memory(
    arch: Architecture, knobs: Knobs, capacity_gib: float, beside: TrainerBeside | None = None
) -> tuple[float, float, float, float]:
    """GiB of the engine's reservation, its weights, its prefill activations and the KV cache room left.
    `beside`: the trainer's resident state and the memory outside torch when another trainer than FSDP's holds the
    card (launch/megatron_memory.py); by default the FSDP trainer's."""
    beside = beside or fsdp_beside(arch, knobs)
    free = capacity_gib - beside.resident_gib - sum(term.gib for term in beside.outside)
    weights = _gib(arch.params * 2 / knobs.rollout_tp)
    activations = _gib(ENGINE_ACTIVATION_BYTES_PER_TOKEN_HIDDEN * knobs.max_num_batched_tokens * arch.hidden)
    reserve = engine_reservation(knobs.engine, knobs.engine_fraction, capacity_gib, free, weights + activations)
    return reserve, weights, activations, reserve - weights - activations


# Engines whose rollout.gpu_memory_utilization is a share of the memory FREE when they start (engine_reservation):
# the sum always fits, and a lower fraction only leaves less KV cache
FREE_MEMORY_ENGINES = ("sglang", "trtllm")


def engine_reservation(engine: str, fraction: float, capacity_gib: float, free_gib: float, loaded_gib: float) -> float:
    """GiB an inference engine takes when it wakes, by how it reads rollout.gpu_memory_utilization: vLLM a fraction
    of TOTAL memory (it refuses to start if that much is not free); SGLang a fraction of what is FREE when it starts;
    TRT-LLM loads its weights and runs its working activations (`loaded_gib`) first, then takes the fraction of what
    is free after them for its KV cache: verl 0.9.1 passes the key as KvCacheConfig.free_gpu_memory_fraction
    (workers/rollout/trtllm_rollout/trtllm_async_server.py)."""
    free = max(free_gib, 0.0)
    if engine == "sglang":
        return fraction * free
    if engine == "trtllm":
        return loaded_gib + fraction * max(free - loaded_gib, 0.0)
    return fraction * capacity_gib


def kv_per_sequence_gib(arch: Architecture, knobs: Knobs, tokens: int) -> float:
    shards = knobs.rollout_tp if arch.kv_shards_over_tp else 1
    return _gib(arch.kv_bytes_per_token / shards * tokens)


def engine_context(arch: Architecture, knobs: Knobs) -> int:
    """The sequence the engine's KV cache must hold one of to start. vLLM refuses to start without room for one
    max_model_len sequence (check_enough_kv_cache_memory: "To serve at least one request with the model's max seq
    len"), and verl 0.9.1 gives it the model's max_position_embeddings when rollout.max_model_len is null
    (vllm_async_server _validate_configs; older verl gave it prompt + response, and verl PR #5015 asked for that back
    after 131072-token contexts failed to start). SGLang caps a request at the room it has: one prompt + response."""
    if knobs.engine != "vllm":
        return knobs.sequence
    return knobs.engine_max_model_len or arch.max_position_embeddings or knobs.sequence


def rollout_phase(arch: Architecture, knobs: Knobs, capacity_gib: float, beside: TrainerBeside | None = None) -> Phase:
    """The engine awake next to the resident trainer state. vLLM reserves a fraction of TOTAL memory (and refuses to
    start if that much is not free); SGLang and TRT-LLM take a fraction of what is FREE (engine_reservation), so with
    them the sum always fits and the question is whether the KV cache keeps room for one full sequence. `beside`: as
    for engine_memory."""
    beside = beside or fsdp_beside(arch, knobs)
    reserve, weights, activations, kv_room = engine_memory(arch, knobs, capacity_gib, beside)
    kv_per_sequence = kv_per_sequence_gib(arch, knobs, knobs.sequence)
    sequences = kv_room / kv_per_sequence if kv_per_sequence > 0 else 0.0
    context = engine_context(arch, knobs)
    kv_per_context = kv_per_sequence_gib(arch, knobs, context)
    failure = ""
    if kv_room < kv_per_context:
        failure = (
            f"the engine's {reserve:.1f} GiB hold weights {weights:.1f} + activations {activations:.1f} but not one "
            f"{context}-token sequence of KV cache ({kv_per_context:.2f} GiB)"
        )
        if context > knobs.sequence:  # vLLM's room for rollout.max_model_len, not the run's own sequences
            why = "as set" if knobs.engine_max_model_len else "null: verl gives vLLM the model's positions"
            failure += (
                f", which vLLM needs to start (rollout.max_model_len {context}, {why}; the run's prompt + response "
                f"is {knobs.sequence})"
            )
    notes = [
        f"KV cache room {max(kv_room, 0):.1f} GiB = {max(sequences, 0):.0f} full-length sequences "
        f"(max_num_seqs {knobs.max_num_seqs})"
    ]
    terms = (
        Term("resident trainer state", beside.resident_gib),
        Term(f"{knobs.engine} reservation", reserve),
        *beside.outside,
    )
    return Phase("rollout", terms, capacity_gib, tuple(notes), failure)


def host_ram_terms(arch: Architecture, knobs: Knobs) -> tuple[Term, ...]:
    """Host RAM one node needs, by what holds it (GiB per node; each term's note the setting that removes or shrinks
    it): offloaded states, the sleeping engines' weights, one process per GPU, and the node's share (Ray, the driver,
    the loader)."""
    per_node = knobs.gpus_per_node
    states = model_states(arch, knobs)
    critic = critic_states(arch, knobs) if knobs.critic else {"params": 0.0, "optimizer": 0.0}
    offloads = (
        ("the actor's offloaded params", states["params"], "param_offload"),
        ("the actor's offloaded optimizer state", states["optimizer"], "optimizer_offload"),
        ("the critic's offloaded params", critic["params"], "critic_param_offload"),
        ("the critic's offloaded optimizer state", critic["optimizer"], "critic_optimizer_offload"),
    )
    terms = [
        Term(name, per_node * _gib(per_gpu), f"{KNOB_KEYS[knob]}=false")
        for name, per_gpu, knob in offloads
        if per_gpu and getattr(knobs, knob)
    ]
    if holds_a_reference(knobs):  # verl's FSDP reference lives in host RAM (actor_resident_state), in its model_dtype
        terms.append(
            Term(
                "the reference's params",
                per_node * _gib(arch.params * knobs.ref_dtype_bytes / knobs.shard_group),
                "verl keeps its FSDP reference there always; ref.fsdp_config.model_dtype=bf16 halves it, and a run "
                "without KL (actor.use_kl_loss=false, algorithm.use_kl_in_reward=false) has none",
            )
        )
    engine_weights = per_node * _gib(arch.params * 2 / knobs.rollout_tp) if knobs.engine_weights_in_host_ram else 0.0
    return (*terms, *node_terms(per_node, engine_weights))


def holds_a_reference(knobs: Knobs) -> bool:
    """A reference model of its own: KL on and no LoRA (whose reference is the actor with its adapters off)."""
    return knobs.ref_model and not knobs.ref_in_actor


def dtype_bytes(name: Any) -> int:
    """Bytes per parameter of an fsdp_config.model_dtype."""
    return 2 if str(name) in ("bf16", "bfloat16", "fp16", "float16") else 4


def node_terms(gpus_per_node: int, engine_weights_gib: float) -> tuple[Term, ...]:
    """The host-RAM terms every backend's node has: the sleeping engines' weights (sleep level 1: older vLLM,
    SGLang; 0 at level 2, which drops them), one process per GPU, and Ray, the driver and the loader."""
    engine = Term(
        f"{gpus_per_node} sleeping engine shard(s)' weights",
        engine_weights_gib,
        f"a larger {KNOB_KEYS['rollout_tp']} (each GPU keeps 1/TP of the weights), or vLLM >= 0.18, which drops them "
        "asleep (cluster.engine_version says what the job runs)",
    )
    return (
        *((engine,) if engine_weights_gib else ()),
        Term(
            f"{gpus_per_node} worker processes",
            gpus_per_node * HOST_GIB_PER_GPU_PROCESS,
            f"fewer {KNOB_KEYS['gpus_per_node']}",
        ),
        Term("Ray, the driver and the loader", HOST_BASE_GIB_PER_NODE),
    )


def host_ram_per_node(arch: Architecture, knobs: Knobs) -> float:
    """GiB of host RAM one node needs (host_ram_terms, summed)."""
    return sum(term.gib for term in host_ram_terms(arch, knobs))


def estimate(arch: Architecture, knobs: Knobs, capacity_gib: float) -> list[Phase]:
    """Every phase of a step that this run has, in verl's order of a step's memory: the actor's update and
    log-prob pass, generation, then the critic's update and value pass and a colocated reward model."""
    phases = [
        training_phase(arch, knobs, capacity_gib),
        logprob_phase(arch, knobs, capacity_gib),
        rollout_phase(arch, knobs, capacity_gib),
    ]
    if knobs.critic:
        phases += [critic_training_phase(arch, knobs, capacity_gib), critic_value_phase(arch, knobs, capacity_gib)]
    if knobs.reward_model:
        phases.append(reward_model_phase(arch, knobs, capacity_gib))
    return phases


def flops_per_token(arch: Architecture, sequence: int) -> float:
    """verl's FlopsCounter (verl/utils/flops_counter.py): 6·N per token for the matmuls plus the attention scores,
    12·seq·head_dim·heads·layers per token, forward + backward; N counts the parameters a token passes through
    (a MoE layer's routed experts: experts_per_token of them)."""
    dense = 6 * (arch.active_params - arch.embedding_params + arch.vocab * arch.hidden)
    attention = 12 * sequence * arch.head_dim * arch.heads * arch.layers
    return dense + attention


def predicted_mfu(knobs: Knobs) -> float:
    """A heuristic, not a measurement (no GPU here): a training micro-batch of t tokens reaches ~55 % of peak as t
    grows, half of that at 2k tokens; recomputation spends a third more FLOPs than verl counts."""
    efficiency = 0.55 * knobs.train_tokens / (knobs.train_tokens + 2048)
    return efficiency / (1.33 if knobs.checkpointing else 1.0)


def with_changes(knobs: Knobs, **changes: Any) -> Knobs:
    return replace(knobs, **changes)
