"""Failure messages as the libraries a verl run goes through print or raise them (tests/data/failures_library/<kind>/
<library>-<name>.log): each excerpt holds the message verbatim with the lines its library prints around it, and its
first line names the source file (or the issue quoting it) it was read from. Each must be named by the signatures as
its directory says, and its fix must name the key the message points at. unknown/ holds real messages of failures
outside rlaunch's vocabulary and near-misses (a warning that mentions memory or preemption, a retry that succeeded),
which must stay unknown, the likeness reading included."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.failures import excerpt_body, excerpt_source, signature_kind
from launch.report import failures
from launch.report.failures import KINDS

LIBRARY = Path(__file__).parent / "data" / "failures_library"
EXCERPTS = sorted(LIBRARY.glob("*/*.log"))
ROLLOUT_FRACTION = "actor_rollout_ref.rollout.gpu_memory_utilization"
# what each excerpt's fix must say, where its message names the knob (or the file, node setting) to change
FIX_NAMES = {
    "config_error/slurm-memory-specification-not-satisfied": "lower cluster.mem_gb",
    "config_error/slurm-requested-time-limit-invalid": "lower mode.time_budget_min",
    "config_error/sglang-input-longer-than-context-length": "data.filter_overlong_prompts=true",
    "config_error/verl-dataproto-only-support-equal-chunk": "make it 992 or 1008",
    "config_error/verl-sglang-prompt-exceeds-context": "data.filter_overlong_prompts=true",
    "config_error/verl-max-model-len-above-position-embeddings": "actor_rollout_ref.rollout.max_model_len=32768",
    "config_error/verl-vllm-lora-rank-above-max": "actor_rollout_ref.model.lora_rank to 512",
    "config_error/verl-vllm-prompt-leaves-no-room": "actor_rollout_ref.rollout.max_model_len",
    "config_error/vllm-attention-heads-divisible-tp": "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "config_error/vllm-bfloat16-compute-capability": "actor_rollout_ref.rollout.dtype=float16",
    "config_error/vllm-decoder-prompt-longer-than-max-model-len": "actor_rollout_ref.rollout.max_model_len",
    "config_error/vllm-max-model-len-above-derived": "actor_rollout_ref.rollout.max_model_len=32768",
    "cuda_oom/torch-caching-allocator-update-actor": "ppo_micro_batch_size_per_gpu",
    "cuda_oom/torch-oom-ref-compute-log-prob": "log_prob_micro_batch_size_per_gpu",
    "data_error/verl-unsupported-file-format": "data.train_files / data.val_files at the files themselves",
    "data_missing/datasets-unable-to-find-data-file": "data.train_files",
    "data_missing/pyarrow-failed-to-open-local-file": "data.train_files",
    "disk_full/nccl-shm-fallocate-no-space": "NCCL_SHM_DISABLE=1",
    "disk_full/python-errno122-disk-quota-checkpoint": "trainer.max_actor_ckpt_to_keep",
    "disk_full/safetensors-storage-full": "trainer.max_actor_ckpt_to_keep",
    "engine_memory/sglang-capture-cuda-graph-oom": f"lower {ROLLOUT_FRACTION}",
    "engine_memory/sglang-prefill-out-of-memory": "actor_rollout_ref.rollout.max_num_seqs",
    "engine_memory/vllm-free-memory-below-utilization": ROLLOUT_FRACTION,
    "engine_memory/vllm-sampler-warmup-oom": "actor_rollout_ref.rollout.max_num_seqs",
    "engine_memory/vllm-v1-kv-cache-below-max-seq-len": f"raise {ROLLOUT_FRACTION}",
    "engine_memory/vllm-v1-no-available-memory-cache-blocks": f"raise {ROLLOUT_FRACTION}",
    "gpu_unavailable/nccl-duplicate-gpu-detected": "trainer.n_gpus_per_node",
    "gpu_unavailable/slurm-invalid-gres-specification": "cluster.gres_types",
    "gpu_unavailable/torch-cudagetdevicecount-802-fabric-manager": "fabricmanager",
    "gpu_unavailable/verl-total-available-gpus": "trainer.n_gpus_per_node",
    "host_oom/ray-memory-monitor-actor-died": "cluster.mem_gb",
    "host_oom/ray-object-store-full": "cluster.mem_gb",
    "host_oom/slurm-exceeded-step-memory-limit": "cluster.mem_gb",
    "host_oom/torch-dataloader-worker-bus-error-shm": "data.dataloader_num_workers",
    "model_not_cached/huggingface-hub-revision-not-found": "no revision v1.1",
    "model_not_cached/transformers-no-weights-in-directory": "actor_rollout_ref.model.path",
    "model_not_cached/vllm-invalid-repository-id": "actor_rollout_ref.model.path",
    "ray_start_failed/ray-version-mismatch": "Ray 2.49.1 here, 2.43.0 on the cluster",
    "reward_error/verl-custom-reward-module-not-found": "reward.custom_reward_function.path",
    "reward_error/verl-custom-reward-object-not-found": "reward.custom_reward_function.name",
    "reward_error/verl-default-compute-score-data-source": "reward.custom_reward_function.path",
    "nccl_timeout/nccl-bootstrap-no-socket-interface": "cluster.env.NCCL_SOCKET_IFNAME",
    "nccl_timeout/nccl-ib-completion-error": "status 12 (retries exceeded",
    "nccl_timeout/nccl-ib-completion-error-old-form": "status 12 (retries exceeded",
    "nccl_timeout/nccl-ibv-reg-mr-memlock-not-host-oom": "ulimit -l",
    "nccl_timeout/torch-gloo-recv-timeout": "waited 1800 s to recv",
    "nccl_timeout/vllm-pynccl-bootstrap-no-socket-interface": "cluster.env.NCCL_SOCKET_IFNAME",
    "time_limit/slurm-step-cancelled-time-limit": "mode.time_budget_min",
}


def name_of(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@pytest.mark.parametrize("path", EXCERPTS, ids=name_of)
def test_each_library_message_is_named_as_its_directory_says(path: Path) -> None:
    text = excerpt_body(path)
    failure = failures.classify(text)
    assert signature_kind(text) == failure.kind == path.parent.name, failure.evidence
    if name_of(path) in FIX_NAMES:
        assert FIX_NAMES[name_of(path)] in failure.fix


def test_every_excerpt_names_its_source_and_every_kind_has_one() -> None:
    assert all(excerpt_source(path).startswith("https://") for path in EXCERPTS)
    assert {path.parent.name for path in EXCERPTS} == set(KINDS)
    assert set(FIX_NAMES) <= {name_of(path) for path in EXCERPTS}  # no expectation left for an excerpt gone
