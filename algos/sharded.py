"""PCGrad on FSDP gradient shards: per-task buffers, a local Gram matrix, ONE all-reduce of T x T numbers.

Runs in: verl's actor workers (Ray), one instance per rank, inside the optimizer step; pure torch (torch.distributed),
so tests drive it over gloo on CPU without verl.

Each rank keeps, for each task k, its own shard of g_k in a float32 buffer (T shard-sized buffers: the memory PCGrad
costs on top of the baseline, which the preflight counts for algo=mtl_pcgrad). Because the shards of one gradient are
disjoint pieces of it, the Gram matrix of the full gradients is the sum of the shards' Grams:

    K = sum over ranks of B_r @ B_r^T          (B_r: the rank's (T, N_r) buffer)

so one all-reduce gives every rank the same K, hence (with the same task order, drawn from a shared seed) the same
weights w, and each rank writes its own shard of the update, grad = sum_k w_k buf_k, without ever gathering a gradient.
verl's own clipping and optimizer step then run on that gradient unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist

from algos.pcgrad import Order, PcgradResult, pcgrad_from_gram

GRAM_CHUNK = 1 << 20  # columns per Gram chunk: float32 products stay accurate, partial Grams add up in float64


def local_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's shard: a DTensor's local tensor (FSDP2), or the tensor itself (FSDP1's flat shards)."""
    to_local = getattr(tensor, "to_local", None)
    return to_local() if to_local is not None else tensor


class TaskGradientBuffers:
    """T float32 buffers, each the size of this rank's gradient shard, filled one task at a time.

    Usage per optimizer step: after the backward passes of task k have been reduced into the parameters' (sharded)
    .grad, `capture(k)` moves them into buffer k and zeroes .grad for the next task; then `gram()`, and finally
    `write_combined(weights)` puts sum_k w_k buf_k back into .grad. `restart(T)` begins the next step in the same
    memory (the mini-batches of one update); `release()` frees it (before rollout, which wants that memory back)."""

    def __init__(self, parameters: Iterable[torch.nn.Parameter], num_tasks: int) -> None:
        self.parameters = [p for p in parameters if p.requires_grad]
        self.sizes = [local_tensor(p).numel() for p in self.parameters]
        self.numel = sum(self.sizes)
        self.storage: torch.Tensor | None = None
        self.restart(num_tasks)

    def restart(self, num_tasks: int) -> None:
        """A new step with num_tasks tasks: keeps the allocation when it is large enough (no memset: every row is
        either captured, which overwrites it, or zeroed before use)."""
        self.num_tasks = num_tasks
        self.captured = [False] * num_tasks
        if self.storage is not None and self.storage.shape[0] < num_tasks:
            self.storage = None

    def _slices(self) -> Iterable[tuple[torch.nn.Parameter, int, int]]:
        start = 0
        for parameter, size in zip(self.parameters, self.sizes, strict=True):
            yield parameter, start, start + size
            start += size

    @property
    def buffers(self) -> torch.Tensor:
        """(T, N) rows of this step's tasks."""
        if self.storage is None:
            device = local_tensor(self.parameters[0]).device if self.parameters else torch.device("cpu")
            self.storage = torch.empty(self.num_tasks, self.numel, dtype=torch.float32, device=device)
        return self.storage[: self.num_tasks]

    def capture(self, task: int) -> None:
        """Move the current .grad shards into buffer `task` (adding, if the task is captured twice) and zero them."""
        row = self.buffers[task]
        for parameter, start, end in self._slices():
            target = row[start:end]
            if parameter.grad is None:
                if not self.captured[task]:
                    target.zero_()
                continue
            grad = local_tensor(parameter.grad)
            if self.captured[task]:
                target.add_(grad.reshape(-1))
            else:
                target.copy_(grad.reshape(-1))
            grad.zero_()
        self.captured[task] = True

    def _zero_uncaptured(self) -> None:
        for task, captured in enumerate(self.captured):
            if not captured:  # a task nobody ran (absent from the whole batch): an exact zero gradient
                self.buffers[task].zero_()
                self.captured[task] = True

    def gram(self) -> torch.Tensor:
        """This shard's (T, T) Gram matrix in float64: float32 products per column chunk (no float64 copy of the
        buffers), the chunks' partial Grams summed in float64."""
        self._zero_uncaptured()
        buffers = self.buffers
        gram = torch.zeros(self.num_tasks, self.num_tasks, dtype=torch.float64, device=buffers.device)
        for chunk in buffers.split(GRAM_CHUNK, dim=1):
            gram += (chunk @ chunk.T).to(torch.float64)
        return gram

    def write_combined(self, weights: torch.Tensor) -> None:
        """.grad = sum_k weights[k] * buf_k on this rank's shard (verl's clipping and optimizer step follow)."""
        self._zero_uncaptured()
        buffers = self.buffers
        w = weights.to(device=buffers.device, dtype=buffers.dtype)
        for parameter, start, end in self._slices():
            if parameter.grad is None:
                continue
            grad = local_tensor(parameter.grad)
            grad.copy_((w @ buffers[:, start:end]).reshape(grad.shape))

    def release(self) -> None:
        self.storage = None


def all_reduced_gram(buffers: TaskGradientBuffers, group: dist.ProcessGroup | None) -> torch.Tensor:
    """The Gram matrix of the full task gradients: local shard Grams summed over the sharding group (one
    all-reduce of T^2 float64 numbers). group None: not distributed, the local Gram is the whole Gram."""
    gram = buffers.gram()
    if group is not None and dist.is_initialized() and dist.get_world_size(group) > 1:
        dist.all_reduce(gram, op=dist.ReduceOp.SUM, group=group)
    return gram


def sharded_pcgrad(
    buffers: TaskGradientBuffers, group: dist.ProcessGroup | None, order: Order
) -> tuple[PcgradResult, torch.Tensor]:
    """One PCGrad step on sharded gradients: Gram -> all-reduce -> identical weights on every rank -> each rank
    writes its shard of the combined gradient into .grad. Returns the decision and the (full) Gram matrix."""
    gram = all_reduced_gram(buffers, group).cpu()
    result = pcgrad_from_gram(gram, order)
    buffers.write_combined(result.weights)
    return result, gram
