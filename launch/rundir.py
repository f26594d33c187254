"""The run directory's layout: the one module that knows its file names, writes the plan and reads back, typed,
the plan and what the job recorded.

Runs on: the login node (launch/run.py writes a run directory before anything runs), the job head (attempts, the
metrics file of each attempt) and wherever the report tools read runs (metrics, doctor, compare, sweep status).
A run directory holds everything to reproduce and judge its run; a sweep directory holds its run directories.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from launch.errors import UserError
from launch.steptime import StepTime
from launch.verdict import Verdict, known_fields

PLAN_FILE = "plan.json"  # the Plan, as JSON (launch/plan.py)
PLAN_TEXT_FILE = "plan.txt"  # the plan as the user read it
RLAUNCH_CONFIG_FILE = "rlaunch_config.yaml"  # our own roots of the composed config, resolved
VERL_CONFIG_NAME = "verl_config"  # verl's config exactly as verl reads it: <run_dir>/verl_config.yaml
ATTEMPTS_FILE = "attempts.jsonl"  # one record per start of the job (a requeued job appends another)
METRICS_DIR = "metrics"  # verl's file logger, one file per attempt; other metric files beside them
ATTEMPT_METRICS = re.compile(r"attempt-(\d+)\.jsonl$")
PROVENANCE_FILE = "provenance.json"  # git sha + dirty diff, package versions, host (launch/provenance.py)
RAY_READY_FILE = "ray_ready.jsonl"  # one record per Ray bring-up in the job: how long each node took to register
CHECKPOINT_CALLS_FILE = "checkpoint_calls.txt"  # one line per signal that made the job checkpoint and requeue
NOT_REQUEUED_FILE = "not_requeued.txt"  # why the job stopped requeueing its run (the failure is not transient)
HANG_FILE = "hang.json"  # the hang watchdog's record of the attempt it stopped (launch/watchdog.py)
STARTUP_PHASE = "start-up"  # a hang record's phase: no step yet, and no stack in verl's training loop
HANG_DIR = "hang"  # hang/attempt-<n>/: every process's stack, ray status and nvidia-smi when the watchdog fired
CALIBRATION_FILE = "calibration.json"  # predicted against measured, per phase (launch/calibration.py)
STEP_TIME_METRIC = "timing_s/step"  # verl logs it for every training step (a validation-only record has none)


@dataclass(frozen=True)
class Resources:
    nodes: int
    gpus_per_node: int
    cpus_per_task: int
    mem_gb: int
    time_min: int
    gres: str  # gpu:N, or gpu:<type>:N where the partition's GRES has types
    partition: str | None


@dataclass(frozen=True)
class JobSettings:
    """What the job itself reads of cluster/, launch.hang and launch.calibration (the rest was used up by planning)."""

    max_requeues: int
    ray_timeout_s: int
    ray_auth_token_file: str | None  # a site's own Ray token; None: the run's own, made at submission
    # the hang watchdog (launch/watchdog.py), from launch.hang.*; a plan.json written before it had none: off
    hang_enabled: bool = False
    hang_factor: float = 5.0
    hang_floor_s: float = 1800.0
    # launch.calibration=auto: the job measures itself against the plan after this step and at each attempt's end
    # (launch/calibration.py); a plan.json written before it had none: off
    calibrate_after_step: int | None = None


@dataclass(frozen=True)
class Change:
    """One key of verl's config whose planned value differs from verl's own composition of the user's keys
    (launch/verl_diff.py); a key only one side has covers its sub-keys."""

    key: str  # dotted, e.g. actor_rollout_ref.actor.use_dynamic_bsz
    verl: Any  # what verl alone would run with ("<not in verl's config>" for a key verl does not have)
    value: Any  # what the plan runs with ("<not in verl's config>" for a key rlaunch removed)
    by: str  # the layer that set it: gpu=h100, mode=standard, algo=..., rlaunch (...), launch.preflight=fix


@dataclass(frozen=True, kw_only=True)
class PredictedTime:
    """Readiness's time check (launch/readiness.py predict_time): the run's steps and wall time at the plan's step
    time, against the time limit; the `time` of the plan's readiness record, its fields in plan.json's order."""

    rows: int  # training rows read (data.train_max_samples applied)
    steps_per_epoch: int
    total_steps: int
    step_s: float
    step_source: str = ""  # where step_s came from (launch/steptime.py); a plan.json before it had none
    wall_min: float
    time_limit_min: int  # mode.time_budget_min
    attempts: int  # attempts of attempt_min the run needs; 0: no attempt keeps a step (the run never finishes)
    first_checkpoint_step: int
    checkpoints: bool  # trainer.save_freq saves any
    attempt_min: int  # one attempt's training minutes: the budget less the start-up and the validation before it
    validation_s: float = 0.0  # one of verl's validations (0: none, or no validation file read)
    test_freq: int = -1  # trainer.test_freq: where the validations fall among the steps
    validations: int = 0  # among the steps (trainer.test_freq)
    validates_before_training: bool = False  # trainer.val_before_train, in every attempt: attempt_min excludes it
    first_checkpoint_min: float | None = None  # into an attempt's training minutes (a plan.json before it had none)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PredictedTime:
        return cls(**known_fields(cls, data))


@dataclass(frozen=True)
class ReadinessProblem:
    """A readiness check that would fail in the queue: refuses a run that executes, unless its check is skipped."""

    check: str  # model | data | time | hub_cache ... (launch.skip_checks names)
    problem: str  # one line: what, where, and the fix


@dataclass(frozen=True)
class DataRead:
    """One data file readiness read (or could not: rows None) on the login node."""

    key: str  # data.train_files or data.val_files
    path: str
    rows: int | None
    data_sources: tuple[str, ...] = ()  # distinct values of the data_source column


@dataclass(frozen=True)
class CheckpointDisk:
    """Readiness's disk check (launch/readiness.py judge_disk): what verl's checkpoints of this run hold at most on
    the filesystem of trainer.default_local_dir, against its free space when planned."""

    directory: str  # trainer.default_local_dir
    probed: str  # its nearest existing directory, whose filesystem was asked
    one_gib: float  # one save: every role's model, optimizer and hf_model shards as save_contents lists them
    saves: int  # checkpoints the run writes (every save_freq steps and the last)
    save_freq: int  # trainer.save_freq
    kept: int  # the most on disk at once (max_actor_ckpt_to_keep, earlier attempts' kept ones, the one being saved)
    free_gib: float | None  # None: not measured (the job's filesystem is not this machine's)
    filesystem: int = 0  # st_dev of `probed`: the runs of a sweep on one filesystem share its free space
    attempts: int = 1  # the attempts `kept` counts leftovers of: SLURM requeues; a local or Ray run has one

    @property
    def needed_gib(self) -> float:
        return round(self.one_gib * self.kept, 3)


def gib_text(value: float) -> str:
    """GiB as a plan says them: 85.1 and 14894.4, 0.0283 for a tiny model's checkpoint."""
    return f"{value:.1f} GiB" if value >= 10 else f"{value:.3g} GiB"


@dataclass(frozen=True)
class Readiness:
    """What readiness (launch/readiness.py judge) found for one job: the problems that refuse it when it executes, the
    checks turned off, notes, the data files read, the time check and where the model's architecture came from."""

    problems: tuple[ReadinessProblem, ...] = ()
    skipped: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    data: tuple[DataRead, ...] = ()
    time: PredictedTime | None = None
    model_source: str = ""
    disk: CheckpointDisk | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "problems": [asdict(problem) for problem in self.problems],
            "skipped": list(self.skipped),
            "notes": list(self.notes),
            "data": [{**asdict(file), "data_sources": list(file.data_sources)} for file in self.data],
            "time": self.time.to_dict() if self.time is not None else None,
            "model_source": self.model_source,
            "disk": asdict(self.disk) if self.disk is not None else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Readiness:
        return cls(
            problems=tuple(ReadinessProblem(**problem) for problem in data.get("problems") or ()),
            skipped=tuple(data.get("skipped") or ()),
            notes=tuple(data.get("notes") or ()),
            data=tuple(
                DataRead(**{**known_fields(DataRead, file), "data_sources": tuple(file.get("data_sources") or ())})
                for file in data.get("data") or ()
            ),
            time=PredictedTime.from_dict(data["time"]) if data.get("time") else None,
            model_source=str(data.get("model_source") or ""),
            disk=CheckpointDisk(**known_fields(CheckpointDisk, data["disk"])) if data.get("disk") else None,
        )


# What the job runs once Ray is up: verl's PPO trainer (verl.trainer.main_ppo) or the RFT pipeline (algos/rft/)
Driver = Literal["ppo", "rft"]


@dataclass(frozen=True)
class Plan:
    """One run, as launch/plan.py planned it; written to plan.json before anything runs, read back by the job and the
    report tools."""

    sweep_id: str
    run_id: str
    job_name: str
    run_dir: str
    cluster: str
    execution: str  # what happens after planning: submit | run-local | plan-only
    execution_reason: str
    gpu_profile: str
    gpu_selected_by: str
    llm: dict[str, Any]  # the architecture the plan used, and where it came from
    resources: Resources
    slurm: dict[str, Any]  # submitit's SlurmExecutor parameters (sbatch options), empty for cluster=local
    verl: dict[str, Any]  # the complete resolved config, exactly as verl will receive it
    driver: Driver  # the job's entry point once Ray is up; plan.json names it instead of readers parsing the command
    driver_command: list[str]  # its command line (verl's main_ppo on the dumped config, or the RFT pipeline)
    worker_env: dict[str, str]
    cluster_settings: JobSettings
    overrides: list[str]
    warnings: list[str] = field(default_factory=list)
    preflight: Verdict | None = None  # the memory preflight's verdict (launch/preflight.py); None when off
    readiness: Readiness | None = None  # model, data and time checks (launch/readiness.py)
    code_dir: str | None = None  # the code snapshot the job imports from (launch/snapshot.py); None: the checkout
    container: dict[str, Any] | None = None  # cluster.container resolved (launch/container.py); None: on the host
    # every verl key whose value differs from verl's own composition of the user's keys, with its layer
    changed_from_verl: list[Change] = field(default_factory=list)
    # one step's predicted seconds per phase at the typical lengths, calibrated where runs of this shape were measured
    time: StepTime | None = None
    # the cluster it runs on (calibration.cluster_identity; `slurm` alone where slurm.conf was unreadable, "" where
    # unknown): its measured steps calibrate that cluster's plans only
    cluster_identity: str = ""
    # the GiB a node gives the job where the preflight's host-RAM estimate will not fit it
    # (plan.node_short_of_host_ram): the user's cluster.mem_gb (host_ram_limit_is_mem_gb) below the estimate, or the
    # node below 1.2 x it
    node_short_of_host_ram_gib: float | None = None
    host_ram_limit_is_mem_gb: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON. Shallow: the nested dicts are the plan's own (asdict would copy the thousand-key verl
        config, three times per job of a sweep); treat them as read-only like the plan."""
        nested = {
            "resources": asdict(self.resources),
            "cluster_settings": asdict(self.cluster_settings),
            "changed_from_verl": [asdict(change) for change in self.changed_from_verl],
            "time": self.time.to_dict() if self.time is not None else None,
            "preflight": self.preflight.to_dict() if self.preflight is not None else None,
            "readiness": self.readiness.to_dict() if self.readiness is not None else None,
        }
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, **nested}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        """to_dict's inverse. Keys this version does not know are left out (a plan.json written by a newer rlaunch
        still reads)."""
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        values["resources"] = Resources(**data["resources"])
        values["cluster_settings"] = JobSettings(**data["cluster_settings"])
        values["changed_from_verl"] = [Change(**change) for change in data.get("changed_from_verl", [])]
        values["time"] = StepTime.from_dict(data["time"]) if data.get("time") else None
        values["preflight"] = Verdict.from_dict(data["preflight"]) if data.get("preflight") else None
        values["readiness"] = Readiness.from_dict(data["readiness"]) if data.get("readiness") else None
        return cls(**values)

    @property
    def predicted_time(self) -> PredictedTime | None:
        """Readiness's time check; None where it predicted none (no step time, or training rows it could not
        read)."""
        return self.readiness.time if self.readiness is not None else None


def requeue_signal_at_start(delay_s: int, time_min: int) -> bool:
    """SLURM sends the requeue signal (--signal=USR2@delay_s) that long before --time ends: a delay not below the time
    limit signals the job as it starts."""
    return time_min > 0 and delay_s >= time_min * 60


def save_plan(plan: Plan) -> None:
    (Path(plan.run_dir) / PLAN_FILE).write_text(json.dumps(plan.to_dict(), indent=2) + "\n")


def load_plan(run_dir: str | Path) -> Plan:
    path = Path(run_dir) / PLAN_FILE
    try:
        return Plan.from_dict(json.loads(path.read_text()))
    except json.JSONDecodeError as error:  # cut short (a full disk, a copy that stopped) or edited by hand
        raise UserError(f"{path} is not valid JSON ({error}): plan the run again, or restore the file") from None
    except (KeyError, TypeError, AttributeError) as error:
        raise UserError(
            f"{path} is not a plan this rlaunch can read ({error}): plan it again with this version"
        ) from None


def is_run_dir(path: Path) -> bool:
    return (path / PLAN_FILE).exists()


def attempts(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / ATTEMPTS_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def append_attempt(run_dir: Path, record: dict[str, Any]) -> None:
    with (run_dir / ATTEMPTS_FILE).open("a") as log:
        log.write(json.dumps(record) + "\n")


def attempt_log_path(run_dir: Path, attempt: int) -> Path:
    """Where verl's file logger writes during attempt `attempt` (1-based) of a run."""
    return run_dir / METRICS_DIR / f"attempt-{attempt}.jsonl"


def hang_records(run_dir: Path) -> list[dict[str, Any]]:
    """The hang watchdog's records of the run (HANG_FILE: a JSON list, one object per attempt it stopped; a single
    object is read as one), each with its attempt; a file cut short (the job killed while writing it) holds none."""
    try:
        records = json.loads((run_dir / HANG_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return []
    records = records if isinstance(records, list) else [records]
    return [record for record in records if isinstance(record, dict) and isinstance(record.get("attempt"), int)]


# --- what verl logged: one metrics file per attempt, merged ----------------------------------------------------------
# verl's file logger writes JSON lines {"step": N, "data": {...}} and truncates its file on every start, so the job
# points it at one file per attempt. A requeued attempt resumes from its last checkpoint step k and logs k, k+1, ...
# again; the earlier attempt's steps after k belong to work that was thrown away, so merging keeps, for every step,
# what the LATEST attempt that reached it logged.


def parse_records(lines: Iterable[str]) -> list[tuple[int, dict[str, Any]]]:
    """(step, data) per line of verl's file logger; a line cut short by a kill (the last one of a preempted attempt)
    is skipped, and so is any value that is not a finite number: verl's file logger writes with orjson, which turns
    NaN and inf into null (Python's json writes NaN), and no reader can add, compare or plot either."""
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int) and isinstance(record.get("data"), dict):
            numbers = {name: value for name, value in record["data"].items() if is_finite_number(value)}
            records.append((record["step"], numbers))
    return records


def is_finite_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def read_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    return parse_records(path.read_text(errors="replace").splitlines())


def merge_attempts(attempt_records: Iterable[list[tuple[int, dict[str, Any]]]]) -> dict[int, dict[str, Any]]:
    """Attempts in order: each attempt drops what earlier ones logged after the step it resumed from, and the
    metrics it logs at a step override earlier ones of the same name."""
    merged: dict[int, dict[str, Any]] = {}
    for records in attempt_records:
        if not records:
            continue
        resumed_at = min(step for step, _ in records)
        merged = {step: data for step, data in merged.items() if step <= resumed_at}
        for step, data in records:
            merged.setdefault(step, {}).update(data)
    return dict(sorted(merged.items()))


def attempt_files(run_dir: Path) -> list[Path]:
    files = [path for path in (run_dir / METRICS_DIR).glob("attempt-*.jsonl") if ATTEMPT_METRICS.search(path.name)]
    return sorted(files, key=lambda path: int(ATTEMPT_METRICS.search(path.name).group(1)))  # type: ignore[union-attr]


def steady_steps(history: dict[int, dict[str, Any]], warmup: frozenset[int] = frozenset()) -> list[int]:
    """The steps that time a steady step: every step verl timed but the run's first and each attempt's first
    (`warmup`, from warmup_steps)."""
    timed = sorted(step for step, metrics in history.items() if STEP_TIME_METRIC in metrics)
    return [step for step in timed[1:] if step not in warmup]


def warmup_steps(run_dir: Path) -> frozenset[int]:
    """Each attempt's first training step (a resumed one's too): it compiles, captures CUDA graphs and warms the
    allocator, so it says nothing about the steady step."""
    firsts = set()
    for path in attempt_files(run_dir):
        trained = [step for step, data in read_records(path) if STEP_TIME_METRIC in data]
        if trained:
            firsts.add(min(trained))
    return frozenset(firsts)


def read_history(run_dir: Path) -> dict[int, dict[str, Any]]:
    """step -> metrics of one run, attempts merged in step order, then the other metric files of the run."""
    history = merge_attempts(read_records(path) for path in attempt_files(run_dir))
    attempts = set(attempt_files(run_dir))
    for path in sorted((run_dir / METRICS_DIR).glob("*.jsonl")):
        if path not in attempts:
            for step, data in read_records(path):
                history.setdefault(step, {}).update(data)
    return dict(sorted(history.items()))
