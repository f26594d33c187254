"""The closed loop: every run measured against its plan, and the next plan of the same shape corrected by it.

Runs on: the job head (after step `launch.calibrate_after_step` and when an attempt ends: `record`), the login node
(`python launch/calibrate.py RUN_DIR...` ingests finished runs; planning reads the store: `calibrated_forecast`).

- A run's `calibration.json` (rundir.CALIBRATION_FILE) holds, per phase, the plan's figure, the measured one (verl's
  `timing_s/*` medians, step 1 left out: it compiles and captures graphs) and the error; the memory the plan
  predicted against verl's `perf/max_memory_*_gb`; and the response lengths with their trend. A checkpoint save
  (verl times it inside its step) is measured apart: `other` and the step are without it, as the model times them.
- The store is one append-only JSON-lines file per cluster, `<runs_dir>/calibration.jsonl` (the runs dir lives on
  the cluster's shared filesystem). Each line is one measured run: the cluster it ran on (`cluster_identity`: a
  store copied from another cluster, or a runs dir two clusters share, must not time this one), the GPU profile, the
  model's architecture, the
  knobs that matter, and for each phase the raw model's seconds *at the run's measured lengths* beside the measured
  seconds. Their ratio is therefore the model's own error, not a length guess's.
- A new plan takes the nearest records (same profile, architecture family and engine; similar size and tokens per
  GPU), multiplies each phase by the median measured ratio (bounded), and takes the measured mean response length of
  runs on the same data and model. The plan says so per phase: "generate 212 s: model x 0.83 from 3 runs of this
  shape on this cluster". launch.calibration=off: neither read nor written.
Appends are one write(2) of one line on an O_APPEND descriptor under an exclusive flock, so concurrent jobs never
interleave lines (NFSv4 honours flock through its lock manager); a line that does not parse is skipped with a
warning, never fatal.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import socket
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from launch.lengths import PromptStats, TypicalLengths, typical_lengths
from launch.memory import Architecture, Knobs, trains_critic
from launch.rundir import (
    CALIBRATION_FILE,
    STEP_TIME_METRIC,
    Plan,
    attempt_log_path,
    is_finite_number,
    load_plan,
    read_history,
    read_records,
    steady_steps,
    warmup_steps,
)
from launch.steptime import PHASES, Card, Lengths, StepTime, forecast
from launch.verdict import predicted_torch_peaks

STORE_FILE = "calibration.jsonl"
STORE_VERSION = 1
# verl's timing_s/<name> per phase (verl/trainer/ppo/ray_trainer.py's marked_timer names); `other` is the rest of
# timing_s/step
PHASE_METRICS = {
    "generate": ("timing_s/gen",),
    "log_prob": ("timing_s/old_log_prob", "timing_s/ref", "timing_s/values"),
    "update": ("timing_s/update_actor", "timing_s/update_critic"),
}
# timers verl 0.9.1 runs inside timing_s/step that the step model counts in no phase (ray_trainer.py's fit loop, and
# v1/trainer_base.py's): the checkpoint save (every trainer.save_freq steps and the last) and the rollout dump
# (trainer.rollout_data_dir). Left in, a save lands in `other`: at save_freq 1 or 2 it is the median step's, and every
# record of the shape is left out as "beyond the bounds". timing_s/testing is timed after the step, not inside it.
OUTSIDE_THE_MODEL = ("timing_s/save_checkpoint", "timing_s/dump_rollout_generations")
CHECKPOINT_METRIC = "timing_s/save_checkpoint"
TIMERS_SAID = 12  # timing keys a run without timing_s/step is said to have logged
VERL_VERSION = "0.9.1"  # whose metric names these are
RATIO_BOUNDS = (0.25, 4.0)  # a record further off than this is a different shape, not a calibration
BOUNDS_SAID = f"x{RATIO_BOUNDS[0]:g}-{RATIO_BOUNDS[1]:g}"
# runs of one shape whose ratios lie further apart than this timed different steps (a setting the shape does not see,
# a slow node): the plan says so, as the median of such runs may fit none of them
DISAGREEING = 1.5
NEAREST = 5  # records one plan is corrected by
MAX_SIZE_RATIO = 2.0  # parameters within 2x: same architecture family and roughly the same size
MAX_TOKENS_RATIO = 4.0  # tokens per GPU per step within 4x


# --- one run: predicted against measured ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """What verl logged, per phase (median over the steps after the first), and the lengths it saw."""

    steps: list[int]
    phases_s: dict[str, float]
    step_s: float  # the step as the model times it: verl's timing_s/step less the timers in OUTSIDE_THE_MODEL
    checkpoint_s: float | None  # one checkpoint save (median over the steps that saved); None where none did
    response_mean: float | None
    response_max: float | None
    response_clip_ratio: float | None
    prompt_mean: float | None
    memory_allocated_gib: float | None
    memory_reserved_gib: float | None
    response_trend_pct_per_10_steps: float | None


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def measure(history: dict[int, dict[str, Any]], warmup: frozenset[int] = frozenset()) -> Measured | None:
    """The run's measured figures from its merged metric history (launch/report/metrics.py); None before a steady
    step: the run's first step and each attempt's first (`warmup`) compile, capture CUDA graphs and warm the allocator.
    A phase verl did not time on any steady step (no reference, no critic) is left out, never counted as 0 s."""
    steps = sorted(step for step, metrics in history.items() if STEP_TIME_METRIC in metrics)
    steady = steady_steps(history, warmup)
    if not steady:
        return None
    phases: dict[str, float] = {}
    for phase, names in PHASE_METRICS.items():
        timed = [sum(history[s].get(n, 0.0) for n in names) for s in steady if any(n in history[s] for n in names)]
        if timed:
            phases[phase] = statistics.median(timed)
    step_s = statistics.median(modelled_step_s(history[s]) for s in steady)
    phases["other"] = max(0.0, step_s - sum(phases.values()))
    # a save does not compile: every logged one counts, the run's first step's too
    saves = [float(history[s][CHECKPOINT_METRIC]) for s in steps if CHECKPOINT_METRIC in history[s]]

    def last(name: str) -> float | None:
        values = [float(history[s][name]) for s in steps if name in history[s]]
        return values[-1] if values else None

    def has(step: int, which: str) -> bool:
        return f"{which}_length/mean" in history[step]

    def peak(name: str) -> float | None:
        values = [float(history[s][name]) for s in steps if name in history[s]]
        return max(values) if values else None

    return Measured(
        steps=steps,
        phases_s={phase: round(seconds, 2) for phase, seconds in phases.items()},
        step_s=round(step_s, 2),
        checkpoint_s=round(statistics.median(saves), 2) if saves else None,
        response_mean=_median([float(history[s]["response_length/mean"]) for s in steady if has(s, "response")]),
        response_max=peak("response_length/max"),
        response_clip_ratio=last("response_length/clip_ratio"),
        prompt_mean=_median([float(history[s]["prompt_length/mean"]) for s in steady if has(s, "prompt")]),
        memory_allocated_gib=peak("perf/max_memory_allocated_gb"),
        memory_reserved_gib=peak("perf/max_memory_reserved_gb"),
        response_trend_pct_per_10_steps=response_trend(history, steps),
    )


def why_unmeasured(history: dict[int, dict[str, Any]]) -> tuple[str, bool]:
    """Why measure() found no steady step, said so the user can act on it, and whether later steps may bring one.
    A log without verl 0.9.1's step timer is not read under other names: verl's `timing/` prefix (before v0.2) never
    had a step timer, and `timing(s)/` lived four days between two commits of January 2025, so a `timing/step` is no
    verl's and reading it would be a guess."""
    if any(STEP_TIME_METRIC in metrics for metrics in history.values()):
        return "no step after the first logged: the first of each attempt compiles and is left out", True
    # training steps: a record of validation metrics alone (before training) is no step
    logged = [step for step, metrics in history.items() if any(not name.startswith("val-") for name in metrics)]
    if not logged:
        return "no step logged yet", True
    timers = sorted({name for step in logged for name in history[step] if "timing" in name and "per_token" not in name})
    more = f" and {len(timers) - TIMERS_SAID} more" if len(timers) > TIMERS_SAID else ""
    seen = f"timing keys seen: {', '.join(timers[:TIMERS_SAID])}{more}" if timers else "no timing key logged"
    return (
        f"{STEP_TIME_METRIC} (verl {VERL_VERSION}'s step timer) is in none of the {len(logged)} step(s) logged; "
        f"{seen}; log the run with verl {VERL_VERSION}, whose timing_s/* timers rlaunch reads",
        False,
    )


def modelled_step_s(metrics: dict[str, Any]) -> float:
    """One step's seconds as the step model times it: verl's step timer less the timers it runs inside the step that
    no phase counts (OUTSIDE_THE_MODEL: a checkpoint save, a rollout dump)."""
    return float(metrics[STEP_TIME_METRIC]) - sum(float(metrics.get(name, 0.0)) for name in OUTSIDE_THE_MODEL)


def response_trend(history: dict[int, dict[str, Any]], steps: list[int]) -> float | None:
    """How fast the mean response grows: the least-squares slope over the logged steps, in % of its mean per 10
    steps (GRPO's responses often lengthen as it learns, and memory with them)."""
    points = [(s, float(history[s]["response_length/mean"])) for s in steps if "response_length/mean" in history[s]]
    if len(points) < 3:
        return None
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0 or mean_y <= 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    return round(100 * slope * 10 / mean_y, 1)


def model_inputs(plan: Plan) -> tuple[Architecture, Knobs, Card, bool] | None:
    """What the step-time model needs, from the plan alone (its forecast records the card it used)."""
    if plan.time is None or "card" not in plan.time.inputs:
        return None
    card = Card(**plan.time.inputs["card"])
    return Architecture.from_llm(plan.llm), Knobs.from_verl(plan.verl), card, bool(plan.time.inputs.get("critic"))


def model_at(plan: Plan, lengths: Lengths) -> StepTime | None:
    """The raw model (no calibration) for this plan at `lengths`."""
    inputs = model_inputs(plan)
    if inputs is None:
        return None
    arch, knobs, card, critic = inputs
    return forecast(arch, knobs, card, plan.verl, lengths, critic)


def measured_lengths(plan: Plan, measured: Measured) -> Lengths:
    planned = plan.time.lengths if plan.time else Lengths(0.0, 0.0, "none")
    return Lengths(
        prompt_tokens=measured.prompt_mean if measured.prompt_mean is not None else planned.prompt_tokens,
        response_tokens=measured.response_mean if measured.response_mean is not None else planned.response_tokens,
        source="measured",
    )


def error_pct(predicted: float, measured: float) -> float | None:
    # + 0.0: a plan right to the tenth rounds to -0.0, which json writes as "-0.0"
    return round(100 * (predicted - measured) / measured, 1) + 0.0 if measured > 0 else None


def calibration_of(
    plan: Plan, history: dict[int, dict[str, Any]], attempt: int, warmup: frozenset[int] = frozenset()
) -> dict[str, Any] | None:
    """The run's calibration.json: predicted against measured, per time phase and for memory, and the lengths."""
    measured = measure(history, warmup)
    if measured is None or plan.time is None:
        return None
    predicted = plan.time.phases_s
    raw = model_at(plan, measured_lengths(plan, measured))
    verdict = plan.preflight
    # what torch's counters (verl's perf/max_memory_*) can see: the trainer's phases without the terms outside torch,
    # never the rollout's, whose engine reservation they do not count
    torch_peak = max(predicted_torch_peaks(verdict.phases).values(), default=None) if verdict is not None else None
    capacity = verdict.capacity_gib if verdict is not None and verdict.phases else None
    return {
        "run_id": plan.run_id,
        "attempt": attempt,
        "steps_measured": len(measured.steps),
        "last_step": measured.steps[-1],
        "time": {
            "predicted_s": {**predicted, "step": plan.time.step_s},
            "measured_s": {**measured.phases_s, "step": measured.step_s},
            "error_pct": {
                phase: error_pct(float(predicted.get(phase, 0.0)), measured.phases_s.get(phase, 0.0))
                for phase in PHASES
            }
            | {"step": error_pct(plan.time.step_s, measured.step_s)},
            "model_at_measured_lengths_s": raw.phases_s if raw else None,
            "predicted_source": plan.time.source,
            # verl times a save inside its step; the step model does not (measured_s's step is without it)
            "checkpoint_s": measured.checkpoint_s,
        },
        "memory": {
            "predicted_peak_gib": torch_peak,
            "capacity_gib": capacity,
            "measured_allocated_gib": measured.memory_allocated_gib,
            "measured_reserved_gib": measured.memory_reserved_gib,
        },
        "lengths": {
            "planned_prompt_tokens": plan.time.lengths.prompt_tokens,
            "planned_response_tokens": plan.time.lengths.response_tokens,
            "planned_source": plan.time.lengths.source,
            "prompt_mean": measured.prompt_mean,
            "response_mean": measured.response_mean,
            "response_max": measured.response_max,
            "response_clip_ratio": measured.response_clip_ratio,
            "max_response_tokens": int(plan.verl["data"]["max_response_length"]),
            "response_trend_pct_per_10_steps": measured.response_trend_pct_per_10_steps,
        },
    }


def write_calibration(run_dir: Path, attempt: int) -> dict[str, Any] | None:
    """calibration.json for the run as it stands (written whole, then renamed: a reader never sees half a file)."""
    plan = load_plan(run_dir)
    record = calibration_of(plan, read_history(run_dir), attempt, warmup_steps(run_dir))
    if record is None:
        return None
    partial = run_dir / f".{CALIBRATION_FILE}.tmp"
    partial.write_text(json.dumps(record, indent=2) + "\n")
    partial.replace(run_dir / CALIBRATION_FILE)
    return record


# --- the store -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreRecord:
    """One measured run in the cluster's store."""

    run_id: str
    recorded_at: str
    gpu: str
    family: str
    params: int
    engine: str
    rollout_tp: int
    n_gpus: int
    tokens_per_gpu: float  # the step's tokens (measured lengths) per GPU
    model_path: str
    train_files: list[str]
    max_response_tokens: int
    prompt_mean: float | None
    response_mean: float | None
    model_s: dict[str, float]  # the raw model at the run's measured lengths
    measured_s: dict[str, float]
    memory: dict[str, float | None] = field(default_factory=dict)
    version: int = STORE_VERSION
    backend: str = "fsdp"  # the trainer's strategy: megatron's step is another model (a store before it held fsdp's)
    trainer_mode: str = ""  # verl's trainer.v1.trainer_mode ("" in a store written before it was recorded)
    cluster: str = ""  # cluster_identity of the cluster the run ran on ("" in a store written before it was recorded)
    checkpoint_s: float | None = None  # one checkpoint save, timed apart from measured_s (None: none, or not recorded)


def store_path(runs_dir: str | Path) -> Path:
    return Path(runs_dir).expanduser() / STORE_FILE


def store_record(
    plan: Plan, history: dict[int, dict[str, Any]], warmup: frozenset[int] = frozenset()
) -> StoreRecord | None:
    measured = measure(history, warmup)
    if measured is None or plan.time is None:
        return None
    lengths = measured_lengths(plan, measured)
    raw = model_at(plan, lengths)
    if raw is None:
        return None
    arch = Architecture.from_llm(plan.llm)
    knobs = Knobs.from_verl(plan.verl)
    sequences = int(plan.verl["data"]["train_batch_size"]) * int(plan.verl["actor_rollout_ref"]["rollout"]["n"])
    files = plan.verl["data"]["train_files"]
    return StoreRecord(
        run_id=plan.run_id,
        recorded_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        gpu=plan.gpu_profile,
        family=str(plan.llm.get("family", "")),
        params=arch.params,
        engine=knobs.engine,
        rollout_tp=knobs.rollout_tp,
        n_gpus=knobs.n_gpus,
        tokens_per_gpu=sequences * (lengths.prompt_tokens + lengths.response_tokens) / knobs.n_gpus,
        model_path=str(plan.verl["actor_rollout_ref"]["model"]["path"]),
        train_files=[str(path) for path in (files if isinstance(files, list) else [files])],
        max_response_tokens=int(plan.verl["data"]["max_response_length"]),
        prompt_mean=measured.prompt_mean,
        response_mean=measured.response_mean,
        model_s=raw.phases_s,
        measured_s=measured.phases_s,
        memory={"allocated_gib": measured.memory_allocated_gib, "reserved_gib": measured.memory_reserved_gib},
        backend=backend_of(plan.verl),
        trainer_mode=trainer_mode_of(plan.verl),
        cluster=plan.cluster_identity,
        checkpoint_s=measured.checkpoint_s,
    )


def append(store: Path, record: StoreRecord) -> None:
    """One line, appended atomically against other jobs doing the same (module docstring)."""
    store.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(asdict(record), separators=(",", ":")) + "\n").encode()
    descriptor = os.open(store, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        # a line cut short (a writer killed mid-write, a full disk) must not swallow this one: start a line of its own
        size = os.fstat(descriptor).st_size
        if size and os.pread(descriptor, 1, size - 1) != b"\n":
            line = b"\n" + line
        os.write(descriptor, line)
    finally:
        os.close(descriptor)  # closing releases the lock


def read_store(store: Path) -> tuple[list[StoreRecord], list[str]]:
    """Every record that parses, and one warning per line that does not."""
    if not store.exists():
        return [], []
    records, warnings = [], []
    known = set(StoreRecord.__dataclass_fields__)
    for number, line in enumerate(store.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise TypeError(f"a JSON {type(data).__name__}, not a record")
            record = StoreRecord(**{key: value for key, value in data.items() if key in known})
            problem = malformed(record)
            if problem:
                raise TypeError(problem)
            records.append(record)
        except (ValueError, TypeError) as error:
            warnings.append(f"{store}:{number}: skipped a calibration record that does not parse ({error})")
    return records, warnings


def malformed(record: StoreRecord) -> str | None:
    """What makes a parsed record unusable (a hand edit, another version's writer), or None: every field the
    planner reads is checked, so one bad line can only be skipped, never stop a plan."""
    for name in ("model_s", "measured_s"):
        seconds = getattr(record, name)
        if not isinstance(seconds, dict) or not all(is_finite_number(value) for value in seconds.values()):
            return f"{name} is not a table of finite seconds"
    for name in ("params", "rollout_tp", "n_gpus", "tokens_per_gpu", "max_response_tokens"):
        if not is_finite_number(getattr(record, name)):
            return f"{name} is not a number"
    for name in ("prompt_mean", "response_mean", "checkpoint_s"):
        if getattr(record, name) is not None and not is_finite_number(getattr(record, name)):
            return f"{name} is not a number"
    if not isinstance(record.train_files, list):
        return "train_files is not a list"
    return None


@cache
def _cached_store(path: str, size: int, mtime_ns: int) -> tuple[tuple[StoreRecord, ...], tuple[str, ...]]:
    records, warnings = read_store(Path(path))
    return tuple(records), tuple(warnings)


def load_store(runs_dir: str | Path) -> tuple[tuple[StoreRecord, ...], tuple[str, ...]]:
    """The store, read once per invocation however many jobs a sweep plans (keyed by size and mtime)."""
    path = store_path(runs_dir)
    if not path.exists():
        return (), ()
    stat = path.stat()
    return _cached_store(str(path), stat.st_size, stat.st_mtime_ns)


def records_for(cfg: DictConfig) -> tuple[StoreRecord, ...]:
    """The store of the runs dir this plan's run will live in; () with launch.calibration=off. A line that does not
    parse is said once per invocation, on stderr, and skipped."""
    if str(cfg.launch.calibration) != "auto":
        return ()
    runs_dir = Path(str(cfg.launch.runs_dir)).expanduser()
    records, warnings = load_store(runs_dir if runs_dir.is_absolute() else Path.cwd() / runs_dir)
    if warnings and warnings not in _ALREADY_SAID:  # a sweep plans many jobs from one store: say it once
        _ALREADY_SAID.add(warnings)
        warn(warnings)
    return records


_ALREADY_SAID: set[tuple[str, ...]] = set()


def ingest(run_dir: Path, runs_dir: str | Path | None = None) -> StoreRecord | None:
    """The job's and calibrate.py's one way in: calibration.json for the run, and its record in the store."""
    plan = load_plan(run_dir)
    history = read_history(run_dir)
    attempts = sorted(int(p.stem.split("-")[1]) for p in (run_dir / "metrics").glob("attempt-*.jsonl"))
    write_calibration(run_dir, attempts[-1] if attempts else 1)
    record = store_record(plan, history, warmup_steps(run_dir))
    if record is not None:
        # the runs dir the run lives in (<runs_dir>/<sweep>/<run>) as this machine sees it, not the path it was
        # planned at: a run directory copied from another cluster must not write that cluster's path here
        append(store_path(runs_dir if runs_dir is not None else run_dir.parent.parent), record)
    return record


# --- in the job ---------------------------------------------------------------------------------------------------


FOLLOW_POLL_S = 15.0  # how often the job looks for step k in the attempt's metrics (verl steps take minutes)


def ingest_quietly(run_dir: Path, runs_dir: Path) -> None:
    """The job's ingest: a failure to calibrate is said in the job's log and never fails the run."""
    try:
        record = ingest(run_dir, runs_dir)
        if record is not None:
            print(f"rlaunch: calibration: {CALIBRATION_FILE} written, {runs_dir / STORE_FILE} appended", flush=True)
    except Exception as error:  # noqa: BLE001 (the run matters more than its calibration)
        print(f"rlaunch: calibration skipped: {type(error).__name__}: {error}", file=sys.stderr, flush=True)


def follow(run_dir: Path, runs_dir: Path, attempt: int, after_step: int, stop: threading.Event) -> threading.Thread:
    """A daemon thread that ingests the run once its attempt has logged `after_step` steps (then exits), or when
    `stop` is set first."""

    def watch() -> None:
        log = attempt_log_path(run_dir, attempt)
        while not stop.wait(FOLLOW_POLL_S):
            # training steps: a validation-only record (before training, or at the resumed step) is no step
            steps = [step for step, data in read_records(log) if STEP_TIME_METRIC in data] if log.exists() else []
            if len(steps) >= after_step:
                ingest_quietly(run_dir, runs_dir)
                return

    thread = threading.Thread(target=watch, name="rlaunch-calibration", daemon=True)
    thread.start()
    return thread


# --- planning: the nearest records correct the model ---------------------------------------------------------------


SLURM_CONF_DEFAULT = "/etc/slurm/slurm.conf"  # where SLURM's commands read it when SLURM_CONF is unset
CLUSTER_NAME_LINE = re.compile(r"(?im)^\s*ClusterName\s*=\s*(\S+)")


def cluster_identity(cfg: DictConfig) -> str:
    """The cluster a run is planned for, recorded in its plan and thus in its store record: its kind, then SLURM's
    ClusterName, the Ray head's address, or this host for cluster=local. "slurm" alone when SLURM's configuration is
    not readable here (a configless login node has no slurm.conf): the kind still keeps a workstation's runs out."""
    kind = str(cfg.cluster.name)
    if kind == "ray":
        return f"ray {cfg.cluster.address}"
    if kind == "local":
        return f"local {socket.gethostname()}"
    return slurm_cluster_name(os.environ.get("SLURM_CLUSTER_NAME"), os.environ.get("SLURM_CONF"))


@cache
def slurm_cluster_name(in_allocation: str | None, slurm_conf: str | None) -> str:
    """Inside an allocation SLURM says the name; elsewhere slurm.conf does. Read from the file, not asked of
    scontrol: planning must not wait on a controller that does not answer."""
    if in_allocation:
        return f"slurm {in_allocation.lower()}"
    try:
        found = CLUSTER_NAME_LINE.search(Path(slurm_conf or SLURM_CONF_DEFAULT).read_text(errors="replace"))
    except OSError:
        return "slurm"
    return f"slurm {found.group(1).lower()}" if found else "slurm"  # SLURM lower-cases the name it keeps


@dataclass(frozen=True)
class Shape:
    """What a plan is matched on."""

    gpu: str
    family: str
    params: int
    engine: str
    rollout_tp: int
    n_gpus: int
    tokens_per_gpu: float
    backend: str = "fsdp"
    trainer_mode: str = ""
    cluster: str = ""  # cluster_identity; "" where it is not known here


def trainer_mode_of(verl: dict[str, Any]) -> str:
    """verl's trainer mode: mtl_pcgrad's update is one forward/backward per domain plus its reduce, another step
    than the plain trainer's, so the two never calibrate each other."""
    return str(((verl.get("trainer") or {}).get("v1") or {}).get("trainer_mode") or "")


def backend_of(verl: dict[str, Any]) -> str:
    """fsdp or megatron: the actor's strategy (fsdp2 is FSDP's)."""
    return "megatron" if verl["actor_rollout_ref"]["actor"].get("strategy") == "megatron" else "fsdp"


def distance(shape: Shape, record: StoreRecord) -> float | None:
    """How far a record is from the shape; None when it is another shape altogether."""
    if (record.gpu, record.family, record.engine, record.backend) != (
        shape.gpu,
        shape.family,
        shape.engine,
        shape.backend,
    ):
        return None
    if record.trainer_mode and shape.trainer_mode and record.trainer_mode != shape.trainer_mode:
        return None
    if another_cluster(shape, record):
        return None
    size = abs(math.log(max(record.params, 1) / max(shape.params, 1)))
    tokens = abs(math.log(max(record.tokens_per_gpu, 1.0) / max(shape.tokens_per_gpu, 1.0)))
    if size > math.log(MAX_SIZE_RATIO) or tokens > math.log(MAX_TOKENS_RATIO):
        return None
    return size + 0.5 * tokens + 0.3 * (record.rollout_tp != shape.rollout_tp) + 0.2 * (record.n_gpus != shape.n_gpus)


def cluster_kind(identity: str) -> str:
    """slurm, ray or local: an identity's first word ("" for a record written before records named their cluster)."""
    return identity.split(" ", 1)[0]


def named(identity: str) -> bool:
    """Whether an identity names its cluster, not only its kind (cluster_identity's "slurm" alone)."""
    return " " in identity


def another_cluster(shape: Shape, record: StoreRecord) -> bool:
    """Another kind of cluster (a workstation's run for a SLURM plan), or both named and not the same: its step
    times are another network's, another filesystem's. A record or a plan that names no cluster is not another."""
    if not record.cluster or not shape.cluster:
        return False
    if cluster_kind(record.cluster) != cluster_kind(shape.cluster):
        return True
    return named(record.cluster) and named(shape.cluster) and record.cluster != shape.cluster


def where_measured(shape: Shape, close: list[StoreRecord]) -> str:
    """Where the calibrating runs ran, as far as their records say: the plan says "this cluster" only when it is."""
    clusters = {record.cluster for record in close}
    if named(shape.cluster) and clusters == {shape.cluster}:
        return "this cluster"
    if "" in clusters:
        return "a cluster its records do not name"
    said = []
    if names := sorted(identity for identity in clusters if named(identity)):
        said.append("cluster " + ", ".join(names))
    # planned where slurm.conf was not readable: a SLURM cluster, which one unknown
    said += sorted(f"a {identity} cluster whose name was not readable" for identity in clusters if not named(identity))
    return " and ".join(said)


def other_clusters(shape: Shape, records: tuple[StoreRecord, ...]) -> str:
    """What the store holds of this shape from other clusters and the plan leaves out, said; "" for none."""
    names = sorted(
        {
            record.cluster
            for record in latest_per_run(records)
            if another_cluster(shape, record) and distance(replace(shape, cluster=record.cluster), record) is not None
        }
    )
    return f"runs of this shape on {', '.join(names)} not used: another cluster" if names else ""


def other_sizes(shape: Shape, close: list[StoreRecord]) -> str:
    """The calibrating runs of another model size (the shape takes its family within MAX_SIZE_RATIO), named: a 14B
    plan timed by a 7B run says which; "" when every run is of the plan's size."""
    others = sorted({(record.params, record.model_path) for record in close if record.params != shape.params})
    if not others:
        return ""
    runs = sum(record.params != shape.params for record in close)
    models = ", ".join(f"{path} ({params / 1e9:.1f}B)" for params, path in others)
    return f"{runs} of them of another size than this {shape.params / 1e9:.1f}B model: {models}"


def latest_per_run(records: tuple[StoreRecord, ...]) -> list[StoreRecord]:
    """A run ingested again (after each attempt, or by hand) counts once: its latest record."""
    return list({record.run_id: record for record in records}.values())


def nearest(shape: Shape, records: tuple[StoreRecord, ...]) -> list[StoreRecord]:
    runs = latest_per_run(records)
    scored = [(d, index, record) for index, record in enumerate(runs) if (d := distance(shape, record)) is not None]
    scored.sort(key=lambda item: (item[0], -item[1]))  # nearest first; among equals the newest
    return [record for _, _, record in scored[:NEAREST]]


@dataclass(frozen=True)
class PhaseRatio:
    ratio: float  # the median of measured / model over the runs that calibrate this phase
    runs: int
    left_out: tuple[float, ...] = ()  # ratios beyond RATIO_BOUNDS: another shape (or a stalled run), not a calibration
    where: str = "this cluster"  # where_measured
    lowest: float | None = None  # the range of the runs' ratios: a median of two runs is their mean, like neither
    highest: float | None = None

    def said(self) -> str:
        off = ", ".join(f"x{ratio:.2f}" for ratio in self.left_out)
        left_out = f"{len(self.left_out)} run(s) of this shape left out: measured {off} the model, beyond {BOUNDS_SAID}"
        if not self.runs:
            return f"model ({left_out})"
        said = f"model x {self.ratio:.2f} from {self.runs} run(s) of this shape on {self.where}"
        low, high = self.lowest or self.ratio, self.highest or self.ratio
        if f"{low:.2f}" != f"{high:.2f}":
            said += f", x{low:.2f}-x{high:.2f}"
        if high > DISAGREEING * low:
            apart = f"x{high / low:.2f} apart (more than x{DISAGREEING:g})"
            said += f": the runs disagree, {apart}: check what differs in them"
        return said + (f" ({left_out})" if self.left_out else "")


def phase_ratios(records: list[StoreRecord], where: str = "this cluster") -> dict[str, PhaseRatio]:
    """Per phase, the median of measured / model over the records whose ratio lies within RATIO_BOUNDS. A record
    further off is left out, and said: it times something else than this shape's step (a stalled or failing run,
    another setting the shape does not see), and clamping it would pull the median as far as the bound allows."""
    low, high = RATIO_BOUNDS
    ratios = {}
    for phase in PHASES:
        values = [
            record.measured_s[phase] / record.model_s[phase]
            for record in records
            if record.model_s.get(phase, 0) > 0 and phase in record.measured_s
        ]
        kept = [value for value in values if low <= value <= high]
        left_out = tuple(value for value in values if not low <= value <= high)
        if kept:
            ratios[phase] = PhaseRatio(statistics.median(kept), len(kept), left_out, where, min(kept), max(kept))
        elif left_out:
            ratios[phase] = PhaseRatio(1.0, 0, left_out, where)  # the model as it is, and why no run corrected it
    return ratios


@dataclass(frozen=True)
class DataIdentity:
    """What makes two runs' lengths comparable: the same model on the same data; for the responses, also the same
    response limit (verl cuts every response at it: a mean measured under another limit is another mean). A prompt
    does not depend on the response limit, and is capped at the plan's own prompt limit (lengths.typical_lengths)."""

    model_path: str
    train_files: tuple[str, ...]
    max_response_tokens: int

    @classmethod
    def of(cls, model_path: Any, train_files: Any, max_response_tokens: Any) -> DataIdentity:
        files = train_files if isinstance(train_files, list | tuple) else [train_files]
        return cls(str(model_path), tuple(sorted(str(path) for path in files)), int(max_response_tokens))

    @classmethod
    def of_record(cls, record: StoreRecord) -> DataIdentity:
        return cls.of(record.model_path, record.train_files, record.max_response_tokens)

    def same_prompts(self, other: DataIdentity) -> bool:
        return (self.model_path, self.train_files) == (other.model_path, other.train_files)


def same_data(identity: DataIdentity, records: tuple[StoreRecord, ...]) -> list[StoreRecord]:
    """Runs of the same model on the same data and response limit: their measured responses are this run's best
    guess."""
    return [
        record for record in records if DataIdentity.of_record(record) == identity and record.response_mean is not None
    ]


def same_prompts(identity: DataIdentity, records: tuple[StoreRecord, ...]) -> list[StoreRecord]:
    """Runs of the same model on the same data, whatever their response limit: their measured prompts are this run's."""
    return [
        record
        for record in records
        if identity.same_prompts(DataIdentity.of_record(record)) and record.prompt_mean is not None
    ]


@dataclass(frozen=True)
class MeasuredLengths:
    """The store's measured means for a plan's model and data, each with the runs it is the mean of."""

    prompt: float | None
    response: float | None
    prompt_runs: int
    response_runs: int


def measured_mean_lengths(identity: DataIdentity, records: tuple[StoreRecord, ...]) -> MeasuredLengths:
    """The mean prompt over the runs of the same model and data, the mean response over those of the same response
    limit too."""
    runs = tuple(latest_per_run(records))
    prompts = [record.prompt_mean for record in same_prompts(identity, runs) if record.prompt_mean is not None]
    responses = [record.response_mean for record in same_data(identity, runs) if record.response_mean is not None]
    return MeasuredLengths(
        statistics.fmean(prompts) if prompts else None,
        statistics.fmean(responses) if responses else None,
        len(prompts),
        len(responses),
    )


def typical_for(cfg: DictConfig, records: tuple[StoreRecord, ...], prompts: PromptStats | None) -> TypicalLengths:
    """The job's typical lengths, decided once before the preflight and the step time read them: the user's
    launch.expect.*, else measured (the prompts: the data's own, tokenized here; else the store's runs of this model
    and data, as are the responses), else half the maximum. Each measured one says where it was measured."""
    files = cfg.data.get("train_files") or []
    files = OmegaConf.to_container(files, resolve=True) if isinstance(files, ListConfig) else files
    identity = DataIdentity.of(cfg.actor_rollout_ref.model.path, files, cfg.data.max_response_length)
    stored = measured_mean_lengths(identity, records)
    typical = typical_lengths(cfg, prompts.p50 if prompts else stored.prompt, stored.response)
    data_said = f"({stored.prompt_runs} run(s) of this model and data)"
    if prompts is not None:
        data_said = f"(p50 of {prompts.rows} rows tokenized; p95 {prompts.p95}, max {prompts.max})"
    runs_said = f"({stored.response_runs} run(s) of this model and data)"
    source = typical.source.replace("prompt: measured", f"prompt: measured {data_said}")
    return replace(typical, source=source.replace("response: measured", f"response: measured {runs_said}"))


def warn(lines: tuple[str, ...]) -> None:
    for line in lines:
        print(f"rlaunch: warning: {line}", file=sys.stderr)


def shape_of(
    plan_verl: dict[str, Any], llm: dict[str, Any], gpu: str, tokens_per_gpu: float, cluster: str = ""
) -> Shape:
    knobs = Knobs.from_verl(plan_verl)
    return Shape(
        gpu=gpu,
        family=str(llm.get("family", "")),
        params=Architecture.from_llm(llm).params,
        engine=knobs.engine,
        rollout_tp=knobs.rollout_tp,
        n_gpus=knobs.n_gpus,
        tokens_per_gpu=tokens_per_gpu,
        backend=backend_of(plan_verl),
        trainer_mode=trainer_mode_of(plan_verl),
        cluster=cluster,
    )


def planned_forecast(
    cfg: DictConfig,
    verl: dict[str, Any],
    llm: dict[str, Any],
    records: tuple[StoreRecord, ...],
    typical: TypicalLengths | None = None,
) -> StepTime | None:
    """The plan's step time: the model at the typical lengths (typical_for's, by default the config's own), each
    phase corrected by the nearest records of the same backend when launch.calibration=auto (steptime.forecast times
    verl's Megatron backend with its own, rougher model). None for algo=rft (its stages are not PPO steps) and for a
    model whose architecture is unknown here (another model's table would time another model)."""
    if cfg.algo.name == "rft" or llm.get("known") is False:
        return None
    arch, knobs, card = Architecture.from_llm(llm), Knobs.from_verl(verl), Card.of(cfg.gpu)
    critic = trains_critic(verl)
    typical = typical or typical_lengths(cfg)
    lengths = Lengths(float(typical.prompt_tokens), float(typical.response_tokens), typical.source)
    model = forecast(arch, knobs, card, verl, lengths, critic)
    model = replace(model, inputs={**model.inputs, "card": asdict(card), "critic": critic})
    shape = shape_of(verl, llm, str(cfg.gpu.name), model.inputs["tokens"] / knobs.n_gpus, cluster_identity(cfg))
    close = nearest(shape, records)
    elsewhere = other_clusters(shape, records)
    ratios = phase_ratios(close, where_measured(shape, close))
    if not ratios:
        return replace(model, source=f"{model.source} ({elsewhere})") if elsewhere else model
    runs = f"from {len(close)} run(s) of this shape on {where_measured(shape, close)}"
    runs += "".join(f" ({said})" for said in (other_sizes(shape, close), elsewhere) if said)
    return model.scaled({phase: r.ratio for phase, r in ratios.items()}, runs, {p: r.said() for p, r in ratios.items()})
