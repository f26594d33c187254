"""Bad values a probe of verl's examples and misspellings found planned in silence or explained wrongly: each is still
refused, or still explained, the way tests/test_bad_values.py's table cannot say (a key that did move keeps the
moved-key explainer's answer)."""

from __future__ import annotations

from pathlib import Path


def test_a_legacy_reward_model_key_that_moved_is_still_named_where_verl_has_it(cli, tmp_path: Path):
    """reward_model.* keys verl 0.9.1 has under reward.* are moves (the moved-key explainer names the place); only
    the legacy reward worker's own switches are told to go."""
    result = cli("reward_model.sandbox_fusion.url=http://sandbox:8080", "launch.dry_run=true")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "write reward.sandbox_fusion.url=..." in line, line


def test_the_new_checks_leave_what_verl_runs_as_asked_to_plan(cli, tmp_path: Path):
    """Each new check judges only where verl reads the key: PF-PPO's method only with algorithm.use_pf_ppo, the
    critic's Ulysses size where the deprecated key agrees with its engine's, a whole seed, a known schedule."""
    result = cli(
        "algorithm.adv_estimator=gae",
        "critic.ulysses_sequence_parallel_size=2",
        "critic.fsdp.ulysses_sequence_parallel_size=2",
        "critic.ppo_mini_batch_size=64",
        "data.seed=7",
        "algorithm.pf_ppo.reweight_method=poww",
        "actor_rollout_ref.actor.optim.warmup_style=cosine",
        "launch.dry_run=true",
    )
    assert result.returncode == 0, result.stderr[-3000:]
