"""Megatron's hybrid CPU optimizer (the whole optimizer state kept and stepped on the CPU, as verl's
examples/grpo_trainer/run_qwen3moe-30b_megatron_96gb.sh sets it) is one of the preflight's searched fixes, printed in a
form Hydra takes as printed; a misfit nothing searched fixes names it among the knobs beyond the search unless the run
set it."""

from __future__ import annotations

from pathlib import Path

from conftest import compose_config, cpu_facts

from launch import preflight, render
from launch.megatron_memory import HYBRID, MegatronKnobs, fixes_beyond
from launch.plan import make_plan

QWEN3_MOE_EP8 = (
    "backend=megatron",
    "gpu=h100",
    "llm=qwen3_30b_a3b",
    "actor_rollout_ref.actor.megatron.expert_model_parallel_size=8",
)
OPTIMIZER = "actor_rollout_ref.actor.optim.override_optimizer_config"


def planned(*overrides: str):
    cfg = compose_config(*overrides)
    return cfg, make_plan(cfg, cpu_facts(), list(overrides), Path("/tmp"), "python")


def test_a_misfit_the_hybrid_cpu_optimizer_fixes_gets_it_as_its_cheapest_fix():
    """Qwen3-30B-A3B at EP 8 on 8 H100s: 42.7 GiB of optimizer state a GPU, which optimizer_offload brings back for
    the update; the hybrid CPU optimizer keeps it off the card through the update, and the search finds it (before
    it did, the plan said only "no fix found")."""
    cfg, plan = planned(*QWEN3_MOE_EP8)
    verdict = preflight.judge(cfg, plan.verl, plan.llm, plan.overrides, {})[0]
    hybrid = [f"{OPTIMIZER}.optimizer_cpu_offload=true", f"{OPTIMIZER}.optimizer_offload_fraction=1.0"]
    pasted = [f"++{override}" for override in (*hybrid, f"{OPTIMIZER}.use_precision_aware_optimizer=true")]
    assert not verdict.fits and set(pasted) <= set(verdict.first_fitting_fixes), verdict.first_fitting_fixes
    assert " ".join(pasted) in HYBRID
    cfg, with_it = planned(*QWEN3_MOE_EP8, *verdict.first_fitting_fixes)  # Hydra takes it as printed
    fixed = preflight.judge(cfg, with_it.verl, with_it.llm, with_it.overrides, {})[0]
    assert fixed.fits and fixed.phases["training"].terms["optimizer"] == 0.0, fixed.phases["training"].terms
    assert HYBRID not in fixes_beyond(MegatronKnobs.from_verl(with_it.verl))


def test_no_fix_found_names_the_hybrid_cpu_optimizer():
    """Qwen2.5-72B at TP 4 on one node of 4 H100s: nothing searched fits (its fp32 gradients alone fill the card),
    and the knobs beyond the search name the hybrid CPU optimizer in the form Hydra takes."""
    cfg, plan = planned(
        "backend=megatron",
        "gpu=h100",
        "llm=qwen2_5_72b",
        "trainer.n_gpus_per_node=4",
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
    )
    verdict = preflight.judge(cfg, plan.verl, plan.llm, plan.overrides, {})[0]
    assert not verdict.fits and not verdict.first_fitting_fixes
    assert HYBRID in verdict.beyond and HYBRID in "\n".join(render.render_preflight(verdict))
