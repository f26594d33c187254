"""README.md's Layout section names every part of the tree a newcomer opens: each top-level directory, each config
group, each module of launch/, rewards/ and algos/, each benchmark. A file added without a line there fails here."""

from __future__ import annotations

import re
import subprocess

from conftest import PROJECT

LEFT_OUT = {"__init__.py", "common.py"}  # package markers and the benches' shared helpers


def layout_section() -> str:
    text = (PROJECT / "README.md").read_text()
    start = text.index("\n## Layout\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def tracked(*patterns: str) -> list[str]:
    listed = subprocess.run(["git", "ls-files", *patterns], cwd=PROJECT, capture_output=True, text=True, check=True)
    return listed.stdout.split()


def unnamed(layout: str, paths: list[str]) -> list[str]:
    """The paths whose file name appears nowhere in the layout as a whole word."""
    return sorted(
        path
        for path in paths
        if path.rsplit("/", 1)[-1] not in LEFT_OUT
        and not re.search(rf"(?<![\w.]){re.escape(path.rsplit('/', 1)[-1])}(?![\w])", layout)
    )


def test_every_module_and_benchmark_is_in_the_layout():
    layout = layout_section()
    modules = tracked("launch/*.py", "rewards/*.py", "algos/*.py", "bench/*.py", "hydra_plugins/*.py")
    assert modules and "launch/run.py" in modules  # git listed the tree
    assert unnamed(layout, modules) == []


def test_every_top_level_directory_and_config_group_is_in_the_layout():
    layout = layout_section()
    top_level = {path.split("/", 1)[0] for path in tracked() if "/" in path and not path.startswith(".")}
    assert {name for name in top_level if not re.search(rf"(?m)^    {re.escape(name)}/", layout)} == set()
    groups = {path.split("/")[1] for path in tracked("conf/") if path.count("/") >= 2}
    assert {group for group in groups if f"{group}/" not in layout} == set()


def test_the_check_finds_a_missing_name():
    layout = "launch/ run.py (entry) · memory.py"
    assert unnamed(layout, ["launch/run.py", "launch/memory.py", "launch/megatron_memory.py"]) == [
        "launch/megatron_memory.py"
    ]
