"""verl's own verdict on a config, remembered on disk: the one place that decides when verl must be asked.

Runs on: the login node. Asking verl means importing it (torch, Ray, transformers, tensordict: ~4 s on a laptop,
more than composing, planning and preflighting together). A config verl accepted once is accepted again, so each
accepted config is recorded under `launch.verl_check_cache` by a hash of the part of the config verl's checks read
(validate.VERL_CHECKED) with its run-specific names (run directory, sweep id, run id) replaced by fixed ones, and of
the versions of the packages verl's checks read.
Rejections are not recorded: their message names this run's keys and values, and asking again costs only time.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Raise when what is checked changes (validate.run_verl_validation's calls), so older verdicts stop matching.
CHECKS_VERSION = 2  # 2: keyed by the part verl's checks read (validate.VERL_CHECKED), not the whole config
# Names that stand in for the run-specific ones in the hashed form.
STAND_INS = {"run_dir": "/rlaunch/sweep/run", "sweep_id": "sweep", "run_id": "run"}


def normalized(verl: dict[str, Any], names: dict[str, str]) -> Any:
    """`verl` with every occurrence of the run's own names (names: run_dir, sweep_id, run_id -> this run's values)
    replaced by STAND_INS, so two runs of one configuration hash alike. The run directory is replaced first: it
    contains the ids."""
    pairs = [(names[key], STAND_INS[key]) for key in ("run_dir", "sweep_id", "run_id") if names.get(key)]

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: walk(value) for key, value in node.items()}
        if isinstance(node, list):
            return [walk(value) for value in node]
        if isinstance(node, str):
            for real, stand_in in pairs:
                node = node.replace(real, stand_in)
        return node

    return walk(verl)


def config_key(verl: dict[str, Any], names: dict[str, str], packages: dict[str, str]) -> str:
    text = json.dumps(
        {"checks": CHECKS_VERSION, "packages": packages, "verl": normalized(verl, names)}, sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()


def check_once(
    verl: dict[str, Any],
    names: dict[str, str],
    packages: dict[str, str],
    cache_dir: str,
    ask_verl: Callable[[], None],
) -> bool:
    """Run `ask_verl` (which raises on a rejection) unless an identical config passed before; record a pass.
    Returns whether verl was asked. An empty cache_dir asks every time."""
    if not cache_dir:
        ask_verl()
        return True
    record = Path(cache_dir).expanduser() / f"{config_key(verl, names, packages)}.ok"
    if record.is_file():
        return False
    ask_verl()
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        partial = record.with_name(f"{record.name}.{os.getpid()}")
        partial.write_text(json.dumps({"packages": packages}) + "\n")
        partial.replace(record)  # atomic: a parallel planner never reads half a record
    except OSError:
        pass  # a read-only or full cache only costs the next plan the import
    return True
