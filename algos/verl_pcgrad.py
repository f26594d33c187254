"""PCGrad inside verl 0.9.1: the trainer `mtl_pcgrad`, its actor worker, and the per-task optimizer step.

Runs in: verl's task runner (PcgradTrainer, a Ray actor on the head node) and verl's actor workers (PcgradStep, one
per GPU, Ray). Imported only when the run selects PCGrad (algos/verl_plugin.py decides); it imports verl at the top.

Why these seams (verl 0.9.1's documented extension points, no fork):
- `register_trainer("mtl_pcgrad")` + `trainer.v1.trainer_mode=mtl_pcgrad` (set by conf/algo/mtl_pcgrad.yaml) select
  the trainer: the config says which algorithm runs, `--cfg job` shows it, and algo=guru_baseline never touches any of
  this (verl's stock `sync` trainer, ActorRolloutRefWorker, TrainingWorker and ppo_loss).
- The trainer maps the actor role to PcgradActorRolloutRefWorker, whose `actor_worker_cls` (verl's class-attribute
  hook) is PcgradTrainingWorker. Its engine's train step (BaseEngine.train_batch: zero_grad -> forward_backward_batch
  -> optimizer_step) is the one thing replaced, on that engine instance only: PcgradStep runs verl's own
  forward_backward_batch (hence verl's micro-batching, fixed or dynamic, and verl's unchanged ppo_loss) once per task,
  moves each task's reduced gradient shard into a buffer, and calls verl's own optimizer_step (clipping, non-finite
  skip) on the PCGrad combination. `set_loss_fn` was the other candidate; a loss sees one micro-batch, not the
  boundary between tasks nor the optimizer step, so it cannot do gradient surgery.
- The trainer's `_balance_batch` (where verl decides which rank and mini-batch each sequence lands in) adds the
  domain-stratified order, and its `on_init_end` asks every actor worker whether PCGrad is active and fails loudly if
  one is not (verl swallows plugin import errors).

Task-pure, rank-aligned micro-batches: every rank learns every rank's per-task counts (one all-gather of a few
integers), then all ranks walk the tasks in the same order; for each task each rank runs its own samples of it,
padded with zero-weight copies (response and loss masks zeroed, as verl's own batch padding does) so that every rank
runs the same number of micro-batches. FSDP reduces the gradient once per task (verl defers the reduce-scatter to the
last micro-batch of each forward_backward_batch call), so each reduced gradient holds one task only. A rank with no
sample of a task contributes an exact zero. The loss keeps the baseline's normalization: the mini-batch's total token
count (all tasks, all ranks), so sum_k g_k is exactly guru_baseline's gradient.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import ray
import torch
import torch.distributed as dist
import verl
from omegaconf import DictConfig, open_dict
from tensordict import TensorDict
from verl.single_controller.base.decorator import Dispatch, register
from verl.trainer.ppo.utils import Role
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils import tensordict_utils as tu
from verl.utils.device import get_device_id
from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

from algos.pcgrad import PcgradResult, cosine_matrix, random_order
from algos.pcgrad_checks import TRAINER_NAME
from algos.sharded import TaskGradientBuffers, sharded_pcgrad
from algos.tasks import PcgradWorkerSettings, stratify_batch, task_of

VERL_VERSION = "0.9.1"  # the seams above are verl 0.9.1's; pyproject pins it exactly
MASK_KEYS = ("response_mask", "loss_mask")

if verl.__version__ != VERL_VERSION:
    raise ImportError(
        f"the PCGrad plugin is written against verl {VERL_VERSION}'s internals and found verl {verl.__version__}: "
        f"install verl=={VERL_VERSION} (pyproject.toml pins it)"
    )


# ---------------------------------------------------------------------------------------------------------------------
# Actor worker side: the per-task step
# ---------------------------------------------------------------------------------------------------------------------


def sample_tasks(data: TensorDict, settings: PcgradWorkerSettings) -> list[str]:
    if settings.task_key not in data.keys():
        raise KeyError(
            f"PCGrad needs the batch field '{settings.task_key}' (algo.pcgrad.task_key) in the actor's update batch; "
            f"fields present: {sorted(data.keys())}"
        )
    values = data[settings.task_key]
    sources = values.tolist() if hasattr(values, "tolist") else list(values)
    return [task_of(str(source), settings.task_map) for source in sources]


def aligned_part_size(counts: list[int], use_dynamic_bsz: bool, micro_batch_size: int | None) -> tuple[int, int | None]:
    """How many samples (real + zero-weight) every rank feeds for one task, so that verl's micro-batching gives every
    rank the same number of micro-batches, and the micro-batch size for the fixed-size case (at most the configured
    one, chosen to need the fewest zero-weight samples).

    Dynamic batch size: verl syncs the micro-batch COUNT over ranks and needs at least that many samples on each
    rank, which the largest rank's count always satisfies."""
    largest = max(counts)
    if use_dynamic_bsz:
        return largest, None
    num_micro = max(math.ceil(count / micro_batch_size) for count in counts)
    size = max(math.ceil(count / num_micro) for count in counts)
    return num_micro * size, size


def task_part(data: TensorDict, indices: list[int], size: int, template: int) -> TensorDict:
    """The rank's samples of one task plus `size - len(indices)` zero-weight copies of sample `template`."""
    padding = size - len(indices)
    part = tu.index_select_tensor_dict(data, indices + [template] * padding)
    if padding:
        for key in MASK_KEYS:
            if key not in part.keys():
                continue
            mask = part[key]
            if mask.is_nested:
                mask.values()[mask.offsets()[len(indices)] :] = 0  # index_select built fresh storage: ours to edit
            else:
                mask[len(indices) :] = 0
    return part


def with_batch_tokens(loss_function: Callable, batch_num_tokens: int, **kwargs: Any) -> Any:
    """verl's loss, normalized by the WHOLE mini-batch's token count (forward_backward_batch sets it from the part
    it was given, i.e. one task): g_k is then the baseline's gradient restricted to task k's tokens."""
    tu.assign_non_tensor(kwargs["data"], batch_num_tokens=batch_num_tokens)
    return loss_function(**kwargs)


def merge_outputs(outputs: list[dict]) -> dict:
    merged: dict = {"model_output": {}, "loss": [], "metrics": {}}
    for output in outputs:
        merged["loss"].extend(output["loss"])
        for key, values in output["metrics"].items():
            merged["metrics"].setdefault(key, []).extend(values if isinstance(values, list) else [values])
    return merged


def pcgrad_metrics(tasks: list[str], counts: dict[str, int], gram: torch.Tensor, result: PcgradResult) -> dict:
    """Per optimizer step, into verl's tracking (as actor/pcgrad/...): conflicts, weights, per-task gradient norms and
    sample counts, the cosine matrix's entries and summary, and the norms of the plain sum and of the update."""
    cos = cosine_matrix(gram)
    norms = torch.sqrt(torch.clamp(torch.diagonal(gram), min=0.0))
    ones = torch.ones(len(tasks), dtype=torch.float64)
    metrics = {
        "pcgrad/tasks": float(len(tasks)),
        "pcgrad/conflicts": float(result.conflicts),
        "pcgrad/plain_grad_norm": math.sqrt(max(float(ones @ gram @ ones), 0.0)),
        "pcgrad/update_grad_norm": math.sqrt(max(float(result.weights @ gram @ result.weights), 0.0)),
    }
    pairs = []
    for i, task in enumerate(tasks):
        metrics[f"pcgrad/weight/{task}"] = float(result.weights[i])
        metrics[f"pcgrad/grad_norm/{task}"] = float(norms[i])
        metrics[f"pcgrad/samples/{task}"] = float(counts[task])
        for j in range(i + 1, len(tasks)):
            metrics[f"pcgrad/cos/{task}~{tasks[j]}"] = float(cos[i, j])
            pairs.append(float(cos[i, j]))
    if pairs:
        metrics["pcgrad/cos_min"] = min(pairs)
        metrics["pcgrad/cos_mean"] = sum(pairs) / len(pairs)
        metrics["pcgrad/conflicting_pairs"] = float(sum(value < 0 for value in pairs))
    return metrics


def sharding_group(engine: Any) -> dist.ProcessGroup | None:
    """The group over which gradient shards are disjoint: the 'fsdp' dimension of verl's device mesh (the whole world
    for plain FSDP; one replica's ranks for HSDP, whose replicas hold identical shards)."""
    mesh = getattr(engine, "device_mesh", None)
    if mesh is None:
        return engine.get_data_parallel_group()
    return mesh.get_group("fsdp") if mesh.ndim > 1 else mesh.get_group()


class PcgradStep:
    """Stands in for BaseEngine.train_batch on one actor engine (see the module docstring)."""

    def __init__(self, engine: Any, settings: PcgradWorkerSettings) -> None:
        self.engine = engine
        self.settings = settings
        self.steps = 0
        self.buffers: TaskGradientBuffers | None = None
        self.last: dict[str, Any] = {}  # the latest step's decision, for tests and debugging

    def order(self, num_tasks: int) -> list[list[int]]:
        """The same random order on every rank: a generator seeded from the shared seed and the step count."""
        generator = torch.Generator().manual_seed(self.settings.seed * 1_000_003 + self.steps)
        return random_order(num_tasks, generator)

    def __call__(self, data: TensorDict, loss_function: Callable) -> dict:
        engine = self.engine
        tu.maybe_fix_3d_position_ids(data)
        dp_group = engine.get_data_parallel_group()

        local_tasks = sample_tasks(data, self.settings)
        counts_by_rank: list[Counter] = [Counter() for _ in range(dist.get_world_size(dp_group))]
        dist.all_gather_object(counts_by_rank, Counter(local_tasks), group=dp_group)
        tasks = sorted(set().union(*counts_by_rank))
        counts = {task: sum(rank_counts[task] for rank_counts in counts_by_rank) for task in tasks}

        # the same count forward_backward_batch computes, over the whole mini-batch instead of one task's part
        batch_num_tokens = data["loss_mask"].sum().to(get_device_id())
        dist.all_reduce(batch_num_tokens, op=dist.ReduceOp.SUM, group=dp_group)
        loss = partial(with_batch_tokens, loss_function, int(batch_num_tokens.item()))

        use_dynamic_bsz = bool(tu.get_non_tensor_data(data, "use_dynamic_bsz", True))
        micro_batch_size = tu.get_non_tensor_data(data, "micro_batch_size_per_gpu", None)
        lengths = data["input_ids"].offsets().diff()
        template = int(torch.argmin(lengths))  # the cheapest sample to copy as a zero-weight filler

        engine.optimizer_zero_grad()
        # one allocation per update: the mini-batches of an update reuse it; the last one frees it for the rollout
        buffers = self.buffers or TaskGradientBuffers(engine.module.parameters(), num_tasks=len(tasks))
        buffers.restart(len(tasks))
        last_mini_batch = bool(tu.get_non_tensor_data(data, "update_lr_scheduler", True))
        outputs, padding = [], 0
        for index, task in enumerate(tasks):
            mine = [i for i, sample_task in enumerate(local_tasks) if sample_task == task]
            size, micro = aligned_part_size([c[task] for c in counts_by_rank], use_dynamic_bsz, micro_batch_size)
            part = task_part(data, mine, size, template)
            if micro is not None:
                tu.assign_non_tensor(part, micro_batch_size_per_gpu=micro)
            output = engine.forward_backward_batch(part, loss, forward_only=False)
            buffers.capture(index)
            if mine:  # a part of zero-weight fillers only would add zeros to the clip-fraction means
                outputs.append(output)
            padding += size - len(mine)

        result, gram = sharded_pcgrad(buffers, sharding_group(engine), self.order(len(tasks)))
        self.buffers = None if last_mini_batch else buffers
        grad_norm = engine.optimizer_step()

        merged = merge_outputs(outputs)
        padding_total = torch.tensor(float(padding), device=get_device_id())
        dist.all_reduce(padding_total, op=dist.ReduceOp.SUM, group=dp_group)
        metrics = pcgrad_metrics(tasks, counts, gram, result)
        metrics["pcgrad/padding_samples"] = float(padding_total.item())
        self.last = {"tasks": tasks, "counts": counts, "gram": gram, "result": result, "metrics": metrics}
        self.steps += 1
        if engine.is_mp_src_rank_with_outputs():
            for key, value in metrics.items():
                merged["metrics"][key] = [value]
            merged["metrics"]["grad_norm"] = grad_norm
        return merged


class PcgradTrainingWorker(TrainingWorker):
    """verl's TrainingWorker whose engine trains with PcgradStep (the actor's only; the ref model keeps verl's)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.pcgrad_settings = PcgradWorkerSettings.from_env()
        self.pcgrad_step = PcgradStep(self.engine, self.pcgrad_settings)
        self.engine.train_batch = self.pcgrad_step


class PcgradActorRolloutRefWorker(ActorRolloutRefWorker):
    """verl's hybrid worker with the PCGrad actor, plus the start-up self-report the trainer checks."""

    actor_worker_cls = PcgradTrainingWorker

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def pcgrad_status(self) -> dict:
        actor = self.actor
        active = isinstance(actor, PcgradTrainingWorker) and actor.engine.train_batch is actor.pcgrad_step
        settings = PcgradWorkerSettings.from_env()
        return {
            "rank": self.rank,
            "active": bool(active),
            "actor_worker": type(actor).__name__,
            "task_key": settings.task_key,
            "seed": settings.seed,
            "verl": verl.__version__,
        }


# ---------------------------------------------------------------------------------------------------------------------
# Task runner side: the trainer
# ---------------------------------------------------------------------------------------------------------------------


def check_worker_status(statuses: list[dict]) -> None:
    """Every actor rank must run the PCGrad step with the same settings, or the run is not the one asked for."""
    inactive = [status for status in statuses if not status.get("active")]
    if inactive:
        raise RuntimeError(
            f"algo=mtl_pcgrad, but PCGrad is NOT active on actor rank(s) {[s['rank'] for s in inactive]} "
            f"({inactive[0]}): "
            "the workers would train plain GRPO. Check that rlaunch is installed in the workers' environment "
            "(`pip install -e .` registers the verl.plugins entry point) and that RLAUNCH_PCGRAD_ENABLED=1 reaches "
            "them."
        )
    settings = {(status["task_key"], status["seed"]) for status in statuses}
    if len(settings) > 1:
        raise RuntimeError(f"PCGrad settings differ across actor ranks (task_key, seed): {sorted(settings)}")


@register_trainer(TRAINER_NAME)
class PcgradTrainer(PPOTrainerSync):
    """verl's synchronous trainer (colocated rollout) with the PCGrad actor and domain-stratified mini-batches."""

    def __init__(self, config: DictConfig) -> None:
        self.pcgrad_settings = PcgradWorkerSettings.from_env()
        if not self.pcgrad_settings.enabled:
            raise RuntimeError(
                f"trainer.v1.trainer_mode={TRAINER_NAME} but RLAUNCH_PCGRAD_ENABLED is not 1 in the task runner: "
                "start the run with algo=mtl_pcgrad (it sets both), not with the trainer mode alone"
            )
        # verl branches on the literal mode "sync" (replay buffer, refill, weight sync): from here on this IS the
        # sync trainer, and trainer.v1.sync holds its settings
        with open_dict(config):
            config.trainer.v1.trainer_mode = "sync"
        super().__init__(config)
        print(
            f"rlaunch: PCGrad plugin active: trainer '{TRAINER_NAME}' (verl {verl.__version__}), tasks from "
            f"'{self.pcgrad_settings.task_key}', seed {self.pcgrad_settings.seed}, "
            f"stratified mini-batches {'on' if self.pcgrad_settings.stratify else 'off'}",
            flush=True,
        )

    def _init_resource_pool_mgr(self) -> None:
        super()._init_resource_pool_mgr()
        for role in (Role.Actor, Role.ActorRollout, Role.ActorRolloutRef):
            if role in self.role_worker_mapping:
                self.role_worker_mapping[role] = ray.remote(PcgradActorRolloutRefWorker)

    def on_init_end(self) -> None:
        statuses = self.actor_rollout_wg.pcgrad_status()
        check_worker_status(statuses)
        print(f"rlaunch: PCGrad active on all {len(statuses)} actor rank(s)", flush=True)
        super().on_init_end()

    def _balance_batch(
        self, batch: Any, metrics: dict, logging_prefix: str = "global_seqlen", keep_minibatch: bool = False
    ) -> Any:
        """verl's balancing (padding to whole mini-batches, token balance over ranks), then the domain-stratified
        order: the place where verl decides which rank and mini-batch each sequence lands in."""
        import transfer_queue as tq

        batch = super()._balance_batch(batch, metrics, logging_prefix=logging_prefix, keep_minibatch=keep_minibatch)
        fetched = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["data_source"])
        tasks = [task_of(str(source), self.pcgrad_settings.task_map) for source in fetched["data_source"].tolist()]
        rollout_n = self.config.actor_rollout_ref.rollout.n
        mini_batch = self.config.actor_rollout_ref.actor.ppo_mini_batch_size * rollout_n
        dp_size = max(self.actor_rollout_wg._dispatch_info["actor"]) + 1
        seq_lens = [int(tag["seq_len"]) for tag in batch.tags]
        order, counts = stratify_batch(tasks, seq_lens, dp_size, mini_batch, self.pcgrad_settings.stratify)
        metrics.update(counts)
        if order is not None:
            batch.reorder(order)
        return batch
