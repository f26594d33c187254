"""Rewards for GURU's six domains (math, codegen, logic, simulation, table, stem) behind verl's signature.

Runs in: verl's reward workers (Ray actors). verl loads `rewards/verl_entry.py` by path, which exposes
`compute_score_async` under the name `compute_score`.

Why async, and where the grading happens: verl 0.9.1's reward loop splits a batch over `reward.num_workers` Ray
actors, and its managers call the reward function once per sample; a plain function runs in a THREAD there
(`run_in_executor`), where math-verify's SIGALRM timeouts fail. An `async def` is awaited on the worker's event loop
instead. Its route: each call submits its sample to this process's Scorer (rewards/scorer.py), which extracts the
answer, serves repeated (ground truth, answer) tasks from results known or in flight, and hands the rest to a pool
of scoring PROCESSES (rewards/pool.py), where every grader runs in a main thread with a process-level timeout. The
concurrent calls of one reward worker thus become one continuous stream of submissions to one pool — the batch
is gathered by the pool's queue rather than by a timer. Stem answers go to an HTTP judge instead
(rewards/domains/stem.py), model code to a bubblewrap sandbox (rewards/sandbox.py).

Every result is a dict with the same keys (rewards/result.py): score, acc, passed, error, errored.
Settings (rewards/settings.py) arrive as keyword arguments: verl passes `reward.custom_reward_function.reward_kwargs`
to every call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from rewards.result import RESULT_KEYS
from rewards.scorer import DOMAINS, Scorer, scorer_for
from rewards.settings import RewardSettings
from rewards.sources import domain_of

__all__ = [
    "DOMAINS",
    "RESULT_KEYS",
    "RewardSettings",
    "compute_score",
    "compute_score_async",
    "domain_of",
    "score_batch",
    "score_batch_async",
    "scorer",
]


def scorer(**settings: Any) -> Scorer:
    """This process's scorer for these settings (one process pool each)."""
    return scorer_for(RewardSettings.from_kwargs(settings))


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, **settings: Any
) -> dict[str, Any]:
    """verl's signature, blocking: safe from any thread (the grading runs in the pool's processes)."""
    return dict(scorer(**settings).submit(data_source, solution_str, ground_truth, extra_info).result())


async def compute_score_async(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, **settings: Any
) -> dict[str, Any]:
    """verl's signature as a coroutine: what verl's reward loop awaits (rewards/verl_entry.py)."""
    future = scorer(**settings).submit(data_source, solution_str, ground_truth, extra_info)
    return dict(await asyncio.wrap_future(future))


def _submit_all(items: Iterable[Mapping[str, Any]], settings: dict[str, Any]) -> list:
    active = scorer(**settings)
    return [
        active.submit(item["data_source"], item["solution_str"], item["ground_truth"], item.get("extra_info"))
        for item in items
    ]


def score_batch(items: Iterable[Mapping[str, Any]], **settings: Any) -> list[dict[str, Any]]:
    """Score many samples (mappings with data_source, solution_str, ground_truth and optional extra_info) across
    the process pool; results in order. An item that crashes or hangs gets an error result after its own timeout;
    it never zeroes or stalls the others. Raises ValueError before grading anything if a data_source is unknown."""
    return [dict(future.result()) for future in _submit_all(items, settings)]


async def score_batch_async(items: Iterable[Mapping[str, Any]], **settings: Any) -> list[dict[str, Any]]:
    futures = _submit_all(items, settings)
    return [dict(result) for result in await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))]
