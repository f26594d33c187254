"""One line for a value of the wrong type or shape, saying what to write: a list in brackets, a number in the key's
own unit, an open table's new entries each with a `+`; and no `+key` advice under a node verl builds into one of its
dataclasses (which refuses a key it lacks), whose refusal names the key's full path."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_here

PLAN = ("gpu=a40", "llm=qwen2_5_0_5b", "launch.skip_checks=[model,data,files]", "launch.dry_run=true")


def refusal(tmp_path: Path, *overrides: str) -> str:
    result = run_here(*PLAN, f"launch.runs_dir={tmp_path / 'runs'}", *overrides, cwd=tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize(
    ("override", "said"),
    [
        (
            "launch.skip_checks=data",
            "launch.skip_checks=data: must be a list, in brackets: write launch.skip_checks=[data]",
        ),
        ("mode.time_budget_min=1h", "mode.time_budget_min=1h: must be a whole number of minutes, without a unit"),
        ("cluster.max_requeues=two", "cluster.max_requeues=two: must be a whole number"),
        ("launch.hang.enabled=maybe", "launch.hang.enabled=maybe: must be true or false"),
        (
            "cluster.env={FOO:bar}",
            "cluster.env is a table whose new entries each take a +: write +cluster.env.FOO='bar'",
        ),
    ],
)
def test_a_value_of_the_wrong_type_or_shape_says_what_to_write(tmp_path: Path, override: str, said: str):
    assert said in refusal(tmp_path, override)


def test_an_open_tables_entries_pasted_as_said_plan(tmp_path: Path):
    result = run_here(*PLAN, f"launch.runs_dir={tmp_path / 'runs'}", "+cluster.env.FOO='bar'", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]


def test_no_plus_advice_under_a_node_verl_builds_into_its_dataclass(tmp_path: Path):
    """verl's omega_conf_to_dataclass builds actor.optim into FSDPOptimizerConfig: a `+` key there fails as verl
    checks the config, so it is not offered, and a `+` key typed anyway is named with its full path."""
    unknown = refusal(tmp_path, "actor_rollout_ref.actor.optim.lrr=1e-6")
    assert "+actor_rollout_ref" not in unknown and "into its FSDPOptimizerConfig, which takes no other key" in unknown
    added = refusal(tmp_path, "+actor_rollout_ref.actor.optim.lrr=1e-6")
    assert "actor_rollout_ref.actor.optim.lrr: no field of verl's FSDPOptimizerConfig" in added, added
    assert "+trainer.foo_bar=..." in refusal(tmp_path, "trainer.foo_bar=1")  # trainer is no dataclass of verl's


@pytest.mark.parametrize(
    ("override", "said"),
    [
        (  # a key of verl's SFT tree rft.sft does not set: added with +
            "rft.sft.data.micro_batch_size_per_gpu=3",
            "add a new key on purpose with +rft.sft.data.micro_batch_size_per_gpu=...",
        ),
        (  # one it lacks: not offered a + that stage 3 refuses, but where the name lives
            "rft.sft.micro_batch_size_per_gpu=0",
            "(it has micro_batch_size_per_gpu at rft.sft.data.micro_batch_size_per_gpu)",
        ),
        (
            "rft.sft.optim.lrr=1e-5",
            "(did you mean 'lr'?): verl's sft_trainer_engine (stage 3's trainer) has no optim.lrr",
        ),
    ],
)
def test_an_unknown_rft_sft_key_is_judged_against_verls_sft_tree(tmp_path: Path, override: str, said: str):
    line = refusal(tmp_path, "algo=rft", override)
    assert said in line, line
    assert "+" not in line or "rft.sft.data.micro_batch_size_per_gpu=3" == override, line
