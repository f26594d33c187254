"""Tasks for multi-task learning over GURU: which task a sample belongs to, the worker settings, and the
domain-stratified order that keeps small domains in every mini-batch.

Runs in: verl's task runner (the trainer's batch ordering) and actor workers (Ray); pure Python, no verl import.
Settings arrive as RLAUNCH_PCGRAD_* variables in Ray's runtime env (launch/plan.py::make_worker_env writes them).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rewards.sources import domain_of


@dataclass(frozen=True)
class PcgradWorkerSettings:
    """algo.pcgrad as the workers see it (launch/schema.py::PcgradSettings documents each field)."""

    enabled: bool = False
    task_key: str = "data_source"
    seed: int = 0
    task_map: Mapping[str, str] = field(default_factory=dict)
    stratify: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PcgradWorkerSettings:
        env = os.environ if env is None else env
        task_map = json.loads(env.get("RLAUNCH_PCGRAD_TASK_MAP") or "{}")
        if not isinstance(task_map, dict):
            raise ValueError(
                f"RLAUNCH_PCGRAD_TASK_MAP must be a JSON object (data_source or domain -> task): {task_map}"
            )
        return cls(
            enabled=env.get("RLAUNCH_PCGRAD_ENABLED") == "1",
            task_key=env.get("RLAUNCH_PCGRAD_TASK_KEY") or "data_source",
            seed=int(env.get("RLAUNCH_PCGRAD_SEED") or 0),
            task_map={str(k): str(v) for k, v in task_map.items()},
            stratify=env.get("RLAUNCH_PCGRAD_STRATIFY", "1") != "0",
        )


def task_of(data_source: str, task_map: Mapping[str, str]) -> str:
    """A sample's task is its data source's domain, as rewards/ defines it (math__deepscaler -> math, openai/gsm8k ->
    math). task_map overrides, first for the whole data_source, then for the domain (e.g. simulation -> codegen)."""
    if data_source in task_map:
        return task_map[data_source]
    domain = domain_of(data_source)
    return task_map.get(domain, domain)


def stratified_order(tasks: Sequence[str], seq_lens: Sequence[int], dp_size: int, mini_batches: int) -> list[int]:
    """A permutation of the batch such that, once verl splits it into dp_size contiguous rank chunks and each rank
    into `mini_batches` contiguous mini-batches, every task is spread over the mini-batches first and the ranks
    second (a domain 10x smaller than math still reaches every mini-batch when it has at least `mini_batches`
    samples, and each rank holds nearly the same count of each task, so the task-aligned micro-batches need little
    padding), with the tokens of the (rank, mini-batch) cells balanced.

    Cells are (rank, mini-batch) pairs in rank-major order, the order of verl's contiguous split, so consecutive cells
    are consecutive mini-batches of one rank. Quotas: the i-th sample of the task-grouped list counts for cell
    i mod C (C = dp_size x mini_batches), in a snake order; tasks follow each other without restarting at cell 0, so
    the small ones land on different ranks. Contents: longest sequence first, each to the least-loaded cell that
    still has quota for its task."""
    size = len(tasks)
    cells = dp_size * mini_batches
    if size % cells:
        raise ValueError(f"a batch of {size} does not split into {dp_size} ranks x {mini_batches} mini-batches")
    by_task: dict[str, list[int]] = {}
    for index, task in enumerate(tasks):
        by_task.setdefault(task, []).append(index)
    quota: list[Counter] = [Counter() for _ in range(cells)]
    position = 0
    for task in sorted(by_task):
        for _ in by_task[task]:
            round_, offset = divmod(position, cells)
            quota[offset if round_ % 2 == 0 else cells - 1 - offset][task] += 1
            position += 1
    load = [0] * cells
    contents: list[list[int]] = [[] for _ in range(cells)]
    for index in sorted(range(size), key=lambda i: (-seq_lens[i], i)):
        task = tasks[index]
        cell = min((c for c in range(cells) if quota[c][task]), key=lambda c: (load[c], c))
        quota[cell][task] -= 1
        load[cell] += seq_lens[index]
        contents[cell].append(index)
    return [index for cell in contents for index in cell]


def count_tasks(tasks: Sequence[str]) -> dict[str, int]:
    return dict(sorted(Counter(tasks).items()))


def stratify_batch(
    tasks: Sequence[str], seq_lens: Sequence[int], dp_size: int, mini_batch: int, stratify: bool
) -> tuple[list[int] | None, dict[str, float]]:
    """The trainer's decision for one batch: the stratified permutation (None: keep verl's order, when stratification
    is off or the batch does not split into whole mini-batches) and the per-task counts to log."""
    metrics = {f"pcgrad/batch_samples/{task}": float(count) for task, count in count_tasks(tasks).items()}
    if not stratify or not tasks or len(tasks) % mini_batch or mini_batch % dp_size:
        return None, metrics
    order = stratified_order(tasks, seq_lens, dp_size, len(tasks) // mini_batch)
    cells = [order[start : start + mini_batch // dp_size] for start in range(0, len(order), mini_batch // dp_size)]
    smallest = min(count_tasks(tasks).values())
    for task in count_tasks(tasks):
        present = sum(any(tasks[i] == task for i in cells[c]) for c in range(len(cells)))
        metrics[f"pcgrad/batch_cells_with/{task}"] = float(present)
    metrics["pcgrad/batch_smallest_task"] = float(smallest)
    return order, metrics
