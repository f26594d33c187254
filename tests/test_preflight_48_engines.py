"""How each rollout engine reads rollout.gpu_memory_utilization in the memory preflight: TRT-LLM's is a share of the
memory free after its weights (verl 0.9.1 passes it as KvCacheConfig.free_gpu_memory_fraction), not of the card's
total as vLLM's is. The run is verl's examples/grpo_trainer/run_qwen2-7b_math_trtllm.sh on 8 H100s."""

from __future__ import annotations

from functools import cache
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from test_megatron_memory import gpu_profile, llm_table

from launch.memory import Architecture, Knobs, engine_memory, rollout_phase, with_changes
from launch.preflight import candidate_fixes
from launch.schema import verl_config_source

# the keys of verl's examples/grpo_trainer/run_qwen2-7b_math_trtllm.sh (TP 4) that decide memory
SCRIPT = (
    "algorithm.adv_estimator=grpo",
    "data.train_batch_size=1024",
    "data.max_prompt_length=2048",
    "data.max_response_length=1024",
    "actor_rollout_ref.actor.ppo_mini_batch_size=256",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
    "actor_rollout_ref.actor.use_kl_loss=True",
    "actor_rollout_ref.model.enable_gradient_checkpointing=True",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
    "actor_rollout_ref.rollout.name=trtllm",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
    "actor_rollout_ref.rollout.n=5",
    "actor_rollout_ref.rollout.max_num_seqs=1024",
    "actor_rollout_ref.rollout.max_num_batched_tokens=32768",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16",
    "actor_rollout_ref.ref.fsdp_config.param_offload=True",
    "trainer.n_gpus_per_node=8",
    "trainer.nnodes=1",
)
QWEN2_7B = Architecture.from_llm(llm_table("qwen2_7b"))
H100 = gpu_profile("h100")
CARD = float(H100["usable_gib"])


@cache
def verl_fsdp_config(overrides: tuple[str, ...]) -> dict[str, Any]:
    """`python -m verl.trainer.main_ppo <overrides>` composed as verl does."""
    with initialize_config_dir(config_dir=verl_config_source().removeprefix("file://"), version_base=None):
        cfg = compose("ppo_trainer", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def knobs(*overrides: str) -> Knobs:
    verl = verl_fsdp_config((*SCRIPT, *overrides))
    return with_changes(Knobs.from_verl(verl), communicator_gib=float(H100["nccl_gib_per_communicator"]))


def terms(knobs: Knobs) -> dict[str, float]:
    return {term.name: term.gib for term in rollout_phase(QWEN2_7B, knobs, CARD).terms}


def test_trtllm_takes_its_fraction_of_the_memory_free_after_its_weights():
    trtllm = knobs()
    phase = rollout_phase(QWEN2_7B, trtllm, CARD)
    free = CARD - sum(gib for name, gib in terms(trtllm).items() if name != "trtllm reservation")
    reserve, weights, activations, kv_room = engine_memory(QWEN2_7B, trtllm, CARD)
    assert abs(reserve - (weights + activations + 0.6 * (free - weights - activations))) < 1e-9
    assert reserve < 0.6 * CARD  # before: 0.6 x 79.1 = 47.5 GiB, as vLLM's
    assert phase.fits and kv_room > 0
    # vLLM's fraction stays one of the card's total
    assert abs(terms(knobs("actor_rollout_ref.rollout.name=vllm"))["vllm reservation"] - 0.6 * CARD) < 1e-9


def test_a_trtllm_fraction_near_one_still_fits_and_a_tiny_one_fails_on_its_kv_cache():
    greedy = rollout_phase(QWEN2_7B, knobs("actor_rollout_ref.rollout.gpu_memory_utilization=0.95"), CARD)
    assert greedy.fits, greedy  # vLLM at 0.95 of the card beside the trainer would not
    assert not rollout_phase(
        QWEN2_7B,
        knobs("actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.gpu_memory_utilization=0.95"),
        CARD,
    ).fits
    tiny = knobs("actor_rollout_ref.rollout.gpu_memory_utilization=0.0001")
    starved = rollout_phase(QWEN2_7B, tiny, CARD)
    assert not starved.fits and "KV cache" in starved.hard_failure
    # a lower fraction only leaves TRT-LLM less KV cache: never offered as a fix
    assert not [fix for fix in candidate_fixes(QWEN2_7B, tiny, CARD) if "engine_fraction" in fix.changes]
