"""rlaunch's `--help`: the sections that Hydra's app-help template (conf/hydra/help/rlaunch.yaml) pulls in through
the `${rlaunch_help:...}` resolver: each of our groups with its options (the one in use marked), our own keys
(`launch.*`, `cluster.*`, algo=rft's `rft.*`) with their current value as it is typed on the command line and the
comment their schema field carries, and Hydra's own flags; wrapped to the terminal (100 columns into a pipe), never
cut.

Runs on: the login node (`python launch/run.py --help`). The text comes from the config tree and the schema, so a new
option or key shows up without editing the help; tests/test_cli_help.py makes sure every key has its line.
"""

from __future__ import annotations

import ast
import inspect
import re
import shutil
import textwrap
from typing import Any

from omegaconf import DictConfig, OmegaConf

from algos.rft.settings import RftSettings
from launch import schema
from launch.overrides import render_value

SECTIONS = {"launch": schema.LaunchSettings, "cluster": schema.ClusterSettings, "rft": RftSettings}
# what a root's keys need before they do anything (launch/choices.py refuses rft.* under another algo)
SECTION_NOTES = {"rft": "algo=rft only:"}


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
GROUP_COLUMN = 2  # where the template puts a group's line
CONTINUED = 6  # the indent of a group's or a value's continuation lines


def width() -> int:
    """The terminal's columns ($COLUMNS first, as shutil reads it), else PIPED_WIDTH; never so narrow that a
    description gets less than a few words per line."""
    return max(shutil.get_terminal_size((PIPED_WIDTH, 24)).columns, KEY_COLUMN + 30)


def typed(value: Any) -> str:
    """A value as it is typed on the command line: a scalar as written (an interpolation too), a mapping or a list in
    Hydra's override syntax (`{runtime:null,mounts:[]}`), never Python's repr."""
    if isinstance(value, dict | list):
        return render_value(value)
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def broken(text: str, after: str, first_column: int = 0) -> list[str]:
    """`text` over lines of width() columns, broken only after an `after` character (a value's commas, a group's
    bars), its continuations indented by CONTINUED; a part longer than a line stays whole. `first_column`: where
    the first line starts on the screen."""
    lines, line = [], ""
    for part in re.split(f"(?<={re.escape(after)})", text):
        room = width() - (first_column if not lines else 0)
        if line.strip() and len(line) + len(part) > room:
            lines.append(line)
            line = " " * CONTINUED
        line += part
    return [*lines, line]


def key_lines(root: str, cfg: DictConfig) -> str:
    docs = field_docs(SECTIONS[root])
    note = SECTION_NOTES.get(root, "")
    node = cfg.get(root)
    lines = []
    for key, doc in docs.items():
        value = OmegaConf.select(node, key, default=None, throw_on_resolution_failure=False) if node else None
        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value, resolve=False)
        head = f"  {root}.{key}={typed(value)}".ljust(KEY_COLUMN - 1) + " "
        if len(head) > width() - 20:  # a long value (a dict) gets its own lines: the description starts below it
            lines += [line.rstrip() for line in broken(head, ",")]
            head = " " * KEY_COLUMN
        described = " ".join(part for part in (note, doc) if part)
        # a path or a URL in the description is one word: moved whole to the next line, never split
        wrapped = textwrap.fill(
            described,
            width(),
            initial_indent=head,
            subsequent_indent=" " * KEY_COLUMN,
            break_long_words=False,
            break_on_hyphens=False,
        )
        lines.append(wrapped if described else head.rstrip())
    return "\n".join(lines)


def group_line(group: str, cfg: DictConfig) -> str:
    """'gpu=a40|a100_40|[a100_80]|auto|h100': the options of conf/<group>/, the one this invocation uses in [],
    continued on further lines where they outgrow one."""
    options = sorted(path.stem for path in (schema.PROJECT_DIR / "conf" / group).glob("*.yaml"))
    chosen = OmegaConf.select(cfg, f"hydra.runtime.choices.{group}", default=None)
    text = f"{group}=" + "|".join(f"[{option}]" if option == chosen else option for option in options)
    return "\n".join(broken(text, "|", GROUP_COLUMN))


MARKDOWN_LINK = re.compile(r"\[([^\]]+)\]\((\S+)\)")


def flag_lines() -> str:
    """Hydra's own flags as Hydra's help lists them (its $FLAGS_HELP), each line wrapped at its own indent; a
    markdown link becomes its words and its URL, so that the URL is a word of its own."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import get_args_parser

    lines = []
    for line in Hydra.format_args_help(get_args_parser()).splitlines():
        line = MARKDOWN_LINK.sub(r"\1 (\2)", line)
        indent = " " * (len(line) - len(line.lstrip()))
        lines.append(
            textwrap.fill(
                line.strip(),
                width(),
                initial_indent=indent,
                subsequent_indent=indent + "    ",
                break_long_words=False,
                break_on_hyphens=False,
            )
            if line.strip()
            else ""
        )
    return "\n".join(lines)


def section(name: str, arg: str = "", *, _root_: DictConfig) -> str:
    """The resolver: `${rlaunch_help:group,gpu}`, `${rlaunch_help:keys,launch}` or `${rlaunch_help:flags}`. `$` is
    doubled: Hydra reads the template with string.Template."""
    if name == "group":
        text = group_line(arg, _root_)
    elif name == "flags":
        text = flag_lines()
    else:
        text = key_lines(arg, _root_)
    return text.replace("$", "$$")


def register_help_resolver() -> None:
    """conf/hydra/help/rlaunch.yaml's `${rlaunch_help:...}`; registered by the entry point (this module reads the
    schemas, so the schemas cannot register it)."""
    OmegaConf.register_new_resolver("rlaunch_help", section, replace=True)
