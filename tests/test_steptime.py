"""The step-time model (launch/steptime.py) against published verl step times, and the properties any such model must
keep: more GPUs never slower, longer responses never quicker to generate, a critic and offload cost time, TP groups
the engines. Planned as bench/step_time.py plans (offline, no GPU)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest

from bench.step_time import GOAL, TOLERANCE, evaluate, load_cases, plan_case, within
from launch.calibration import model_inputs
from launch.memory import Architecture, Knobs
from launch.steptime import Card, Lengths, StepTime, forecast

# a 7B GRPO run on one 8 x H100 node, planned as a user would (the bench's way)
BASE = {
    "id": "unit",
    "plan": {
        "gpu": "h100",
        "llm": "qwen2_5_7b",
        "overrides": [
            "algorithm.adv_estimator=grpo",
            "data.train_batch_size=256",
            "actor_rollout_ref.rollout.n=8",
            "actor_rollout_ref.actor.ppo_mini_batch_size=64",
            "data.max_prompt_length=1024",
            "data.max_response_length=4096",
        ],
        "expect": {"prompt_tokens": 200, "response_tokens": 1000},
    },
}


def with_overrides(*extra: str) -> dict[str, Any]:
    return {**BASE, "plan": {**BASE["plan"], "overrides": [*BASE["plan"]["overrides"], *extra]}}


@pytest.fixture(scope="module")
def base() -> tuple[Architecture, Knobs, Card, dict[str, Any], Lengths]:
    plan = plan_case(BASE)
    inputs = model_inputs(plan)
    assert inputs is not None and plan.time is not None
    arch, knobs, card, _ = inputs
    return arch, knobs, card, plan.verl, plan.time.lengths


def at(base: tuple, critic: bool = False, lengths: Lengths | None = None, **knobs: Any) -> StepTime:
    arch, base_knobs, card, verl, base_lengths = base
    return forecast(arch, replace(base_knobs, **knobs), card, verl, lengths or base_lengths, critic)


def test_published_step_times_are_met_on_three_quarters_of_the_cases():
    """issue #25's acceptance, deterministic: each FSDP case of tests/data/step_time_cases.yaml planned with its
    config and mean lengths (launch.expect.*); its predicted step within +-35 % of the measured one on >= 75 %."""
    results = [evaluate(case) for case in load_cases()]
    assert len(results) >= 8
    misses = {r["id"]: f"{r['step']['error']:+.0%}" for r in results if abs(r["step"]["error"]) > TOLERANCE}
    assert within(results) >= GOAL, f"outside +-{TOLERANCE:.0%}: {misses} (python bench/step_time.py prints each phase)"


def test_more_gpus_are_never_slower_for_the_same_batch(base):
    steps = [at(base, n_gpus=n, gpus_per_node=min(n, 8)).step_s for n in (8, 16, 32, 64, 128)]
    assert all(later <= earlier for earlier, later in itertools.pairwise(steps)), steps


def test_generation_grows_with_the_response_length(base):
    times = [at(base, lengths=Lengths(200.0, float(r), "test")).phases_s["generate"] for r in (100, 500, 1000, 3000)]
    assert all(later > earlier for earlier, later in itertools.pairwise(times)), times


def test_a_critic_adds_a_value_pass_and_its_own_update(base):
    grpo, gae = at(base), at(base, critic=True)
    assert gae.phases_s["log_prob"] > grpo.phases_s["log_prob"]
    assert gae.phases_s["update"] > grpo.phases_s["update"]
    assert gae.inputs["forward_passes"] == grpo.inputs["forward_passes"] + 1


def test_the_critic_through_planning():
    """adv_estimator=gae on the command line: the plan trains a critic and its phases say so."""
    grpo, gae = plan_case(BASE).time, plan_case(with_overrides("algorithm.adv_estimator=gae")).time
    assert grpo is not None and gae is not None
    assert gae.inputs["critic"] and not grpo.inputs["critic"]
    assert gae.phases_s["log_prob"] > grpo.phases_s["log_prob"] and gae.phases_s["update"] > grpo.phases_s["update"]


def test_param_and_optimizer_offload_add_update_time(base):
    plain = at(base).phases_s["update"]
    params = at(base, param_offload=True).phases_s["update"]
    both = at(base, param_offload=True, optimizer_offload=True).phases_s["update"]
    assert plain < params < both


def test_tensor_parallel_engines_group_the_gpus(base):
    tp1, tp2, tp4 = (at(base, rollout_tp=tp).inputs["engines"] for tp in (1, 2, 4))
    assert (tp1, tp2, tp4) == (8, 4, 2)
