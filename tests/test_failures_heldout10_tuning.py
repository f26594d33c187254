"""The families held-out-10's misses belong to (bench/results/failures.txt note 21), each with a look-alike that keeps
its kind. Messages are the libraries' own: made by the library where it runs here (Python's unraisable hook, torch),
else checked against the installed library's source (transformers) or quoted from Ray's and vLLM's sources."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.failures import signature_kind
from launch.report import failures


def test_sglangs_memory_saver_out_of_memory_in_its_cu_result_form_is_the_engines():
    log = (
        "(SGLangHttpServer pid=250977) [torch_memory_saver.cpp] CUresult error: 2 (out of memory)  file=csrc/utils.h "
        "func=cu_mem_create line=194\n"
        "(WorkerDict pid=209740) WARNING: Async request to resume_memory_occupation timed out (attempt 1)"
    )
    failure = failures.classify(log)
    assert failure.kind == "engine_memory" and "likeness" not in failure.details
    # another CUresult (1: invalid value) is no memory shortage
    assert signature_kind(log.replace("error: 2 (out of memory)", "error: 1 (invalid argument)")) != "engine_memory"


VLLM_WARMUP = (
    '(VllmWorker rank=1 pid=2445156) ERROR [multiproc_executor.py:470]   File "/x/vllm/v1/worker/gpu_model_runner.py",'
    " line 1548, in _dummy_sampler_run\n"
    "(VllmWorker rank=1 pid=2445156) ERROR [multiproc_executor.py:470] RuntimeError: CUDA out of memory occurred when "
    "warming up sampler with {n} dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when "
    "initializing the engine."
)


@pytest.mark.parametrize("requests", [256, 1024])
def test_vllms_warm_up_out_of_memory_is_the_engines_with_its_max_num_seqs(requests: int):
    failure = failures.classify(VLLM_WARMUP.format(n=requests))
    assert failure.kind == "engine_memory"
    assert failure.details["max_num_seqs"] == requests
    assert f"max_num_seqs to {requests // 2} (now {requests})" in failure.fix
    assert "raising the share cannot help" in failure.fix


def test_rays_memory_monitor_kill_as_an_actors_exit_detail_is_the_hosts():
    log = (
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.\n"
        "        class_name: MemoryMonitorActor\n"
        "The actor is dead because its worker process has died. Worker exit type: USER_ERROR Worker exit detail: Task "
        "was killed due to the node running low on memory."
    )
    assert failures.classify(log).kind == "host_oom"
    # the same actor death with any other exit detail names no host memory
    other = log.replace("Task was killed due to the node running low on memory.", "Worker exits with an exit code 1.")
    assert signature_kind(other) != "host_oom"


TRANSFORMERS = Path(__import__("transformers").__file__).parent


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "tokenization_utils_base.py",
            "OSError: Can't load tokenizer for 'EleutherAI/pythia-160m'. If you were trying to load it from "
            "'https://huggingface.co/models', make sure you don't have a local directory with the same name.",
        ),
        (
            "configuration_utils.py",
            "OSError: Can't load the configuration of 'EleutherAI/pythia-160m'. If you were trying to load it from "
            "'https://huggingface.co/models', make sure you don't have a local directory with the same name.",
        ),
    ],
)
def test_transformers_failing_to_resolve_a_models_part_names_the_model(source: str, message: str):
    # the wording is the installed transformers' own
    template = message.split("'EleutherAI/pythia-160m'")[0].removeprefix("OSError: ")
    assert template in (TRANSFORMERS / source).read_text()
    failure = failures.classify(message)
    assert failure.kind == "model_not_cached"
    assert failure.details["model"] == "EleutherAI/pythia-160m" and "hf download EleutherAI/pythia-160m" in failure.fix


def test_grpcs_own_bind_failure_is_a_failed_ray_start():
    log = (
        'E0826 20:02:15.725277270   12954 server_chttp2.cc:40]        {"created":"@1598472135.7","description":"No '
        'address added out of total 1 resolved","referenced_errors":[{"description":"Failed to add any wildcard '
        'listeners","referenced_errors":[{"description":"Address already in use","errno":98,"syscall":"bind"}]}]}'
    )
    failure = failures.classify(log)
    assert failure.kind == "ray_start_failed"
    assert "Address already in use" in failure.fix and "ray stop" in failure.fix


def test_a_raylet_that_exits_with_its_agent_loses_its_node_and_names_the_agent():
    log = (
        "(raylet) agent_manager.cc:83: The raylet exited immediately because one Ray agent failed, agent_name = "
        "dashboard_agent/424238335.\nThe raylet fate shares with the agent. This can happen because\n"
        " - The agent is killed by the OS (e.g., out of memory)."
    )
    failure = failures.classify(log)
    assert failure.kind == "ray_node_lost" and failure.details["agent"] == "dashboard_agent"
    assert "read dashboard_agent.log" in failure.fix and "grpcio" in failure.fix


REDIS_RETRIES = [
    "2020-04-16 18:45:58,907 INFO scripts.py:374 -- Using IP address 10.0.7.12:6379 for this node.",
    "2020-04-16 18:45:59,882 INFO services.py:563 -- Failed to connect to the redis server, retrying.",
    "2020-04-16 18:45:59,915 INFO services.py:563 -- Failed to connect to the redis server, retrying.",
]


def test_ray_start_retrying_redis_then_crashing_never_reached_the_head():
    crashed = "\n".join(
        [*REDIS_RETRIES, "Traceback (most recent call last):", '  File "/env/bin/ray", line 10, in <module>']
    )
    failure = failures.classify(crashed)
    assert failure.kind == "ray_start_failed" and failure.details["head"] == "unreachable"
    # retries that ended (the node went on starting) are no cause
    connected = "\n".join([*REDIS_RETRIES, "2020-04-16 18:46:01,002 INFO scripts.py:400 -- Started Ray on this node."])
    assert signature_kind(connected) == "unknown"


IGNORED_IN_FINALIZER = """
import weakref

class Grader:
    pass

def handler(_=None):
    # math_verify's timeout handler, as a finalizer runs it
    raise TimeoutError("Operation timed out!")

grader = Grader()
weakref.finalize(grader, handler)
del grader
print("training goes on", flush=True)
"""


def python_prints_an_ignored_exception(tmp_path: Path) -> str:
    """What Python itself prints for an exception raised in a finalizer (its unraisable hook), from a real run. The
    handler lives in a file under math_verify/, so its frame reads as reward code."""
    module = tmp_path / "math_verify" / "utils.py"
    module.parent.mkdir()
    module.write_text(IGNORED_IN_FINALIZER)
    run = subprocess.run([sys.executable, str(module)], capture_output=True, text=True, check=True, timeout=60)
    assert "Exception ignored" in run.stderr and "training goes on" in run.stdout
    return run.stderr


def test_an_exception_python_ignored_stopped_nothing(tmp_path: Path):
    ignored = python_prints_an_ignored_exception(tmp_path)
    assert signature_kind(ignored) != "reward_error"  # alone, it names no cause
    watchdog = (
        "[rank2]:[E516 06:09:16.295 ProcessGroupNCCL.cpp:629] [Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=49296, OpType=_ALLGATHER_BASE, NumelIn=192, NumelOut=576, Timeout(ms)=1800000) ran for "
        "1800076 milliseconds before timing out."
    )
    assert failures.classify(ignored + watchdog).kind == "nccl_timeout"
    # the same traceback raised for real (no "Exception ignored" above it) is the reward code's
    raised = ignored.replace("Exception ignored in", "During handling, raised in")
    assert signature_kind(raised) == "reward_error"
