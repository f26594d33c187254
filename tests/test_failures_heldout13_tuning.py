"""The families held-out-13's misses belong to (bench/results/failures.txt note 27), each made by the library that
prints it where it is installed (Ray's wrapper, submitit's signal handler, urllib3, Python's faulthandler), each with a
look-alike that keeps its kind; and the unknowns whose fix now says what decides them (a CUDA kernel's fault, a native
crash)."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from bench.failures import CORPORA, load_corpus, signature_kind
from launch.report import failures


def held_out_13(kind: str, stem: str) -> str:
    return next(e.text for e in load_corpus(CORPORA["held-out-13"]) if e.kind == kind and e.path.stem.startswith(stem))


# --- an OutOfMemoryError a worker's own code raised, through Ray's wrapper (cuda_oom) ---------------------------------


def rays_wrapper_of(exception: Exception, method: str) -> str:
    """The traceback a caller of a Ray actor method prints when the method raised `exception` (Ray's own wrapper)."""
    from ray.exceptions import RayTaskError

    try:
        raise exception
    except Exception as raised:  # noqa: BLE001 - whatever the method raised is what Ray wraps
        wrapped = RayTaskError(method, traceback.format_exc(), raised, pid=2671339, ip="10.65.16.209")
    try:
        raise wrapped.as_instanceof_cause()
    except Exception:  # noqa: BLE001
        return traceback.format_exc()


def test_a_workers_own_oom_through_rays_wrapper_is_the_gpus_even_cut_before_its_message():
    import torch

    log = rays_wrapper_of(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB."), "get_logprobs")
    cut = "\n".join(line for line in log.splitlines() if "CUDA out of memory" not in line)
    assert "RayTaskError(OutOfMemoryError)" in cut
    for text in (log, cut):
        assert failures.classify(text).kind == "cuda_oom"
    nemo = failures.classify(held_out_13("cuda_oom", "nemo-rl-3793"))
    assert nemo.kind == "cuda_oom" and "policy.logprob_batch_size" in nemo.fix


def test_rays_own_memory_kill_stays_the_hosts_and_one_through_ray_get_stays_undecided():
    from ray.exceptions import OutOfMemoryError

    host = OutOfMemoryError(
        "Task was killed due to the node running low on memory.\nMemory on the node (IP: 10.0.0.5, ID: 8c5a) where the "
        "task (task ID: ff, name=TaskRunner.run, pid=548, memory used=1.20GB) was running was 60.00GB / 62.00GB "
        "(0.97), which exceeds the memory usage threshold of 0.95."
    )
    assert failures.classify(rays_wrapper_of(host, "run")).kind == "host_oom"
    # a task that called ray.get on one the monitor killed, with the message cut: the frames below the header say so
    nested = (
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::TaskRunner.run() (pid=548, ip=10.0.0.5)\n"
        '  File "/w/verl/trainer/main_ppo.py", line 120, in run\n'
        "    scores = ray.get(futures)\n"
        '  File "/venv/lib/python3.11/site-packages/ray/_private/auto_init_hook.py", line 21, in auto_init_wrapper\n'
    )
    undecided = failures.classify(nested)
    assert undecided.kind == "unknown" and "from a ray.get of another task" in undecided.fix


# --- torch's store waiting for a peer's key: covered with the library's own words in test_failures_library_messages --


def test_a_gloo_group_on_npus_that_never_formed_names_the_rank_that_never_came():
    failure = failures.classify(held_out_13("nccl_timeout", "vllm-ascend-2248"))
    assert failure.kind == "nccl_timeout" and failure.details["rank_missing"] == 2
    assert "waited 1800 s for the key of rank 2" in failure.fix


# --- submitit ending a timed-out job instead of requeuing it (time_limit) ---------------------------------------------


def submitit_refusal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, max_num_timeout: int) -> str:
    """submitit's own signal handler on a job past its time, for a function with no checkpoint method."""
    from submitit.core import job_environment, utils
    from submitit.slurm.slurm import SlurmJobEnvironment

    for variable, value in {"SLURM_JOB_ID": "4242", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}.items():
        monkeypatch.setenv(variable, value)
    delayed = utils.DelayedSubmission(print, "trained")
    delayed.set_timeout(timeout_min=0, max_num_timeout=max_num_timeout)
    paths = utils.JobPaths(tmp_path, job_id="4242")
    handler = job_environment.SignalHandler(SlurmJobEnvironment(), paths, delayed)
    try:
        handler.checkpoint_and_try_requeue(signal.SIGUSR2)
    except utils.UncompletedJobError:
        return traceback.format_exc()
    raise AssertionError("submitit requeued the job")


@pytest.mark.parametrize(
    ("max_num_timeout", "reason", "says"),
    [
        (3, "timed-out and not checkpointable", "submitit.helpers.Checkpointable"),
        (0, "timed-out too many times", "max_num_timeout"),
    ],
)
def test_submitits_refusal_to_requeue_a_timed_out_job_is_the_time_limit_naming_its_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, max_num_timeout: int, reason: str, says: str
):
    log = submitit_refusal(monkeypatch, tmp_path, max_num_timeout)
    assert f"Job not requeued because: {reason}" in log
    failure = failures.classify(log)
    assert failure.kind == "time_limit" and says in failure.fix and "mode.time_budget_min" in failure.fix


def test_submitits_other_uncompleted_jobs_are_no_time_limit():
    log = "submitit.core.utils.UncompletedJobError: Job 4242 (task: 0) with path /runs/x has not produced any output"
    assert signature_kind(log) == "unknown"


# --- no route to the network from Python's HTTP stack (model_not_cached) ----------------------------------------------


def unreachable(monkeypatch: pytest.MonkeyPatch, url: str) -> str:
    """urllib3's own traceback for a request from a node with no route out (the kernel's ENETUNREACH on connect)."""
    import urllib3

    def no_route(self: socket.socket, address: object) -> None:
        raise OSError(errno.ENETUNREACH, os.strerror(errno.ENETUNREACH))

    def resolved(host: str, port: object, *args: object, **kwargs: object) -> list[tuple]:
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("192.0.2.1", int(str(port))))]

    monkeypatch.setattr(socket, "getaddrinfo", resolved)  # the name resolves; the route out is what is missing
    monkeypatch.setattr(socket.socket, "connect", no_route)
    try:
        urllib3.PoolManager(retries=False).request("GET", url)
    except Exception:  # noqa: BLE001 - urllib3's error is the message under test
        return traceback.format_exc()
    raise AssertionError("the request went through")


def test_no_route_to_the_hub_is_a_model_the_nodes_cache_lacks(monkeypatch: pytest.MonkeyPatch):
    log = unreachable(monkeypatch, "https://huggingface.co/microsoft/phi-2/resolve/main/config.json")
    assert "[Errno 101] Network is unreachable" in log
    failure = failures.classify(log)
    assert failure.kind == "model_not_cached" and "HF_HUB_OFFLINE=1" in failure.fix
    saved = failures.classify(held_out_13("model_not_cached", "llamafactory-2497"))
    assert saved.kind == "model_not_cached" and "no retry helps" in saved.fix


def test_the_hubs_name_that_does_not_resolve_is_a_model_the_nodes_cache_lacks():
    # urllib3's own wording where the node has no DNS for the Hub (the requests and huggingface_hub logs quote it)
    log = (
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries "
        'exceeded with url: /Qwen/Qwen2.5-7B/resolve/main/config.json (Caused by NameResolutionError("<urllib3.'
        "connection.HTTPSConnection object at 0x7f>: Failed to resolve 'huggingface.co' ([Errno -2] Name or service "
        'not known)"))'
    )
    failure = failures.classify(log)
    assert failure.kind == "model_not_cached" and failure.details["model"] == "Qwen/Qwen2.5-7B"
    wandb = log.replace("huggingface.co", "api.wandb.ai")
    assert signature_kind(wandb) == "unknown"


@pytest.mark.parametrize("url", ["https://api.wandb.ai/graphql", "http://10.0.0.9:5000/get_reward"])
def test_no_route_to_another_named_host_is_no_model(monkeypatch: pytest.MonkeyPatch, url: str):
    assert signature_kind(unreachable(monkeypatch, url)) == "unknown"


# --- unknowns whose fix says what decides them ------------------------------------------------------------------------


@pytest.mark.parametrize("stem", ["axolotl-1473", "sglang-8296"])
def test_a_cuda_kernels_fault_reported_by_nccls_watchdog_stays_unknown_and_says_how_to_find_the_kernel(stem: str):
    failure = failures.classify(held_out_13("unknown", stem))
    assert failure.kind == "unknown" and failure.details["device_fault"] == "an illegal memory access was encountered"
    assert "no collective timeout" in failure.fix and "CUDA_LAUNCH_BLOCKING=1" in failure.fix


def segfault(function: str, tmp_path: Path) -> str:
    """Python's faulthandler reporting a segmentation fault inside `function` (a real SIGSEGV in a child process)."""
    script = tmp_path / "crash.py"
    script.write_text(
        "import ctypes, faulthandler\nfaulthandler.enable()\n"
        f"def {function}():\n    ctypes.string_at(0)\n{function}()\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGSEGV
    return done.stderr


@pytest.mark.parametrize(
    ("function", "crash", "says"),
    [
        ("capture_begin", "cuda graph capture", "enforce_eager=True"),
        ("ncclAllReduce_proxy", "segmentation fault", "no configuration value can help"),
    ],
)
def test_a_segmentation_fault_stays_unknown_and_names_the_switch_that_avoids_it(
    tmp_path: Path, function: str, crash: str, says: str
):
    log = segfault(function, tmp_path)
    assert "Fatal Python error: Segmentation fault" in log
    failure = failures.classify(log)
    assert failure.kind == "unknown" and failure.details["native_crash"] == crash and says in failure.fix
    assert failures.classify(held_out_13("unknown", "vllm-6783")).details["native_crash"] == "nccl"


def test_rays_list_of_guesses_naming_sigsegv_is_no_segmentation_fault():
    log = (
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
        "Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. "
        "(1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. "
        "(3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors."
    )
    failure = failures.classify(log)
    assert "native_crash" not in failure.details and "look for the OOM killer" in failure.fix


def test_a_model_dimension_tensor_parallelism_cannot_split_names_the_degrees_that_can():
    failure = failures.classify(held_out_13("config_error", "vllm-55517"))
    assert failure.details["config_key"] == "actor_rollout_ref.rollout.tensor_model_parallel_size"
    assert "a divisor of 16 (1, 2, 4, 8, 16)" in failure.fix


def test_ray_1s_start_up_timeout_without_its_seconds_is_a_failed_start():
    failure = failures.classify(held_out_13("ray_start_failed", "ray-19835"))
    assert failure.kind == signature_kind(held_out_13("ray_start_failed", "ray-19835")) == "ray_start_failed"
    assert "within Ray's start-up wait" in failure.fix
