"""The preflight against public reports of verl runs that fit or ran out of memory (tests/data/public_cases.yaml,
each with its source), planned as reported by bench/preflight_accuracy.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench.preflight_accuracy import accuracy, evaluate, load_cases, plan_case
from launch import memory, preflight

CASES = load_cases()
MEASURED = json.loads((Path(__file__).parent / "data" / "gpu_cases_h100.json").read_text())


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
    assert {text.split("gpu=")[1].split()[0] for text in joined} >= {"h100", "a40", "h20"}
    # issue #27's shapes: a critic (gae), HSDP (fsdp_size below the GPU count), verl 0.9's SGLang examples
    assert any("adv_estimator=gae" in text for text in joined)
    assert any("fsdp_size=2" in text and "n_gpus_per_node=8" in text for text in joined)
    assert any("rollout.name=sglang" in text for text in joined)


def test_accuracy_on_public_cases(results: dict[str, dict]):
    """22 of 22 since the H100 measurements (tests/data/gpu_cases_h100.json): the one-GPU cases are predicted from
    measured coefficients; the multi-GPU ones also depend on gpu.nccl_gib_per_communicator, which h100's profile
    takes from these same searches (any value in 2.4-3.0 GiB gets all 22 right), so they are not an independent
    check of it. 29 of 29 with issue #27's seven (a critic under gae, HSDP on H20s, verl 0.9's SGLang examples),
    which were added without changing the estimator. bench/preflight_accuracy.py prints each case."""
    wrong = [name for name, result in results.items() if not result["right"]]
    assert accuracy(list(results.values())) >= 0.90, wrong


@pytest.mark.parametrize("name", ["qwen2-7b GRPO 2xH800 (verl MIN)", "qwen2-14b GRPO 4xH800 (verl MIN)"])
def test_verl_minimum_configurations_fit_with_the_jobs_flash_attn(results: dict[str, dict], name: str):
    assert results[name]["predicted"] == "fit", results[name]


@pytest.mark.parametrize(
    "name, outcome",
    [
        ("qwen2_5_14b LoRA 2xH100 nproc_per_gpu 48", "fit"),
        ("qwen2_5_14b LoRA 2xH100 nproc_per_gpu 64", "oom"),
        ("qwen2_5_32b LoRA 4xH100 nproc_per_gpu 40", "fit"),
        ("qwen2_5_32b LoRA 4xH100 nproc_per_gpu 48", "oom"),
        ("qwen2_5_72b LoRA 8xH100 nproc_per_gpu 20", "fit"),
        ("qwen2_5_72b LoRA 8xH100 nproc_per_gpu 24", "oom"),
        ("qwen2_5_1_5b LoRA 1xH100 nproc_per_gpu 128", "fit"),
        ("qwen2_5_7b LoRA 1xH100 nproc_per_gpu 112", "oom"),
    ],
)
def test_verl_lora_cases_around_where_they_stop_fitting(results: dict[str, dict], name: str, outcome: str):
    """Each search's last point that ran and first that did not. Planned on this machine, which has no vLLM: verl's
    engine check is skipped, never a refusal."""
    assert results[name]["predicted"] == outcome, results[name]


@pytest.mark.parametrize(
    "name, outcome",
    [
        ("qwen2.5-0.5b PPO+critic (gae) 1 GPU prompt 1024 response 512 (verl baseline log)", "fit"),
        ("TinyZero qwen2.5-3b PPO+critic (gae) 2xH100 as scripted", "oom"),
        ("DAPO qwen2.5-math-7b colocate 16xH20 HSDP fsdp_size 2 (verl one-step-off doc)", "fit"),
        ("DAPO qwen2.5-math-7b colocate 32xH20 HSDP fsdp_size 8 (verl fully-async doc)", "fit"),
        ("verl 0.9 SGLang multi-turn qwen2.5-3b GRPO 8 GPUs (example script)", "fit"),
        ("verl 0.9 SGLang multi-turn qwen2.5-3b GRPO 4 GPUs TP 2 engine 0.5 (example script)", "fit"),
    ],
)
def test_issue_27_shapes_as_reported(results: dict[str, dict], name: str, outcome: str):
    assert results[name]["predicted"] == outcome, results[name]


@pytest.mark.parametrize(
    "name",
    [
        "qwen2.5-0.5b PPO+critic (gae) 1 GPU prompt 1024 response 512 (verl baseline log)",
        "TinyZero qwen2.5-3b PPO+critic (gae) 2xH100 as scripted",
    ],
)
def test_gae_cases_count_the_critic(name: str):
    """A gae case is judged with the critic on its GPUs: its update and value passes are phases of the verdict, and
    its resident states sit in the actor's phases."""
    spec = next(spec for spec in CASES if spec["name"] == name)
    cfg, plan = plan_case(spec)
    verdict = preflight.check_plan(cfg, plan, {})
    assert {"critic update", "values"} <= set(verdict.phases), sorted(verdict.phases)
    assert verdict.knobs is not None and verdict.knobs.critic is True


MEASURED_ROWS = [
    (case, label) for case in MEASURED["cases"] for label in ("train", "train_half", "train_quarter", "logprob")
]


@pytest.mark.parametrize("case, label", MEASURED_ROWS, ids=[f"{c['name']}-{label}" for c, label in MEASURED_ROWS])
def test_one_gpu_cases_as_measured_on_the_h100(case: dict, label: str):
    """bench/gpu_cases.py built each one-GPU LoRA case as verl does (FSDP, LoRA on every linear, recomputation,
    flash-attn's cross-entropy with the compiled entropy) and measured its training and log-prob micro-batches.
    The estimator's bytes for the same tokens: never more than 3 % under what torch allocated, at most 12 % over
    (its gathered-unit and layer terms are rounded up); with the margins, not under what the card held."""
    measured = case[label]
    if "allocated_gib" not in measured:  # 7B at 128 sequences ran out of memory on the card, as verl reported
        assert case["outcome_reported"] == "oom" and "out_of_memory" in measured
        return
    spec = next(spec for spec in CASES if spec["name"] == case["name"])
    cfg, plan = plan_case(spec)
    verdict = preflight.check_plan(cfg, plan, {})
    knobs = verdict.knobs
    assert knobs is not None
    tokens = measured["sequences"] * case["sequence_tokens"]
    # as measured: the kit's AdamW is torch's default (foreach), whatever the case's profile sets
    knobs = replace(knobs, train_tokens=tokens, logprob_tokens=tokens, optimizer_temporaries=True)
    arch = memory.Architecture.from_llm(plan.llm)
    capacity = float(cfg.gpu.usable_gib)
    phase = (memory.logprob_phase if label == "logprob" else memory.training_phase)(arch, knobs, capacity)
    margins = sum(term.gib for term in phase.terms if term.name in ("fragmentation", *memory.OUTSIDE_TORCH_TERMS))
    ratio = measured["allocated_gib"] / (phase.peak_gib - margins)
    assert 0.88 <= ratio <= 1.03, f"allocated: measured / predicted = {ratio:.3f}"
    if measured["total_gib"] >= 0.95 * MEASURED["capacity_gib"]:  # where the card filled, the whole footprint too
        assert phase.peak_gib >= measured["total_gib"] - 0.1, phase.arithmetic()
