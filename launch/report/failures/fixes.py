"""What to change for each failure kind: a generic fix per kind, and for the kinds whose numbers the plan knows
(GPU and host memory, the engine's share, the time limit) a fix computed from the run's plan.

Runs on: any machine that sees the run directories (login node, laptop with the shared filesystem). The plan-aware
numbers a fix quotes (the preflight's prediction, the steps an attempt reached) come in a `FixContext` that
launch/report/doctor.py builds, so this module needs only the plan. A fix never changes the `Failure` it is given:
`with_plan_fix` returns a new one with the fix and the numbers the fix read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from launch.report.failures.signatures import Failure, phase_of
from launch.rundir import Plan

Details = dict[str, float | str]  # what Failure.details holds: numbers parsed from the evidence, the phase

GENERIC_FIXES = {
    "preempted": "nothing to change: SLURM gave the node to a higher-priority job and the run was requeued; if "
    "attempts lose much work, save more often (trainer.save_freq)",
    "time_limit": "the attempt ran out of time: give the mode more time (mode.time_budget_min) or save more often "
    "(trainer.save_freq) so that a requeued attempt resumes from a checkpoint",
    "host_oom": "the node ran out of host RAM: raise --mem (cluster.mem_gb) or offload less "
    "(actor_rollout_ref.actor.fsdp_config.{param,optimizer}_offload=false)",
    "engine_memory": "the rollout engine cannot fit the weights and KV cache in its share: change the engine's "
    "memory fraction (actor_rollout_ref.rollout.gpu_memory_utilization) or raise rollout TP",
    "cuda_oom": "a GPU ran out of memory: halve the micro-batch or token budget per GPU, or offload; "
    "launch.preflight=fix applies the preflight's fixes",
    "gpu_unavailable": "verl found fewer GPUs than trainer.nnodes x trainer.n_gpus_per_node: run on a partition whose "
    "nodes have GPUs (check --gres and that nvidia-smi works in the job)",
    "model_not_cached": "the nodes cannot load the model offline: download it into the HF cache the nodes read "
    "(HF_HOME) with `hf download <model>` on a machine with internet, or point actor_rollout_ref.model.path at a "
    "local directory",
    "data_missing": "a data file does not exist where the nodes look: fix data.train_files / data.val_files (absolute "
    "paths on the shared filesystem)",
    "data_error": "a data file cannot be read as verl expects: check it is parquet with verl's columns (prompt, "
    "data_source, reward_model.ground_truth)",
    "ray_start_failed": "Ray did not start on every node: read that node's ray_start log in the run directory "
    "(ports taken, auth token, a node that never ran its task)",
    "reward_error": "the reward function raised: fix the scoring code for that data source (rewards/) or the data "
    "source's name",
    "config_error": "verl refused its config: fix the override the error names (python launch/run.py ... --cfg job "
    "shows the composed config)",
    "ray_node_lost": "a Ray node died during the run: look at that node (host OOM, hardware, preemption of a node) "
    "and resubmit; the run resumes from its last checkpoint",
    "nccl_timeout": "a collective timed out: one rank stopped (read the other ranks' errors first) or the "
    "interconnect failed; rerun with NCCL_DEBUG=INFO",
    "unknown": "no known cause: read the log around the evidence",
}


def generic_fix(failure: Failure) -> str:
    before = failure.details.get("before")
    return GENERIC_FIXES[failure.kind] + (f" (before it, the log shows {before})" if before else "")


@dataclass(frozen=True)
class FixContext:
    """What the plan and the run's files say, for fixes with numbers (launch/report/doctor.py builds it)."""

    plan: Plan
    predicted_peaks_gib: dict[str, float] = field(default_factory=dict)  # phase -> the preflight's predicted peak
    next_fixes: dict[str, list[str]] = field(default_factory=dict)  # phase -> the preflight's next fix (overrides)
    steps_reached: dict[int, int] = field(default_factory=dict)  # attempt -> training steps it logged past its start
    checkpointed_step: dict[int, int] = field(default_factory=dict)  # attempt -> the checkpoint it started from
    saves_per_attempt: int = 2


def save_freq_that_fits(steps_reached: int, saves_per_attempt: int) -> int:
    """The trainer.save_freq that saves `saves_per_attempt` times in the steps one attempt reaches (at least 1)."""
    return max(1, steps_reached // saves_per_attempt)


def verl_value(plan: Plan, dotted: str) -> Any:
    node: Any = plan.verl
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def fix_cuda_oom(failure: Failure, context: FixContext, log_text: str) -> tuple[str, Details]:
    phase = phase_of(log_text)
    peaks = context.predicted_peaks_gib
    # no phase in the traceback: compare with the phase the preflight expected to peak
    phase_or_peak = phase or (max(peaks, key=peaks.__getitem__) if peaks else None)
    found: Details = {"phase": phase or "?"}
    parts = [f"{phase} phase ran out of GPU memory" if phase else "a GPU ran out of memory (no verl phase in the log)"]
    needed = float(failure.details.get("in_use_gib", failure.details.get("torch_allocated_gib", 0.0))) + float(
        failure.details.get("tried_gib", 0.0)
    )
    predicted = peaks.get(phase_or_peak) if phase_or_peak else None
    if predicted and needed > 0:
        found |= {"predicted_gib": round(predicted, 2), "needed_gib": round(needed, 2)}
        parts.append(
            f"it needed at least {needed:.1f} GiB where the preflight predicted {predicted:.1f} GiB "
            f"for {phase_or_peak} ({needed / predicted:.2f}x)"
        )
    overrides = context.next_fixes.get(phase_or_peak) if phase_or_peak else None
    if overrides:
        parts.append("the preflight's next fix for it: " + " ".join(overrides))
    else:
        parts.append("halve the micro-batch or token budget per GPU, or offload (launch.preflight=fix)")
    return "; ".join(parts), found


def fix_engine_memory(failure: Failure, context: FixContext, log_text: str) -> tuple[str, Details]:
    fraction = verl_value(context.plan, "actor_rollout_ref.rollout.gpu_memory_utilization")
    tp = verl_value(context.plan, "actor_rollout_ref.rollout.tensor_model_parallel_size")
    gpus = context.plan.resources.gpus_per_node
    # "increase" messages: the reservation is too small for weights + KV cache; an OOM inside the engine (or a wake-up
    # that finds the card taken) means the reservation is larger than what is free.
    too_small = re.search(r"No available memory for the cache blocks|increase --mem-fraction|KV cache", log_text)
    options = []
    if fraction is not None:
        fraction = float(fraction)
        new = round(min(0.9, fraction + 0.1), 2) if too_small else round(max(0.1, fraction - 0.1), 2)
        if new != fraction:
            options.append(f"actor_rollout_ref.rollout.gpu_memory_utilization={new} (now {fraction})")
    if tp is not None and too_small and (not gpus or int(tp) * 2 <= gpus):
        options.append(f"actor_rollout_ref.rollout.tensor_model_parallel_size={int(tp) * 2} (now {tp})")
    if not options:
        return GENERIC_FIXES["engine_memory"], {}
    reason = "the engine's share holds too little for weights + KV cache" if too_small else "the engine asked for "
    reason += "" if too_small else "more than the card had free"
    return f"{reason}: try " + " or ".join(options), {}


def fix_host_oom(failure: Failure, context: FixContext, log_text: str) -> tuple[str, Details]:
    mem = context.plan.resources.mem_gb
    options = []
    if mem:
        options.append(f"cluster.mem_gb={int(mem) * 2} (now --mem={mem}G)")
    for key in ("param_offload", "optimizer_offload"):
        if verl_value(context.plan, f"actor_rollout_ref.actor.fsdp_config.{key}"):
            options.append(f"actor_rollout_ref.actor.fsdp_config.{key}=false")
    predicted = (context.plan.preflight or {}).get("host_ram_gib_per_node")
    note = f" (the preflight predicted {predicted} GiB per node)" if predicted else ""
    return "the node ran out of host RAM" + note + ": raise --mem or offload less: " + " or ".join(options or ["-"]), {}


def fix_time_limit(failure: Failure, context: FixContext, log_text: str) -> tuple[str, Details]:
    attempt = failure.attempt or 1
    trainer = verl_value(context.plan, "trainer") or {}
    save_freq = trainer.get("save_freq")
    start = context.checkpointed_step.get(attempt, 0)
    reached = context.steps_reached.get(attempt)
    minutes = context.plan.resources.time_min
    limit = f" of {minutes} min" if minutes else ""
    if reached is None:
        return GENERIC_FIXES["time_limit"], {}
    found: Details = {"steps_reached": reached}
    if reached == 0:
        fix = "trainer.val_before_train=false" if trainer.get("val_before_train") else "mode.time_budget_min=<longer>"
        return f"the attempt reached no training step in its time limit{limit}: {fix}", found
    if start == 0 and save_freq is not None and int(save_freq) > reached:
        fits = save_freq_that_fits(reached, context.saves_per_attempt)
        return (
            f"the time limit{limit} came at step {reached}, before the first checkpoint (trainer.save_freq="
            f"{save_freq}): trainer.save_freq={fits} saves {context.saves_per_attempt}x per attempt"
        ), found
    return f"the time limit{limit} came at step {start + reached}; the run was requeued from its last checkpoint", found


# each returns the fix and the numbers it read (they go into the failure's details)
PLAN_FIXES: dict[str, Callable[[Failure, FixContext, str], tuple[str, Details]]] = {
    "cuda_oom": fix_cuda_oom,
    "engine_memory": fix_engine_memory,
    "host_oom": fix_host_oom,
    "time_limit": fix_time_limit,
}


def with_plan_fix(failure: Failure, context: FixContext | None, log_text: str) -> Failure:
    """The failure with its fix computed from the run's plan where the kind has one (a new Failure: the one given
    is left as it is)."""
    if context is not None and failure.kind in PLAN_FIXES:
        before = failure.details.get("before")
        fix, found = PLAN_FIXES[failure.kind](failure, context, log_text)
        fix += f" (before it, the log shows {before})" if before else ""
        return replace(failure, fix=fix, details=failure.details | found)
    if failure.kind == "cuda_oom":
        return replace(failure, details=failure.details | {"phase": phase_of(log_text) or "?"})
    return failure
