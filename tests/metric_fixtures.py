"""Fixture runs for the metric readers (compare.py, doctor.py): real plans (composed, planned and preflighted like
any run) with metric files in verl's file-logger format and verl's real metric names, whose values follow simple
formulas so tests can assert exact numbers."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from conftest import compose_config, cpu_facts

from launch import preflight
from launch.plan import make_plan
from launch.report.metrics import RunMetrics
from launch.run import write_run_dir
from launch.rundir import attempt_log_path, load_plan

DOMAINS = ("math", "codegen", "logic", "simulation", "table", "stem")
DATA_SOURCES = {domain: f"{domain}__fixture" for domain in DOMAINS}  # GURU's <domain>__<dataset> names
SWEEP_ID = "fixture-sweep"


@dataclass(frozen=True)
class StepProfile:
    """What one training step of a fixture run reports."""

    throughput: float = 1000.0  # perf/throughput, tokens/s/GPU
    mfu: float = 0.30  # perf/mfu/actor
    memory_allocated_gb: float = 20.0  # perf/max_memory_allocated_gb
    memory_reserved_gb: float = 22.0
    gen_s: float = 40.0  # timing_s/gen
    reward_s: float = 5.0  # timing_s/reward
    update_s: float = 40.0  # timing_s/update_actor
    other_s: float = 15.0  # the rest of timing_s/step (log-prob, advantages, ...)

    @property
    def step_s(self) -> float:
        return self.gen_s + self.reward_s + self.update_s + self.other_s


def step_metrics(profile: StepProfile) -> dict[str, float]:
    return {
        "perf/throughput": profile.throughput,
        "perf/mfu/actor": profile.mfu,
        "perf/max_memory_allocated_gb": profile.memory_allocated_gb,
        "perf/max_memory_reserved_gb": profile.memory_reserved_gb,
        "timing_s/gen": profile.gen_s,
        "timing_s/reward": profile.reward_s,
        "timing_s/update_actor": profile.update_s,
        "timing_s/step": profile.step_s,
        "actor/pg_loss": 0.01,
        "critic/score/mean": 0.5,
    }


def validation_reward(domain_index: int, step: int, bonus: float) -> float:
    """The fixture's validation reward: rises with the step, per-domain offset, plus the run's bonus; the odd
    domains (codegen, simulation, stem) fall back by 0.15 at step 10, so their best is not their final value."""
    dip = 0.15 if domain_index % 2 and step == 10 else 0.0
    return round(0.1 * domain_index + 0.02 * step + bonus - dip, 6)


def validation_metrics(step: int, bonus: float) -> dict[str, float]:
    """What verl logs after validation with val n=1 and rewards/ results (score and acc): acc is the core var."""
    metrics: dict[str, float] = {}
    for index, domain in enumerate(DOMAINS):
        reward = validation_reward(index, step, bonus)
        source = DATA_SOURCES[domain]
        metrics[f"val-core/{source}/acc/mean@1"] = round(reward / 2, 6)
        metrics[f"val-aux/{source}/reward/mean@1"] = reward
    return metrics


def make_plan_dir(sweep_dir: Path, algo: str, gpu: str, *extra: str) -> Path:
    """A real run directory: composed, planned and preflighted (so plan.json carries the predicted peaks)."""
    overrides = [f"algo={algo}", f"gpu={gpu}", *extra]
    cfg = compose_config("cluster=local", f"launch.sweep_id={SWEEP_ID}", *overrides)
    plan = make_plan(cfg, cpu_facts(), overrides, sweep_dir.parent, "python")
    plan = replace(plan, run_dir=str(sweep_dir / plan.run_id))
    plan = replace(plan, preflight=preflight.check_plan(cfg, plan, {}))
    write_run_dir(plan, cfg)
    return Path(plan.run_dir)


def write_attempt(
    run_dir: Path, attempt: int, records: list[tuple[int, dict[str, Any]]], cut_last: bool = False
) -> None:
    """One attempt's verl file log; `cut_last` leaves the last line half-written, as a killed attempt does."""
    path = attempt_log_path(run_dir, attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"step": step, "data": data}) for step, data in records]
    text = "\n".join(lines) + "\n"
    if cut_last:
        text = text[: -len(lines[-1]) // 2]
    path.write_text(text)
    with (run_dir / "attempts.jsonl").open("a") as log:
        log.write(json.dumps({"attempt": attempt, "checkpointed_step": records[0][0] if attempt > 1 else 0}) + "\n")


def run_records(
    steps: range, profile: StepProfile, bonus: float, val_every: int = 5
) -> list[tuple[int, dict[str, Any]]]:
    """verl's logging order: validation before training at the step it starts from (0, or the checkpoint step on a
    resume), then one record per training step, with validation every `val_every` steps."""
    first = steps[0]
    records: list[tuple[int, dict[str, Any]]] = [(first, validation_metrics(first, bonus))]
    for step in steps[1:]:
        data: dict[str, Any] = step_metrics(profile)
        if step % val_every == 0:
            data |= validation_metrics(step, bonus)
        records.append((step, data))
    return records


def make_run(
    sweep_dir: Path,
    algo: str,
    gpu: str,
    profile: StepProfile | None = None,
    bonus: float = 0.0,
    last_step: int = 10,
    resumed_from: int | None = None,
    extra: tuple[str, ...] = (),
    memory_ratio: float | None = None,
) -> Path:
    """One fixture run, steps 0..last_step. With `resumed_from=k`, attempt 1 got to step k+2 (its steps after k
    carry nonsense values that the merged history must not show) and was killed mid-line; attempt 2 resumed at k.
    `memory_ratio` sets the reserved-memory peak to that share of the preflight's prediction for the run's plan."""
    run_dir = make_plan_dir(sweep_dir, algo, gpu, *extra)
    profile = profile or StepProfile()
    if memory_ratio is not None:
        predicted = RunMetrics(run_dir, load_plan(str(run_dir)), {}).predicted_torch_peak_gib or 0.0
        reserved = round(memory_ratio * predicted, 2)
        profile = replace(profile, memory_reserved_gb=reserved, memory_allocated_gb=round(0.9 * reserved, 2))
    if resumed_from is None:
        write_attempt(run_dir, 1, run_records(range(0, last_step + 1), profile, bonus))
        return run_dir
    lost = StepProfile(throughput=1.0, mfu=0.001, memory_allocated_gb=99.0, memory_reserved_gb=99.0)
    first = run_records(range(0, resumed_from + 1), profile, bonus)
    first += [(step, step_metrics(lost)) for step in (resumed_from + 1, resumed_from + 2)]
    write_attempt(run_dir, 1, first, cut_last=True)
    write_attempt(run_dir, 2, run_records(range(resumed_from, last_step + 1), profile, bonus))
    return run_dir


def make_fixture_sweep(root: Path) -> Path:
    """2 algos x 2 gpus, 6 domains; the mtl_pcgrad run on a40 was preempted once and resumed from step 5.
    PCGrad's validation rewards are 0.05 higher; a100_80 runs twice as fast as a40; every run's memory peak is 95 %
    of its prediction."""
    sweep_dir = root / SWEEP_ID
    for gpu, speed in (("a40", 1.0), ("a100_80", 2.0)):
        profile = StepProfile(
            throughput=1000.0 * speed, mfu=0.2 * speed, gen_s=40 / speed, update_s=40 / speed, other_s=15 / speed
        )
        make_run(sweep_dir, "guru_baseline", gpu, profile, bonus=0.0, memory_ratio=0.95)
        resumed_from = 5 if gpu == "a40" else None
        make_run(sweep_dir, "mtl_pcgrad", gpu, profile, bonus=0.05, resumed_from=resumed_from, memory_ratio=0.95)
    return sweep_dir
