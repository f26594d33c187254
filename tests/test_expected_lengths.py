"""launch.expect.prompt_tokens / .response_tokens above the length verl never exceeds (rollout.prompt_length /
response_length, data.max_*_length unless set): refused in one line naming the key, the value, the limit and the fix
(launch/ranges.py check_expected_lengths); at the limit, still planned."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import compose_config, run_here

from launch.errors import UserError
from launch.lengths import typical_lengths
from launch.ranges import check_ranges


@pytest.mark.parametrize(
    ("overrides", "refusal"),
    [
        (
            ["data.max_response_length=1024", "launch.expect.response_tokens=1025"],
            "launch.expect.response_tokens=1025: above the response length limit data.max_response_length=1024, past "
            "which verl's agent loop cuts a response at 1024 tokens",
        ),
        (
            ["data.max_prompt_length=512", "launch.expect.prompt_tokens=600"],
            "launch.expect.prompt_tokens=600: above the prompt length limit data.max_prompt_length=512, past which "
            "verl's agent loop keeps a prompt's last 512 tokens",
        ),
        (  # the engine's own limit, set below data's: the key to raise is the engine's
            ["actor_rollout_ref.rollout.response_length=2048", "launch.expect.response_tokens=3000"],
            "above the response length limit actor_rollout_ref.rollout.response_length=2048",
        ),
    ],
)
def test_an_expected_length_above_the_limit_is_refused(overrides: list[str], refusal: str):
    with pytest.raises(UserError) as refused:
        check_ranges(compose_config(*overrides))
    assert refusal in str(refused.value) and "\n" not in str(refused.value)
    assert "set launch.expect." in str(refused.value) and ", or raise " in str(refused.value)


def test_an_expected_length_at_the_limit_plans():
    check_ranges(compose_config("data.max_response_length=1024", "launch.expect.response_tokens=1024"))
    check_ranges(compose_config("launch.expect.prompt_tokens=1", "launch.expect.response_tokens=1"))


def test_the_cli_says_one_line_and_writes_nothing(tmp_path: Path):
    result = run_here("gpu=a40", "launch.expect.response_tokens=100000", "launch.dry_run=true", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("rlaunch: error: launch.expect.response_tokens=100000: above the response length")
    assert not (tmp_path / "runs").exists()


def test_the_typical_lengths_are_capped_at_the_engines_own_limits_where_they_are_lower():
    """The engine stops a response at actor_rollout_ref.rollout.response_length (and keeps a prompt's last
    prompt_length tokens): a run that sets them below data.max_*_length never sees half of the data's maximum."""
    cfg = compose_config(
        "data.max_prompt_length=1000",
        "data.max_response_length=4000",
        "actor_rollout_ref.rollout.response_length=1000",
    )
    typical = typical_lengths(cfg)
    assert (typical.prompt_tokens, typical.response_tokens) == (500, 500)
    assert (
        typical.source
        == "prompt: half of data.max_prompt_length; response: half of actor_rollout_ref.rollout.response_length"
    )
    assert typical_lengths(cfg, None, 3000).response_tokens == 1000
