"""What the job's Python would fail to import is refused before the queue (a probe's real jobs had died there, after
their wait): a reward file that imports a module the job's venv lacks (verl's load_module wraps the
ModuleNotFoundError as 'Error loading module from module_path=...'), and a PYTHONPATH entry holding a `verl`
without verl.trainer.main_ppo ('No module named verl.trainer' at the job's first line). A PYTHONPATH entry holding
another package the job imports is said, not refused: a user's own fork may be meant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_readiness import submission, tiny_run

from launch.errors import UserError

REWARD = "reward.custom_reward_function.path"


def with_reward(tmp_path: Path, source: str) -> list[str]:
    reward = tmp_path / "rewards_of_mine" / "my_reward.py"
    reward.parent.mkdir(exist_ok=True)
    scorer = "def compute_score(data_source, solution_str, ground_truth, **kwargs):\n    return 0\n"
    reward.write_text(f"{source}\n{scorer}")
    return [*tiny_run(tmp_path), f"{REWARD}={reward}"]


def test_a_reward_file_importing_a_module_the_job_lacks_is_refused_naming_it(tmp_path: Path):
    overrides = with_reward(tmp_path, "import json\nimport not_a_module_xyz\nfrom also_missing.sub import thing")
    with pytest.raises(UserError, match=rf"{REWARD}=\S+my_reward.py imports not_a_module_xyz, also_missing, which"):
        submission(tmp_path, *overrides)


def test_guarded_sibling_and_installed_imports_pass(tmp_path: Path):
    (tmp_path / "rewards_of_mine").mkdir()
    (tmp_path / "rewards_of_mine" / "helpers_of_mine.py").write_text("X = 1\n")
    guarded = "try:\n    import not_a_module_xyz\nexcept ImportError:\n    pass"
    source = f"import math_verify\nimport helpers_of_mine\n{guarded}"
    plan = submission(tmp_path, *with_reward(tmp_path, source))
    assert plan.readiness is not None and plan.readiness.problems == ()


def test_a_pythonpath_verl_without_its_trainer_is_refused_and_another_package_is_said(tmp_path: Path):
    shadow = tmp_path / "shadow"
    (shadow / "verl").mkdir(parents=True)
    (shadow / "verl" / "__init__.py").write_text('__version__ = "0.4.1"\n')
    overrides = tiny_run(tmp_path)
    with pytest.raises(UserError, match=rf"cluster.env.PYTHONPATH entry {shadow} holds a verl package without"):
        submission(tmp_path, *overrides, f"+cluster.env.PYTHONPATH={shadow}")
    (shadow / "verl" / "__init__.py").unlink()
    (shadow / "omegaconf").mkdir()
    (shadow / "omegaconf" / "__init__.py").write_text("raise ImportError('mine')\n")
    plan = submission(tmp_path, *overrides, f"+cluster.env.PYTHONPATH={shadow}")
    assert plan.readiness is not None
    (said,) = [note for note in plan.readiness.notes if "holds its own omegaconf" in note]
    assert "instead of the installed omegaconf 2." in said


def test_a_model_type_transformers_does_not_know_is_refused_unless_its_own_code_is_trusted(tmp_path: Path):
    """verl's workers read the model's config with AutoConfig: an unknown model_type fails there, in the job."""
    overrides = tiny_run(tmp_path)
    config_file = tmp_path / "model" / "config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "model_type": "my_arch"}))
    with pytest.raises(UserError, match=r"model_type 'my_arch' is one transformers \S+ does not know: verl's workers"):
        submission(tmp_path, *overrides)
    own_code = {**config, "model_type": "my_arch", "auto_map": {"AutoConfig": "configuration_my_arch.MyConfig"}}
    config_file.write_text(json.dumps(own_code))
    with pytest.raises(UserError, match=r"set actor_rollout_ref.model.trust_remote_code=true to load the model's own"):
        submission(tmp_path, *overrides)
    plan = submission(tmp_path, *overrides, "actor_rollout_ref.model.trust_remote_code=true")
    assert plan.readiness is not None and not [p for p in plan.readiness.problems if "model_type" in p.problem]
