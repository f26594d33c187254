"""A Megatron misfit the search cannot fix names Megatron's hybrid CPU optimizer among the knobs beyond the search
(the whole optimizer state kept and stepped on the CPU, as verl's
examples/grpo_trainer/run_qwen3moe-30b_megatron_96gb.sh sets it), in a form Hydra takes as printed, unless the run set
it."""

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


def test_no_fix_found_names_the_hybrid_cpu_optimizer():
    """Qwen3-30B-A3B at EP 8 on 8 H100s: no searched change fits, and the hint list omitted the hybrid CPU optimizer,
    which holds its 42.7 GiB of optimizer state off the card through the update (optimizer_offload brings it back)."""
    cfg, plan = planned(*QWEN3_MOE_EP8)
    verdict = preflight.judge(cfg, plan.verl, plan.llm, plan.overrides, {})[0]
    assert not verdict.fits and not verdict.cheapest_fix
    assert HYBRID in verdict.beyond and HYBRID in "\n".join(render.render_preflight(verdict))
    hybrid = [f"{OPTIMIZER}.optimizer_cpu_offload=true", f"{OPTIMIZER}.optimizer_offload_fraction=1.0"]
    pasted = [f"++{override}" for override in (*hybrid, f"{OPTIMIZER}.use_precision_aware_optimizer=true")]
    assert " ".join(pasted) in HYBRID
    cfg, with_it = planned(*QWEN3_MOE_EP8, *pasted)  # Hydra takes it as printed, and the estimate counts it
    optimizer = preflight.judge(cfg, with_it.verl, with_it.llm, with_it.overrides, {})[0].phases["training"].terms
    assert optimizer["optimizer"] == 0.0, optimizer
    assert HYBRID not in fixes_beyond(MegatronKnobs.from_verl(with_it.verl))
