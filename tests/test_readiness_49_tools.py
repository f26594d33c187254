"""The tools a multi-turn run names are checked before the queue: verl 0.9.1's AgentLoopWorker loads every tool of
rollout.multi_turn.tool_config_path as it starts (tools/tool_registry.py), after the job got its nodes and loaded
the model, and a class_name whose module the job's Python lacks dies there (find_spec -> None, then
module_from_spec(None): AttributeError). verl's own multi-turn examples name verl.tools.gsm8k_tool, search_tool and
geo3k_tool, which verl 0.9.1 does not ship. A function_tool_path file is run there too, and an MCP tool (config.type
mcp) is a ToolType verl 0.9.1 no longer has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_readiness import dry_run, submission, tiny_run

from launch.errors import UserError
from launch.readiness import module_in_the_job

TOOLS = "actor_rollout_ref.rollout.multi_turn.tool_config_path"
FUNCTIONS = "actor_rollout_ref.rollout.multi_turn.function_tool_path"

# verl's examples/sglang_multiturn/config/tool_config/gsm8k_tool_config.yaml (https://github.com/volcengine/verl)
GSM8K_TOOL_CONFIG = """\
tools:
  - class_name: "verl.tools.gsm8k_tool.Gsm8kTool"
    config:
      type: native
    tool_schema:
      type: "function"
      function:
        name: "calc_gsm8k_reward"
        description: "A tool for calculating the reward of gsm8k."
        parameters:
          type: "object"
          properties:
            answer:
              type: "string"
              description: "The model's answer to the GSM8K math problem, must be a digits"
          required: ["answer"]
"""


def tool_config(tmp_path: Path, class_name: str, kind: str = "native") -> str:
    config = tmp_path / "tool_config" / "my_tool_config.yaml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(GSM8K_TOOL_CONFIG.replace("verl.tools.gsm8k_tool.Gsm8kTool", class_name).replace("native", kind))
    return str(config)


def tools_package(tmp_path: Path, source: str) -> Path:
    """A package of the user's own on the job's PYTHONPATH: tools_of_mine/calc.py holding `source`."""
    root = tmp_path / "pythonpath"
    (root / "tools_of_mine").mkdir(parents=True, exist_ok=True)
    # were it run here, planning would stop: the package is found, never imported
    (root / "tools_of_mine" / "__init__.py").write_text("raise RuntimeError('imported at planning')\n")
    (root / "tools_of_mine" / "calc.py").write_text(source)
    return root


def test_a_tool_verl_does_not_ship_is_refused_naming_the_class_the_file_and_the_fix(tmp_path: Path):
    overrides = [*tiny_run(tmp_path), f"{TOOLS}={tool_config(tmp_path, 'verl.tools.gsm8k_tool.Gsm8kTool')}"]
    expected = (
        rf"{re.escape(TOOLS)}=\S+/my_tool_config.yaml: tools\[0\].class_name verl.tools.gsm8k_tool.Gsm8kTool: the "
        r"job's Python has no module verl.tools.gsm8k_tool \(its package verl.tools holds base_tool, function_tool, "
        r".*verl fails as its agent loop starts, after the job got its nodes and loaded the model .*AttributeError"
        r".*write the tool as a BaseTool class in a module of your own"
    )
    with pytest.raises(UserError, match=rf"^{expected}"):
        submission(tmp_path, *overrides)
    warnings = dry_run(tmp_path, *overrides).warnings
    assert [w for w in warnings if re.match(rf"not ready: {expected}", w)], warnings


def test_a_tool_class_of_ones_own_is_found_on_the_jobs_pythonpath_and_read_not_imported(tmp_path: Path):
    source = "import json\n\n\nclass CalcTool:\n    pass\n"
    root = tools_package(tmp_path, source)
    overrides = [*tiny_run(tmp_path), f"+cluster.env.PYTHONPATH={root}"]
    plan = submission(tmp_path, *overrides, f"{TOOLS}={tool_config(tmp_path, 'tools_of_mine.calc.CalcTool')}")
    assert plan.readiness is not None and plan.readiness.problems == ()
    with pytest.raises(UserError, match=r"tools_of_mine.calc.CalcTolo: \S+/calc.py defines no CalcTolo \(it defines "):
        submission(tmp_path, *overrides, f"{TOOLS}={tool_config(tmp_path, 'tools_of_mine.calc.CalcTolo')}")
    # without the PYTHONPATH entry the job's Python finds no tools_of_mine
    with pytest.raises(UserError, match=r"the job's Python has no module tools_of_mine.calc: verl fails as its agent"):
        submission(tmp_path, *tiny_run(tmp_path), f"{TOOLS}={tool_config(tmp_path, 'tools_of_mine.calc.CalcTool')}")


def test_a_tool_module_importing_what_the_job_lacks_is_refused(tmp_path: Path):
    root = tools_package(tmp_path, "import not_a_module_xyz\n\n\nclass CalcTool:\n    pass\n")
    overrides = [*tiny_run(tmp_path), f"+cluster.env.PYTHONPATH={root}"]
    with pytest.raises(UserError, match=r"CalcTool \(\S+/calc.py\) imports not_a_module_xyz, which the job's Python"):
        submission(tmp_path, *overrides, f"{TOOLS}={tool_config(tmp_path, 'tools_of_mine.calc.CalcTool')}")


def test_an_mcp_tool_is_refused_as_verl_091_has_no_mcp_tool_type(tmp_path: Path):
    config = tool_config(tmp_path, "verl.tools.mcp_search_tool.MCPSearchTool", kind="mcp")
    expected = r"tools\[0\] \(verl.tools.mcp_search_tool.MCPSearchTool\) has config.type 'mcp': verl 0.9.1 loads native"
    with pytest.raises(UserError, match=expected):
        submission(tmp_path, *tiny_run(tmp_path), f"{TOOLS}={config}")


def test_a_function_tool_file_importing_what_the_job_lacks_is_refused(tmp_path: Path):
    functions = tmp_path / "my_functions.py"
    functions.write_text("import not_a_module_xyz\n\n\ndef add(a: int, b: int) -> int:\n    return a + b\n")
    with pytest.raises(UserError, match=rf"{re.escape(FUNCTIONS)}=\S+my_functions.py imports not_a_module_xyz, which"):
        submission(tmp_path, *tiny_run(tmp_path), f"{FUNCTIONS}={functions}")
    functions.write_text("import json\n\n\ndef add(a: int, b: int) -> int:\n    return a + b\n")
    plan = submission(tmp_path, *tiny_run(tmp_path), f"{FUNCTIONS}={functions}")
    assert plan.readiness is not None and plan.readiness.problems == ()


def test_module_in_the_job_walks_packages_without_running_them(tmp_path: Path):
    root = tools_package(tmp_path, "class CalcTool:\n    pass\n")
    spec = module_in_the_job("tools_of_mine.calc", str(root))
    assert spec is not None and spec.origin == str(root / "tools_of_mine" / "calc.py")
    assert module_in_the_job("tools_of_mine.nope", str(root)) is None
    assert module_in_the_job("verl.tools.tool_registry") is not None
    assert module_in_the_job("verl.tools.gsm8k_tool") is None
