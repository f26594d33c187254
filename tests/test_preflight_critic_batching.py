"""A critic's micro-batches as verl 0.9.1 cuts them (memory.critic_batching): both trainers hand the critic's engine
config (critic.fsdp) only its token budgets, so whether it packs by tokens is the engine's own use_dynamic_bsz and,
without it, its micro-batches are the engine's micro_batch_size_per_gpu (update) and infer_micro_batch_size_per_gpu
(value pass); critic.use_dynamic_bsz and critic.ppo_micro_batch_size_per_gpu never reach it. The prediction reads
those, the fix search halves the one the engine reads (`++`: verl's yaml lacks it), and a critic engine without
dynamic batching or micro-batch is refused as verl would stop at its first pass."""

from __future__ import annotations

from collections.abc import Callable

from conftest import Result
from test_preflight_what_fits import judged, planned

from launch import preflight

SEQUENCE = 1024 + 4096
# Qwen2.5-7B PPO on 8 A100-80s, its critic's engine batched by micro-batches of 64 sequences (each rank's share of a
# critic mini-batch is 256 / 8 = 32, so it holds 32) and value passes of 8
CRITIC_64 = (
    "algo=verl",
    "gpu=a100_80",
    "llm=qwen2_5_7b",
    "algorithm.adv_estimator=gae",
    "data.max_prompt_length=1024",
    "data.max_response_length=4096",
    "++critic.fsdp.use_dynamic_bsz=false",
    "++critic.fsdp.micro_batch_size_per_gpu=64",
    "++critic.fsdp.infer_micro_batch_size_per_gpu=8",
)


def test_the_prediction_reads_the_micro_batches_the_critics_engine_reads():
    """critic.ppo_micro_batch_size_per_gpu (2 here) is not what the engine cuts by: the update holds the rank's whole
    share (32 sequences: the engine's 64 capped), the value pass the engine's infer micro-batch of 8."""
    verdict = judged(*CRITIC_64, "critic.ppo_micro_batch_size_per_gpu=2")
    knobs = verdict.knobs
    assert knobs is not None and not knobs.critic_dynamic_bsz
    assert (knobs.critic_micro_batch, knobs.critic_value_micro_batch) == (64, 8)
    assert knobs.critic_train_tokens_on_gpu == 32 * SEQUENCE
    assert knobs.critic_value_tokens_on_gpu == 8 * SEQUENCE


def test_a_critic_without_dynamic_batching_gets_the_micro_batch_fix_its_engine_reads():
    """Its update misses the card at 32 sequences a micro-batch; halving the engine's micro-batch to 16 fits on the
    same GPUs (the search had only more GPUs to offer: trainer.nnodes=2). The value pass fits, so its own
    micro-batch is left alone."""
    verdict = judged(*CRITIC_64)
    assert not verdict.fits and verdict.misfit == "critic update", verdict.misfit
    assert verdict.cheapest_fix == ("++critic.fsdp.micro_batch_size_per_gpu=16",), verdict.cheapest_fix
    fixed = judged(*CRITIC_64, *verdict.cheapest_fix)  # Hydra takes it as printed
    assert fixed.fits and not fixed.at_the_edge, {name: phase.peak_gib for name, phase in fixed.phases.items()}


def test_the_legacy_trainers_critic_budget_is_its_update_key():
    """trainer.use_v1=false: verl 0.9.1's legacy trainer gives the critic's update critic.ppo_max_token_len_per_gpu
    (trainer/ppo/ray_trainer.py init_workers), and the halved budget is said there."""
    legacy = ("algo=verl", "gpu=a100_80", "llm=qwen2_5_7b", "algorithm.adv_estimator=gae", "trainer.use_v1=false")
    verdict, arch = planned(*legacy, "critic.ppo_max_token_len_per_gpu=262144", "data.max_response_length=8192")
    knobs = verdict.knobs
    assert knobs is not None and not knobs.critic_v1 and knobs.critic_tokens == 262144
    assert knobs.critic_value_tokens == 32768  # its value pass: ppo_infer_max_token_len_per_gpu, verl's default
    fixes = {fix.words: fix for fix in preflight.candidate_fixes(arch, knobs, verdict.capacity_gib)}
    halved = next(fix for words, fix in fixes.items() if words.startswith("critic token budget"))
    assert set(preflight.overrides_for(halved.changes, knobs)) == {"critic.ppo_max_token_len_per_gpu"}


def test_a_critic_engine_without_dynamic_batching_or_micro_batch_is_refused_in_one_line(
    cli: Callable[..., Result],
):
    """verl 0.9.1 would stop at the critic's first pass (a None micro-batch); the critic's own key is named as not
    copied there."""
    result = cli(
        "algo=verl",
        "gpu=a100_80",
        "llm=qwen2_5_7b",
        "algorithm.adv_estimator=gae",
        "++critic.fsdp.use_dynamic_bsz=false",
        "critic.ppo_micro_batch_size_per_gpu=8",
        "launch.dry_run=true",
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "critic.fsdp.micro_batch_size_per_gpu is not set" in lines[0], lines
    assert "critic.ppo_micro_batch_size_per_gpu=8 is not copied there" in lines[0]
    assert "++critic.fsdp.micro_batch_size_per_gpu=N" in lines[0]
