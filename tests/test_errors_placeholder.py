"""A pasted script's `<...>` placeholder (verl's run_deepseek671b_math_megatron_80gb.sh writes
actor_rollout_ref.model.path=<path_to_dsv3_config>) is said to be one the first time, not taken for a quoting slip
whose advice only leads to a second refusal."""

from __future__ import annotations

import pytest
from conftest import compose_config
from hydra.errors import OverrideParseException

from launch.errors import explain


def test_an_unquoted_placeholder_is_named_a_placeholder_not_a_quoting_problem():
    with pytest.raises(OverrideParseException) as raised:
        compose_config("algo=verl", "actor_rollout_ref.model.path=<path_to_dsv3_config>")
    said = explain(raised.value)
    assert said == (
        "actor_rollout_ref.model.path is a placeholder (value '<path_to_dsv3_config>'): give it a value on the "
        "command line (actor_rollout_ref.model.path=...)"
    )
    # a value Hydra cannot parse that is no placeholder still gets the quoting advice
    with pytest.raises(OverrideParseException) as raised:
        compose_config("algo=verl", "trainer.experiment_name=a<b")
    assert "quote the value for Hydra" in str(explain(raised.value))
