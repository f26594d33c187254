"""A custom reward file that fails as verl loads it (helper-41's probe, case c4imp2: `import not_a_module_xyz` on its
first line) is named with the file and its own exception, not as a scorer that raised in verl's loader."""

from __future__ import annotations

from pathlib import Path

from test_failures_directions import run_with_log

from launch.report import failures

WORKER = "(RewardLoopWorker pid=23145) "
# c4imp2's job log (submitit/<job>/<job>_0_log.err), Ray's colours removed and the caret lines left out
LOADER_FAILED = "\n".join(
    WORKER + line
    for line in [
        "Exception raised in creation task: The actor died because of an error raised in its creation task, "
        "ray::RewardLoopWorker.__init__() (pid=23145, ip=127.132.0.11, actor_id=5034f0008e800d25f4f9012d02000000)",
        '  File "<frozen importlib._bootstrap_external>", line 940, in exec_module',
        '  File "<frozen importlib._bootstrap>", line 241, in _call_with_frames_removed',
        '  File "/tmp/h41/rw/bad_import.py", line 1, in <module>',
        "    import not_a_module_xyz  # noqa",
        "ModuleNotFoundError: No module named 'not_a_module_xyz'",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "ray::RewardLoopWorker.__init__() (pid=23145, ip=127.132.0.11, actor_id=5034f0008e800d25f4f9012d02000000)",
        '  File "/work/main/.venv/lib/python3.11/site-packages/verl/trainer/ppo/reward.py", line 80, in '
        "get_custom_reward_fn",
        "    raw_fn = load_extern_object(module_path=module_path, object_name=fn_name)",
        '  File "/work/main/.venv/lib/python3.11/site-packages/verl/utils/import_utils.py", line 191, in load_module',
        '    raise RuntimeError(f"Error loading module from {module_path=}") from e',
        "RuntimeError: Error loading module from module_path='/tmp/h41/rw/bad_import.py'",
    ]
)


def test_a_reward_file_that_fails_to_import_is_named_with_the_module_it_lacks(tmp_path: Path):
    found = failures.run_failures(run_with_log(tmp_path, [LOADER_FAILED]))
    assert [failure.kind for failure in found] == ["reward_error"]
    assert found[0].evidence[0] == WORKER + "ModuleNotFoundError: No module named 'not_a_module_xyz'"
    assert found[0].fix.startswith(
        "the reward module /tmp/h41/rw/bad_import.py fails to import (line 1: No module named 'not_a_module_xyz'): "
        "install not_a_module_xyz in the job's environment"
    )
    assert "get_custom_reward_fn" not in found[0].fix and "catch it" not in found[0].fix
    assert found[0].short() == "reward_error: ModuleNotFoundError: No module named 'not_a_module_xyz'"


def test_a_reward_file_that_raises_anything_else_as_it_loads_is_that_files_error():
    raised = LOADER_FAILED.replace("    import not_a_module_xyz  # noqa", "    THRESHOLD = int('x')").replace(
        "ModuleNotFoundError: No module named 'not_a_module_xyz'",
        "ValueError: invalid literal for int() with base 10: 'x'",
    )
    failure = failures.classify(raised)
    assert failure.kind == "reward_error"
    assert failure.fix.startswith(
        "the reward module /tmp/h41/rw/bad_import.py raised as verl loaded it (line 1: ValueError: invalid literal"
    )
