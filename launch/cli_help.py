"""rlaunch's `--help`: the sections that Hydra's app-help template (conf/hydra/help/rlaunch.yaml) pulls in through
the `${rlaunch_help:...}` resolver: each of our groups with its options (the one in use marked), and our own keys
(`launch.*`, `cluster.*`) with their current value and the comment their schema field carries, wrapped to the
terminal (100 columns into a pipe), never cut.

Runs on: the login node (`python launch/run.py --help`). The text comes from the config tree and the schema, so a new
option or key shows up without editing the help; tests/test_cli_help.py makes sure every key has its line.
"""

from __future__ import annotations

import ast
import inspect
import shutil
import textwrap
from typing import Any

from omegaconf import DictConfig, OmegaConf

from launch import schema

SECTIONS = {"launch": schema.LaunchSettings, "cluster": schema.ClusterSettings}


def field_docs(cls: type) -> dict[str, str]:
    """Each field's comment in the class source: the trailing one, else the comment lines right above it."""
    lines, _ = inspect.getsourcelines(cls)
    tree = ast.parse(inspect.cleandoc("\n".join(line.rstrip("\n") for line in lines)))
    source = inspect.cleandoc("".join(lines)).splitlines()
    docs: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        line = source[node.lineno - 1]
        trailing = line.split("  # ", 1)[1].strip() if "  # " in line else ""
        above = []
        row = node.lineno - 2
        while row >= 0 and source[row].strip().startswith("#"):
            above.insert(0, source[row].strip().lstrip("#").strip())
            row -= 1
        docs[node.target.id] = trailing or " ".join(above)
    return docs


KEY_COLUMN = 46  # where a key's description starts (a longer KEY=value pushes it right on that line)
PIPED_WIDTH = 100  # the width when stdout is not a terminal (a pipe, a file): nothing is ever cut, only wrapped


def width() -> int:
    """The terminal's columns ($COLUMNS first, as shutil reads it), else PIPED_WIDTH; never so narrow that a
    description gets less than a few words per line."""
    return max(shutil.get_terminal_size((PIPED_WIDTH, 24)).columns, KEY_COLUMN + 30)


def _shown(value: Any) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def key_lines(root: str, cfg: DictConfig) -> str:
    docs = field_docs(SECTIONS[root])
    node = cfg.get(root)
    lines = []
    for key, doc in docs.items():
        value = OmegaConf.select(node, key, default=None, throw_on_resolution_failure=False) if node else None
        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value, resolve=False)
        head = f"  {root}.{key}={_shown(value)}".ljust(KEY_COLUMN - 1) + " "
        if len(head) > width() - 20:  # a long value (a dict) gets its own line: the description starts below it
            lines.append(head.rstrip())
            head = " " * KEY_COLUMN
        # a path or a URL in the description is one word: moved whole to the next line, never split
        wrapped = textwrap.fill(
            doc,
            width(),
            initial_indent=head,
            subsequent_indent=" " * KEY_COLUMN,
            break_long_words=False,
            break_on_hyphens=False,
        )
        lines.append(wrapped if doc else head.rstrip())
    return "\n".join(lines)


def group_line(group: str, cfg: DictConfig) -> str:
    """'gpu=a40|a100_40|[a100_80]|auto|h100': the options of conf/<group>/, the one this invocation uses in []."""
    options = sorted(path.stem for path in (schema.PROJECT_DIR / "conf" / group).glob("*.yaml"))
    chosen = OmegaConf.select(cfg, f"hydra.runtime.choices.{group}", default=None)
    return f"{group}=" + "|".join(f"[{option}]" if option == chosen else option for option in options)


def section(name: str, arg: str = "", *, _root_: DictConfig) -> str:
    """The resolver: `${rlaunch_help:group,gpu}` or `${rlaunch_help:keys,launch}`. `$` is doubled: Hydra reads the
    template with string.Template."""
    text = group_line(arg, _root_) if name == "group" else key_lines(arg, _root_)
    return text.replace("$", "$$")


def register_help_resolver() -> None:
    """conf/hydra/help/rlaunch.yaml's `${rlaunch_help:...}`; registered by the entry point (this module reads the
    schemas, so the schemas cannot register it)."""
    OmegaConf.register_new_resolver("rlaunch_help", section, replace=True)
