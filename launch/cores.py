"""Per-job work of a large sweep spread over the login node's cores, results in sweep order.

Runs on: the login node, inside launch/run.py's multirun (the rlaunch launcher plans every job of a sweep here, and
dispatch writes their run directories). Planning a job is Python work on one core (OmegaConf, verl's dataclasses);
a sweep is cut into contiguous slices and each slice runs in a forked copy of this process, which starts with
everything already imported, composed and cached. The first item runs here before any fork, so the copies inherit
what it warmed (machine facts, its composition, verl when it had to be asked). The outcome is what running the items
one after the other gives: the results in order, or the failure of the first item that fails.
"""

from __future__ import annotations

import os
import pickle
import signal
import tempfile
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from launch.errors import UserError, explain

Item = TypeVar("Item")
Result = TypeVar("Result")

# Below this many items per core a fork costs more than it saves (a job plans in tens of milliseconds).
MIN_ITEMS_PER_CORE = 8
# RLAUNCH_CORES=N: exactly N processes whatever the sweep's size (1: one job after the other, for debugging; tests
# fork small sweeps with it); unset: every core this process may run on, for sweeps large enough.
CORES_VARIABLE = "RLAUNCH_CORES"


def cores_for(items: int) -> int:
    if os.environ.get(CORES_VARIABLE, "").strip():
        return max(1, min(int(os.environ[CORES_VARIABLE]), items - 1))
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(usable, items // MIN_ITEMS_PER_CORE)


def in_order(function: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
    """[function(item) for item in items], on several cores when there are enough items."""
    cores = cores_for(len(items))
    if cores < 2 or not hasattr(os, "fork"):
        return [function(item) for item in items]
    first = function(items[0])
    rest = list(items[1:])
    bounds = [len(rest) * index // cores for index in range(cores + 1)]
    slices = [rest[start:end] for start, end in zip(bounds, bounds[1:], strict=False)]
    with tempfile.TemporaryDirectory(prefix="rlaunch-cores-") as tmp:
        children = [
            (_fork(function, part, Path(tmp) / f"{index}.pickle"), Path(tmp) / f"{index}.pickle")
            for index, part in enumerate(slices[1:], start=1)
        ]
        outcomes = [_run_slice(function, slices[0])]
        if outcomes[0][1] is not None:  # this slice comes first: its failure is the sweep's, whatever the others do
            for pid, _ in children:
                os.kill(pid, signal.SIGKILL)
        for pid, path in children:
            _, status = os.waitpid(pid, 0)
            if outcomes[-1][1] is None:
                outcomes.append(_load(path, status))
    results = [first]
    for done, error in outcomes:
        results.extend(done)
        if error is not None:
            raise error
    return results


def _run_slice(function: Callable[[Item], Result], items: list[Item]) -> tuple[list[Result], BaseException | None]:
    """Results up to the first failure, and that failure (a user's error as its one-line message, so it survives
    the trip between processes; the original traceback rides along as a note, shown with RLAUNCH_DEBUG=1)."""
    done: list[Result] = []
    for item in items:
        try:
            done.append(function(item))
        except Exception as error:
            message = explain(error)
            carried: BaseException = UserError(message) if message is not None else RuntimeError(str(error))
            carried.add_note("".join(traceback.format_exception(error)))
            return done, carried
    return done, None


def _fork(function: Callable[[Item], Any], items: list[Item], path: Path) -> int:
    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:  # the copy only plans and writes its outcome: no atexit hooks, no Hydra teardown, no buffered output twice
        outcome = _run_slice(function, items)
        partial = path.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL))
        partial.rename(path)
        status = 0
    finally:
        os._exit(status)


def _load(path: Path, status: int) -> tuple[list[Any], BaseException | None]:
    if not path.is_file():
        return [], RuntimeError(f"a planning process ended without a result (wait status {status})")
    return pickle.loads(path.read_bytes())
