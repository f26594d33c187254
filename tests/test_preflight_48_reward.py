"""A colocated reward model's architecture is read from its config.json where reward.reward_model.model_path is a
local directory, and its engine's KV cache is then judged as the actor's is (verl 0.9.1 serves it with the rollout's
replica classes). The run is verl's examples/ppo_trainer/run_qwen2.5-3b_rm_reward_loop_colocate.sh on 8 H100s."""

from __future__ import annotations

import json
from pathlib import Path

from bench.preflight_accuracy import plan_case
from launch import preflight
from launch.facts import architecture_of, reward_model_config
from launch.memory import Architecture, reward_architecture_knobs

# Skywork/Skywork-Reward-V2-Llama-3.2-3B's config.json (Llama-3.2-3B's decoder, a one-label score head)
SKYWORK_RM_3B = {
    "architectures": ["LlamaForSequenceClassification"],
    "model_type": "llama",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_hidden_layers": 28,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
    "num_labels": 1,
}
SCRIPT = [
    "gpu=h100",
    "llm=qwen2_5_3b",
    "dataset=gsm8k",
    "algorithm.adv_estimator=gae",
    "data.train_batch_size=1024",
    "data.max_prompt_length=1024",
    "data.max_response_length=2048",
    "actor_rollout_ref.actor.ppo_mini_batch_size=256",
    "actor_rollout_ref.actor.use_kl_loss=false",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
    "reward.reward_model.enable=true",
    "reward.reward_model.rollout.name=vllm",
    "reward.reward_model.rollout.gpu_memory_utilization=0.8",
    "reward.reward_model.rollout.tensor_model_parallel_size=1",
    "reward.reward_model.rollout.prompt_length=4096",
    "reward.reward_model.rollout.response_length=4096",
    "trainer.n_gpus_per_node=8",
    "trainer.nnodes=1",
]


def reward_model(tmp_path: Path) -> Path:
    directory = tmp_path / "Skywork-Reward-V2-Llama-3.2-3B"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(SKYWORK_RM_3B))
    return directory


def verdict(*overrides: str) -> preflight.Verdict:
    cfg, plan = plan_case({"overrides": [*SCRIPT, *overrides], "flash_attn": True})
    return preflight.check_plan(cfg, plan, {})


def test_a_local_reward_models_architecture_is_read_and_its_kv_cache_judged(tmp_path: Path):
    path = reward_model(tmp_path)
    read = verdict(f"reward.reward_model.model_path={path}")
    phase = read.phases["reward model"]
    assert phase.fits and "its KV cache room" in phase.notes[0] and "131072-token context" in phase.notes[0], phase
    assert not [line for line in read.not_counted if "reward model" in line], read.not_counted
    # too small a share for one 131072-token sequence (vLLM's max_model_len: null is the model's positions)
    starved = verdict(
        f"reward.reward_model.model_path={path}", "reward.reward_model.rollout.gpu_memory_utilization=0.1"
    )
    assert not starved.fits and "not one 131072-token sequence" in starved.phases["reward model"].failure
    # a hub id is not read: said, as before
    hub = verdict("reward.reward_model.model_path=Skywork/Skywork-Reward-V2-Llama-3.2-3B")
    assert [line for line in hub.not_counted if "reward model's KV cache room" in line], hub.not_counted


def test_reward_model_config_reads_only_a_local_enabled_reward_model(tmp_path: Path):
    path = str(reward_model(tmp_path))
    found = reward_model_config({"reward": {"reward_model": {"enable": True, "model_path": path}}})
    assert found is not None and (found["layers"], found["hidden"], found["kv_heads"]) == (28, 3072, 8)
    assert reward_model_config({"reward": {"reward_model": {"enable": False, "model_path": path}}}) is None
    assert reward_model_config({"reward": {"reward_model": {"enable": True, "model_path": "org/rm"}}}) is None


def test_the_reward_engines_context_follows_verls_engine_rules():
    arch = Architecture.from_llm({"tied_embeddings": True, **architecture_of(SKYWORK_RM_3B)})
    rollout = {"name": "vllm", "tensor_model_parallel_size": 2, "prompt_length": 4096, "response_length": 4096}
    vllm = reward_architecture_knobs({"reward": {"reward_model": {"rollout": rollout}}}, arch)
    assert vllm["reward_context"] == 131072 and vllm["reward_kv_bytes_per_token"] == arch.kv_bytes_per_token // 2
    sglang = reward_architecture_knobs({"reward": {"reward_model": {"rollout": rollout | {"name": "sglang"}}}}, arch)
    assert sglang["reward_context"] == 8192
    capped = rollout | {"max_model_len": 16384, "enable_chunked_prefill": False, "max_num_batched_tokens": 8192}
    capped_knobs = reward_architecture_knobs({"reward": {"reward_model": {"rollout": capped}}}, arch)
    assert (capped_knobs["reward_context"], capped_knobs["reward_batched_tokens"]) == (16384, 16384)
