"""A run's metrics as verl logged them, read back from the run directory: the one reader behind report/compare.py and
report/doctor.py.

Runs on: any machine that sees the run directories. verl's file logger (trainer.logger includes `file`) writes JSON
lines `{"step": N, "data": {...}}` and truncates its file on every start (docs/facts.md#verl), so the job points it at
one file per attempt: <run_dir>/metrics/attempt-<n>.jsonl (launch/job.py). A requeued attempt resumes from its last
checkpoint step k and logs k, k+1, ... again; the earlier attempt's steps after k belong to work that was thrown away,
so merging keeps, for every step, what the LATEST attempt that reached it logged. Other files in metrics/ (e.g. the RFT
filter's statistics) are merged in after the attempts.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launch.calibration import modelled_step_s
from launch.rundir import STEP_TIME_METRIC, Plan, attempts, is_run_dir, load_plan, read_history
from launch.verdict import PhasePeak, predicted_torch_peaks

# verl's metric names (verl/trainer/ppo/metric_utils.py, ray_trainer.py; docs/facts.md#verl)
THROUGHPUT = "perf/throughput"  # tokens / s / GPU
MFU = "perf/mfu/actor"
MEMORY_ALLOCATED = "perf/max_memory_allocated_gb"
MEMORY_RESERVED = "perf/max_memory_reserved_gb"
STEP_TIME = STEP_TIME_METRIC
VALIDATION = re.compile(r"^val-(?:core|aux)/(?P<source>[^/]+)/(?P<var>reward|acc)/mean@(?P<n>\d+)$")


def step_s_over(history: dict[int, dict[str, Any]], steps: Iterable[int]) -> float | None:
    """Seconds per training step as every report says it (the doctor, compare's s/step and its step-time table, the
    status forecast): the median over `steps` of verl's timing_s/step less the timers verl runs inside the step for a
    checkpoint save or a rollout dump (calibration.modelled_step_s, as the step model times a step), so a run that
    saves every step and one that saves every 50th read alike, and one stalled step moves it not at all. A save's
    own seconds are said apart (calibration.measure's checkpoint_s)."""
    values = [modelled_step_s(history[step]) for step in steps if STEP_TIME in history.get(step, {})]
    return statistics.median(values) if values else None


def series(history: dict[int, dict[str, Any]], name: str) -> list[tuple[int, float]]:
    return [(step, float(data[name])) for step, data in history.items() if isinstance(data.get(name), int | float)]


def validation_series(history: dict[int, dict[str, Any]]) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """(data source, reward|acc) -> [(step, value)], from verl's val-core/val-aux names at the largest n@."""
    found: dict[tuple[str, str], dict[int, tuple[int, float]]] = {}
    for step, data in history.items():
        for name, value in data.items():
            match = VALIDATION.match(name)
            if match is None or not isinstance(value, int | float):
                continue
            key = (match["source"], match["var"])
            n = int(match["n"])
            if step not in found.setdefault(key, {}) or n > found[key][step][0]:
                found[key][step] = (n, float(value))
    return {key: [(step, value) for step, (_, value) in sorted(by_step.items())] for key, by_step in found.items()}


@dataclass(frozen=True)
class RunLabels:
    """What the report shows of a run's plan: read from plan.json, or for a run that is not on this machine from what
    W&B kept (rlaunch's provenance in the run's config) with W&B's own state of it."""

    run_id: str
    job_name: str
    algo: str
    gpu: str
    preflight_phases: dict[str, PhasePeak]  # the verdict's phases ({} when the preflight was off)
    wandb_state: str | None = None

    @classmethod
    def of_plan(cls, plan: Plan) -> RunLabels:
        return cls(
            run_id=plan.run_id,
            job_name=plan.job_name,
            algo=plan.worker_env.get("WANDB_JOB_TYPE") or plan.job_name,
            gpu=plan.gpu_profile,
            preflight_phases=plan.preflight.phases if plan.preflight is not None else {},
        )


@dataclass
class RunMetrics:
    """One run: what was planned (plan.json, or for a run read from W&B what W&B kept of it) and what verl logged."""

    run_dir: Path
    plan: Plan | None  # None: a run read from W&B (`remote`)
    history: dict[int, dict[str, Any]]
    attempts: list[dict[str, Any]] = field(default_factory=list)  # attempts.jsonl, one record per job start
    remote: RunLabels | None = None

    @property
    def local_plan(self) -> Plan:
        """The plan of a run read from its run directory (the doctor's runs always are)."""
        if self.plan is None:
            raise ValueError(f"run {self.run_id} was read from W&B: its plan.json is not here")
        return self.plan

    @property
    def labels(self) -> RunLabels:
        return self.remote if self.remote is not None else RunLabels.of_plan(self.local_plan)

    @property
    def run_id(self) -> str:
        return self.labels.run_id

    @property
    def label(self) -> str:
        """algo · gpu, plus whatever else the job's overrides vary (the job name without algo and gpu, which a
        sweep's job name holds too): how compare and the doctor name the run."""
        rest = [part for part in self.job_name.split(",") if part not in (self.algo, self.gpu)]
        return " · ".join([self.algo, self.gpu, *rest[:2]])

    @property
    def job_name(self) -> str:
        return self.labels.job_name

    @property
    def algo(self) -> str:
        return self.labels.algo

    @property
    def gpu(self) -> str:
        return self.labels.gpu

    @property
    def preflight_phases(self) -> dict[str, PhasePeak]:
        return self.labels.preflight_phases

    @property
    def wandb_state(self) -> str | None:
        return self.labels.wandb_state

    @property
    def predicted_torch_peak_gib(self) -> float | None:
        """The preflight's larger trainer-process peak as torch's counters see it (predicted_torch_peaks)."""
        peaks = predicted_torch_peaks(self.preflight_phases)
        return round(max(peaks.values()), 2) if peaks else None

    def last(self, name: str) -> float | None:
        values = series(self.history, name)
        return values[-1][1] if values else None

    def mean(self, name: str, skip_first: int = 1) -> float | None:
        """Mean over the run's steps, the first `skip_first` left out (compilation, cache warm-up)."""
        values = [value for _, value in series(self.history, name)]
        values = values[skip_first:] if len(values) > skip_first else values
        return sum(values) / len(values) if values else None

    def peak(self, name: str) -> float | None:
        values = [value for _, value in series(self.history, name)]
        return max(values) if values else None


def read_run(run_dir: Path) -> RunMetrics:
    return RunMetrics(run_dir, load_plan(run_dir), read_history(run_dir), attempts(run_dir))


def run_dirs(path: Path) -> list[Path]:
    """A run directory itself, or every run directory of a sweep directory (those holding a plan.json)."""
    if is_run_dir(path):
        return [path]
    return sorted(child for child in path.iterdir() if is_run_dir(child))


def progress(run_dir: Path) -> str:
    """How far training got, from verl's file logger (attempts merged)."""
    logged = read_history(run_dir)
    return f"step {max(logged)}" if logged else "no step yet"
