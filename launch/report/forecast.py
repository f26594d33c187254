"""Where a running job is heading, from what it measured so far: ETA, the attempts it needs against the ones it may
use, when its first checkpoint lands, and early warnings when the measurements break the plan.

Runs on: any machine that sees the run directories (`sweep.py status`, the doctor). The plan's figures come from its
plan.json (launch/steptime.py's step time, readiness's step counts); the measured ones from verl's metric files
(timing_s/step, response_length/mean, perf/max_memory_reserved_gb). A warning names the key and the value that would
have made the plan hold, so the user can cancel and resubmit rather than learn it at the time limit or by OOM.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launch.calibration import measure, response_trend
from launch.report.metrics import step_s_over
from launch.rundir import (
    STEP_TIME_METRIC,
    Plan,
    is_run_dir,
    load_plan,
    read_history,
    steady_steps,
    warmup_steps,
)
from launch.rundir import attempts as run_attempts
from launch.steptime import STARTUP_MIN, spent_s, steps_within
from launch.watchdog import planned_steps

RECENT_STEPS = 10  # the measured step time: median of the last steps (step 1 left out: compilation, graph capture)
SLOWER_THAN_PLANNED = 1.5  # a measured step this much slower than planned is said, even when everything still fits
CARD_FULL = 0.90  # reserved memory above this share of the card...
GROWING_PCT_PER_10_STEPS = 5.0  # ...while responses still lengthen this fast: the next long batch may not fit


@dataclass(frozen=True)
class Forecast:
    step: int
    total_steps: int | None
    measured_step_s: float
    planned_step_s: float | None
    eta_h: float | None
    attempts_needed: int | None
    attempts_allowed: int
    first_checkpoint_step: int | None
    first_checkpoint_min: float | None  # minutes into an attempt at which the first checkpoint is written
    attempt_min: float | None
    warnings: list[str] = field(default_factory=list)
    save_s: float = 0.0  # one checkpoint save as measured (0: none yet), which measured_step_s leaves out
    attempt: int | None = None  # the attempt running now (attempts.jsonl's records), where known
    limit_min: float | None = None  # an attempt's minutes until it is stopped: start-up included

    def lines(self) -> list[str]:
        past = self.total_steps is not None and self.step > self.total_steps
        total = f"/{self.total_steps}" if self.total_steps and not past else ""
        planned = ""
        if self.planned_step_s:
            ratio = self.measured_step_s / self.planned_step_s
            shown = f"{ratio:.1f}" if ratio >= 0.1 else f"{ratio:.2g}"  # 0.0077x, not 0.0x
            planned = f" (plan {self.planned_step_s:g} s, {shown}x)"
        # the step as every report says it (metrics.step_s_over): where the run saves, the saves are said apart
        saves = f", checkpoint saves apart: {self.save_s:.0f} s each" if self.save_s else ""
        parts = [f"step {self.step}{total} at {self.measured_step_s:.0f} s/step{planned}{saves}"]
        if past:
            parts.append(f"past the plan's {self.total_steps} steps: no ETA")
        if self.eta_h is not None:
            parts.append(f"ETA {duration_text(self.eta_h * 3600)}")
        if self.attempts_needed is not None:
            now = f" (this is attempt {self.attempt})" if self.attempt else ""
            parts.append(
                f"the run needs {self.attempts_needed} attempt{'s' * (self.attempts_needed != 1)} of the "
                f"{self.attempts_allowed} allowed{now}"
            )
        elif self.attempt:
            parts.append(f"attempt {self.attempt} of {self.attempts_allowed} allowed")
        if self.first_checkpoint_min is not None and self.first_checkpoint_step is not None:
            within = f" of the attempt's {self.limit_min:.0f} min" if self.limit_min else ""
            parts.append(
                f"first checkpoint (step {self.first_checkpoint_step}) ~{self.first_checkpoint_min:.0f} min into an "
                f"attempt ({STARTUP_MIN} min of start-up assumed){within}"
            )
        return ["forecast: " + "; ".join(parts), *(f"WARNING: {warning}" for warning in self.warnings)]


def duration_text(seconds: float) -> str:
    """Hours from an hour on (1.4 h); below, minutes (12 min), and seconds below a minute (40 s): 'ETA 0.0 h' said
    nothing of a run with minutes left."""
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{max(seconds, 0.0):.0f} s"


def measured_step_s(history: dict[int, dict[str, Any]], warmup: frozenset[int] = frozenset()) -> float | None:
    """The step of every report (metrics.step_s_over: checkpoint saves apart) over the recent steady steps
    (rundir.steady_steps), which follow a run whose responses lengthen; with none yet, over the steps there are: a
    live forecast from a compiling step beats none."""
    steady = steady_steps(history, warmup) or sorted(s for s, metrics in history.items() if STEP_TIME_METRIC in metrics)
    return step_s_over(history, steady[-RECENT_STEPS:])


def measured_save_s(history: dict[int, dict[str, Any]], warmup: frozenset[int]) -> float:
    """One checkpoint save as the run measured it (calibration.measure's checkpoint_s), 0 before any: the step
    (step_s_over) leaves the saves out, and the forecast adds them where verl makes them."""
    measured = measure(history, warmup)
    return measured.checkpoint_s or 0.0 if measured is not None else 0.0


def measured_validation_s(history: dict[int, dict[str, Any]]) -> float | None:
    """verl times each validation among the steps apart from the step (timing_s/testing, on the steps it ran)."""
    measured = [float(metrics["timing_s/testing"]) for metrics in history.values() if "timing_s/testing" in metrics]
    return statistics.median(measured) if measured else None


def attempt_limit_min(plan: Plan, attempt_min: float | None) -> float | None:
    """An attempt's minutes until it is stopped, start-up included: the job's --time less the requeue signal's delay
    (cluster.signal_delay_s: submitit requeues at the signal) where the plan gives them, else the planned attempt's
    training minutes plus the start-up; the fewer of the two where both (a budget below the start-up is planned as one
    training minute, which no attempt has)."""
    planned = attempt_min + STARTUP_MIN if attempt_min else None
    minutes = plan.resources.time_min if plan.resources is not None else None
    if not minutes:
        return planned
    delay = int((plan.slurm or {}).get("signal_delay_s") or 0)
    wall = max(minutes - delay / 60, 0.0)
    return min(wall, planned) if planned is not None else wall


def forecast(
    plan: Plan, history: dict[int, dict[str, Any]], warmup: frozenset[int] = frozenset(), attempt: int | None = None
) -> Forecast | None:
    """None until a step is logged. `attempt`: the attempt running now, where known."""
    step_s = measured_step_s(history, warmup)
    if step_s is None or step_s <= 0:
        return None
    step = max(history)
    timing = plan.predicted_time
    steps = planned_steps(plan)  # the fewer of total_training_steps and the epochs' steps, as verl's fit loop runs
    total = steps.total if steps is not None else None
    attempt_min = timing.attempt_min if timing is not None else None
    allowed = 1 + plan.cluster_settings.max_requeues
    warnings: list[str] = []
    planned = plan.time.step_s if plan.time is not None else None
    if planned and step_s > SLOWER_THAN_PLANNED * planned:
        warnings.append(
            f"steps take {step_s:.0f} s, {step_s / planned:.1f}x the plan's {planned:g} s: the plan's time figures "
            "are off (calibrate.py on this run corrects the next plan of this shape)"
        )
    eta_h = attempts = first_step = first_min = None
    validation_s = measured_validation_s(history) or (timing.validation_s if timing is not None else 0.0)
    save_s = measured_save_s(history, warmup)
    trainer = plan.verl["trainer"]
    test_freq, save_freq = int(trainer.get("test_freq") or -1), int(trainer.get("save_freq") or -1)
    limit = attempt_limit_min(plan, attempt_min)
    if total and step > total:  # the run went past the plan's steps: its figures say nothing of the rest
        warnings.append(
            f"step {step} is past the plan's {total} steps (trainer.total_training_steps and the epochs, as verl's fit "
            "loop counts them): the run does not stop where it was planned to; the forecast has no ETA for it"
        )
    elif steps is not None and total:
        # VerlSteps.acts: no last-step validation (nor save) where the epochs end the run before total_training_steps
        validations, saves = steps.acts(test_freq), steps.acts(save_freq)
        # a step's metrics are logged after its save and its validation
        validated, saved = (step // freq if freq > 0 else 0 for freq in (test_freq, save_freq))
        left_s = max(0, validations - validated) * validation_s + max(0, saves - saved) * save_s
        eta_h = (max(0, total - step) * step_s + left_s) / 3600
        train_s = total * step_s + validations * validation_s + saves * save_s
        if attempt_min:
            attempts = max(1, math.ceil(train_s / 60 / attempt_min))
            # as readiness's predict_time: the first save, else (none) the whole run with nothing kept
            first_step = min(save_freq, total) if saves else total
            first_s = spent_s(first_step, step_s, validation_s, test_freq, False) + save_s if saves else train_s
            first_min = STARTUP_MIN + first_s / 60
            # one attempt that the limit stops before its first save keeps nothing: each requeue starts over (and a
            # run that would finish in one attempt does not, where that attempt is stopped before its end)
            if limit is not None and first_min > limit:
                training_min = min(attempt_min, limit - STARTUP_MIN)
                fitting = steps_within(training_min, step_s, validation_s, test_freq) if training_min > 0 else 0
                if training_min <= 0:
                    fix = (
                        f"give the job a longer limit (mode.time_budget_min): the start-up alone is assumed to take "
                        f"{STARTUP_MIN} min"
                    )
                else:
                    fix = f"set trainer.save_freq={fitting}" if fitting >= 1 else "one step outlasts the attempt"
                warnings.append(
                    f"at {step_s:.0f} s/step the first checkpoint (step {first_step}) lands after the time limit "
                    f"({first_min:.0f} of {limit:.0f} min): every requeue would start over; cancel and {fix}"
                )
            if attempts > allowed:
                fitting_steps = steps_within(allowed * attempt_min, step_s, validation_s, test_freq, to_the_end=True)
                warnings.append(
                    f"at {step_s:.0f} s/step the run needs {attempts} attempts but cluster.max_requeues="
                    f"{allowed - 1} allows {allowed}: it would stop unfinished; cancel and set "
                    f"cluster.max_requeues={attempts - 1} or trainer.total_training_steps={fitting_steps}"
                )
    warnings += memory_warning(plan, history)
    return Forecast(
        step,
        total,
        step_s,
        planned,
        eta_h,
        attempts,
        allowed,
        first_step,
        first_min,
        attempt_min,
        warnings,
        save_s,
        attempt,
        limit,
    )


def memory_warning(plan: Plan, history: dict[int, dict[str, Any]]) -> list[str]:
    """The card nearly full while responses still grow: the OOM is coming with the next longer batch."""
    capacity = plan.preflight.capacity_gib if plan.preflight is not None and plan.preflight.phases else None
    steps = sorted(history)
    reserved = [
        float(history[s]["perf/max_memory_reserved_gb"]) for s in steps if "perf/max_memory_reserved_gb" in history[s]
    ]
    responses = [float(history[s]["response_length/mean"]) for s in steps if "response_length/mean" in history[s]]
    trend = response_trend(history, steps)
    if not capacity or not reserved or not responses or trend is None:
        return []
    share = max(reserved) / capacity
    if share < CARD_FULL or trend < GROWING_PCT_PER_10_STEPS:
        return []
    maximum = int(plan.verl["data"]["max_response_length"])
    return [
        f"{100 * share:.0f} % of the card at mean response {responses[-1]:,.0f} of {maximum:,} tokens, rising "
        f"{trend:.0f} %/10 steps: lower actor_rollout_ref.actor.ppo_max_token_len_per_gpu (or the micro-batch) "
        "before a longer batch runs out of memory"
    ]


def forecast_lines(run_dir: Path, state: str) -> list[str]:
    """`status`'s lines under a run that is still going (SLURM's or Ray's state): its forecast from the steps
    measured so far, and the early warnings."""
    if not state.upper().startswith(("RUNNING", "REQUEUED", "PENDING")) or not is_run_dir(run_dir):
        return []
    attempt = len(run_attempts(run_dir)) or None
    ahead = forecast(load_plan(run_dir), read_history(run_dir), warmup_steps(run_dir), attempt)
    return [f"{'':14}{line}" for line in ahead.lines()] if ahead is not None else []
