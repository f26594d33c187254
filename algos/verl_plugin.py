"""The `verl.plugins` entry point (pyproject.toml): verl imports this module in EVERY process that imports verl
(the driver, the task runner, each Ray worker), and swallows any error it raises.

Runs in: every verl process. So it does nothing unless the run selects PCGrad: only when RLAUNCH_PCGRAD_ENABLED=1
(set by the plan for algo=mtl_pcgrad, in the driver's env and in Ray's runtime env) does it import
algos.verl_pcgrad, which registers the `mtl_pcgrad` trainer. A failure then is printed to stderr before verl hides it,
and the run still fails loudly later: verl cannot find the trainer that trainer.v1.trainer_mode names, or the
trainer's start-up check finds a worker without PCGrad.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Mapping


def selected(env: Mapping[str, str] = os.environ) -> bool:
    """The run selected PCGrad: the plan sets this for algo=mtl_pcgrad, in the driver's env and Ray's runtime env."""
    return env.get("RLAUNCH_PCGRAD_ENABLED") == "1"


def load() -> None:
    """Import the plugin proper, saying why on stderr if that fails (verl logs plugin errors at DEBUG only)."""
    try:
        import algos.verl_pcgrad  # noqa: F401  (registers the trainer)
    except Exception:
        print("rlaunch: the PCGrad verl plugin failed to load (verl would hide this error):", file=sys.stderr)
        traceback.print_exc()
        raise


if selected():
    load()
