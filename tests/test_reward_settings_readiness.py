"""rlaunch's own reward takes only RewardSettings' keys, each in its range (rewards/settings.py): what it would
refuse at every call, or run wrongly, is refused before the queue (launch/readiness.py), one line naming key,
value and fix."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from test_readiness import dry_run, hf_cache, submission, tiny_run  # noqa: F401 (hf_cache: autouse, no ~/.cache)
from tiny_assets import guru_rows

from launch.errors import UserError
from rewards.settings import RewardSettings

KWARGS = "reward.custom_reward_function.reward_kwargs"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (f"+{KWARGS}.code_cpu=5", rf"{KWARGS}.code_cpu=5: no such reward setting .*did you mean {KWARGS}.code_cpu_s=5"),
        (f"{KWARGS}.timeout_s=0", rf"{KWARGS}.timeout_s=0: must be positive.*the default is 30.0"),
        (f"{KWARGS}.code_memory_mb=0", rf"{KWARGS}.code_memory_mb=0: must be positive"),
        (f"{KWARGS}.code_wall_s=-1", rf"{KWARGS}.code_wall_s=-1: must be positive"),
        (f"{KWARGS}.sandbox_uid=0", rf"{KWARGS}.sandbox_uid=0: model code would run as root .*default is 65534"),
    ],
)
def test_reward_settings_the_reward_refuses_are_refused_before_the_queue(tmp_path: Path, override: str, message: str):
    overrides = tiny_run(tmp_path)
    with pytest.raises(UserError, match=message):
        submission(tmp_path, *overrides, override)
    plan = dry_run(tmp_path, *overrides, override)
    assert sum("reward_kwargs" in warning for warning in plan.warnings) == 1, plan.warnings


def test_the_settings_check_reads_reward_settings_own_fields():
    """Every default passes, and the keys verl adds to each call are no typo."""
    defaults = {name: getattr(RewardSettings(), name) for name in RewardSettings.__dataclass_fields__}
    assert RewardSettings.problems({**defaults, "reward_router_address": None}, KWARGS) == []
    assert RewardSettings.problems({"cache_size": 0, "stem_judge_retries": 0}, KWARGS) == []
    assert RewardSettings.problems({"timeout_s": "soon"}, KWARGS) == [
        f"{KWARGS}.timeout_s=soon: must be a number; the default is 30.0"
    ]


def test_stem_rows_without_a_judge_are_refused_naming_its_keys(tmp_path: Path):
    """rlaunch's stem reward asks a verifier model: without one set, every stem sample scores 0 as an error."""
    overrides = tiny_run(tmp_path)
    train = tmp_path / "data" / "train.parquet"
    pd.DataFrame(guru_rows(["stem__web", "math__x"], 8, "train")).to_parquet(train)
    with pytest.raises(
        UserError, match=rf"{train} has stem rows.*{KWARGS}.stem_judge_url and {KWARGS}.stem_judge_model"
    ):
        submission(tmp_path, *overrides)
    judge = [f"{KWARGS}.stem_judge_url=http://judge:8000", f"{KWARGS}.stem_judge_model=verifier"]
    plan = dry_run(tmp_path, *overrides, *judge)
    assert not any("stem" in warning for warning in plan.warnings), plan.warnings
