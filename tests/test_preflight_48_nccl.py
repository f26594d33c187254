"""NCCL communicators counted by where their ranks sit: one that spans nodes with 1 or 2 GPUs on each opens no
NVLink SHARP (NCCL's src/transport/nvls.cc ncclNvlsInit), so it holds the card's buffers without NVLS; a group within
one node keeps the profile's calibrated figure. The layout is verl-recipe's dapo/test_dapo_7b_math.sh: 8 nodes x 8
H100s, fsdp_size 32, Ulysses 4, rollout TP 4."""

from __future__ import annotations

from bench.preflight_accuracy import plan_case
from launch import preflight
from launch.megatron_memory import Layout, outside
from launch.memory import Architecture, Knobs, with_changes

H100 = {"communicator_gib": 2.7, "communicator_gib_without_nvls": 0.7}
DAPO_64 = [
    "gpu=h100",
    "llm=qwen2_5_7b",
    "dataset=gsm8k",
    "trainer.nnodes=8",
    "trainer.n_gpus_per_node=8",
    "algorithm.adv_estimator=grpo",
    "data.train_batch_size=512",
    "data.max_prompt_length=2048",
    "data.max_response_length=8192",
    "actor_rollout_ref.rollout.n=16",
    "actor_rollout_ref.actor.ppo_mini_batch_size=32",
    "actor_rollout_ref.actor.use_kl_loss=false",
    "actor_rollout_ref.actor.use_dynamic_bsz=true",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=20480",
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=30720",
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=30720",
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size=4",
    "actor_rollout_ref.ref.ulysses_sequence_parallel_size=4",
    "actor_rollout_ref.actor.fsdp_config.fsdp_size=32",
    "actor_rollout_ref.actor.fsdp_config.param_offload=true",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
    "actor_rollout_ref.ref.fsdp_config.param_offload=true",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.80",
    "actor_rollout_ref.rollout.max_num_batched_tokens=10240",
]


def knobs(n_gpus: int, gpus_per_node: int = 8, **changes: object) -> Knobs:
    base = Knobs(**{name: 0 for name in ("prompt_length", "response_length", "train_tokens", "logprob_tokens")},
                 n_gpus=n_gpus, gpus_per_node=gpus_per_node, dynamic_bsz=True, micro_batch=None,
                 logprob_micro_batch=None, checkpointing=True, param_offload=False, optimizer_offload=False,
                 ref_model=False, lora_rank=0, entropy=False, fused_kernels=True, engine="vllm", engine_fraction=0.6,
                 rollout_tp=4, max_num_seqs=256, max_num_batched_tokens=8192)  # fmt: skip
    return with_changes(base, **(H100 | changes))


def test_groups_across_nodes_with_few_gpus_each_count_without_nvls():
    dapo = knobs(64, fsdp_size=32, sequence_parallel=4)
    # FSDP 32 (4 nodes x 8), its replicas (2: 1 GPU a node), SP 4 (in a node), Ulysses' DP 16 (2 GPUs a node),
    # the engine's TP 4 twice (in a node)
    assert dapo.communicator_groups == [(32, 1), (2, 32), (4, 1), (16, 4), (4, 1), (4, 1)]
    assert abs(dapo.communicators_gib - (4 * 2.7 + 2 * 0.7)) < 1e-9  # before: 6 x 2.7 = 16.2
    assert "2 across nodes at 0.7 GiB (no NVLS)" in dapo.communicators_note


def test_single_node_groups_keep_the_calibrated_figure():
    for layout in ({"fsdp_size": -1}, {"fsdp_size": 2, "sequence_parallel": 4}, {"fsdp_size": 4}):
        one_node = knobs(8, **layout)
        assert abs(one_node.communicators_gib - one_node.communicators * 2.7) < 1e-9, layout
    # a card without NVLS to turn off (or NVLS off already) counts every group at its one figure
    assert abs(knobs(64, fsdp_size=32, communicator_gib_without_nvls=0.0).communicators_gib - 4 * 2.7) < 1e-9


def test_verls_64_gpu_dapo_layout_fits_its_h100s():
    """Before: every phase carried 16.2 GiB of NCCL buffers and rollout came to 0.8 x 79.1 + 16.2 + ..., over the
    card."""
    cfg, plan = plan_case({"overrides": DAPO_64, "flash_attn": True})
    verdict = preflight.check_plan(cfg, plan, {})
    rollout = verdict.phases["rollout"]
    assert abs(rollout.terms["NCCL buffers"] - 12.2) < 0.01, rollout
    assert rollout.fits and rollout.peak_gib < 79.1, rollout


def test_megatron_data_parallel_group_across_nodes_counts_without_nvls():
    """TP 8 on 2 nodes of 8: the data-parallel group is one GPU a node (Megatron-core's tp-cp-ep-dp-pp order)."""
    dense = Architecture(
        layers=2, hidden=64, heads=4, kv_heads=4, head_dim=16, intermediate=128, vocab=10, tied_embeddings=False
    )
    two_nodes = knobs(16, rollout_tp=8)
    nccl = outside(dense, two_nodes, Layout(n_gpus=16, tp=8))[1]
    assert abs(nccl.gib - (3 * 2.7 + 0.7)) < 1e-9 and "DP across nodes, no NVLS" in nccl.note, nccl
    one_node = outside(dense, knobs(8, rollout_tp=4), Layout(n_gpus=8, tp=4))[1]
    assert abs(one_node.gib - 4 * 2.7) < 1e-9, one_node
