"""PCGrad (Yu et al. 2020, "Gradient Surgery for Multi-Task Learning") in coefficient space.

Runs in: any process (pure torch; imports neither verl nor the launcher). The verl plugin calls it inside verl's
actor workers, once per optimizer step, on a Gram matrix summed over FSDP shards.

The paper's update, for tasks i = 1..T with gradients g_i:

    for each task i:   g_i' = g_i
        for each other task j, in a random order:
            if g_i' . g_j < 0:   g_i' -= (g_i' . g_j / |g_j|^2) g_j        (project onto the normal plane of g_j)
    update = sum_i g_i'

Every g_i' stays a linear combination of the original gradients, g_i' = sum_k C[i, k] g_k, so the whole loop runs on
the T x T Gram matrix K[k, l] = g_k . g_l alone:

    g_i' . g_j = (C[i] @ K)[j]          C[i] -= ((C[i] @ K)[j] / K[j, j]) e_j

and update = sum_k w_k g_k with w = sum_i C[i]. Under FSDP each rank holds a shard of every g_k; K is the sum of the
shards' Grams, so one all-reduce of T^2 numbers gives every rank the same weights (docs/facts.md#pcgrad: checked against
the literal loop to 1e-15 in float64).

Degenerate cases, chosen so that PCGrad never does worse than the baseline's plain sum:
- a task absent from the batch, or whose gradient is exactly zero (K[k, k] == 0): it has nothing to project onto
  (its projection would divide by zero) and nothing to contribute. It is skipped as a projection target and its weight
  is 0. The others are combined exactly as if it were not there.
- a single task (or a single task with a non-zero gradient): nothing to conflict with, weight 1: the plain gradient.
- no conflicts at all: every weight is 1, the update is the plain sum, which is the baseline's gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

Order = Sequence[Sequence[int]]


@dataclass(frozen=True)
class PcgradResult:
    """What one PCGrad step decided, in terms of the original task gradients."""

    weights: torch.Tensor  # (T,) update = sum_k weights[k] g_k
    coefficients: torch.Tensor  # (T, T) g_i' = sum_k coefficients[i, k] g_k
    conflicts: int  # projections made: pairs (i, j) with g_i' . g_j < 0 when j was visited
    present: torch.Tensor  # (T,) bool: tasks with a non-zero gradient


def random_order(num_tasks: int, generator: torch.Generator | None = None) -> list[list[int]]:
    """For each task i, the other tasks in a random order (the paper shuffles them anew for every i). Ranks that
    share the generator's seed draw the same orders, so they compute the same weights without communicating."""
    orders = []
    for task in range(num_tasks):
        others = [j for j in range(num_tasks) if j != task]
        permutation = torch.randperm(len(others), generator=generator).tolist()
        orders.append([others[p] for p in permutation])
    return orders


def check_order(order: Order, num_tasks: int) -> list[list[int]]:
    """An order must name, for each task, every other task exactly once."""
    if len(order) != num_tasks:
        raise ValueError(f"order has {len(order)} rows for {num_tasks} tasks: give one sequence per task")
    checked = []
    for task, visits in enumerate(order):
        visits = [int(j) for j in visits]
        expected = set(range(num_tasks)) - {task}
        if sorted(visits) != sorted(expected):
            raise ValueError(f"order[{task}] = {visits} must list each task other than {task} once: {sorted(expected)}")
        checked.append(visits)
    return checked


def pcgrad_from_gram(gram: torch.Tensor, order: Order) -> PcgradResult:
    """The PCGrad combination weights from the Gram matrix alone (see the module docstring).

    gram: (T, T) symmetric, gram[k, l] = g_k . g_l. Computed in float64 whatever the input dtype: the weights are
    T numbers, and K's entries can span many orders of magnitude across tasks."""
    num_tasks = gram.shape[0]
    if gram.shape != (num_tasks, num_tasks):
        raise ValueError(f"gram must be square, got shape {tuple(gram.shape)}")
    order = check_order(order, num_tasks)
    K = gram.detach().to(dtype=torch.float64, device="cpu")
    squared_norm = torch.diagonal(K)
    present = squared_norm > 0
    C = torch.eye(num_tasks, dtype=torch.float64)
    conflicts = 0
    for i in range(num_tasks):
        if not present[i]:
            continue
        for j in order[i]:
            if not present[j]:
                continue  # g_j = 0: g_i' . g_j is 0, never a conflict, and the projection would divide by zero
            dot = C[i] @ K[:, j]  # g_i' . g_j
            if dot < 0:
                C[i, j] -= dot / squared_norm[j]
                conflicts += 1
    C[~present] = 0.0  # an absent task contributes nothing: its (zero) gradient gets weight 0
    return PcgradResult(weights=C.sum(dim=0), coefficients=C, conflicts=conflicts, present=present)


def gram_matrix(grads: torch.Tensor) -> torch.Tensor:
    """(T, N) stacked flat gradients -> (T, T) Gram matrix, accumulated in float64."""
    flat = grads.to(torch.float64)
    return flat @ flat.T


def pcgrad(
    grads: Sequence[torch.Tensor] | torch.Tensor,
    order: Order | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The PCGrad update (sum of projected task gradients) of T flat gradients of one shape.

    order: for each task i, the order in which the other tasks are visited; None draws a random order from
    `generator`. Computed in coefficient space: one Gram matrix, T weights, one weighted sum."""
    stacked = torch.stack([g.reshape(-1) for g in grads]) if not isinstance(grads, torch.Tensor) else grads
    if stacked.ndim != 2:
        raise ValueError(f"grads must be T flat tensors of one shape, got a tensor of shape {tuple(stacked.shape)}")
    num_tasks = stacked.shape[0]
    if order is None:
        order = random_order(num_tasks, generator)
    result = pcgrad_from_gram(gram_matrix(stacked), order)
    combined = (result.weights.to(stacked.device) @ stacked.to(torch.float64)).to(stacked.dtype)
    shape = grads[0].shape if not isinstance(grads, torch.Tensor) else (stacked.shape[1],)
    return combined.reshape(shape)


def cosine_matrix(gram: torch.Tensor) -> torch.Tensor:
    """Pairwise cosine similarities of the task gradients from their Gram matrix (0 where a gradient is zero)."""
    K = gram.to(torch.float64)
    norm = torch.sqrt(torch.clamp(torch.diagonal(K), min=0.0))
    denominator = torch.outer(norm, norm)
    return torch.where(denominator > 0, K / torch.where(denominator > 0, denominator, 1.0), 0.0)
