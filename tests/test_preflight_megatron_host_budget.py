"""Megatron's fix search holds a fix to the same host RAM as FSDP's (preflight.host_budget): the profile's share, or
what the run as it is already takes where that is more. Held to the share alone, a Megatron run whose own offloads
already exceed it had every fix refused, however little host RAM the fix added."""

from __future__ import annotations

from conftest import compose_config
from test_preflight_what_fits import judged

from launch import preflight

# Qwen2.5-32B on 8 A40s at TP 4 with both offloads: the offloaded states and the sleeping engine's weights take
# 674 GiB of a node whose share is 8 x 64 = 512 GiB; the update misses the card by ~100 GiB
QWEN_32B_OFFLOADED = (
    "backend=megatron",
    "gpu=a40",
    "llm=qwen2_5_32b",
    "actor_rollout_ref.actor.megatron.param_offload=true",
    "actor_rollout_ref.actor.megatron.optimizer_offload=true",
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
)


def test_a_megatron_fix_may_take_the_host_ram_the_run_already_takes():
    verdict = judged(*QWEN_32B_OFFLOADED)
    cfg = compose_config(*QWEN_32B_OFFLOADED)
    share = float(cfg.gpu.host_ram_gib_per_gpu) * int(cfg.trainer.n_gpus_per_node)
    assert not verdict.fits and verdict.host_ram_gib_per_node > share, (verdict.host_ram_gib_per_node, share)
    assert verdict.first_fitting_fixes, "no fix found: the search held the fixes to the profile's share"
    assert verdict.fits_with is not None and verdict.fits_with.on_your_gpus is not None
    fix_host = verdict.fits_with.on_your_gpus.host_ram_gib_per_node
    assert share < fix_host <= verdict.host_ram_gib_per_node + 0.05, (fix_host, share)
    fixed = judged(*QWEN_32B_OFFLOADED, *verdict.first_fitting_fixes)  # Hydra takes it as printed, and it fits
    assert fixed.fits and not fixed.at_the_edge, {name: phase.peak_gib for name, phase in fixed.phases.items()}


def test_the_host_budget_is_the_share_or_the_runs_own_whichever_is_more():
    assert preflight.host_budget(674.0, 8, 64.0) == 674.0 / 8
    assert preflight.host_budget(100.0, 8, 64.0) == 64.0
    assert preflight.host_budget(674.0, 8, 0.0) == 0.0  # not checked stays not checked
