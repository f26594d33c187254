"""A Megatron critic in the Megatron fix search: verl 0.9.1's critic.megatron does not follow the actor's layout (its
own engine/megatron.yaml: TP 1, PP 1), so verl's PPO Megatron scripts, which widen only the actor and the reference,
put a whole critic on every GPU. The search moves the critic with the actor (its size raised to the actor's new one
where smaller, its offloads and recomputation set where off); it had moved it only where it held the actor's value,
and found no fix at all for verl's examples/ppo_trainer/run_qwen2-7b_math_gsm8k_megatron.sh on 8 H100s."""

from __future__ import annotations

from test_preflight_what_fits import judged

from launch import preflight

# verl's examples/ppo_trainer/run_qwen2-7b_math_gsm8k_megatron.sh as pasted (its data paths aside), on 8 H100s
QWEN2_7B_PPO_MEGATRON = (
    "backend=megatron",
    "algo=verl",
    "gpu=h100",
    "algorithm.adv_estimator=gae",
    "data.train_batch_size=1024",
    "data.max_prompt_length=1024",
    "data.max_response_length=512",
    "actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct",
    "actor_rollout_ref.actor.ppo_mini_batch_size=256",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2",
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
    "actor_rollout_ref.actor.use_kl_loss=False",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
    "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=2",
    "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=2",
    "critic.model.path=Qwen/Qwen2-7B-Instruct",
    "critic.ppo_micro_batch_size_per_gpu=4",
    "algorithm.use_kl_in_reward=False",
    "trainer.n_gpus_per_node=8",
    "trainer.nnodes=1",
)


def test_the_megatron_search_moves_a_critic_of_its_own_layout_with_the_actor():
    verdict = judged(*QWEN2_7B_PPO_MEGATRON)
    assert not verdict.fits
    fix = verdict.first_fitting_fixes
    assert fix, "no fix found: the critic's own layout was left as it is"
    assert any(override.startswith("critic.megatron.") for override in fix), fix
    fixed = judged(*QWEN2_7B_PPO_MEGATRON, *fix)  # Hydra takes it as printed, and it fits
    assert fixed.fits and not fixed.at_the_edge, {name: phase.peak_gib for name, phase in fixed.phases.items()}


def test_a_critic_already_wider_than_the_actor_keeps_its_size():
    verl = {
        "algorithm": {"adv_estimator": "gae"},
        "critic": {"strategy": "megatron", "megatron": {"tensor_model_parallel_size": 8, "param_offload": False}},
        "actor_rollout_ref": {
            "ref": {"strategy": "megatron", "megatron": {"tensor_model_parallel_size": 2}},
            "actor": {"megatron": {"tensor_model_parallel_size": 2}},
        },
    }
    values = preflight.megatron_values(verl, {"tensor_model_parallel_size": 4, "param_offload": True})
    assert values == {
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size": 4,
        "actor_rollout_ref.ref.megatron.tensor_model_parallel_size": 4,
        "actor_rollout_ref.actor.megatron.param_offload": True,
        "actor_rollout_ref.ref.megatron.param_offload": True,  # the reference follows the actor's it holds
        "critic.megatron.param_offload": True,
    }, values


def test_a_megatron_critics_offloaded_states_are_counted_in_host_ram():
    """critic.megatron.param_offload / optimizer_offload park the critic's states in host RAM, as the actor's do; the
    node's host RAM left them out (92.4 GiB/node either way for the script above)."""
    offloads = ("critic.megatron.param_offload=true", "critic.megatron.optimizer_offload=true")
    kept, offloaded = judged(*QWEN2_7B_PPO_MEGATRON), judged(*QWEN2_7B_PPO_MEGATRON, *offloads)
    critic = {term.name: term.gib for term in offloaded.host_ram}["the critic's offloaded states"]
    # Qwen2-7B's critic at TP 1: bf16 params (~14 GiB) and its optimizer shard over 8 ranks (~11 GiB), 8 GPUs a node
    assert 8 * 20 < critic < 8 * 30, critic
    assert abs(offloaded.host_ram_gib_per_node - kept.host_ram_gib_per_node - critic) < 0.5
