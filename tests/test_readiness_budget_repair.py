"""A token budget a gpu profile set shorter than one sequence is raised by readiness's repair
(launch/readiness.py profile_budgets_hold_one_sequence): for every profile, inherited ones too, and plan.json's
changed_from_verl credits the raised value to the repair, not to the profile that set the shorter one."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import compose_config

from launch.run import plan_job
from launch.rundir import Plan

ACTOR_BUDGET = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"
LOG_PROB_BUDGET = "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu"
# 4096-token prompts (guru_baseline) + these responses: longer than every budget a40's family sets
LONG = ["llm=qwen2_5_0_5b", "data.max_response_length=28000"]


@pytest.fixture(autouse=True)
def own_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))


def dry_run(tmp_path: Path, *overrides: str) -> Plan:
    cfg = compose_config("cluster=local", f"cluster.shared_dir={tmp_path}", "launch.dry_run=true", *overrides)
    return plan_job(cfg, list(overrides))


@pytest.mark.parametrize("gpu", ["a40", "l40s", "a6000"])
def test_a_profile_budget_shorter_than_one_sequence_is_raised_for_inherited_profiles_too(tmp_path: Path, gpu: str):
    """l40s and a6000 take a40's 12288/24576 budgets through their defaults list: the repair raised only a40's, and
    l40s and a6000 were refused for a budget the user never set."""
    plan = dry_run(tmp_path, f"gpu={gpu}", *LONG)
    actor, rollout = plan.verl["actor_rollout_ref"]["actor"], plan.verl["actor_rollout_ref"]["rollout"]
    assert (actor["ppo_max_token_len_per_gpu"], rollout["log_prob_max_token_len_per_gpu"]) == (32096, 32096)
    said = [w for w in plan.warnings if w.startswith(f"{ACTOR_BUDGET}=12288 (gpu={gpu}) cannot hold one sequence")]
    assert len(said) == 1 and said[0].endswith(f"raised to 32096; set {ACTOR_BUDGET} yourself to choose another")


def test_a_raised_budget_is_credited_to_the_readiness_repair_in_changed_from_verl(tmp_path: Path):
    plan = dry_run(tmp_path, "gpu=a40", *LONG)
    by = {change.key: (change.value, change.by) for change in plan.changed_from_verl}
    assert by[ACTOR_BUDGET] == (32096, "rlaunch: readiness repair")
    assert by[LOG_PROB_BUDGET] == (32096, "rlaunch: readiness repair")
    # a budget of the profile's that holds one sequence stays the profile's
    assert by["actor_rollout_ref.rollout.gpu_memory_utilization"][1] == "gpu=a40"
    # one the user typed is theirs: never raised, so verl's composition of the user's keys has it too
    typed = dry_run(tmp_path, "gpu=a40", *LONG, f"{ACTOR_BUDGET}=40000")
    assert ACTOR_BUDGET not in {change.key for change in typed.changed_from_verl}
    assert {change.key: change.by for change in typed.changed_from_verl}[LOG_PROB_BUDGET] == "rlaunch: readiness repair"
