"""The families held-out-12's misses belong to (bench/results/failures.txt note 25), each with a look-alike that keeps
its kind, in the libraries' wording (Ray Tune's, vLLM's and vLLM-Ascend's, Ray's dashboard agent's)."""

from __future__ import annotations

import pytest

from bench.failures import signature_kind
from launch.report import failures


@pytest.mark.parametrize(("asked", "had", "short"), [("2.0", "1.0", True), ("1.0", "4.0", False)])
def test_ray_tunes_older_per_trial_demand_is_a_gpu_shortage_only_when_short(asked: str, had: str, short: bool):
    log = (
        "2024-12-27 12:22:27,422\tWARNING trial_executor.py:305 -- Ignore this message if the cluster is autoscaling. "
        f"You asked for 5.0 cpu and {asked} gpu per trial, but the cluster only has 72.0 cpu and {had} gpu. Stop the "
        "tuning job and adjust the resources requested per trial"
    )
    assert (signature_kind(log) == "gpu_unavailable") == short


def test_vllms_engine_on_a_node_without_gpus_says_to_move_it():
    log = (
        "ERROR 02-09 02:31:11 engine.py:389] Ray does not allocate any GPUs on the driver node. Consider adjusting the "
        "Ray placement group or running the driver on a GPU node."
    )
    failure = failures.classify(log)
    assert failure.kind == "gpu_unavailable" and failure.details["driver_gpus"] == 0
    assert "ray start --num-gpus" in failure.fix


@pytest.mark.parametrize(("available", "engine"), [("0", True), ("2147483648", False)])
def test_vllm_ascends_worker_with_nothing_left_is_the_engines_memory(available: str, engine: bool):
    log = f"(Worker_TP2 pid=554) INFO [worker_v1.py:259] Available memory: {available}, total memory: 65452113920"
    assert (signature_kind(log) == "engine_memory") == engine


@pytest.mark.parametrize(
    ("log", "process"),
    [
        ("Some Ray subprocesses exited unexpectedly:\n  dashboard [exit code=-11]", "dashboard"),
        (
            "2022-05-04 17:21:43,304 ERROR agent.py:385 -- Agent is working abnormally. It will exit immediately.",
            "dashboard_agent",
        ),
    ],
)
def test_rays_dashboard_dying_at_start_is_a_failed_start_naming_its_log(log: str, process: str):
    failure = failures.classify(log)
    assert failure.kind == "ray_start_failed" and failure.details["agent"] == process
    assert f"read {process}.log" in failure.fix and "--include-dashboard=false" in failure.fix
