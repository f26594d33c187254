"""A key verl 0.9.1's config holds but its trainer does not read (a pasted script's actor.grad_clip, a critic token
budget the v1 trainer replaces) is said in the plan with the key verl reads: its value would change nothing."""

from __future__ import annotations

from pathlib import Path

from conftest import compose_config, cpu_facts

from launch.plan import make_plan


def warnings_of(*overrides: str) -> list[str]:
    cfg = compose_config(*overrides)
    return make_plan(cfg, cpu_facts(), list(overrides), Path("/tmp"), "python").warnings


def test_a_key_verl_does_not_read_is_said_with_the_one_it_reads():
    warnings = warnings_of(
        "actor_rollout_ref.actor.grad_clip=0.5", "algorithm.adv_estimator=gae", "critic.ppo_max_token_len_per_gpu=8192"
    )
    said = [warning for warning in warnings if "is not read by verl 0.9.1" in warning]
    assert len(said) == 2, warnings
    assert "actor_rollout_ref.actor.grad_clip" in said[0] and "actor_rollout_ref.actor.optim.clip_grad" in said[0]
    assert "critic.ppo_infer_max_token_len_per_gpu" in said[1]


def test_what_the_legacy_trainer_reads_is_not_said_under_it_and_nothing_is_said_unset():
    legacy = warnings_of("trainer.use_v1=false", "algorithm.adv_estimator=gae", "critic.ppo_max_token_len_per_gpu=8192")
    assert not any("is not read by verl" in warning for warning in legacy), legacy
    assert not any("is not read by verl" in warning for warning in warnings_of("algorithm.adv_estimator=gae"))


def test_the_critics_micro_batches_are_said_with_its_engines_keys_not_as_the_actors_ignored_knobs():
    """verl 0.9.1 hands the critic's engine only its token budgets: a pasted critic micro-batch (or use_dynamic_bsz)
    changes nothing, whatever the actor's batching; the warning had told the user to set the ACTOR's use_dynamic_bsz
    to use it (a probe of verl's own PPO examples)."""
    warnings = warnings_of(
        "algorithm.adv_estimator=gae", "critic.ppo_micro_batch_size_per_gpu=4", "critic.use_dynamic_bsz=false"
    )
    assert not any("ignored by verl" in warning and "critic." in warning for warning in warnings), warnings
    said = [warning for warning in warnings if "is not read by verl 0.9.1" in warning]
    assert len(said) == 2, warnings
    assert any("++critic.fsdp (++critic.megatron under backend=megatron).micro_batch_size_per_gpu" in w for w in said)


def test_a_key_given_twice_is_said_with_both_values():
    """Hydra keeps the last of a key set twice (a pasted script's value, then the user's "$@") without a word
    (helper-44's walkthrough)."""
    warnings = warnings_of("actor_rollout_ref.actor.optim.lr=1e-6", "actor_rollout_ref.actor.optim.lr=2e-6")
    assert "actor_rollout_ref.actor.optim.lr is given 2 times (1e-6, 2e-6): the last, 2e-6, is used" in warnings
    assert not [w for w in warnings_of("trainer.save_freq=5", "trainer.save_freq=5") if "given 2 times" in w]
