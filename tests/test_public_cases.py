"""The preflight against public reports of verl runs that fit or ran out of memory (tests/data/public_cases.yaml,
each with its source), planned as reported by bench/preflight_accuracy.py."""

from __future__ import annotations

import pytest

from bench.preflight_accuracy import accuracy, evaluate, load_cases

CASES = load_cases()


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    return {case["name"]: evaluate(case) for case in CASES}


def test_the_cases_cover_what_the_preflight_models():
    joined = [" ".join(case["overrides"]) for case in CASES]
    assert len(CASES) >= 12 and all(case["source"] for case in CASES)
    assert {case["outcome"] for case in CASES} == {"fit", "oom"}
    assert any("lora_rank=32" in text for text in joined)
    assert any("param_offload=true" in text for text in joined) and any(
        "param_offload=false" in text for text in joined
    )
    assert any("tensor_model_parallel_size=8" in text for text in joined)
    assert {text.split("gpu=")[1].split()[0] for text in joined} >= {"h100", "a40"}


def test_accuracy_on_public_cases(results: dict[str, dict]):
    """20 of 22 when this was written. The misses: verl's 72B LoRA search point at 24 sequences per GPU (8 GPUs),
    reported OOM and predicted 73 of 79 GiB; the 1.5B LoRA script's 128 sequences on one GPU, which ran and is
    predicted 82 of 79 GiB. One GPU is over-predicted and eight under-predicted: bench/preflight_accuracy.py prints
    each case."""
    wrong = [name for name, result in results.items() if not result["right"]]
    assert accuracy(list(results.values())) >= 0.90, wrong


@pytest.mark.parametrize("name", ["qwen2-7b GRPO 2xH800 (verl MIN)", "qwen2-14b GRPO 4xH800 (verl MIN)"])
def test_verl_minimum_configurations_fit_with_the_jobs_flash_attn(results: dict[str, dict], name: str):
    assert results[name]["predicted"] == "fit", results[name]


@pytest.mark.parametrize(
    "name, outcome",
    [
        ("qwen2_5_14b LoRA 2xH100 nproc_per_gpu 32", "fit"),
        ("qwen2_5_14b LoRA 2xH100 nproc_per_gpu 64", "oom"),
        ("qwen2_5_72b LoRA 8xH100 nproc_per_gpu 20", "fit"),
        ("qwen2_5_72b LoRA 8xH100 nproc_per_gpu 32", "oom"),
    ],
)
def test_verl_lora_cases_around_where_they_stop_fitting(results: dict[str, dict], name: str, outcome: str):
    """Planned on this machine, which has no vLLM: verl's engine check is skipped, never a refusal."""
    assert results[name]["predicted"] == outcome, results[name]
