"""The cheapest fix a misfit's plan names: minimal (no fix the others do not need), clear of the band around the card
where the verdict is too close to call, the same in the plan's `cheapest fix` and `what fits`, the refusal and what
launch.preflight=fix applies, and taken by Hydra as printed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import compose_config, cpu_facts

from launch import preflight, render
from launch.plan import make_plan
from launch.verdict import Verdict

OPTIMIZER_OFFLOAD = "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true"


def judged(*overrides: str) -> tuple[Verdict, dict[str, Any]]:
    cfg = compose_config(*overrides)
    plan = make_plan(cfg, cpu_facts(), list(overrides), Path("/tmp"), "python")
    return preflight.judge(cfg, plan.verl, plan.llm, plan.overrides, {})


def clear(verdict: Verdict) -> bool:
    """Fits, and no phase within the estimate's band: a verdict a fix must reach."""
    return verdict.fits and not verdict.at_the_edge


def test_the_cheapest_fix_carries_no_cheaper_fix_it_does_not_need():
    """Qwen2.5-14B on 4 H100s: NVLS off and a halved token budget were tried before optimizer offload, which fits
    alone (73.5 of 79.1 GiB); the plan named all three with the log-prob budget halved too, `what fits` the offload."""
    base = ("gpu=h100", "llm=qwen2_5_14b", "trainer.n_gpus_per_node=4")
    verdict, _ = judged(*base)
    assert not verdict.fits
    assert verdict.cheapest_fix == (OPTIMIZER_OFFLOAD,), verdict.cheapest_fix
    assert verdict.fits_with is not None and verdict.fits_with.on_your_gpus is not None
    assert verdict.fits_with.on_your_gpus.overrides == verdict.cheapest_fix
    assert clear(judged(*base, *verdict.cheapest_fix)[0])
    # 32B on two nodes of A100-40s: a larger rollout TP fits alone; the engine's context cap and param offload tried
    # before it are no part of the fix
    base = ("gpu=a100_40", "llm=qwen2_5_32b", "trainer.nnodes=2")
    verdict, _ = judged(*base)
    assert verdict.cheapest_fix == ("actor_rollout_ref.rollout.tensor_model_parallel_size=4",), verdict.cheapest_fix
    assert clear(judged(*base, *verdict.cheapest_fix)[0])


def test_what_fits_names_the_cheapest_fix_on_the_runs_own_gpus():
    """Qwen2.5-32B on 8 H200s: the cheapest fix lowers the engine's fraction; `what fits` had said optimizer offload,
    another change than the plan's cheapest."""
    verdict, _ = judged("gpu=h200", "llm=qwen2_5_32b")
    assert verdict.fits_with is not None and verdict.fits_with.on_your_gpus is not None
    assert verdict.fits_with.on_your_gpus.overrides == verdict.cheapest_fix
    assert verdict.fits_with.summary.startswith(f"fits on 8 with {verdict.fits_with.on_your_gpus.change} ")
    assert clear(judged("gpu=h200", "llm=qwen2_5_32b", *verdict.cheapest_fix)[0])


def test_fix_applies_the_cheapest_fix_the_plan_prints():
    """Qwen2.5-32B on 8 H100s (and on 8 A40s): the plan printed one set, launch.preflight=fix applied the longer
    cumulative chain (halved token budgets, NVLS off) besides it."""
    for gpu in ("gpu=h100", "gpu=a40"):
        base = (gpu, "llm=qwen2_5_32b")
        verdict, _ = judged(*base)
        assert verdict.cheapest_fix
        _, proposed = judged(*base, "launch.preflight=fix")
        assert preflight.typed_overrides(verdict.cheapest_fix) == proposed, (gpu, verdict.cheapest_fix, proposed)
        assert " ".join(verdict.cheapest_fix) in render.refusal(verdict, "job").splitlines()[0]
        assert clear(judged(*base, *verdict.cheapest_fix)[0])


def test_a_fix_that_lands_in_the_band_around_the_card_is_no_fix():
    """Qwen3-8B on 2 H100s: a lower engine fraction and NVLS off land the update at 79.0 of 79.1 GiB, within the
    band where the verdict is too close to call; the cheapest fix is the GPU count `what fits` names."""
    base = ("gpu=h100", "llm=qwen3_8b", "trainer.n_gpus_per_node=2")
    verdict, _ = judged(*base)
    fixed, _ = judged(*base, *verdict.cheapest_fix)
    assert clear(fixed), fixed.arithmetic
    assert verdict.gpus_of(verdict.cheapest_fix) == 4
    assert verdict.fits_with is not None and "it needs 4 GPUs" in verdict.fits_with.summary


def test_the_gpu_count_search_clears_the_band_too():
    """Qwen2.5-72B on two nodes of A100-40s: 512 GPUs (64 nodes, rollout TP 8) left the update at 39.1 of 39.4 GiB,
    too close to call, and were named as its fix; no count up to 64 nodes clears the band, so none is named."""
    base = ("gpu=a100_40", "llm=qwen2_5_72b", "trainer.nnodes=2")
    verdict, _ = judged(*base)
    if verdict.cheapest_fix:
        assert clear(judged(*base, *verdict.cheapest_fix)[0])
    assert "trainer.nnodes=64" not in verdict.cheapest_fix
