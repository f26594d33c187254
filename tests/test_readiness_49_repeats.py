"""A key that a config file of the user's own sets (verl's multi-turn examples: `--config-path=<dir>
--config-name=gsm8k_multiturn_grpo`) and the command line sets again is Hydra's layering, as verl's own Hydra composes
the file: the plan does not call it "given 2 times". A key the command line itself repeats (a pasted script's value,
then the user's "$@") still is, with the command line's values alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import run_here
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from test_verl_diff import MULTITURN_SCRIPT, own_config_dir

from launch.auto import own_config_keys
from launch.overrides import parse

# besides verl's script's own (data.train_batch_size over the file's): keys the script sets to the file's values
SCRIPT = [*MULTITURN_SCRIPT, "data.return_raw_chat=True", "actor_rollout_ref.rollout.name=sglang"]


def warnings_of(tmp_path: Path, *args: str) -> list[str]:
    directory = own_config_dir(tmp_path)
    flags = [f"--config-path={directory}", "--config-name=gsm8k_multiturn_grpo"]
    result = run_here(*flags, *SCRIPT, *args, "gpu=a100_80", "algo=verl", "launch.dry_run=json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    plan: dict[str, Any] = json.loads(result.stdout)
    return [warning for warning in plan["warnings"] if " times (" in warning]


def test_the_command_line_over_ones_own_config_file_is_no_repeat(tmp_path: Path):
    assert warnings_of(tmp_path, "data.max_prompt_length=4096") == []


def test_a_key_the_command_line_repeats_is_said_with_the_command_lines_values(tmp_path: Path):
    repeated = warnings_of(tmp_path, "data.max_prompt_length=4096", "data.max_prompt_length=2048")
    assert repeated == ["data.max_prompt_length is given 2 times (4096, 2048): the last, 2048, is used"]


def test_the_files_overrides_are_known_as_hydras_sweeper_rewrites_them():
    """A sweep's job gets each override as Hydra's BasicSweeper writes it: key element, then the value re-rendered."""
    made = ["++trainer.logger=['console', 'wandb']", "++data.max_prompt_length=1024"]
    typed = ["trainer.logger=['console', 'wandb']", "gpu=a100_80,h100"]  # the command line's own: no `++`
    ((job, _),) = BasicSweeper.split_arguments(parse([*made, *typed]), None)
    assert job[0] == "++trainer.logger=['console','wandb']"  # not the string the file made
    own_config_keys.record(made)
    try:
        assert [own_config_keys.made(override) for override in parse(job)] == [True, True, False, False]
    finally:
        own_config_keys.record([])
