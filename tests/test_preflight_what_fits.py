"""A misfit's `cheapest fix` and `what fits` as pasted verl scripts met them (helper-28's probe): the critic's own
fixes searched before more GPUs, the free engine-context fix never bundled with GPUs it does not need, and `what fits`
naming the change the cheapest fix names, NVLS off by its override."""

from __future__ import annotations

from pathlib import Path

from conftest import compose_config, cpu_facts

from launch import preflight
from launch.memory import Architecture, host_ram_per_node, with_changes
from launch.plan import make_plan
from launch.verdict import Verdict

GAE_7B = ("gpu=h100", "llm=qwen2_5_7b", "algorithm.adv_estimator=gae")
# verl's LoRA scripts on one A40 (docs/background.md#a40-oom): the shipped a40 profile offloads the trainer, so the
# run's host RAM (67.8 GiB/node) is above the profile's share for one GPU (64 GiB)
LLAMA_LORA_ONE_A40 = (
    "gpu=a40",
    "llm=llama3_1_8b",
    "trainer.n_gpus_per_node=1",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.model.lora_rank=32",
    "actor_rollout_ref.model.target_modules=all-linear",
)


def planned(*overrides: str) -> tuple[Verdict, Architecture]:
    """The plan's verdict and the model it judged."""
    cfg = compose_config(*overrides)
    plan = make_plan(cfg, cpu_facts(), list(overrides), Path("/tmp"), "python")
    return preflight.judge(cfg, plan.verl, plan.llm, plan.overrides, {})[0], Architecture.from_llm(plan.llm)


def judged(*overrides: str) -> Verdict:
    return planned(*overrides)[0]


def clear(verdict: Verdict) -> bool:
    return verdict.fits and not verdict.at_the_edge


def test_a_critic_misfit_is_fixed_by_the_critics_own_checkpointing_not_more_gpus() -> None:
    """verl's ppo_trainer/run_qwen2.5-32b.sh sets critic.model.enable_gradient_checkpointing=False: its critic update
    saved every layer's activations (342 GiB) and the cheapest fix was 8x the GPUs, while the critic's checkpointing
    alone fits on the script's own GPUs. Here 7B with a critic on 8 H100s: no GPU count fits it as it is."""
    base = (*GAE_7B, "critic.model.enable_gradient_checkpointing=false")
    verdict = judged(*base)
    assert verdict.misfit == "critic update", verdict.arithmetic
    assert verdict.cheapest_fix == ("critic.model.enable_gradient_checkpointing=true",), verdict.cheapest_fix
    assert verdict.fits_with is not None
    assert verdict.fits_with.summary.startswith("fits on 8 with critic gradient checkpointing "), verdict.fits_with
    assert clear(judged(*base, *verdict.cheapest_fix))


def test_the_critics_token_budget_is_searched_where_it_is_what_does_not_fit() -> None:
    """A critic whose token budget is the misfit gets it halved (verl 0.9.1's critic engine packs by tokens at
    critic.ppo_infer_max_token_len_per_gpu), at what a GPU holds of it: a budget above the rank's share of the
    mini-batch holds only the share."""
    verdict, arch = planned(*GAE_7B)
    knobs = verdict.knobs
    assert knobs is not None and knobs.critic and knobs.critic_dynamic_bsz
    wide = with_changes(knobs, critic_tokens=knobs.critic_tokens * 8, mini_batch_sequences=1 << 16)
    held = wide.critic_train_tokens_on_gpu
    fixes = {fix.words: fix for fix in preflight.candidate_fixes(arch, wide, verdict.capacity_gib)}
    halved = fixes[f"critic token budget {held // 2}"]
    assert preflight.overrides_for(halved.changes, wide) == {"++critic.ppo_infer_max_token_len_per_gpu": held // 2}
    assert with_changes(wide, **halved.changes).critic_train_tokens_on_gpu == held // 2


def test_the_free_engine_context_fix_adds_no_gpus_the_run_does_not_need() -> None:
    """Llama-3.1-8B LoRA on one A40: capping the engine's context at prompt + response fits on the one GPU, clear of
    the band; the cheapest fix had added a second GPU to it, because the fix search held each fix to the profile's
    host RAM share (64 GiB for one A40) which the run as it is already exceeds (it gets --mem of 1.2 x its own)."""
    verdict = judged(*LLAMA_LORA_ONE_A40)
    assert verdict.knobs is not None
    context = f"actor_rollout_ref.rollout.max_model_len={verdict.knobs.sequence}"
    assert verdict.cheapest_fix == (context,), verdict.cheapest_fix
    assert verdict.gpus_of(verdict.cheapest_fix) is None
    assert verdict.fits_with is not None and verdict.fits_with.summary.startswith("fits on 1 with engine context ")
    assert clear(judged(*LLAMA_LORA_ONE_A40, context))


def test_a_fix_may_take_the_host_ram_the_run_takes_but_no_more() -> None:
    """The host RAM a fix may take: the profile's share, or the run's own where that is more; an offload that adds to
    it is still held to it."""
    verdict, arch = planned(*LLAMA_LORA_ONE_A40)
    knobs = verdict.knobs
    assert knobs is not None
    own = host_ram_per_node(arch, knobs)
    assert own > 64.0
    assert preflight.host_budget_per_gpu(arch, knobs, 64.0) == own
    assert preflight.host_budget_per_gpu(arch, knobs, 0.0) == 0.0  # not checked stays not checked
    assert preflight.host_budget_per_gpu(arch, knobs, 256.0) == 256.0


def test_what_fits_names_the_cheapest_fix_also_where_it_changes_a_key_the_user_set() -> None:
    """verl's ppo_trainer/run_deepseek7b_llm_sp2.sh on 8 H100s sets the engine's fraction (0.6): the cheapest fix
    lowers it to 0.55, `what fits` left the user's key out and said "fits on 8 with NVLS off; without NVLS off it needs
    16 GPUs", which the cheapest fix contradicts."""
    base = (
        "gpu=h100",
        "llm=deepseek_llm_7b",
        "algorithm.adv_estimator=gae",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
        "critic.fsdp.ulysses_sequence_parallel_size=2",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
    )
    verdict = judged(*base)
    assert verdict.cheapest_fix == ("actor_rollout_ref.rollout.gpu_memory_utilization=0.55",), verdict.cheapest_fix
    found = verdict.fits_with
    assert found is not None and found.on_your_gpus is not None
    assert found.on_your_gpus.overrides == verdict.cheapest_fix
    assert found.summary.startswith("fits on 8 with engine memory fraction 0.55 "), found.summary
    assert "NVLS" not in found.summary


def test_nvls_off_is_named_by_its_override() -> None:
    """`what fits` said "NVLS off", which no key of verl's or rlaunch's is: it names the override the cheapest fix
    prints."""
    verdict, arch = planned("gpu=h100", "llm=qwen2_5_7b")
    assert verdict.knobs is not None and verdict.knobs.communicator_gib_without_nvls
    words = [fix.words for fix in preflight.candidate_fixes(arch, verdict.knobs, verdict.capacity_gib)]
    assert "NVLS off (++cluster.env.NCCL_NVLS_ENABLE='0')" in words, words


def test_what_fits_says_where_a_fix_on_the_runs_own_gpus_is_too_close_to_call() -> None:
    """Qwen3-8B on 2 H100s: a lower engine fraction and NVLS off fit the 2 GPUs only within the band around the card,
    so the cheapest fix is 4 GPUs; `what fits` said "no offload or rollout TP fits it on 2", as if the 2 GPUs lacked
    the memory, not the estimate the certainty."""
    verdict = judged("gpu=h100", "llm=qwen3_8b", "trainer.n_gpus_per_node=2")
    assert verdict.gpus_of(verdict.cheapest_fix) == 4
    found = verdict.fits_with
    assert found is not None and found.on_your_gpus is None
    assert found.summary.startswith("on 2 only too close to call with "), found.summary
    assert "(within the estimate's band around the card); as it is it needs 4 GPUs" in found.summary
    assert found.summary.endswith("it needs 4 GPUs"), found.summary


def test_the_critics_token_budget_fix_is_taken_where_the_user_set_the_budget() -> None:
    """The user's own `+critic.ppo_infer_max_token_len_per_gpu=65536` (7B with a critic on 16 A100-40s): the cheapest
    fix halves it, printed with `++`, which Hydra takes after the user's `+` (a second `+` is refused)."""
    base = ("gpu=a100_40", "llm=qwen2_5_7b", "algorithm.adv_estimator=gae", "trainer.nnodes=2")
    user = "+critic.ppo_infer_max_token_len_per_gpu=65536"
    verdict = judged(*base, user)
    assert verdict.cheapest_fix == ("++critic.ppo_infer_max_token_len_per_gpu=32768",), verdict.cheapest_fix
    assert clear(judged(*base, user, *verdict.cheapest_fix))
