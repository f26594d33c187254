"""A job that dies importing its own software (helper-41's probe, cases c5pp and c5pp2: a PYTHONPATH entry,
cluster.env.PYTHONPATH, holding a `verl` or an `omegaconf` package that shadows the installed one) is named, with the
module and where Python found it; an import a library catches and goes on without is no cause."""

from __future__ import annotations

from pathlib import Path

from metric_fixtures import make_plan_dir
from test_failures import SUBMITIT_START, job_log_layout
from test_failures_directions import run_with_log

from launch.report import failures
from launch.rundir import load_plan

# c5pp's job log (submitit/10/10_0_log.err), its wrapper traceback shortened to its last frames
RUNPY_REFUSED = "\n".join(
    [
        "/work/main/.venv/bin/python: Error while finding module specification for 'verl.trainer.main_ppo' "
        "(ModuleNotFoundError: No module named 'verl.trainer')",
        "submitit ERROR (2026-11-22 19:50:09,336) - Submitted job triggered an exception",
        "Traceback (most recent call last):",
        '  File "/tmp/h41/runs/rlaunch/code/a0b465d097a93d2e/launch/job.py", line 272, in run_head',
        '    raise RuntimeError(f"verl exited with code {code} (run {plan.run_id}; its output is in this job\'s log)")',
        "RuntimeError: verl exited with code 1 (run 03468f653489; its output is in this job's log)",
        "srun: error: c1: task 0: Exited with exit code 1",
    ]
)
# c5pp2's job log (submitit/20/20_0_log.err): the shadowing omegaconf raised while submitit unpickled the job
SHADOW_RAISED = "\n".join(
    [
        "Traceback (most recent call last):",
        '  File "/work/main/.venv/lib/python3.11/site-packages/submitit/core/utils.py", line 232, in pickle_load',
        "    return pickle.load(ifile)",
        "           ^^^^^^^^^^^^^^^^^^",
        '  File "/tmp/h41/runs/rlaunch/code/bc1180fe5978fbf6/launch/parse_once.py", line 25, in <module>',
        "    from omegaconf import _utils, base, grammar_parser",
        '  File "/tmp/h41/shadow2/omegaconf/__init__.py", line 1, in <module>',
        '    raise ImportError("cannot import name DictConfig from omegaconf 1.4 (probe)")',
        "ImportError: cannot import name DictConfig from omegaconf 1.4 (probe)",
        "srun: error: c1: task 0: Exited with exit code 1",
    ]
)


def test_python_refusing_verls_entry_module_names_verl_and_its_shadow_not_a_likeness_reading(tmp_path: Path):
    found = failures.run_failures(run_with_log(tmp_path, [RUNPY_REFUSED]))
    assert [(failure.kind, "likeness" in failure.details) for failure in found] == [("config_error", False)]
    assert "Error while finding module specification for 'verl.trainer.main_ppo'" in found[0].evidence[0]
    assert found[0].fix.startswith("verl is not importable in the job (/work/main/.venv/bin/python)")
    assert "cluster.env.PYTHONPATH" in found[0].fix and "shadows the installed one" in found[0].fix
    assert found[0].details["module"] == "verl.trainer"


def test_an_import_error_raised_by_a_module_outside_the_venv_names_that_file_and_its_directory():
    failure = failures.classify(SHADOW_RAISED)
    assert failure.kind == "config_error"
    assert failure.evidence[0] == "ImportError: cannot import name DictConfig from omegaconf 1.4 (probe)"
    assert 'File "/tmp/h41/shadow2/omegaconf/__init__.py"' in failure.evidence[1]
    assert "omegaconf is not importable in the job: Python imported it from /tmp/h41/shadow2/omegaconf/__init__.py" in (
        failure.fix
    )
    assert failure.fix.endswith("drop /tmp/h41/shadow2 from it")


def test_with_its_plan_the_fix_names_the_pythonpath_entry_that_holds_the_shadow(tmp_path: Path):
    shadow = tmp_path / "shadow"
    (shadow / "verl").mkdir(parents=True)
    run_dir = make_plan_dir(tmp_path / "sweep", "guru_baseline", "a40", f"+cluster.env.PYTHONPATH={shadow}")
    job_log_layout(run_dir, "10", RUNPY_REFUSED, SUBMITIT_START.format(s=1, host="c1"))
    found = failures.run_failures(run_dir, failures.FixContext(plan=load_plan(run_dir)))
    assert [failure.kind for failure in found] == ["config_error"]
    assert f"(the plan gives the job PYTHONPATH={shadow}: {shadow} holds one)" in found[0].fix
    assert found[0].fix.endswith(f"drop {shadow} from cluster.env.PYTHONPATH")


def test_a_module_not_installed_is_named_with_the_interpreter_that_lacks_it():
    failure = failures.classify(
        "/opt/venv/bin/python3: Error while finding module specification for 'verl.trainer.main_ppo' "
        "(ModuleNotFoundError: No module named 'verl')"
    )
    assert failure.kind == "config_error"
    assert failure.fix.startswith("the module verl is not installed in the job's Python (/opt/venv/bin/python3)")


def test_an_import_a_library_catches_or_a_later_exception_wraps_is_no_cause():
    # verl/workers/engine/__init__.py warns and goes on without torchtitan
    warned = (
        "(TaskRunnerV1 pid=18600) /work/main/.venv/lib/python3.11/site-packages/verl/workers/engine/__init__.py:32: "
        "UserWarning: torchtitan engine is not available: ModuleNotFoundError(\"No module named 'torchtitan'\")"
    )
    assert failures.classify(warned + "\nsrun: error: c1: task 0: Exited with exit code 1").kind == "unknown"
    wrapped = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/x/plugin.py", line 3, in <module>',
            "ModuleNotFoundError: No module named 'optional_thing'",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            '  File "/x/main.py", line 9, in main',
            "ValueError: something else went wrong",
        ]
    )
    assert failures.classify(wrapped).kind == "unknown"
    # a compiled extension built against another torch stays outside the vocabulary (an undefined symbol)
    symbol = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/x/site-packages/flash_attn/__init__.py", line 3, in <module>',
            "ImportError: /x/site-packages/flash_attn_2_cuda.cpython-311.so: undefined symbol: _ZN3c10",
        ]
    )
    assert failures.classify(symbol).kind == "unknown"
