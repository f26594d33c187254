"""Broader signatures and fixes with a direction (launch/report/failures/): the held-out corpus
(tests/data/failures_heldout/), a root cause over the errors it causes, a cause named only in an exception's message,
fixes that name the key, the way to move it and the value the log gives, what cannot help, and the hang watchdog's
record as the kind `hang`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_failures import SUBMITIT_START, job_log_layout
from test_failures_heldout import TUNED_MISSES_4

from bench.failures import CORPORA, excerpt_body, load_corpus, signature_kind
from launch.report import failures
from launch.rundir import HANG_FILE

CORPUS = CORPORA["tuning"]
HELD_OUT = load_corpus(CORPORA["held-out"])


def text(kind: str, name: str, root: Path = CORPUS) -> str:
    return excerpt_body(root / kind / f"{name}.log")


def test_the_held_out_corpus_is_real_public_logs_of_every_kind_and_some_outside_the_vocabulary():
    assert len(HELD_OUT) >= 20
    assert all(excerpt.source.startswith("https://github.com/") for excerpt in HELD_OUT)
    assert {excerpt.kind for excerpt in HELD_OUT} <= set(failures.KINDS)
    assert sum(excerpt.kind == "unknown" for excerpt in HELD_OUT) >= 3


@pytest.mark.parametrize("excerpt", HELD_OUT, ids=[f"{e.kind}/{e.path.stem}" for e in HELD_OUT])
def test_each_held_out_excerpt_is_its_kind(excerpt):
    assert failures.classify(excerpt.text).kind == excerpt.kind


# --- root cause first ------------------------------------------------------------------------------------------------


def test_an_engine_oom_in_sglangs_memory_saver_wins_over_the_nccl_timeouts_after_it():
    oom = text("engine_memory", "tms-4-cu-mem-create")
    nccl = text("nccl_timeout", "vllm-6042-rayworker")
    assert failures.classify(nccl).kind == "nccl_timeout"
    assert failures.classify(oom + "\n" + nccl).kind == "engine_memory"
    assert failures.classify(nccl + "\n" + oom).kind == "engine_memory"  # printed later, still the cause


def test_a_host_oom_wins_over_the_actor_deaths_it_causes():
    dead = text("unknown", "verl-4921-worker-died")
    oom = text("host_oom", "ray-40568-small-victim")
    assert failures.classify(dead).kind == "unknown"
    assert failures.classify(dead + "\n" + oom).kind == "host_oom"


@pytest.mark.parametrize("signal", ["SIGHUP", "SIGUSR1", "SIGUSR2", "SIGTERM"])
def test_preemption_by_any_signal_submitit_announces(signal: str):
    line = f"submitit WARNING (2022-07-12 04:18:45,881) - Caught signal {signal} on c1: this job is preempted."
    assert failures.classify(line).kind == "preempted"
    timed_out = line.replace("preempted", "timed-out")
    assert failures.classify(timed_out).kind == "time_limit"


def test_a_reward_module_named_only_in_the_exception_message_is_a_reward_error():
    failure = failures.classify(text("reward_error", "verl-2680-custom-module"))
    assert failure.kind == "reward_error"
    assert failure.evidence == ["ModuleNotFoundError: No module named 'custom_module'"]
    # the same exception with a message that names no reward code matches no signature; what likeness.py makes of
    # the reward lines around it is marked as a reading, never as a match
    other = text("reward_error", "verl-2680-custom-module").replace("custom_module", "flash_attn")
    assert signature_kind(other) == "unknown"
    read = failures.classify(other)
    assert read.kind == "reward_error" and read.details["likeness"] >= 0.5 and read.short().startswith("reward_error?")
    assert read.fix.startswith("no signature matched")


def test_a_reward_error_raised_under_the_trainers_own_reward_frames():
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/verl/verl/trainer/ppo/ray_trainer.py", line 1012, in fit',
            "    reward_tensor = self.reward_fn(batch)",
            '  File "/verl/verl/trainer/ppo/ray_trainer.py", line 612, in _score_output',
            "    score = float(result)",
            "TypeError: float() argument must be a string or a real number, not 'dict'",
        ]
    )
    failure = failures.classify(log)
    assert failure.kind == "reward_error" and "_score_output" in failure.evidence[0]


# message forms of the engines and schedulers rlaunch runs, each as the library prints it
@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (
            "ValueError: The number of required GPUs exceeds the total number of available GPUs in the "
            "placement group.",
            "gpu_unavailable",
        ),
        ("ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!", "gpu_unavailable"),
        ("RuntimeError: CUDA error: invalid device ordinal", "gpu_unavailable"),
        (
            "[12345.6] Memory cgroup out of memory: Killed process 4242 (python) total-vm:30193768kB, "
            "anon-rss:19770320kB",
            "host_oom",
        ),
        ("[12345.6] Out of memory: Kill process 4242 (python) score 912 or sacrifice child", "host_oom"),
        ("srun: error: node-c14: task 0: Out Of Memory", "host_oom"),
        ('The job has been killed by "OOM Killer", please check your job\'s memory usage.', "host_oom"),
        (
            "[2022-02-16 12:46:52,789 C 149 149] node_manager.cc:170: This node has beem marked as dead.",
            "ray_node_lost",
        ),
        (
            "Raylet is terminated: ip=10.0.0.2. Termination is unexpected. Possible reasons include: (1) SIGKILL "
            "by the user or system OOM killer, (2) Invalid memory access from Raylet causing SIGSEGV or SIGBUS",
            "ray_node_lost",
        ),
        (
            "WARNING utils.py:1416 -- Unable to connect to GCS at 10.1.2.3:6379. Check that (1) Ray GCS with matching "
            "version started successfully at the specified address",
            "ray_start_failed",
        ),
        ("RuntimeError: Unable to connect to Redis at 10.0.199.179:6379 after 16 retries.", "ray_start_failed"),
        (
            "[rank1]:[E1111 17:10:53] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress",
            "nccl_timeout",
        ),
        (
            "torch.distributed.DistBackendError: [3] wait timeout after 600000ms, keys: /default_pg//0//cuda//0",
            "nccl_timeout",
        ),
    ],
)
def test_each_message_form_is_its_kind(line: str, kind: str):
    assert failures.classify(line).kind == kind


def test_a_store_recv_failure_is_no_nccl_timeout_but_its_watchdog_line_is():
    store = (
        "torch.distributed.DistBackendError: [7] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
        "via c10d key-value store by key '0', but store->get('0') got error: failed to recv, got 0 bytes"
    )
    assert failures.classify(store).kind == "unknown"
    watchdog = "[Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=BROADCAST) ran for"
    assert failures.classify(store + "\n" + watchdog).kind == "nccl_timeout"


def test_the_heartbeat_lag_is_evidence_of_a_dead_node_never_a_cause_alone():
    lag = "node_manager.cc:157: Last heartbeat was sent 6901 ms ago. There might be resource pressure on this node."
    assert failures.classify(lag).kind == "unknown"
    failure = failures.classify(lag + "\nnode_manager.cc:170: This node has beem marked as dead.")
    assert failure.kind == "ray_node_lost" and failure.details["heartbeat_lag_ms"] == 6901
    assert "resource pressure" in failure.fix and "RAY_health_check_failure_threshold" in failure.fix


def test_a_reward_managers_task_failed_line_counts_only_when_it_names_reward_code():
    line = "(TaskRunner pid=1) [Error] Task failed: Can't pickle <function f>: it's not the same object as "
    assert failures.classify(line + "custom_module.f, completion: x").kind == "reward_error"
    assert failures.classify(line + "mymodule.f, completion: x").kind == "unknown"


def test_a_reward_frame_under_a_ray_task_error_and_a_traceback_cut_short():
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            'File "/w/train_grpo.py", line 130, in main',
            "ray.get(main_task.remote(config))",
            "ray.exceptions.RayTaskError(KeyError): ray::main_task() (pid=1, ip=172.20.0.2)",
            'File "/w/trainers/ray_grpo_trainer.py", line 307, in fit',
            "reward_tensor = self.reward_fn(batch)",
            'File "/w/trainers/ray_grpo_trainer.py", line 104, in _score_output',
        ]
    )
    failure = failures.classify(log)
    assert failure.kind == "reward_error" and "_score_output" in failure.evidence[0]


def test_an_exception_out_of_ray_start_is_a_failed_start():
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.6/site-packages/ray/scripts/scripts.py", line 579, in start',
            '  File "/usr/lib/python3.6/site-packages/ray/node.py", line 142, in __init__',
            "ValueError: The argument None must be a bytes object.",
        ]
    )
    assert failures.classify(log).kind == "ray_start_failed"


def test_fixes_for_the_new_forms_name_what_the_log_holds():
    oom = failures.classify(
        "Out of memory: Killed process 4242 (python) total-vm:1kB, anon-rss:19770320kB, file-rss:0kB"
    )
    assert oom.details["killed_rss_gib"] == 18.9 and "raise the job's memory (--mem" in oom.fix
    vllm = failures.classify(
        "Started a local Ray instance.\n"
        "ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group."
    ).fix
    assert "lower actor_rollout_ref.rollout.tensor_model_parallel_size" in vllm and "RAY_ADDRESS" in vllm
    loopback = failures.classify("Unable to connect to GCS at 127.0.0.1:6379. Check that (1) Ray GCS").fix
    assert "127.0.0.1:6379, a loopback address" in loopback
    remote = failures.classify("Unable to connect to GCS at 10.1.2.3:6379. Check that (1) Ray GCS").fix
    assert "at 10.1.2.3:6379" in remote and "loopback" not in remote


# --- fixes with a direction and numbers ------------------------------------------------------------------------------

KEY_OR_VARIABLE = re.compile(r"\b[a-z_]+\.[a-z_.]+|\bNCCL_[A-Z_]+|--[a-z_]+|\bcluster\.\w+")
DIRECTION = re.compile(r"\b(?:raise|lower|halve|set|point|download|fix)\b|=(?:true|false|\d)")
KEYED_KINDS = ("engine_memory", "cuda_oom", "host_oom", "gpu_unavailable", "time_limit", "nccl_timeout", "preempted")
# held-out-4's misses left on purpose: LSF's, PBS's and Azure ML's limits, schedulers rlaunch never drives; they stay
# unknown, and an unknown's fix invents no key
OTHER_SCHEDULERS = set(TUNED_MISSES_4)


@pytest.mark.parametrize(
    "excerpt",
    [
        e
        for e in [
            *load_corpus(CORPUS),
            *HELD_OUT,
            *load_corpus(CORPORA["held-out-2"]),
            *load_corpus(CORPORA["held-out-3"]),
            *load_corpus(CORPORA["held-out-4"]),
            *load_corpus(CORPORA["held-out-5"]),
            *load_corpus(CORPORA["held-out-6"]),
        ]
        if e.kind in KEYED_KINDS and f"{e.kind}/{e.path.stem}" not in OTHER_SCHEDULERS
    ],
    ids=lambda e: f"{e.kind}/{e.path.stem}",
)
def test_every_fix_for_a_kind_with_a_knob_names_a_key_and_a_direction(excerpt):
    fix = failures.classify(excerpt.text).fix
    assert KEY_OR_VARIABLE.search(fix), fix
    assert DIRECTION.search(fix), fix


def test_engine_kv_shortfall_says_by_how_much_at_which_fraction_and_the_value_to_try():
    log = "\n".join(
        [
            "INFO 03-01 10:00:00 config.py:1 gpu_memory_utilization=0.6, max_num_seqs=256",
            "INFO 03-01 10:00:09 worker.py:2 Available KV cache memory: -3.4 GiB",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine.",
        ]
    )
    fix = failures.classify(log).fix
    assert fix.startswith("KV cache -3.4 GiB at gpu_memory_utilization 0.6")
    assert "raise actor_rollout_ref.rollout.gpu_memory_utilization=0.7 (now 0.6) or lower max_num_seqs" in fix


def test_engine_kv_needed_names_vllms_own_estimate_of_the_longest_model_length():
    failure = failures.classify(text("engine_memory", "vllm-32105-kv-needed", CORPORA["held-out"]))
    assert failure.fix.startswith("KV cache -42.6 GiB for weights + KV cache: raise")
    assert "lower max_model_len to 81392" in failure.fix
    assert failure.details["kv_shortfall_gib"] == 42.59


def test_engine_without_enough_free_memory_is_told_the_fraction_that_fits():
    fix = failures.classify(text("engine_memory", "kvcached-110-free-memory", CORPORA["held-out"])).fix
    # 67.24 of 79.25 GiB free: 0.848 of the card, less a 0.02 margin, rounded down
    assert "lower actor_rollout_ref.rollout.gpu_memory_utilization=0.82 (now 0.9)" in fix


def test_sglang_memory_saver_oom_lowers_the_fraction():
    fix = failures.classify(text("engine_memory", "tms-4-cu-mem-create")).fix
    assert "lower actor_rollout_ref.rollout.gpu_memory_utilization by about 0.1" in fix


def test_a_fork_gets_its_own_option_names_never_verls():
    host = failures.classify(text("host_oom", "easyr1-185-fork-raylet")).fix
    assert "worker.actor.offload" in host and "actor_rollout_ref" not in host
    engine = failures.classify(text("engine_memory", "openrlhf-1050-wake-up-cumem", CORPORA["held-out"])).fix
    assert "--vllm_gpu_memory_utilization" in engine and "actor_rollout_ref" not in engine


RAY_OOM = (
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
    "Memory on the node (IP: 10.0.0.5, ID: 8c5a) where the task (actor ID: 41617b, name={name}, pid=548, memory "
    "used={used}GB) was running was 1490.00GB / 1511.00GB (0.986), which exceeds the memory usage threshold of 0.95."
)


def test_a_driver_whose_own_rss_grew_is_told_that_mem_cannot_help():
    """Ray's memory-monitor message (its form in ray-project/ray#30312) with verl's driver as the killed task."""
    failure = failures.classify(RAY_OOM.format(name="TaskRunner.run", used="1402.50"))
    assert failure.kind == "host_oom"
    assert "the driver (TaskRunner.run) itself held 1402.5 of the node's 1490 GB" in failure.fix
    assert "more --mem cannot help" in failure.fix
    worker = failures.classify(RAY_OOM.format(name="WorkerDict.__init__", used="120.00")).fix
    assert "raise the job's memory (--mem, rlaunch: cluster.mem_gb) above 1511 GB" in worker


def test_a_bystander_victim_says_the_memory_is_held_elsewhere():
    fix = failures.classify(text("host_oom", "ray-40568-small-victim")).fix
    assert fix.startswith("the killed task (Actor.__init__) held only 0.06 of the node's 27.57 GB")


def test_an_empty_head_address_is_named_and_nothing_else_blamed():
    """Ray's SLURM template echoes `IP Head: $ip_head` (ray-project/ray#35711); an unresolved head IP leaves ':6379'."""
    log = "IP Head: :6379\nStarting HEAD at node001\nRuntimeError: Failed to connect to GCS at address :6379"
    failure = failures.classify(log)
    assert failure.kind == "ray_start_failed"
    assert failure.fix.startswith("the head address is empty (':6379'): the head node's IP was never resolved")


def test_a_hang_on_the_first_collective_points_at_the_network_not_a_stopped_rank():
    first = failures.classify(text("nccl_timeout", "nccl-719-first-allgather"))
    assert "first collective (ALLGATHER, SeqNum=1)" in first.fix and "NCCL_SOCKET_IFNAME" in first.fix
    assert "rank stopped coming" not in first.fix
    later = failures.classify(text("nccl_timeout", "vllm-6042-rayworker")).fix
    assert "collective 158046 (GATHER)" in later and "a rank stopped coming" in later


def test_gpu_shortage_says_how_many_were_wanted_and_had():
    fix = failures.classify(text("gpu_unavailable", "verl-2515-desired-16")).fix
    assert fix.startswith("verl wanted 16 GPUs (trainer.nnodes x trainer.n_gpus_per_node) and Ray had 8.0")
    ray = failures.classify(text("gpu_unavailable", "scalingup-6-no-node-types")).fix
    assert ray.startswith("a Ray request for 1 GPU(s) that no node of the cluster can give")


# --- across attempts and the hang record ------------------------------------------------------------------------------


def run_with_log(tmp_path: Path, attempts: list[str]) -> Path:
    """A run directory whose job log holds these attempts (each after submitit's start line)."""
    run_dir = tmp_path / "sweep" / "run1"
    run_dir.mkdir(parents=True)
    out = "\n".join(SUBMITIT_START.format(s=10 * number + 1, host="c1") for number in range(len(attempts)))
    err = "\n".join(
        f"{body}\nsubmitit ERROR (2026-11-22 19:50:{10 * number + 5:02d},000) - Submitted job triggered an exception"
        for number, body in enumerate(attempts)
    )
    job_log_layout(run_dir, "7", err, out)
    return run_dir


def test_a_preemption_whose_requeue_failed_on_a_stale_rendezvous_is_not_nothing_to_change(tmp_path: Path):
    preempted = excerpt_body(CORPUS / "preempted" / "submitit-1701-sighup.log").split("\n", 1)[1]
    stale = "RuntimeError: Failed to connect to GCS at address 10.0.0.7:6379 within 60 seconds."
    found = failures.run_failures(run_with_log(tmp_path, [preempted, stale]))
    assert [(f.kind, f.attempt) for f in found] == [("preempted", 1), ("ray_start_failed", 2)]
    assert found[0].fix.startswith("not nothing to change: the requeued attempt 2 then failed on a stale rendezvous")
    alone = failures.run_failures(run_with_log(tmp_path / "other", [preempted, "ValueError: something else"]))
    assert alone[0].fix.startswith("nothing to change")


HANG = {
    "attempt": 1,
    "phase": "update_actor",
    "stuck_ranks": ["rank 0 (c1)", "rank 1 (c2)"],
    "last_step": 12,
    "waited_s": 912.0,
    "window_s": 900.0,
    "expected_step_s": 180.0,
    "transient": False,
    "evidence": "torch.distributed.all_reduce (c10d) on ranks 0-1; rank 2 in compute_score",
    "stacks_dir": "hang/attempt-1",
}


@pytest.mark.parametrize("as_list", [False, True])
def test_an_attempt_the_watchdog_stopped_is_a_hang_over_its_time_limit(tmp_path: Path, as_list: bool):
    time_limit = excerpt_body(CORPUS / "time_limit" / "zetta-671-slurmstepd.log")
    run_dir = run_with_log(tmp_path, [time_limit, "ValueError: later"])
    (run_dir / HANG_FILE).write_text(json.dumps([HANG] if as_list else HANG))
    found = failures.run_failures(run_dir)
    assert [f.kind for f in found] == ["hang", "unknown"]
    hang = found[0]
    assert hang.evidence[0] == HANG["evidence"]
    assert "stuck in a collective in update_actor after step 12: rank 0 (c1), rank 1 (c2) waited in it" in hang.fix
    assert str(run_dir / "hang" / "attempt-1") in hang.fix and "not requeued" in hang.fix
    assert failures.summary(found).startswith("hang > unknown")


def test_a_hang_in_start_up_with_no_process_blocked_points_at_the_floor(tmp_path: Path):
    """The watchdog recorded no stuck process, no step and no stack in verl's training loop (phase start-up): verl may
    only be slow to start on this node, which a larger floor lets through."""
    run_dir = run_with_log(tmp_path, ["rlaunch: hang: no step for 60 s"])
    starting = {**HANG, "phase": "start-up", "stuck_ranks": [], "last_step": None, "window_s": 60.0, "transient": False}
    starting["evidence"] = "no process blocked outside Ray's own waits (2 waiting on ray.get, 9 idle)"
    (run_dir / HANG_FILE).write_text(json.dumps([starting]))
    (hang,) = [f for f in failures.run_failures(run_dir) if f.kind == "hang"]
    assert "no step yet and no process blocked in its own work: verl was still starting" in hang.fix
    assert "raise launch.hang.floor_s above 60 s" in hang.fix


def test_a_broken_hang_record_is_ignored(tmp_path: Path):
    run_dir = run_with_log(tmp_path, ["ValueError: later"])
    (run_dir / HANG_FILE).write_text('{"attempt": 1, "pha')
    assert [f.kind for f in failures.run_failures(run_dir)] == ["unknown"]


# --- held-out-5: the fixes name what its logs hold --------------------------------------------------------------------

HELD_OUT_5_FIXES = {
    "config_error/open-instruct-620-hfargparser-unused-args": "has no option --ground_truths_key, --sft_messages_key",
    "cuda_oom/nemo-rl-2871-logprob-chunk-ignored": "halve NeMo-RL's policy.train_micro_batch_size",
    "data_error/openpi-771-parquet-zero-bytes": "a data file is empty (0 bytes)",
    "data_error/visual-rft-246-parquet-magic-bytes": "`git lfs pull` in the dataset's repository",
    "data_missing/mm-eureka-v0-9-geo-data-parquet": "the data file /lpai/R1-Multimodal-Journey-main/local_scripts/geo_",
    "engine_memory/vllm-10517-29k-bad-kv-cache": "lower max_model_len to 23648 (now 29000) (actor_rollout_ref.rollout."
    "gpu_memory_utilization is already 0.9",
    "gpu_unavailable/cor-gs-23-no-cuda-gpus": "CUDA_VISIBLE_DEVICES hid them",
    "gpu_unavailable/nemo-rl-89-not-enough-gpus": "lower cluster.num_nodes x cluster.gpus_per_node to fit 8",
    "model_not_cached/comfyui-5695-bert-network-unreachable": "`hf download bert-base-uncased`",
    "nccl_timeout/accelerate-223-single-gpu-eval-broadcast": "waited 1800 s in a BROADCAST",
    "ray_node_lost/ray-43751-actor-node-died-broken-pipe": "Ray lost the node 10.72.56.3",
    "ray_start_failed/ray-33842-gcs-wrong-redis-address": "unset RAY_REDIS_ADDRESS",
    "ray_start_failed/ray-37107-serve-docker-gcs-unreachable": "the Ray head's GCS at 172.17.0.2:6379",
    "preempted/everyvoice-183-step-cancelled-preemption": "`sacct -j 4714782 --format=JobID,State,Reason,Elapsed",
    "unknown/verl-4157-rollout-correction-not-in-struct": "code in ppo/rollout_corr_helper.py (apply_rollout_correct",
}


# --- held-out-6: the fixes name what its logs hold --------------------------------------------------------------------

HELD_OUT_6_FIXES = {
    "config_error/open-r1-249-grpo-num-generations-7-procs": "set num_generations to a divisor of 7 (the values that "
    "fit, as TRL lists them: [7]), or per_device_train_batch_size=8 (now 1)",
    "data_error/openrlhf-875-openorca-parquet-fragment": "(its parquet reader raised; the exception under it names the "
    "file)",
    "data_missing/ray-25179-read-csv-relative-path-multinode": "a local path (a relative one most of all) must exist "
    "on every node",
    "engine_memory/intel-arc-cookbook-4-v1-kv-cache-wrapped": "or lower max_model_len (now 100000)",
    "engine_memory/sglang-7691-dp-profiled-negative-tokens": "left -561981 tokens for the KV cache after loading the "
    "weights (the weights took 166.59 GB per GPU, 21.73 GB left)",
    "engine_memory/vllm-6746-405b-fp8-max-seq-len-kv-cache": "lower max_model_len to 79392 (now 131072)",
    "gpu_unavailable/openrlhf-233-llmrayactor-no-supported-device": "set --vllm_tensor_parallel_size=1",
    "host_oom/k-net-30-cityscapes-step-cgroup-oom": "`sacct -j 9411285 --format=MaxRSS,ReqMem`",
    "nccl_timeout/verl-1158-sft-alltoall-epoch-transition": "collective 4486 (ALLTOALL) timed out",
    "ray_start_failed/ray-17365-slurm-pyxis-connect-aborted": "the command line gives 10.199.200.10:6379, not "
    "10.199.200.100:6379",
    "ray_start_failed/ray-43778-slurm-empty-head-init-auto": "the script's head node name is empty",
    "reward_error/open-r1-13-format-reward-func-positional": "format_reward_func() takes 1 positional argument but 2",
}

HELD_OUT_FIXES = [
    *(("held-out-5", name, said) for name, said in sorted(HELD_OUT_5_FIXES.items())),
    *(("held-out-6", name, said) for name, said in sorted(HELD_OUT_6_FIXES.items())),
]


@pytest.mark.parametrize(("corpus", "name", "said"), HELD_OUT_FIXES)
def test_the_held_out_sets_fixes_name_the_key_value_or_file_its_log_holds(corpus: str, name: str, said: str):
    kind, stem = name.split("/")
    assert said in failures.classify(text(kind, stem, CORPORA[corpus])).fix
