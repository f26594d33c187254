"""How a verl entry point (a Hydra app) is started on a config file rlaunch dumped: the PPO driver (launch/plan.py)
and RFT's SFT trainer (algos/rft/sft.py) share it. Owns the one Hydra quoting of values on a command line
(launch/overrides.py offers the same functions to the launcher: algos/ never imports launch/).

Runs on: the login node (plans record the command) and the job head (RFT builds its stage command there). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_BEFORE_QUOTE = re.compile(r"(\\*)('|\Z)")  # backslashes (maybe none) before a quote or the end of the text


def hydra_quoted(text: str) -> str:
    """`text` as a Hydra override value that stays the one string it is: a path, 'c[1-2]' (else a list), a value
    with commas (else a sweep), spaces, '=' or quotes. Hydra reads a backslash literally except in a run of them
    before a quote or the closing quote, where each pair stands for one: only those runs are doubled."""
    escaped = _BEFORE_QUOTE.sub(lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), text)
    return f"'{escaped}'"


def render_value(value: Any) -> str:
    """A value as Hydra's override grammar writes it: strings always quoted; numbers, booleans and null keep their
    type; mappings and lists nested."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return hydra_quoted(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{key}:{render_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(render_value(item) for item in value) + "]"
    raise TypeError(f"cannot write {value!r} ({type(value).__name__}) as a Hydra override")


def hydra_entry_command(python: str, module: str, config_dir: Path, config_name: str, hydra_dir: str) -> list[str]:
    """`python -m <module>` on `config_dir/config_name.yaml`, its Hydra bookkeeping in `hydra_dir`."""
    return [
        python,
        "-m",
        module,
        f"--config-path={config_dir}",
        f"--config-name={config_name}",
        f"hydra.run.dir={hydra_dir}",
    ]
