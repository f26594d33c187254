"""The run doctor: python launch/report/doctor.py <run dir | sweep dir> [threshold=value ...]

Runs on: any machine that sees the run directories (the login node, or a laptop with the shared filesystem mounted).
Reads what the plan expected (plan.json: the preflight's predicted MFU and per-phase peaks, the exact verl config,
the model's architecture) next to what verl logged (launch.report.metrics) and what the job recorded (attempts.jsonl,
not_requeued.txt), and says what holds each run back, most important first, each with the overrides that address
it. A run whose attempts failed gets the cause of each (failures/: kind, evidence, fix from the plan) before
anything else. Writes <run_dir>/diagnosis.md, which the sweep's comparison report links to (`diagnosis_path`).

    python launch/report/doctor.py --log FILE [--json]   how one bare log file's job ended, each failed attempt's cause

Importance orders the diagnoses: the share of a step's time the problem stands for beyond what a healthy run spends
there (a run that makes no progress at all: 1.0; a calibration signal, which costs no time itself: 0.0). Thresholds
and their reasons: conf/doctor.yaml.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from launch.calibration import measure, measured_lengths, model_inputs
from launch.errors import UserError, closest
from launch.memory import with_changes
from launch.overrides import as_override, as_overrides, key_of, keys_of, parse_one
from launch.preflight import TUNE_HEADROOM, WhatIf, candidate_fixes
from launch.report import failures
from launch.report.failures.fixes import (
    PhaseFix,
    budget_for_a_first_step,
    not_requeued_reason,
    passed_save_without_checkpoint,
    signal_at_start,
    who_cancelled,
)
from launch.report.failures.logs import Attempt, job_logs
from launch.report.metrics import (
    MEMORY_ALLOCATED,
    MEMORY_RESERVED,
    MFU,
    STEP_TIME,
    RunMetrics,
    predicted_torch_peaks,
    read_run,
    run_dirs,
    series,
    step_s_over,
)
from launch.rundir import (
    PLAN_FILE,
    attempt_log_path,
    hang_records,
    read_records,
    steady_steps,
    warmup_steps,
)
from launch.steptime import Lengths, forecast

THRESHOLDS_FILE = Path(__file__).resolve().parents[2] / "conf" / "doctor.yaml"
DIAGNOSIS_FILE = "diagnosis.md"

# verl's names (verl/trainer/ppo/ray_trainer.py marked_timer, experimental/agent_loop/agent_loop.py)
GEN_TIME = "timing_s/gen"
REWARD_TIME = "timing_s/reward"
UPDATE_TIME = "timing_s/update_actor"
# verl 0.9 scores rule-based rewards inside the agent loop as each sample finishes, so generation ends only when the
# slowest sample is also scored: that sample's scoring time is reward time the step waits for, beside timing_s/reward.
STREAMED_REWARD_TIME = "agent_loop/slowest/compute_score"

# Most important first when importance ties.
KINDS = (
    "requeue_without_progress",
    "requeues_exhausted",
    "low_mfu",
    "reward_bound",
    "generation_bound",
    "memory_calibration",
)


@dataclass(frozen=True)
class DoctorThresholds:
    """The schema of conf/doctor.yaml, the only source of the values (each commented there with its reason)."""

    min_steps: int
    mfu_ratio_low: float
    memory_used_max: float
    reward_share_high: float
    reward_cpu_share: float
    generation_share_high: float
    memory_over_ratio: float
    memory_under_ratio: float
    requeues_without_progress: int
    saves_per_attempt: int


@dataclass
class Diagnosis:
    kind: str  # one of KINDS
    headline: str  # one line: what holds the run back, with its numbers
    evidence: dict[str, float | int | str]  # the numbers behind it, by name
    overrides: list[str]  # key=value lines to try (verl's or rlaunch's keys, as python launch/run.py takes them)
    importance: float  # share of step time beyond a healthy run's; 1.0 = no progress at all; orders the diagnoses
    alternatives: list[str] = field(default_factory=list)  # another way to the same end (e.g. launch.preflight=tune)


def load_thresholds(overrides: Sequence[str] = (), path: Path = THRESHOLDS_FILE) -> DoctorThresholds:
    """conf/doctor.yaml, typed, with `name=value` overrides on top."""
    names = [item.name for item in fields(DoctorThresholds)]
    given: dict[str, Any] = {}
    for item in overrides:
        parsed = parse_one(item)
        if parsed is None or key_of(parsed) not in names:
            name = key_of(parsed) if parsed is not None else item
            raise UserError(
                f"unknown doctor threshold '{item}'{closest(name, names)}: write name=value with one of "
                f"{', '.join(names)} (conf/doctor.yaml)"
            )
        # a sweep (a,b) goes on as its text: the schema's type check then names the threshold and its type
        given[key_of(parsed)] = parsed.get_value_string() if parsed.is_sweep_override() else parsed.value()
    try:
        merged = OmegaConf.merge(OmegaConf.structured(DoctorThresholds), OmegaConf.load(path), OmegaConf.create(given))
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as error:
        first_line = str(error).strip().splitlines()[0]
        key = getattr(error, "full_key", None) or "?"
        message = f"bad doctor threshold {key}: {first_line} (conf/doctor.yaml holds every name with its reason)"
        raise UserError(message) from error


# --- what the plan expected ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expectation:
    """The preflight's view of the run, from plan.json: its predictions, and its answers to what-ifs."""

    what_if: WhatIf  # the preflight's answers, from the knobs it judged
    mfu: float  # the verdict's predicted MFU
    torch_peak_gib: float  # predicted trainer peak without what torch's counters never see
    torch_peak_phase: str


def expectation(run: RunMetrics) -> Expectation | None:
    """None when the run was planned with launch.preflight=off (no prediction to compare with) or its plan does not
    record the knobs the preflight judged."""
    plan = run.local_plan
    what_if = WhatIf.of_plan(plan)
    if plan.preflight is None or what_if is None:
        return None
    torch_peaks = predicted_torch_peaks(plan.preflight.phases)
    peak_phase = max(torch_peaks, key=torch_peaks.__getitem__)
    return Expectation(
        what_if=what_if,
        mfu=float(plan.preflight.predicted.mfu),
        torch_peak_gib=round(torch_peaks[peak_phase], 2),
        torch_peak_phase=peak_phase,
    )


# --- what verl measured ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepTimes:
    """Seconds per training step, each the median over the steady steps (`steady`): one stalled step (a
    filesystem hiccup, a node that paused for hours) moves a mean by its whole length but a median not at all. The
    step is metrics.step_s_over's, checkpoint saves apart, as compare.py and the status forecast say it: a phase's
    share of it does not shrink in a run that saves every step."""

    steps: int  # steady training steps
    step_s: float
    gen_s: float
    reward_s: float  # timing_s/reward + the streamed scoring of the slowest sample
    update_s: float

    def share(self, seconds: float) -> float:
        return seconds / self.step_s if self.step_s > 0 else 0.0


def training_steps(run: RunMetrics) -> list[int]:
    """The steps verl timed as training steps (a validation-only record, before training or at a resumed step, has
    no step time)."""
    return [step for step, _ in series(run.history, STEP_TIME)]


def steady(run: RunMetrics) -> set[int]:
    """The steps that time a steady step, as launch/calibration.py measures a run's phases on them
    (rundir.steady_steps): every training step but the run's first and each attempt's first, which compile, capture
    CUDA graphs and warm the allocator. A run read from W&B has no attempt files: only its first is left out."""
    warmup = warmup_steps(run.run_dir) if run.plan is not None else frozenset()
    return set(steady_steps(run.history, warmup))


def steady_median(run: RunMetrics, name: str) -> float | None:
    """`name`'s median over the run's steady steps (None where verl logged it on none of them)."""
    steps = steady(run)
    values = [value for step, value in series(run.history, name) if step in steps]
    return statistics.median(values) if values else None


def step_times(run: RunMetrics, thresholds: DoctorThresholds) -> StepTimes | None:
    """None when the run has too few steady steps to say anything about its speed."""
    steps = len(steady(run))
    if steps < thresholds.min_steps:
        return None

    def median(name: str) -> float:
        return steady_median(run, name) or 0.0

    return StepTimes(
        steps=steps,
        step_s=step_s_over(run.history, steady(run)) or 0.0,
        gen_s=median(GEN_TIME),
        reward_s=median(REWARD_TIME) + median(STREAMED_REWARD_TIME),
        update_s=median(UPDATE_TIME),
    )


def rounded(value: float, digits: int = 3) -> float:
    return round(value, digits)


# --- the diagnoses ---------------------------------------------------------------------------------------------------


def diagnose_low_mfu(
    run: RunMetrics, times: StepTimes, expected: Expectation, thresholds: DoctorThresholds
) -> Diagnosis | None:
    """MFU far below the prediction while the card has room: the micro-batch (or token budget) `tune` would choose."""
    measured = steady_median(run, MFU)
    if measured is None or expected.mfu <= 0:
        return None
    ratio = measured / expected.mfu
    measured_peak = run.peak(MEMORY_RESERVED)
    memory_gib = measured_peak if measured_peak is not None else expected.torch_peak_gib
    memory_used = memory_gib / expected.what_if.capacity_gib
    if ratio >= thresholds.mfu_ratio_low or memory_used > thresholds.memory_used_max:
        return None
    what_if = expected.what_if
    knobs, capacity = what_if.knobs, what_if.capacity_gib
    # only the training micro-batch here: engine concurrency is generation's business
    tuned = what_if.larger_micro_batch()
    evidence: dict[str, float | int | str] = {
        "mfu": rounded(measured),
        "predicted_mfu": rounded(expected.mfu),
        "mfu_ratio": rounded(ratio),
        "update_share": rounded(times.share(times.update_s)),
        "memory_gib": rounded(memory_gib, 2),
        "capacity_gib": capacity,
        "memory_used": rounded(memory_used),
        "train_tokens_per_micro_batch": knobs.train_tokens,
    }
    alternatives: list[str] = []
    without_checkpointing = {"checkpointing": False}
    if tuned:
        better_tokens, better_mfu = tuned.knobs.train_tokens, tuned.predicted_mfu
        overrides = as_overrides(tuned.overrides)
        if not keys_of(run.local_plan.overrides) & set(tuned.overrides):  # tune never changes a key the user set
            alternatives = ["launch.preflight=tune"]
        remedy = f"the largest micro-batch that fits with {1 - TUNE_HEADROOM:.0%} spare: {better_tokens} tokens"
    elif knobs.checkpointing and what_if.fits(without_checkpointing, TUNE_HEADROOM):
        # the micro-batch is already as large as it gets: recomputation's extra third of FLOPs is what is left
        better_tokens, better_mfu = knobs.train_tokens, what_if.predicted_mfu(without_checkpointing)
        overrides = as_overrides(what_if.overrides(without_checkpointing))
        remedy = "the micro-batch is already the largest that fits; gradient checkpointing can go"
    else:
        better_tokens, better_mfu = knobs.train_tokens, what_if.predicted_mfu()
        overrides = []
        remedy = "the preflight finds no larger micro-batch that fits: look at the data (short sequences?) or kernels"
    evidence["tuned_train_tokens_per_micro_batch"] = better_tokens
    evidence["tuned_predicted_mfu"] = rounded(better_mfu)
    headline = (
        f"MFU {measured:.1%} is {ratio:.0%} of the predicted {expected.mfu:.1%} while the trainer uses "
        f"{memory_gib:.1f} of {capacity:.1f} GiB: {remedy}"
    )
    importance = times.share(times.update_s) * (1 - ratio)  # the update at the predicted MFU takes `ratio` of it
    return Diagnosis("low_mfu", headline, evidence, overrides, rounded(importance), alternatives)


def diagnose_reward_bound(run: RunMetrics, times: StepTimes, thresholds: DoctorThresholds) -> Diagnosis | None:
    """Reward scoring a large share of the step: more reward workers, and scoring processes up to the CPU budget."""
    share = times.share(times.reward_s)
    if share <= thresholds.reward_share_high:
        return None
    reward = run.local_plan.verl["reward"]
    workers = int(reward["num_workers"])
    procs = reward["custom_reward_function"].get("reward_kwargs", {}).get("procs")
    resources = run.local_plan.resources
    cpus = resources.cpus_per_task * resources.nodes  # one task per node holds the node's CPUs
    more_workers = 2 * workers
    overrides = [as_override("reward.num_workers", more_workers)]
    budget_procs = max(1, math.floor(cpus * thresholds.reward_cpu_share / more_workers))
    if procs is not None and budget_procs > int(procs):  # null already scales with the node's cores (rewards/)
        overrides.append(as_override("reward.custom_reward_function.reward_kwargs.procs", budget_procs))
    evidence: dict[str, float | int | str] = {
        "reward_share": rounded(share),
        "reward_s": rounded(times.reward_s, 2),
        "streamed_reward_s": rounded(steady_median(run, STREAMED_REWARD_TIME) or 0.0, 2),
        "step_s": rounded(times.step_s, 2),
        "reward_workers": workers,
        "procs_per_worker": "null" if procs is None else int(procs),
        "cpus": cpus,
    }
    headline = (
        f"reward scoring takes {share:.0%} of the step ({times.reward_s:.1f} of {times.step_s:.1f} s) while the GPUs "
        f"wait: score with {more_workers} reward workers instead of {workers}"
    )
    importance = share - thresholds.reward_share_high
    return Diagnosis("reward_bound", headline, evidence, overrides, rounded(importance))


def run_lengths(run: RunMetrics) -> Lengths | None:
    """The run's typical prompt and response as calibration.json takes them (verl's means over the steady steps, the
    plan's typical ones where verl logged none); None for a plan without a step-time forecast."""
    planned = run.local_plan.time
    if planned is None:
        return None
    measured = measure(run.history, warmup_steps(run.run_dir))
    return measured_lengths(run.local_plan, measured) if measured is not None else planned.lengths


def modelled_generate_s(run: RunMetrics, lengths: Lengths, changes: dict[str, Any]) -> float | None:
    """The step-time model's generate seconds for this run's plan with these Knobs changes, at `lengths`; None for a
    plan the model cannot time (no forecast recorded, an unknown architecture)."""
    inputs = model_inputs(run.local_plan)
    if inputs is None:
        return None
    arch, knobs, card, critic = inputs
    return forecast(arch, with_changes(knobs, **changes), card, run.local_plan.verl, lengths, critic).phases_s[
        "generate"
    ]


def model_verdict(run: RunMetrics, changes: dict[str, Any]) -> tuple[float, float] | None:
    """(model's generate s now, with `changes`) at the run's lengths; None where the model cannot time the plan."""
    lengths = run_lengths(run)
    if lengths is None:
        return None
    now, then = modelled_generate_s(run, lengths, {}), modelled_generate_s(run, lengths, changes)
    return (now, then) if now is not None and then is not None else None


def faster_rollout_tp(run: RunMetrics, what_if: WhatIf) -> tuple[int, float, float] | None:
    """(TP, model's generate s now, with it): the engine TP (half or double the run's, one that fits and divides a
    node) for which the step-time model predicts the shortest generate phase at the run's lengths, where that is
    shorter than now. A wider engine decodes each sequence faster but the GPUs form fewer engines, each with more
    sequences to decode: which wins depends on the model, the card and the lengths, so the model decides."""
    tp = what_if.knobs.rollout_tp
    timed = [
        (verdict[1], verdict[0], other)
        for other in (tp * 2, tp // 2)
        if 1 <= other != tp and what_if.knobs.gpus_per_node % other == 0 and what_if.fits({"rollout_tp": other})
        if (verdict := model_verdict(run, {"rollout_tp": other})) is not None and verdict[1] < verdict[0]
    ]
    if not timed:
        return None
    then, now, best = min(timed)
    return best, now, then


def diagnose_generation_bound(
    run: RunMetrics, times: StepTimes, expected: Expectation | None, thresholds: DoctorThresholds
) -> Diagnosis | None:
    """Generation dominating the step: the engine concurrency the KV cache allows, then the rollout TP the step-time
    model predicts generates faster."""
    share = times.share(times.gen_s)
    if share <= thresholds.generation_share_high:
        return None
    rollout = run.local_plan.verl["actor_rollout_ref"]["rollout"]
    evidence: dict[str, float | int | str] = {
        "generation_share": rounded(share),
        "gen_s": rounded(times.gen_s, 2),
        "step_s": rounded(times.step_s, 2),
        "max_num_seqs": int(rollout["max_num_seqs"]),
        "rollout_tp": int(rollout["tensor_model_parallel_size"]),
        "gpu_memory_utilization": float(rollout["gpu_memory_utilization"]),
    }
    overrides: list[str] = []
    remedies: list[str] = []
    if expected is not None:
        what_if = expected.what_if
        knobs = what_if.knobs
        # only the engine's concurrency here
        concurrency = what_if.more_engine_sequences()
        wanted = concurrency.knobs.max_num_seqs if concurrency else knobs.max_num_seqs
        # more sequences in flight make each decode step longer as well as fewer: only where the model says it pays
        # (a plan the model cannot time keeps the preflight's word: the KV cache holds them)
        timed = model_verdict(run, {"max_num_seqs": wanted}) if concurrency else None
        if concurrency and (timed is None or timed[1] < timed[0]):
            overrides += as_overrides(concurrency.overrides)
            said = (
                f"generate {timed[0]:.0f} -> {timed[1]:.0f} s by the step-time model" if timed else "by the preflight"
            )
            remedies.append(f"max_num_seqs {knobs.max_num_seqs} -> {wanted} (the KV cache holds them: {said})")
        faster = faster_rollout_tp(run, what_if)
        if faster is not None:
            tp, now_s, then_s = faster
            overrides += as_overrides(what_if.overrides({"rollout_tp": tp}))
            evidence["model_generate_s"] = rounded(now_s, 1)
            evidence[f"model_generate_s_at_tp{tp}"] = rounded(then_s, 1)
            remedies.append(
                f"rollout TP {knobs.rollout_tp} -> {tp} (the step-time model at the run's lengths: generate "
                f"{now_s:.0f} -> {then_s:.0f} s)"
            )
    headline = f"generation takes {share:.0%} of the step ({times.gen_s:.1f} of {times.step_s:.1f} s)" + (
        f": {'; '.join(remedies)}"
        if remedies
        else ": by the step-time model no engine setting that fits generates faster (more max_num_seqs, rollout TP "
        "x2 or /2)"
    )
    importance = share - thresholds.generation_share_high
    return Diagnosis("generation_bound", headline, evidence, overrides, rounded(importance))


def diagnose_memory_calibration(
    run: RunMetrics, expected: Expectation, thresholds: DoctorThresholds
) -> Diagnosis | None:
    """Measured trainer peak far from the preflight's prediction: a calibration signal, no override."""
    measured = run.peak(MEMORY_RESERVED)
    if measured is None or expected.torch_peak_gib <= 0:
        return None
    ratio = measured / expected.torch_peak_gib
    if thresholds.memory_under_ratio <= ratio <= thresholds.memory_over_ratio:
        return None
    evidence: dict[str, float | int | str] = {
        "measured_reserved_gib": rounded(measured, 2),
        "measured_allocated_gib": rounded(run.peak(MEMORY_ALLOCATED) or 0.0, 2),
        "predicted_gib": expected.torch_peak_gib,
        "predicted_phase": expected.torch_peak_phase,
        "ratio": rounded(ratio),
        "capacity_gib": expected.what_if.capacity_gib,
    }
    if ratio > thresholds.memory_over_ratio:
        consequence = "the preflight under-predicts: its 'fits' and tune's headroom are optimistic for this setup"
    else:
        consequence = "the preflight over-predicts: tune stops at micro-batches smaller than what fits"
    headline = (
        f"measured trainer peak {measured:.1f} GiB is {ratio:.2f}x the preflight's {expected.torch_peak_gib:.1f} GiB "
        f"({expected.torch_peak_phase}, torch-visible): {consequence}; a calibration signal "
        "(bench/gpu_memory.py)"
    )
    return Diagnosis("memory_calibration", headline, evidence, [], 0.0)


def steps_reached(run: RunMetrics, starts: list[int]) -> list[int]:
    """Training steps each attempt logged beyond the checkpoint it started from (0 for an attempt with no log)."""
    reached = []
    for number, start in enumerate(starts, start=1):
        path = attempt_log_path(run.run_dir, number)
        steps = [step for step, _ in read_records(path)] if path.exists() else []
        reached.append(max(0, max(steps, default=start) - start))
    return reached


def diagnose_requeues(run: RunMetrics, thresholds: DoctorThresholds) -> Diagnosis | None:
    """Attempts that restart from the same checkpoint again and again, or a run the job stopped requeueing."""
    starts = [int(attempt.get("checkpointed_step") or 0) for attempt in run.attempts]
    stalled = 0
    for before, after in zip(reversed(starts[:-1]), reversed(starts[1:]), strict=True):
        if after > before:
            break
        stalled += 1
    # the job's words, where its attempts' steps do not contradict them (fixes.not_requeued_reason)
    context = failures.FixContext(
        plan=run.local_plan,
        steps_reached=dict(enumerate(steps_reached(run, starts), start=1)),
        checkpointed_step=dict(enumerate(starts, start=1)),
    )
    stop_reason = not_requeued_reason(context, run.run_dir) or ""
    # the job writes not_requeued.txt for every stop (launch/job.py): requeues used up (the test its checkpoint()
    # applies), but also a hang it refused to requeue on purpose, which more requeues would only repeat (the
    # failure says that one)
    limit = run.local_plan.cluster_settings.max_requeues
    hung_last = any(record.get("attempt") == len(starts) for record in hang_records(run.run_dir))
    ran_out = bool(stop_reason) and len(starts) > limit and not hung_last
    if stalled < thresholds.requeues_without_progress and not ran_out:
        return None
    trainer = run.local_plan.verl["trainer"]
    reached = steps_reached(run, starts)
    last_step = max(run.history, default=0)
    evidence: dict[str, float | int | str] = {
        "attempts": len(starts),
        "checkpointed_steps": ",".join(map(str, starts)),
        "steps_reached": ",".join(map(str, reached)),
        "requeues_without_progress": stalled,
        "last_step": last_step,
        "save_freq": int(trainer["save_freq"]),
    }
    if stop_reason:
        evidence["not_requeued"] = stop_reason
    if stalled == 0:  # stopped after making progress: it ran out of requeues
        headline = f"the job stopped requeueing at step {last_step}: {stop_reason}"
        # more requeues than it had: max_requeues=0 doubled is still 0
        overrides = [as_override("cluster.max_requeues", max(2 * limit, limit + 1))]
        if 0 < reached[-1] < int(trainer["save_freq"]):  # its last attempt never saved: a requeue starts over
            save_freq = failures.save_freq_that_fits(reached[-1], thresholds.saves_per_attempt)
            overrides.insert(0, as_override("trainer.save_freq", save_freq))
            headline += f"; its last attempt reached {reached[-1]} steps and saved none (trainer.save_freq="
            headline += f"{trainer['save_freq']}), so a requeue would start over"
        return Diagnosis("requeues_exhausted", headline, evidence, overrides, 1.0)
    stalled_reach = max(reached[-(stalled + 1) :])
    overrides: list[str] = []
    if 0 < stalled_reach and stalled_reach // thresholds.saves_per_attempt < int(trainer["save_freq"]):
        save_freq = failures.save_freq_that_fits(stalled_reach, thresholds.saves_per_attempt)
        overrides.append(as_override("trainer.save_freq", save_freq))
        remedy = f"an attempt reaches {stalled_reach} steps but saves every {trainer['save_freq']}"
    elif stalled_reach == 0 and (at_start := signal_at_start(run.local_plan)):
        remedy = f"no attempt reaches a training step: {at_start}"
    elif stalled_reach == 0 and trainer.get("val_before_train"):
        overrides.append(as_override("trainer.val_before_train", False))
        remedy = "no attempt reaches a training step: every start validates first"
    elif stalled_reach == 0:
        remedy = f"no attempt reaches a training step: {budget_for_a_first_step(run.local_plan)}"
    else:  # past save_freq's step and still no checkpoint: verl did not save (fixes.passed_save_without_checkpoint)
        remedy = passed_save_without_checkpoint(context) or "no attempt reaches a checkpoint"
    if stalled_reach == 0 and "save_freq" in stop_reason:  # the job's words: no step was reached, no save to bring in
        stop_reason = stop_reason.split(":")[0] + " (no attempt reached a step: a lower trainer.save_freq cannot help)"
        evidence["not_requeued"] = stop_reason
    headline = (
        f"{stalled} requeue(s) in a row restarted from checkpoint step {starts[-1]} (last logged step {last_step}): "
        f"{remedy}" + (f"; not requeued again: {stop_reason}" if stop_reason else "")
    )
    return Diagnosis("requeue_without_progress", headline, evidence, overrides, 1.0)


def diagnose(run: RunMetrics, thresholds: DoctorThresholds | None = None) -> list[Diagnosis]:
    """What holds the run back, most important first (an empty list: nothing by the thresholds)."""
    thresholds = thresholds or load_thresholds()
    expected = expectation(run)
    times = step_times(run, thresholds)
    found = [diagnose_requeues(run, thresholds)]
    if times is not None:
        if expected is not None:
            found.append(diagnose_low_mfu(run, times, expected, thresholds))
        found.append(diagnose_reward_bound(run, times, thresholds))
        found.append(diagnose_generation_bound(run, times, expected, thresholds))
    if expected is not None:
        found.append(diagnose_memory_calibration(run, expected, thresholds))
    diagnoses = [item for item in found if item is not None]
    return sorted(diagnoses, key=lambda item: (-item.importance, KINDS.index(item.kind)))


# --- failed attempts -------------------------------------------------------------------------------------------------


def phase_fixes(what_if: WhatIf) -> dict[str, list[PhaseFix]]:
    """phase -> every preflight fix that lowers its predicted peak, cheapest first, with how much: an OOM's fix must
    free what the attempt lacked, and the cheapest fix that lowers the peak at all may free far less."""
    now = what_if.peaks()
    found: dict[str, list[PhaseFix]] = {}
    for fix in candidate_fixes(what_if.arch, what_if.knobs, what_if.capacity_gib):
        overrides = as_overrides(what_if.overrides(fix.changes))
        for name, peak in what_if.peaks(fix.changes).items():
            if peak < now[name] - 0.01:
                found.setdefault(name, []).append(PhaseFix(overrides, round(now[name] - peak, 2), fix.description))
    return found


def failure_context(run: RunMetrics, thresholds: DoctorThresholds) -> failures.FixContext:
    """The plan's numbers a failure's fix quotes: predicted peaks, the preflight's fixes per phase, each attempt's
    reach."""
    phases = run.preflight_phases
    expected = expectation(run) if phases else None
    starts = [int(attempt.get("checkpointed_step") or 0) for attempt in run.attempts]
    reached = steps_reached(run, starts) if starts else []
    return failures.FixContext(
        plan=run.local_plan,
        predicted_peaks_gib={name: float(phase.peak_gib) for name, phase in phases.items()},
        phase_fixes=phase_fixes(expected.what_if) if expected is not None else {},
        steps_reached=dict(enumerate(reached, start=1)),
        checkpointed_step=dict(enumerate(starts, start=1)),
        saves_per_attempt=thresholds.saves_per_attempt,
        attempt_records=dict(enumerate(run.attempts, start=1)),
    )


def run_failures(
    run: RunMetrics, thresholds: DoctorThresholds | None = None, record: failures.JobRecord | None = None
) -> list[failures.Failure]:
    """The cause of each failed or interrupted attempt of the run, with fixes from its plan; `record`: what the
    scheduler says of its job, where it answered (failures.job_records)."""
    context = failure_context(run, thresholds or load_thresholds())
    return failures.run_failures(run.run_dir, context, record)


# --- output ----------------------------------------------------------------------------------------------------------


def diagnosis_path(run_dir: Path) -> Path:
    """Where `write_diagnosis` puts a run's diagnosis (for links: compare.py)."""
    return run_dir / DIAGNOSIS_FILE


def retry_command(run: RunMetrics, item: Diagnosis) -> str:
    """The run's own overrides plus the diagnosis's, as one command line."""
    return " ".join(["python launch/run.py", *run.local_plan.overrides, *item.overrides])


def speed_unjudged(run: RunMetrics, thresholds: DoctorThresholds) -> str | None:
    """Why the speed diagnoses (MFU, reward- and generation-bound) were not made: fewer steady steps than min_steps
    (step_times); None where they were."""
    steps = len(steady(run))
    if steps >= thresholds.min_steps:
        return None
    return (
        f"{steps} steady step(s) of the min_steps={thresholds.min_steps} its speed and MFU need (the run's first "
        "step and each attempt's first are left out)"
    )


def nothing_found(run: RunMetrics, thresholds: DoctorThresholds | None = None, state: str | None = None) -> str:
    """What an empty diagnosis means: a run with no training step yet was not judged at all (its attempts started,
    verl has not finished a step), and one with too few steady steps not for its speed, which is not the same as a
    run the thresholds found healthy."""
    if not training_steps(run) and state == "COMPLETED":
        return (
            "the job COMPLETED with no training step in its metrics, so nothing to judge: verl's file logger wrote "
            "none (trainer.logger must include file; a run planned for 0 steps ends at once)"
        )
    if not training_steps(run):
        return "no training step logged yet, so nothing to judge (verl logs its first once step 1 ends)"
    unjudged = speed_unjudged(run, thresholds or load_thresholds())
    if unjudged is not None:
        return f"speed not judged yet: {unjudged}; nothing else holds this run back (conf/doctor.yaml)"
    return "nothing holds this run back by the doctor's thresholds (conf/doctor.yaml)"


def render_markdown(
    run: RunMetrics,
    diagnoses: list[Diagnosis],
    failed: Sequence[failures.Failure] = (),
    thresholds: DoctorThresholds | None = None,
    state: str | None = None,
    record: failures.JobRecord | None = None,
) -> str:
    lines = [
        f"# Diagnosis of run {run.run_id}",
        "",
        f"{run.label} · `{run.run_dir}`",  # the job name repeats algo and gpu: said once, as compare says it
        "",
    ]
    said = state_line(run, state, failed, record)
    if said:
        lines += [said[:1].upper() + said[1:] + ".", ""]
    attempts = attempt_count(run, failed)
    for item in failed:
        word = ended_word(item, state, failed, attempts)
        lines += [
            f"## Attempt {item.attempt or '?'} {word}: {item.label}" + (f" (node {item.node})" if item.node else "")
        ]
        lines += ["", "```", *item.evidence, "```", "", f"Fix: {item.fix}", ""]
    if not diagnoses and not failed:
        said = nothing_found(run, thresholds, state)
        lines.append(said[:1].upper() + said[1:] + ".")  # str.capitalize would lower "MFU"
    for number, item in enumerate(diagnoses, start=1):
        lines += [f"## {number}. {item.kind} (importance {item.importance:.3f})", "", item.headline, ""]
        lines += ["| evidence | value |", "|---|---|"]
        lines += [f"| {name} | {value} |" for name, value in item.evidence.items()]
        lines.append("")
        if item.overrides:
            lines += ["Try:", "", "    " + retry_command(run, item), ""]
        for alternative in item.alternatives:
            lines += [f"or `{alternative}`.", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_diagnosis(
    run: RunMetrics,
    diagnoses: list[Diagnosis],
    failed: Sequence[failures.Failure] = (),
    thresholds: DoctorThresholds | None = None,
    state: str | None = None,
    record: failures.JobRecord | None = None,
) -> Path:
    path = diagnosis_path(run.run_dir)
    path.write_text(render_markdown(run, diagnoses, failed, thresholds, state, record))
    return path


# the states in which the scheduler holds the job (again): its failed attempts were requeued (logs.QUEUED_STATES)
STILL_HELD = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RUNNING", "COMPLETING")


def attempt_count(run: RunMetrics, failed: Sequence[failures.Failure]) -> int:
    """How many attempts the run has had: attempts.jsonl's records, or the highest attempt a failure names."""
    return max([len(run.attempts), *(item.attempt or 0 for item in failed)])


def still_held(state: str | None) -> bool:
    return state is not None and state.split(" ")[0] in STILL_HELD


def requeued_after(
    item: failures.Failure, state: str | None, failed: Sequence[failures.Failure], attempts: int
) -> bool:
    """The job went on after this failure's attempt: a later attempt, a job the scheduler holds again, or a cancel
    that found it waiting to start again."""
    if item.kind == "cancelled" or not item.attempt:
        return False
    waited = any(other.kind == "cancelled" and other.attempt is None for other in failed)
    return item.attempt < attempts or still_held(state) or waited


def ended_word(
    item: failures.Failure, state: str | None, failed: Sequence[failures.Failure] = (), attempts: int = 0
) -> str:
    """How a failure's attempt ended, as the doctor's line starts: 'cancelled', 'ended' for an attempt the job went
    on after (requeued_after), else 'failed'."""
    if item.kind == "cancelled":
        return "cancelled"
    return "ended" if requeued_after(item, state, failed, attempts) else "failed"


def state_line(
    run: RunMetrics,
    state: str | None,
    failed: Sequence[failures.Failure] = (),
    record: failures.JobRecord | None = None,
) -> str | None:
    """The run's state as `sweep.py status` gives it (failures.run_state: the scheduler's, else the job's records), in
    words, with each earlier attempt's end where the job went on: 'running (attempt 2; attempt 1 ended: time_limit,
    requeued)', 'cancelled by user alice (uid 1000) before it started', 'completed'; None for a run no manifest
    lists."""
    if state is None:
        return None
    attempts = attempt_count(run, failed)
    word = state.split(" ")[0]
    ended = "".join(
        f"; attempt {item.attempt} ended: {item.kind}, requeued"
        for item in failed
        if requeued_after(item, state, failed, attempts)
    )
    if (record is not None and record.cancelled) or word == "CANCELLED":
        slurm = record is None or record.scheduler == "SLURM"
        who = f" by {who_cancelled(state)}" if slurm else " through Ray's job API"
        waited = any(item.kind == "cancelled" and item.attempt is None for item in failed)
        when = " before it started" if not attempts else " while it waited to start again" if waited else ""
        said = f"cancelled{who}{when}" + (f" ({ended[2:]})" if ended else "")
    elif still_held(state) and attempts:
        now = f"attempt {attempts}" if word == "RUNNING" else f"attempt {attempts + 1} waits to start"
        said = f"{word.lower()} ({now}{ended})"
    else:
        said = word.lower() + state[len(word) :]
    return f"state: {said}" + (f" ({state})" if said.split(" ")[0].upper() != word else "")


def render_text(
    run: RunMetrics,
    diagnoses: list[Diagnosis],
    written: Path,
    failed: Sequence[failures.Failure] = (),
    thresholds: DoctorThresholds | None = None,
    state: str | None = None,
    record: failures.JobRecord | None = None,
) -> str:
    lines = [f"run {run.run_id}  {run.algo}  {run.gpu}  ({run.run_dir})"]
    said = state_line(run, state, failed, record)
    if said:
        lines.append(f"  {said}")
    attempts = attempt_count(run, failed)
    for item in failed:
        word = ended_word(item, state, failed, attempts)
        lines += [
            f"  {word} " + line if number == 0 else "  " + line for number, line in enumerate(failures.render(item))
        ]
    if not diagnoses and not failed:
        lines.append(f"  no diagnosis: {nothing_found(run, thresholds, state)}")
    for number, item in enumerate(diagnoses, start=1):
        lines.append(f"  {number}. [{item.kind}] {item.headline}")
        lines.append("     evidence: " + ", ".join(f"{name} {value}" for name, value in item.evidence.items()))
        if item.overrides:
            alternatives = "".join(f"   (or {alternative})" for alternative in item.alternatives)
            lines.append(f"     try: {' '.join(item.overrides)}{alternatives}")
    lines.append(f"  -> {written}")
    return "\n".join(lines)


def has_metrics(run: RunMetrics) -> bool:
    return bool(run.history or run.attempts)


def runs_under(path: Path) -> list[Path]:
    """The run directories to diagnose, or a UserError naming what is wrong with `path`."""
    if path.is_file():  # a run's plan.json, or a job's log without --log
        if path.name == PLAN_FILE:
            raise UserError(f"{path} is a file: give its run directory, {path.parent}")
        raise UserError(f"{path} is a file: give a run directory or a sweep directory, or --log {path} for a job's log")
    if not path.is_dir():
        raise UserError(f"no such directory: {path}: give a run directory or a sweep directory")
    found = run_dirs(path)
    if not found:
        raise UserError(
            f"{path} holds no plan.json and no run directory with one: give a run directory "
            "(<launch.runs_dir>/<sweep id>/<run id>) or its sweep directory"
        )
    return found


def doctor(path: Path, thresholds: DoctorThresholds) -> list[str]:
    """Diagnose every run under `path`, write each diagnosis.md; the text to print."""
    runs = [read_run(run_dir) for run_dir in runs_under(path)]
    said = failures.records_of(run.run_dir for run in runs)  # a cancel is only in the scheduler's record
    failed = {run.run_id: run_failures(run, thresholds, said.by_run.get(run.run_id)) for run in runs}
    planned = {run.run_id for run in runs if failures.planned_only(run.run_dir)}
    if runs and len(planned) == len(runs):  # a dry run's sweep or run: nothing ran, nothing to diagnose
        return [
            f"run {run.run_id}  ({run.run_dir}): {failures.why_only_planned(run.run_dir)}; nothing ran, so there is "
            f"nothing to diagnose (its plan: {run.run_dir / 'plan.txt'})"
            for run in runs
        ]
    if not any(has_metrics(run) or failed[run.run_id] for run in runs):
        raise UserError(
            f"no metrics under {path} and no failed attempt: verl's file logger writes "
            "<run_dir>/metrics/attempt-<n>.jsonl once the run has started (trainer.logger must include file)"
        )
    out = [f"{said.silent}: causes from the runs' own logs"] if said.silent else []
    for run in runs:
        if run.run_id in planned:
            out.append(f"run {run.run_id}  ({run.run_dir}): {failures.why_only_planned(run.run_dir)}; skipped")
            continue
        if not has_metrics(run) and not failed[run.run_id]:
            out.append(f"run {run.run_id}  ({run.run_dir}): no metrics yet, skipped")
            continue
        diagnoses = diagnose(run, thresholds) if has_metrics(run) else []
        record = said.by_run.get(run.run_id)
        state = failures.run_state(run.run_dir, record)  # as sweep.py status says it
        written = write_diagnosis(run, diagnoses, failed[run.run_id], thresholds, state, record)
        out.append(render_text(run, diagnoses, written, failed[run.run_id], thresholds, state, record))
    return out


# what a bare log says when no attempt in it failed
EMPTY_LOG = "the log is empty: the job has not written to it yet, or this is not its log"
NO_END_YET = (
    "no end yet: the log has no error and no submitit end line ('Job completed successfully', an exception, a "
    "preemption or time limit): the job is still running, or it was killed without a word (look at sacct's state)"
)


def log_outcome(attempts: list[Attempt]) -> tuple[str, list[failures.Failure]]:
    """(the job's outcome as its log shows it, the cause of each attempt that did not complete): the outcome is the
    last attempt's ending ('completed', 'failed', 'interrupted', 'cancelled': a Ray job's stop line), 'running' for a
    last attempt with neither an end line nor an error line, 'empty' for no text at all. An attempt with no end line
    that shows an error failed."""
    if not attempts:
        return "empty", []
    numbered = len(attempts) > 1
    found = []
    outcome = attempts[-1].ended
    for attempt in attempts:
        if attempt.ended == "completed":
            continue
        if attempt.ended == "cancelled":  # a Ray job's own stop line
            found.append(failures.cancel_failure(attempt, None, None))
            continue
        failure = failures.classify(attempt.text, attempt.number if numbered else None, attempt.host)
        if attempt.ended == "running" and attempt is attempts[-1]:
            if failure.kind == "unknown" and not failure.evidence:
                continue  # nothing went wrong yet: the attempt has not ended
            outcome = "failed"  # no end line, but an error the attempt stopped on
        found.append(failures.with_plan_fix(failure, None, attempt.text))
    return outcome, found


LOG_SHOWN = 6  # log files a directory's message names


def log_directory_message(path: Path) -> str:
    """--log given a directory: the log files to pass instead (a run directory's job logs through its sweep's
    manifest; else the submitit logs in it or in its submitit/<job>/ folders, stderr of task 0 first)."""
    logs = job_logs(path) if (path / "plan.json").is_file() else []
    if not logs:
        found = [*path.glob("*_log.err"), *path.glob("*_log.out"), *path.glob("submitit/*/*_log.err")]
        found += [*path.glob("*/*_log.err")] if not found else []
        logs = sorted(dict.fromkeys(found), key=lambda log: (log.suffix != ".err", "_0_log" not in log.name, log))
    if not logs:
        return (
            f"{path} is a directory with no job log in it: give the path of a job's log (e.g. submitit's "
            "<job>_0_log.err), or the run directory without --log"
        )
    named = ", ".join(map(str, logs[:LOG_SHOWN])) + (
        f" (and {len(logs) - LOG_SHOWN} more)" if len(logs) > LOG_SHOWN else ""
    )
    return f"{path} is a directory: --log reads one log file; give one of: {named}"


def classify_log(path: Path, as_json: bool) -> str:
    """--log FILE: the job's outcome and the cause of each attempt that failed (each attempt's, for a requeued job's
    submitit log: its stdout, which holds the attempt starts, is read beside a stderr file)."""
    if path.is_dir():
        raise UserError(log_directory_message(path))
    if not path.is_file():
        raise UserError(f"no such log file: {path}: give the path of a job's log (e.g. submitit's <job>_0_log.err)")
    attempts = failures.attempts_in(failures.log_with_sibling(path))
    outcome, found = log_outcome(attempts)
    # the job's failure is its last attempt's; a job that then completed or is still running has none
    failed = found[-1] if found and outcome in ("failed", "interrupted", "cancelled") else None
    if as_json:
        record: dict[str, Any] = {"outcome": outcome, "failure": failed.to_json() if failed else None}
        if len(found) > 1 or (found and failed is None):
            record["attempts"] = [item.to_json() for item in found]
        return json.dumps(record, indent=2)
    lines = [line for item in found for line in failures.render(item)]
    if outcome == "empty":
        lines.append(EMPTY_LOG)
    elif outcome == "running":
        lines.append(NO_END_YET)
    elif outcome == "completed":
        then = f"then attempt {len(attempts)} completed: " if found else "no failure: "
        lines.append(then + "the job's log ends with submitit's 'Job completed successfully'")
    else:  # the outcome last, as the lines above say it for the others (--json: `outcome`)
        lines.append(ended_line(outcome, failed, len(attempts)))
    return "\n".join(lines)


def ended_line(outcome: str, failed: failures.Failure | None, attempts: int) -> str:
    """The last line of --log's text for a job that failed, was interrupted or was cancelled."""
    cause = f" on {failed.label}" if failed is not None else ""
    last = f" (attempt {attempts}, its last)" if attempts > 1 else ""
    if outcome == "interrupted":
        return f"outcome: interrupted{cause}{last}: SLURM requeues the job, and its next attempt logs here"
    if outcome == "cancelled":
        return f"outcome: cancelled{last}: the job was stopped through its scheduler"
    return f"outcome: {outcome}{cause}{last}"


def main(argv: Sequence[str] | None = None) -> None:
    from launch.errors import exit_with_message  # the same one-line exit as the launcher's

    args = list(sys.argv[1:] if argv is None else argv)
    if any(arg in ("-h", "--help") for arg in args):
        print(__doc__)
        return
    try:
        if "--log" in args:
            rest = [arg for arg in args if arg not in ("--log", "--json")]
            if len(rest) != 1:
                raise UserError("usage: python launch/report/doctor.py --log FILE [--json]: give exactly one log file")
            print(classify_log(Path(rest[0]), "--json" in args), flush=True)
            return
        if "--json" in args:
            raise UserError(
                "--json goes with --log FILE (python launch/report/doctor.py --log FILE --json); for a run or sweep "
                "directory the doctor prints text and writes each run's diagnosis.md: drop --json"
            )
        paths = [arg for arg in args if "=" not in arg]
        if len(paths) != 1:
            raise UserError(
                "usage: python launch/report/doctor.py <run dir | sweep dir> [threshold=value ...]: "
                f"give exactly one directory (got {len(paths)})"
            )
        thresholds = load_thresholds([arg for arg in args if "=" in arg])
        for block in doctor(Path(paths[0]), thresholds):
            print(block, flush=True)
    except Exception as error:
        exit_with_message(error)


if __name__ == "__main__":
    main()
