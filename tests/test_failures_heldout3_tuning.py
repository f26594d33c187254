"""What tuning on held-out-3's misses added to the failure classifier (launch/report/failures/), each rule in its
general form rather than the excerpt's (bench/results/failures.txt, note 7): a traceback read whatever prefixes its
lines or where the log cut it, vLLM's placement group that never formed, the Hub's "cannot find the requested files"
in both wordings; and fixes that name the key, the direction and the numbers held-out-3's logs hold, or say what
decides between two causes where the log alone cannot."""

from __future__ import annotations

import pytest

from bench.failures import CORPORA, excerpt_body
from launch.report import failures

HELD_OUT_3 = CORPORA["held-out-3"]


def held_out_3(kind: str, name: str) -> str:
    return excerpt_body(HELD_OUT_3 / kind / f"{name}.log")


# --- tracebacks, whatever their lines carry and wherever the log cut them ---------------------------------------------

REWARD_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/w/verl/trainer/ppo/ray_trainer.py", line 947, in fit',
    "    val_metrics = self._validate()",
    '  File "/w/verl/workers/reward_manager/naive.py", line 89, in __call__',
    "    score = self.compute_score(data_source=data_source)",
    "KeyError: 'answer'",
]


@pytest.mark.parametrize(
    "prefix",
    ["", "[2026-03-11 17:47:54] ", "3: ", "> ", "(TaskRunner pid=2991687) ", "2026-03-11 17:47:54,123 ERROR: "],
)
def test_a_reward_traceback_is_read_whatever_prefixes_its_lines(prefix: str):
    log = "\n".join(prefix + line for line in REWARD_TRACEBACK)
    failure = failures.classify(log)
    assert failure.kind == "reward_error"
    assert "reward_manager/naive.py (__call__)" in failure.fix


def test_timestamps_that_move_on_within_a_traceback_still_carry_it():
    log = "\n".join(f"[2026-03-11 17:47:{50 + index}] {line}" for index, line in enumerate(REWARD_TRACEBACK))
    assert failures.classify(log).kind == "reward_error"


def test_a_log_that_starts_inside_a_traceback_keeps_its_frames():
    # the tail of a log (or a paste) begins at a frame: its header is gone, its frames still say where it was raised
    assert failures.classify("\n".join(REWARD_TRACEBACK[1:])).kind == "reward_error"
    assert failures.classify(held_out_3("reward_error", "math-verify-55-signal-main-thread")).kind == "reward_error"


def test_a_ray_task_errors_remote_frames_count_without_a_header():
    log = "\n".join(
        [
            "ray.exceptions.RayTaskError(KeyError): ray::TaskRunner.run() (pid=1, ip=10.0.0.2)",
            '  File "/w/verl/trainer/ppo/ray_trainer.py", line 598, in _validate',
            '  File "/w/verl/utils/reward_score/__init__.py", line 106, in default_compute_score',
        ]
    )
    assert failures.classify(log).kind == "reward_error"


def test_frames_that_name_no_reward_code_stay_unknown_whatever_their_prefix():
    log = "\n".join(
        f"[2026-03-11 17:47:54] {line}"
        for line in [
            '  File "/w/sglang/srt/entrypoints/verl_engine.py", line 44, in __init__',
            "ValueError: signal only works in main thread of the main interpreter",
        ]
    )
    assert failures.classify(log).kind == "unknown"


# --- vLLM's placement group and the Hub's cache -----------------------------------------------------------------------

WAIT = (
    "(EngineCore pid=84) INFO 06-07 18:13:55 [ray_utils.py:464] Waiting for creating a placement group of specs for "
    "{seconds} seconds. specs=[{{'GPU': 1.0}}, {{'GPU': 1.0}}, {{'GPU': 1.0}}, {{'GPU': 1.0}}]. Check `ray status` "
    "and `ray list nodes` to see if you have enough resources."
)


def test_vllms_placement_group_that_never_formed_is_a_gpu_shortage():
    fatal = (
        "ValueError: Cannot provide a placement group of placement_group_specs=[{'GPU': 1.0, 'node:10.0.0.2': "
        "0.001}, {'GPU': 1.0}] within 1800 seconds. See `ray status` to make sure the cluster has enough resources."
    )
    failure = failures.classify(fatal)
    assert failure.kind == "gpu_unavailable"
    assert failure.details["gpus_requested"] == 2.0
    assert "lower actor_rollout_ref.rollout.tensor_model_parallel_size" in failure.fix
    # vLLM's own wait, when the log ends in it
    waiting = failures.classify(WAIT.format(seconds=310))
    assert waiting.kind == "gpu_unavailable" and waiting.details["bundles"] == 4


def test_a_wait_that_ended_is_no_cause_the_error_after_it_is():
    later_data = "FileNotFoundError: Unable to find '/data/gsm8k/train.parquet'"
    assert failures.classify(WAIT.format(seconds=10) + "\n" + later_data).kind == "data_missing"
    later_unknown = "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert failures.classify(WAIT.format(seconds=30) + "\n" + later_unknown).kind == "unknown"


def test_the_placement_group_fix_counts_the_gpus_asked_and_those_ray_shows():
    failure = failures.classify(held_out_3("gpu_unavailable", "gpustack-5509-gpu-as-tpu"))
    assert failure.kind == "gpu_unavailable"
    assert failure.fix.startswith(
        "vLLM's placement group of 2 bundles asks for 2 GPU(s) (tensor x pipeline parallel size) and Ray's cluster "
        "shows 1, so it never formed: lower actor_rollout_ref.rollout.tensor_model_parallel_size"
    )
    assert "ray start --num-gpus" in failure.fix


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: Connection error, and we cannot find the requested files in the cached path. Please try again or "
        "make sure your Internet connection is on.",
        "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the Hub "
        "and we cannot find the requested files in the local cache. Please check your connection and try again",
        "OSError: Connection error, and we cannot find the requested files in the local cache.",
    ],
)
def test_the_hub_unreachable_and_the_file_not_cached_in_both_wordings(line: str):
    assert failures.classify(line).kind == "model_not_cached"


# --- fixes that name what held-out-3's logs hold ----------------------------------------------------------------------


def test_a_refused_override_names_its_key_and_says_drop_it():
    fix = failures.classify(held_out_3("config_error", "verl-1080-grad-offload")).fix
    assert fix.startswith("verl's config has no key actor_rollout_ref.actor.fsdp_config.grad_offload")
    assert "drop the override actor_rollout_ref.actor.fsdp_config.grad_offload=..." in fix
    struct = failures.classify(held_out_3("config_error", "verl-331-actor-not-in-struct"))
    assert struct.details["config_key"] == "actor" and "fix or drop the override" in struct.fix
    # omegaconf's full key, where it prints one, is the key to name
    full = failures.classify(
        "omegaconf.errors.ConfigAttributeError: Key 'foo' is not in struct\n    full_key: trainer.foo"
    )
    assert full.details["config_key"] == "trainer.foo"


def test_sglangs_own_fraction_is_the_value_the_fix_moves():
    failure = failures.classify(held_out_3("engine_memory", "gpustack-3831-mem-fraction-default"))
    assert "at gpu_memory_utilization 0.2" in failure.fix
    assert "raise actor_rollout_ref.rollout.gpu_memory_utilization=0.3 (now 0.2)" in failure.fix


def test_a_gcs_the_client_could_not_reach_is_named():
    failure = failures.classify(held_out_3("ray_start_failed", "vllm-15385-gcs-5s"))
    assert failure.details["head_address"] == "192.168.2.40:6379"
    assert "could not reach the Ray head's GCS at 192.168.2.40:6379" in failure.fix


def test_a_node_marked_dead_names_its_address_and_both_ways_it_dies():
    failure = failures.classify(held_out_3("ray_node_lost", "ray-59193-marked-dead"))
    assert failure.fix.startswith("the GCS marked the node at 192.168.10.175 dead after it missed too many heartbeats")
    assert "OOM killer" in failure.fix and "raise Ray's tolerance: cluster.env.RAY_health_check_failure_threshold" in (
        failure.fix
    )
    old = failures.classify(held_out_3("ray_node_lost", "ray-5363-missed-heartbeats")).fix
    assert old.startswith("the GCS marked a node dead") and "RAY_num_heartbeats_timeout before Ray 2" in old


def test_a_collective_timeout_quotes_the_timeout_it_ran_under():
    failure = failures.classify(held_out_3("nccl_timeout", "weathergenerator-360-allreduce"))
    assert failure.details["timeout_s"] == 240
    assert "raise actor_rollout_ref.nccl_timeout (s) (now 240) only if that rank was slow" in failure.fix


def test_math_verify_off_the_main_thread_is_told_to_turn_its_signal_timeouts_off():
    fix = failures.classify(held_out_3("reward_error", "math-verify-55-signal-main-thread")).fix
    assert "parsing_timeout=None" in fix and "timeout_seconds=None" in fix


def test_a_reward_error_names_the_deepest_reward_frame_or_the_unscored_data_source():
    cut = failures.classify(held_out_3("reward_error", "simplerl-95-math-verify-timeout"))
    assert cut.fix.startswith("the reward function raised in math_verify/grader.py (sympy_expr_eq)")
    assert "return 0 on a parse failure or a timeout" in cut.fix
    wrapped = failures.classify(held_out_3("reward_error", "verl-5558-data-source-not-implemented")).fix
    assert wrapped.startswith("the reward function raised in reward_manager/naive.py (__call__)")
    named = failures.classify("NotImplementedError: Reward function is not implemented for data_source='aime_ttt'")
    assert named.details["data_source"] == "'aime_ttt'"
    assert "no function for data_source='aime_ttt': point reward.custom_reward_function.path" in named.fix


def test_the_host_oom_fix_names_rays_top_memory_users_in_the_forks_own_options():
    fix = failures.classify(held_out_3("host_oom", "lmm-r1-71-llmrayactor")).fix
    assert "Ray's top memory users: 6 x ray::LLMRayActor (82.3 GB together)" in fix
    assert "--adam_offload" in fix and "actor_rollout_ref" not in fix
    verl = failures.classify(held_out_3("host_oom", "verl-2950-dapo-cpu-oom"))
    assert verl.details["top_holder"] == "ray::WorkerDict.actor_rollout_generate_sequences"
    assert "above 251.54 GB" in verl.fix


def test_a_cuda_oom_fix_quotes_torchs_sizes_and_the_phases_own_key():
    slime = failures.classify(held_out_3("cuda_oom", "slime-1951-compute-log-probs")).fix
    assert slime.startswith("a GPU ran out of memory: one allocation of 58.15 GiB failed: halve")
    log_prob = failures.classify(excerpt_body(CORPORA["tuning"] / "cuda_oom" / "verl-2828-entropy-logprob.log")).fix
    assert log_prob.startswith("the log-prob phase ran out of GPU memory: one allocation of 13.91 GiB failed with 8.85")
    assert "halve actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu" in log_prob
    # torch lists other processes on the card first: the free memory is what it says of the card as a whole
    other = failures.classify(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 388.00 MiB. GPU 0 has a total capacity of "
        "23.64 GiB of which 562.06 MiB is free. Process 1140273 has 384.00 MiB memory in use. Including non-PyTorch "
        "memory, this process has 22.14 GiB memory in use."
    )
    assert other.details["in_use_gib"] == 22.14 and other.details["free_gib"] == 0.55


def test_one_allocation_larger_than_the_card_says_offloading_cannot_help():
    fix = failures.classify(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 96.00 GiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 60.00 GiB is free."
    ).fix
    assert "more than the card's 79.15 GiB: offloading cannot make room" in fix
    assert "fewer tokens per micro-batch can: halve actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" in fix


def test_a_forks_cuda_oom_names_its_own_micro_batch_options():
    log = (
        '(ActorModelRayActor pid=7) File "/w/openrlhf/trainer/ppo_trainer.py", line 3, in training_step\n'
        "(ActorModelRayActor pid=7) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    )
    fix = failures.classify(log).fix
    assert "--micro_train_batch_size" in fix and "actor_rollout_ref" not in fix


# --- the two misses left: the log cannot decide, the fix says what does -----------------------------------------------


def test_an_oom_a_workers_own_code_raised_through_rays_wrapper_is_the_gpus():
    # Ray's memory monitor never raises in the worker's code (the caller gets its OutOfMemoryError unwrapped, or an
    # ActorDiedError): since note 27 the wrapper's header alone is torch's
    failure = failures.classify(held_out_3("cuda_oom", "verl-647-sglang-backend-update-actor"))
    assert failure.kind == "cuda_oom"
    assert "halve actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" in failure.fix


def test_a_worker_ray_saw_vanish_stays_unknown_and_says_where_the_oom_killer_would_show():
    failure = failures.classify(held_out_3("host_oom", "openrlhf-187-actor-killed-docker-limit"))
    assert failure.kind == "unknown"  # Ray lists the OOM killer, `ray stop --force` and a crash, and decides none
    assert "dmesg -T | grep -i 'killed process'" in failure.fix
    assert "raise the job's memory (--mem, rlaunch: cluster.mem_gb)" in failure.fix


def test_a_torch_oom_in_rollout_moves_the_engines_share_not_a_micro_batch():
    log = (
        '  File "/w/verl/workers/fsdp_workers.py", line 512, in generate_sequences\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 1.00 GiB is free."
    )
    fix = failures.classify(log).fix
    assert fix.startswith("the rollout phase ran out of GPU memory: one allocation of 2 GiB failed with 1 of 79.15")
    assert "lower actor_rollout_ref.rollout.gpu_memory_utilization by about 0.1" in fix


def test_only_rays_own_top_memory_rows_name_the_holders():
    oom = "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
    unrelated = oom + "step 12  0.53  loss\nstep 13  0.51  loss\n" + "1234  3.50  python3"
    assert "top memory users" not in failures.classify(unrelated).fix
    listed = oom + "Top 10 memory users:\nPID\tMEM(GB)\tCOMMAND\n4100606\t56.57\tray::WorkerDict.update_actor\n"
    assert (
        "Ray's top memory users: 1 x ray::WorkerDict.update_actor (56.6 GB together)" in failures.classify(listed).fix
    )
