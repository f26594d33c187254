"""A pasted verl script is verl's run: what rlaunch plans for one matches what verl 0.9.1 would do with the same keys
(algo=verl), found by pasting real verl example scripts (in-process plans on tiny local assets; no job runs)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import compose_config
from tiny_assets import guru_rows, make_tiny_model, tiny_run_overrides

from launch.errors import UserError
from launch.render import render
from launch.run import plan_job
from launch.rundir import Plan


def pasted(tmp_path: Path, *overrides: str) -> Plan:
    """The dry-run plan of a pasted verl script (algo=verl) on a tiny local model and gsm8k-shaped parquet files."""
    cfg = compose_config("cluster=local", f"cluster.shared_dir={tmp_path}", "launch.dry_run=true", *overrides)
    return plan_job(cfg, list(overrides))


def gsm8k_script(tmp_path: Path, rows: int = 40, source: str = "openai/gsm8k") -> list[str]:
    """verl's gsm8k example as a user pastes it, on `rows` training rows in batches of 8 of data_source `source`."""
    model = make_tiny_model(tmp_path / "model")
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    train, val = data / "train.parquet", data / "test.parquet"
    pd.DataFrame(guru_rows([source], rows, "train")).to_parquet(train)
    pd.DataFrame(guru_rows([source], 8, "test")).to_parquet(val)
    return ["algo=verl", "algorithm.adv_estimator=grpo", *tiny_run_overrides(model, train, val)]


def test_total_training_steps_beyond_the_epochs_runs_the_epochs_steps_and_says_so(tmp_path: Path):
    """verl 0.9.1's fit loop stops at the end of trainer.total_epochs even where trainer.total_training_steps asks
    for more, and its last-step save then never comes: 40 rows in batches of 8 are 5 steps, saved at 2 and 4."""
    script = [*gsm8k_script(tmp_path), "trainer.total_epochs=1"]
    plan = pasted(tmp_path, *script, "trainer.total_training_steps=100", "trainer.save_freq=2")
    time = plan.predicted_time
    assert time is not None and (time.steps_per_epoch, time.total_steps) == (5, 5)
    assert (time.checkpoints, time.first_checkpoint_step) == (True, 2)
    assert plan.readiness is not None and plan.readiness.disk is not None and plan.readiness.disk.saves == 2
    said = [warning for warning in plan.warnings if "trainer.total_training_steps=100" in warning]
    assert said and "after step 5, with no last-step save" in said[0], plan.warnings
    # a save_freq beyond the steps the epochs allow saves nothing
    plan = pasted(tmp_path, *script, "trainer.total_training_steps=100", "trainer.save_freq=10")
    assert plan.predicted_time is not None and not plan.predicted_time.checkpoints
    assert "5 steps (5/epoch)" in render(plan) and "no checkpoint" in render(plan)
    # the step count below the epochs' ends the run, with its last-step save (verl's is_last_step)
    plan = pasted(tmp_path, *script, "trainer.total_epochs=2", "trainer.total_training_steps=7", "trainer.save_freq=2")
    assert plan.predicted_time is not None and plan.predicted_time.total_steps == 7
    assert plan.readiness is not None and plan.readiness.disk is not None and plan.readiness.disk.saves == 4
    assert not [warning for warning in plan.warnings if "trainer.total_training_steps=7" in warning]


def not_ready(plan: Plan, words: str) -> list[str]:
    return [warning for warning in plan.warnings if warning.startswith("not ready: ") and words in warning]


def test_a_file_that_is_both_train_and_validation_files_is_judged_once_naming_both_roles(tmp_path: Path):
    script = gsm8k_script(tmp_path, source="my_unknown_src")
    train = next(value for value in script if value.startswith("data.train_files="))
    both = [value for value in script if not value.startswith("data.val_files=")]
    plan = pasted(tmp_path, *both, "data.val_files=" + train.split("=", 1)[1])
    said = not_ready(plan, "data_source my_unknown_src")
    assert len(said) == 1 and "train.parquet (data.train_files and data.val_files) is not one" in said[0], said


def test_a_reward_manager_of_the_users_own_is_not_judged_by_verls_default_scores(tmp_path: Path):
    """reward.reward_manager.source=importlib: verl 0.9.1 builds the user's class (trainer/ppo/reward.py
    resolve_reward_manager_cls), which need not call default_compute_score; its file and class are still checked."""
    manager = tmp_path / "manager.py"
    manager.write_text("class MyMgr:\n    pass\n")
    own = ["reward.reward_manager.source=importlib", "reward.reward_manager.name=MyMgr"]
    script = [*gsm8k_script(tmp_path, source="my_unknown_src"), *own]
    plan = pasted(tmp_path, *script, f"reward.reward_manager.module.path={manager}")
    assert not not_ready(plan, "data_source"), plan.warnings
    assert any("builds your own reward manager (MyMgr)" in warning for warning in plan.warnings)
    plan = pasted(tmp_path, *script, f"reward.reward_manager.module.path={tmp_path / 'none.py'}")
    assert not_ready(plan, "reward.reward_manager.module.path"), plan.warnings


def test_a_missing_validation_file_of_a_pasted_script_is_not_fixed_by_dropping_it(tmp_path: Path):
    """Under algo=verl, dropping data.val_files reads dataset=guru's files, not verl's own default validation set:
    the fix says so rather than offering it."""
    script = [value for value in gsm8k_script(tmp_path) if not value.startswith("data.val_files=")]
    plan = pasted(tmp_path, *script, f"data.val_files={tmp_path / 'missing.parquet'}")
    said = not_ready(plan, "missing.parquet does not exist")
    assert said and said[0].endswith(
        "was set on the command line: correct the path there (without it, rlaunch reads dataset=guru's files under "
        "dataset.root, not verl's own default)"
    ), said


def test_a_gpu_profiles_token_budget_shorter_than_one_sequence_is_raised_and_a_users_is_refused_naming_them(
    tmp_path: Path,
):
    """gpu=h100 packs the actor's training by 20480 tokens; verl asserts each budget it packs by holds one sequence.
    The script set neither packing nor the budget: the profile's is raised, said; one the user typed is refused."""
    script = [value for value in gsm8k_script(tmp_path) if not value.startswith(("gpu=", "actor_rollout_ref.model"))]
    long = [*script, "gpu=h100", "llm=qwen2_5_0_5b", "data.max_prompt_length=2048", "data.max_response_length=30000"]
    plan = pasted(tmp_path, *long)
    key = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"
    assert plan.verl["actor_rollout_ref"]["actor"]["ppo_max_token_len_per_gpu"] == 32048
    assert any(warning.startswith(f"{key}=20480 (gpu=h100) cannot hold one sequence") for warning in plan.warnings)
    assert any(change.key == key and change.value == 32048 for change in plan.changed_from_verl)
    with pytest.raises(UserError, match=rf"^{key} \(20480\) cannot hold one .* you set it on the command line: raise"):
        pasted(tmp_path, *long, f"{key}=20480")
