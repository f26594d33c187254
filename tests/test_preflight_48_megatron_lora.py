"""Megatron's LoRA (actor_rollout_ref.model.lora.rank, Megatron-Bridge PEFT) in the memory preflight: only the
adapters train and the reference is the actor with its adapters off, as verl 0.9.1 runs it. The run is verl's own
examples/grpo_trainer/run_qwen2-7b_math_megatron_lora.sh on 8 H100s."""

from __future__ import annotations

from dataclasses import replace

from test_megatron_memory import gpu_profile, llm_table, verl_megatron_config

from launch import megatron_memory as mm
from launch.memory import GIB, Architecture, Knobs, with_changes

# the keys of verl's examples/grpo_trainer/run_qwen2-7b_math_megatron_lora.sh that decide memory
SCRIPT = (
    "algorithm.adv_estimator=grpo",
    "data.max_prompt_length=1024",
    "data.max_response_length=1024",
    "data.train_batch_size=128",
    "actor_rollout_ref.model.lora.rank=256",
    "actor_rollout_ref.model.lora.alpha=512",
    "actor_rollout_ref.actor.ppo_mini_batch_size=16",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.actor.use_dynamic_bsz=True",
    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=1",
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4",
    "actor_rollout_ref.actor.use_kl_loss=True",
    "+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform",
    "+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full",
    "+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=1",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=1",
    "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=4",
    "trainer.n_gpus_per_node=8",
    "trainer.nnodes=1",
)
QWEN2_7B = Architecture.from_llm(llm_table("qwen2_7b"))
# rank 256 on the fused linears verl targets (linear_qkv 3584 -> 3584 + 2 x 512, linear_proj 3584 -> 3584,
# linear_fc1 3584 -> 2 x 18944, linear_fc2 18944 -> 3584), 28 layers
ADAPTERS = 28 * 256 * ((3584 + 4608) + (3584 + 3584) + (3584 + 37888) + (18944 + 3584))


def phases(*overrides: str) -> dict[str, dict[str, float]]:
    verl = verl_megatron_config((*SCRIPT, *overrides))
    card = gpu_profile("h100")
    knobs = with_changes(Knobs.from_verl(verl), communicator_gib=float(card["nccl_gib_per_communicator"]))
    found = mm.estimate(QWEN2_7B, knobs, mm.MegatronKnobs.from_verl(verl), float(card["usable_gib"]))
    return {phase.name: {term.name: term.gib for term in phase.terms} for phase in found}


def test_megatron_lora_trains_only_the_adapters_and_keeps_no_reference_model():
    verl = verl_megatron_config(SCRIPT)
    knobs, megatron = Knobs.from_verl(verl), mm.MegatronKnobs.from_verl(verl)
    assert (knobs.lora_rank, knobs.ref_in_actor) == (256, True)
    assert megatron.lora is not None and megatron.lora.targets == mm.LORA_TARGETS
    [stage] = mm.stages(QWEN2_7B, megatron.actor, megatron.lora)
    assert stage.adapters == ADAPTERS / 4  # both adapter linears split over TP 4
    training = phases()["training"]
    assert training["ref params"] == 0.0
    assert abs(training["grads"] - 4 * ADAPTERS / 4 / GIB) < 1e-6  # fp32 main grads of the adapters only
    assert abs(training["optimizer"] - 12 * ADAPTERS / 4 / 2 / GIB) < 1e-6  # over DP 2
    assert abs(training["params"] - 2 * (QWEN2_7B.params / 4 + ADAPTERS / 4) / GIB) < 0.01
    # the full model trained, for contrast: its gradient buffer, optimizer and a reference of its own
    full = phases("actor_rollout_ref.model.lora.rank=0")["training"]
    assert full["ref params"] > 3 and full["grads"] > 7 and full["optimizer"] > 10


def test_megatron_lora_example_fits_its_h100s():
    """verl ships the script for 8 GPUs: before, rollout counted 84.4 GiB (the full model's grads and optimizer and
    a reference resident beside the engine), DOES NOT FIT on 79.1."""
    rollout = phases()["rollout"]
    assert sum(rollout.values()) < 70, rollout
    assert rollout["resident trainer state"] < 6


def test_fsdp_lora_key_on_megatron_trains_the_whole_model():
    """verl's Megatron engine reads model.lora, never model.lora_rank (FSDP's): the whole model trains there."""
    verl = verl_megatron_config(
        (*[entry for entry in SCRIPT if "lora" not in entry], "actor_rollout_ref.model.lora_rank=64")
    )
    assert mm.MegatronKnobs.from_verl(verl).lora is None and Knobs.from_verl(verl).lora_rank == 0


def test_canonical_lora_targets_count_the_split_linears():
    lora = mm.Lora.from_verl(
        {"rank": 8, "target_modules": ["linear_q", "linear_k", "linear_v", "linear_fc1_up", "linear_fc1_gate"]}
    )
    assert lora is not None
    per_layer = 8 * ((3584 + 3584) + 2 * (3584 + 512) + 2 * (3584 + 18944))
    assert lora.params(QWEN2_7B, QWEN2_7B.intermediate, attention=True) == per_layer
    excluded = mm.Lora.from_verl({"rank": 8, "target_modules": [], "exclude_modules": ["linear_fc2"]})
    assert excluded is not None and excluded.targets == ("linear_qkv", "linear_proj", "linear_fc1")
    assert replace(excluded, rank=0).params(QWEN2_7B, 0, attention=False) == 0
