"""A tokenizer whose chat template files were removed after planning (helper-41's probe, case c3tok) is not only told
to set custom_chat_template as for a base model: the run directory's doctor names the model directory that holds no
template file now."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

from metric_fixtures import make_plan_dir
from test_failures import SUBMITIT_START, job_log_layout

from launch.report import failures
from launch.rundir import load_plan

# c3tok's job log (submitit/<job>/<job>_0_log.err), transformers' message cut where the log cut it
NO_TEMPLATE = (
    "(TaskRunnerV1 pid=14582) ValueError: Cannot use chat template functions because tokenizer.chat_template is not "
    "set and no template argument was passed! For information about writing templates and setting the "
    "tokenizer.chat_template attribute, please see the documentation at https://huggingface.co\n"
    "submitit ERROR (2026-11-22 19:50:05,000) - Submitted job triggered an exception"
)


def test_a_model_directory_without_template_files_is_named(tmp_path: Path):
    model = tmp_path / "m3c"
    model.mkdir()
    (model / "config.json").write_text("{}")
    run_dir = make_plan_dir(tmp_path / "sweep", "guru_baseline", "a40")
    job_log_layout(run_dir, "6", NO_TEMPLATE, SUBMITIT_START.format(s=1, host="c1"))
    plan = load_plan(run_dir)
    verl = copy.deepcopy(plan.verl)
    verl["actor_rollout_ref"]["model"]["path"] = str(model)
    context = failures.FixContext(plan=replace(plan, verl=verl))
    [failure] = failures.run_failures(run_dir, context)
    assert failure.kind == "config_error"
    assert failure.fix.startswith(
        f"the model directory {model} holds no chat template now (none of chat_template.jinja"
    )
    assert "its tokenizer files were removed since: restore them" in failure.fix
    (model / "chat_template.jinja").write_text("{{ messages }}")  # a template there: the log's own fix stands
    [kept] = failures.run_failures(run_dir, context)
    assert kept.fix.startswith("the model's tokenizer has no chat template (a base model's?)")
