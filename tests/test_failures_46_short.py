"""The one-line cause of an import failure (status, compare's state column) starts with what failed, the missing
module, not the interpreter's path that Python puts before its refusal of `python -m` (`/venv/bin/python: No module
named x`), nor a frame's `File "..."` where a log cut short kept only a frame."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from launch.report import failures


def interpreter_says(*args: str) -> str:
    """What this interpreter prints refusing `python <args>`: the log a job's first lines hold."""
    ran = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60)
    assert ran.returncode != 0
    return ran.stdout + ran.stderr


def test_python_m_of_a_missing_module_says_the_module_first_and_the_fix_still_names_the_interpreter():
    log = interpreter_says("-m", "not_a_module_xyz")
    assert log.startswith(f"{sys.executable}: No module named not_a_module_xyz")
    failure = failures.classify(log)
    assert failure.kind == "config_error"
    assert failure.short() == "config_error: No module named not_a_module_xyz"
    assert failures.summary([failure]) == "config_error: No module named not_a_module_xyz"
    assert f"not installed in the job's Python ({sys.executable})" in failure.fix


def test_python_m_of_a_module_in_a_missing_package_says_the_missing_package_first():
    log = interpreter_says("-m", "not_a_pkg_xyz.sub")
    assert "Error while finding module specification for 'not_a_pkg_xyz.sub'" in log
    failure = failures.classify(log)
    assert failure.kind == "config_error"
    assert failure.short(100) == (
        "config_error: ModuleNotFoundError: No module named 'not_a_pkg_xyz' (python -m not_a_pkg_xyz.sub)"
    )
    assert failure.short().startswith("config_error: ModuleNotFoundError: No module named 'not_a_pkg_xyz'")


def test_a_log_that_kept_only_frames_says_the_function_and_file_first():
    """A traceback cut short above its exception (a paste, a log's tail): its frame is all the evidence."""
    log = (
        "ray::TaskRunner.run() (pid=2292396, ip=10.0.0.2)\n"
        '  File "/home/u/verl/verl/trainer/ppo/reward.py", line 77, in get_custom_reward_fn\n'
        "    spec.loader.exec_module(module)\n"
        '  File "<frozen importlib._bootstrap_external>", line 883, in exec_module\n'
        '  File "/home/u/proj/rewards/judge_reward.py", line 16, in <module>\n'
        '    response = requests.get(f"{base}/models")\n'
    )
    failure = failures.classify(log)
    assert failure.kind == "reward_error"
    assert failure.short(200) == "reward_error: <module> (/home/u/proj/rewards/judge_reward.py:16)"


def verl_loads(tmp_path: Path, file: str, source: str | None) -> str:
    """What verl 0.9.1's loader of reward.custom_reward_function prints for `file` (None: no such file)."""
    path = tmp_path / file
    if source is not None:
        path.write_text(source)
    load = (
        "from omegaconf import OmegaConf\nfrom verl.trainer.ppo.reward import get_custom_reward_fn\n"
        "get_custom_reward_fn(OmegaConf.create({'reward': {'custom_reward_function': "
        f"{{'path': '{path}', 'name': 'compute_score', 'reward_kwargs': {{}}}}}}}}))\n"
    )
    return interpreter_says("-c", load)


def test_verls_loader_missing_the_function_or_the_file_says_which_first(tmp_path: Path):
    unnamed = failures.classify(verl_loads(tmp_path, "scorer.py", "def other(solution):\n    return 0\n"))
    assert unnamed.kind == "reward_error"
    assert unnamed.short(200) == f"reward_error: compute_score not found in {tmp_path}/scorer.py"
    assert unnamed.short() == "reward_error: compute_score not found in…"  # the missing name, in a status cell
    missing = failures.classify(verl_loads(tmp_path, "not_there.py", None))
    assert missing.kind == "reward_error"
    assert missing.short(200) == f"reward_error: module file not found: {tmp_path}/not_there.py"
