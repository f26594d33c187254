"""Where the logs of a run's attempts are and what they say about its state: submitit's layout (every task's
<job>_<task>_log.err/.out, found through the sweep's manifest), a cluster=ray job's copy of its output in the run
directory, the copied Ray and ray_start logs, reading a log's tail, the split of a requeued job's log into its
attempts, and the run's state: what the scheduler that ran the job says of it where it answers (`job_records`:
SLURM's squeue and sacct, Ray's job API), else the job's own log.

Runs on: any machine that sees the run directories (login node, laptop with the shared filesystem); the scheduler is
asked where it answers (the login node, or a machine that reaches the Ray cluster's dashboard).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from launch.errors import UserError
from launch.manifest import MANIFEST, Manifest, ManifestRun
from launch.manifest import read as read_manifest
from launch.ray_submit import ENTRY_EXITED, ENTRY_STOPPED, RAY_JOB_LOG
from launch.report.failures.signatures import COMPILED, SCRIPT_STOPPED, match_kind
from launch.rundir import NOT_REQUEUED_FILE, RLAUNCH_CONFIG_FILE, load_plan

# submitit logs this (on stdout) when an attempt starts; with open-mode=append a requeued job's attempts follow each
# other in the same files.
STOPPED_BEFORE_PYTHON = re.compile(SCRIPT_STOPPED)  # the job script's setup stopped it: no submitit line follows
ATTEMPT_START = re.compile(r"submitit INFO \([^)]*\) - Starting with JobEnvironment\((?P<env>[^)]*)\)")
# cluster=ray: launch/ray_entry.py's first line of an attempt, and the entrypoint's last (launch/ray_submit.py)
RAY_ATTEMPT_START = re.compile(r"^rlaunch: Ray job for run \w+, attempt (?P<number>\d+)", re.MULTILINE)
RAY_ENTRY_EXITED = re.compile(rf"^{re.escape(ENTRY_EXITED)} (?P<code>-?\d+)$", re.MULTILINE)
MAX_LOG_BYTES = 4 << 20  # a log's tail this large holds the cause; Ray's logs can grow to gigabytes

# run state (sweep status and compare show it): from the job's own log where no scheduler answers
COMPLETED_STATE, FAILED_STATE, RUNNING_STATE, REQUEUED_STATE, PENDING_STATE, STOPPED_STATE = (
    "COMPLETED",
    "FAILED",
    "RUNNING",
    "REQUEUED",
    "PENDING",
    "STOPPED",  # a Ray job stopped through Ray's job API: its log's last line says so (Ray's own word for it)
)


@dataclass(frozen=True)
class Attempt:
    """One run of the job as its log shows it."""

    number: int
    text: str
    host: str | None
    # "completed", "failed", "interrupted" (preempted / time limit), "cancelled" (a Ray job's stop, which its log
    # records; SLURM's cancel line does not say who cancelled: its record does, JobRecord), "running" (no end yet)
    ended: str


def read_tail(path: Path, limit: int = MAX_LOG_BYTES) -> str:
    with path.open("rb") as handle:
        size = path.stat().st_size
        if size > limit:
            handle.seek(size - limit)
        return handle.read().decode(errors="replace")


# how an attempt that left no submitit ERROR line ended: srun reports a task that died (SIGKILL from the OOM killer,
# a non-zero exit), SLURM a cancellation
TASK_DIED = re.compile(
    r"(?m)srun: error: \S+: tasks? [\d,-]+: (?:Killed|Exited with exit code [1-9])|\bCANCELLED\b|^Killed$"
)


# the job ended for good after an interruption: submitit did not requeue it (its UncompletedJobError, whatever the
# reason it gives), or rlaunch's checkpoint hook refused the requeue (launch/job.py)
NOT_REQUEUED = re.compile(r"(?m)UncompletedJobError: Job not requeued|Job not requeued because|^rlaunch: not requeued:")


def ending(text: str) -> str:
    exited = RAY_ENTRY_EXITED.search(text)
    if exited:  # cluster=ray: the entrypoint's own exit code
        return "completed" if exited.group("code") == "0" else "failed"
    if ENTRY_STOPPED in text:
        return "cancelled"
    if "Job completed successfully" in text:
        return "completed"
    if NOT_REQUEUED.search(text):  # an interruption it did not come back from: the end-for-good line wins
        return "failed"
    if any(p.search(text) for p in COMPILED["preempted"] + COMPILED["time_limit"]):
        return "interrupted"
    if (
        "Submitted job triggered an exception" in text
        or STOPPED_BEFORE_PYTHON.search(text)
        or TASK_DIED.search(text)
        or match_kind("host_oom", text.splitlines())
    ):
        return "failed"
    return "running"


# a run a dry run planned (launch.dry_run): its sweep's manifest says nothing was submitted
DRY_RUN_STATE = "DRY RUN"


def planned_only(run_dir: Path) -> bool:
    """The run was planned by a dry run and never submitted: its sweep's manifest is a dry run's (no job id)."""
    entry = manifest_entry(run_dir)
    return entry is not None and not entry.job_id and read_manifest(run_dir.parent).dry_run


def why_only_planned(run_dir: Path) -> str:
    """How a run that was never submitted came to be only planned: a dry run (launch.dry_run), or a run with nowhere
    to go (cluster=local without a GPU: plan.json's execution_reason says so), with what runs it."""
    try:
        plan = load_plan(run_dir)
        ours = yaml.safe_load((Path(run_dir) / RLAUNCH_CONFIG_FILE).read_text()) or {}
    except (OSError, UserError, yaml.YAMLError):
        plan, ours = None, {}
    dry = str((ours.get("launch") or {}).get("dry_run", "false")).lower() != "false"
    if plan is not None and plan.execution == "plan-only" and not dry:
        return (
            f"planned only ({plan.execution_reason}): run it where it can run, on a GPU machine or from a SLURM "
            "login node with cluster=slurm"
        )
    return "dry run: planned only, nothing was submitted; submit without launch.dry_run to run it"


def manifest_entry(run_dir: Path) -> ManifestRun | None:
    """The run's entry in its sweep's manifest (None: no manifest, or the run is not in it)."""
    if not (run_dir.parent / MANIFEST).exists():
        return None
    return next((run for run in read_manifest(run_dir.parent).runs if Path(run.run_dir).name == run_dir.name), None)


def job_logs(run_dir: Path) -> list[Path]:
    """The job's submitit logs (every task: node 0 runs the driver, the others their Ray worker), stderr first; a
    cluster=ray job's copy of its output in the run directory."""
    entry = manifest_entry(run_dir)
    if entry is None:
        return []
    if not entry.stderr:  # a Ray job (a dry run's entry has neither)
        copied = run_dir / RAY_JOB_LOG
        return [copied] if copied.is_file() else []
    folder = Path(entry.stderr).parent
    prefix = Path(entry.stderr).name.rsplit("_", 2)[0]  # <job id>_<task>_log.err
    tasks = sorted(folder.glob(f"{prefix}_*_log.err")) + sorted(folder.glob(f"{prefix}_*_log.out"))
    return [path for path in tasks if path.is_file()]


def ray_texts(run_dir: Path) -> str:
    """The copied Ray logs and rlaunch's ray_start logs: the cause when the job's own log shows only symptoms."""
    paths = sorted(run_dir.glob("ray_start-*.log"))
    ray_logs = run_dir / "ray_logs"
    if ray_logs.is_dir():
        paths += sorted(
            path for path in ray_logs.rglob("*") if path.is_file() and path.suffix in (".err", ".out", ".log")
        )
    parts = []
    for path in paths:
        # ray_logs/<node>-<rank>/... and ray_start-<node>-<rank>.log
        node = (path.parent.name if path.parent != run_dir else path.stem.split("-", 1)[-1]).rsplit("-", 1)[0]
        parts.append("\n".join(f"{line} [node {node}]" for line in read_tail(path, 1 << 20).splitlines()))
    return "\n".join(parts)


TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)")  # submitit's, slurmstepd's, Ray's


def stamp(line: str) -> str | None:
    match = TIMESTAMP.search(line)
    return f"{match.group(1)} {match.group(2)}" if match else None


def lines_by_attempt(text: str, starts: list[str]) -> dict[int, list[str]]:
    """A job log's lines by the attempt that wrote them. submitit writes its INFO lines (the attempt starts) to
    stdout and WARNING/ERROR to stderr, so a stderr file has no start marker: each line belongs to the attempt of
    the next time-stamped line at or after it (a traceback precedes submitit's ERROR line, slurmstepd stamps its
    cancellation), the lines after the last stamp to the attempt of that stamp."""
    lines = text.splitlines()
    stamps: list[str | None] = [None] * len(lines)
    following = None
    for index in reversed(range(len(lines))):
        following = stamp(lines[index]) or following
        stamps[index] = following
    last = next((value for value in reversed([stamp(line) for line in lines]) if value), None)
    grouped: dict[int, list[str]] = {}
    for line, value in zip(lines, stamps, strict=True):
        value = value or last
        number = max(1, sum(start <= value for start in starts)) if value else max(1, len(starts))
        grouped.setdefault(number, []).append(line)
    return grouped


def ray_attempts(text: str) -> list[Attempt]:
    """A cluster=ray job's output (RAY_JOB_LOG: every submission of the run appends to it), split at the line each
    attempt starts with; the text before the first start belongs to it."""
    starts = list(RAY_ATTEMPT_START.finditer(text))
    bounds = [0, *(match.start() for match in starts[1:]), len(text)]
    numbers = [int(match.group("number")) for match in starts]
    parts = [text[begin:end] for begin, end in zip(bounds, bounds[1:], strict=False)]
    return [Attempt(number, part, None, ending(part)) for number, part in zip(numbers, parts, strict=True)]


# submitit's file names: <job id>_<task>_log.err / .out (task = the rank's global rank in the job)
TASK_LOG = re.compile(r"_(?P<task>\d+)_log\.(?:err|out)$")


def task_of(path: Path) -> str:
    """The task (rank) whose log this is; a file named otherwise is one task of its own."""
    match = TASK_LOG.search(path.name)
    return match.group("task") if match else path.name


# an attempt's ranks' endings, the worst first: an interruption (time limit, preemption) ends every rank, and the ranks
# it killed look failed; else any rank's failure or cancel ends the attempt, whatever the other ranks said before it
WORST_FIRST = ("interrupted", "failed", "cancelled")


def worst_ending(by_rank: dict[str, str]) -> str:
    """A multi-node attempt's ending from each rank's: its worst rank's. A worker rank (task > 0) ends when the
    driver's Ray head goes, so one still 'running' (no end line: killed with the job step) does not hold an attempt
    whose driver (task 0) ended; with no driver log, a rank still running keeps the attempt running."""
    endings = set(by_rank.values())
    worst = next((ending for ending in WORST_FIRST if ending in endings), None)
    if worst:
        return worst
    driver = by_rank.get("0")
    if driver is not None:
        return driver
    return "running" if "running" in endings else "completed"


def attempts_in(logs: list[Path]) -> list[Attempt]:
    """The attempts in a job's log files (stdout and stderr of its tasks), split at the attempt starts submitit wrote
    to task 0's stdout (else the first file that has any); a cluster=ray job's copied output at rlaunch's starts. An
    attempt's text is every task's lines; its ending is its worst task's (worst_ending): a worker rank's 'Job completed
    successfully' does not make an attempt whose driver failed a completed one."""
    texts = [read_tail(path) for path in logs]
    if not any(text.strip() for text in texts):
        return []
    if len(texts) == 1 and RAY_ATTEMPT_START.search(texts[0]):
        return ray_attempts(texts[0])
    ordered = sorted(zip(logs, texts, strict=True), key=lambda item: not item[0].name.endswith("_0_log.out"))
    matches = next((found for _, text in ordered if (found := list(ATTEMPT_START.finditer(text)))), [])
    starts = [stamp(match.group(0)) or "" for match in matches]
    hosts = [re.search(r"hostname=([^,\s)]+)", match.group("env")) for match in matches]
    per_attempt: dict[int, list[str]] = {}
    per_rank: dict[int, dict[str, list[str]]] = {}
    for path, text in zip(logs, texts, strict=True):
        for number, lines in lines_by_attempt(text, starts).items():
            per_attempt.setdefault(number, []).extend(lines)
            per_rank.setdefault(number, {}).setdefault(task_of(path), []).extend(lines)
    attempts = []
    for number in range(1, max(len(starts), max(per_attempt)) + 1):
        text = "\n".join(per_attempt.get(number, []))
        host = hosts[number - 1].group(1) if number <= len(hosts) and hosts[number - 1] else None
        ranks = {
            task: ending("\n".join(lines)) for task, lines in per_rank.get(number, {}).items() if "".join(lines).strip()
        }
        ended = worst_ending(ranks) if len(ranks) > 1 and not NOT_REQUEUED.search(text) else ending(text)
        attempts.append(Attempt(number, text, host, ended))
    return attempts


def read_attempts(run_dir: Path) -> list[Attempt]:
    """The run's attempts from its job logs."""
    return attempts_in(job_logs(run_dir))


def log_with_sibling(path: Path) -> list[Path]:
    """A submitit log and its other half (<job>_<task>_log.err / .out): the attempt starts are on stdout."""
    other = {".err": ".out", ".out": ".err"}.get(path.suffix)
    sibling = path.with_suffix(other) if other else None
    return [path, sibling] if sibling is not None and sibling.is_file() else [path]


def run_state(run_dir: Path, record: JobRecord | None = None) -> str | None:
    """The state the scheduler gives the run's job where it answered (`record`: SLURM's 'CANCELLED by 1000',
    'TIMEOUT', 'PENDING (BeginTime)', Ray's 'STOPPED'), else COMPLETED / FAILED / RUNNING / REQUEUED / PENDING (or a
    Ray job's STOPPED) from the job's own log, DRY RUN for a run a dry run planned; None for a run that no manifest
    lists (cluster=local, or a directory copied without its sweep)."""
    if record is not None:
        return record.state
    if manifest_entry(run_dir) is None:
        return None
    if planned_only(run_dir):
        return DRY_RUN_STATE
    attempts = read_attempts(run_dir)
    if not attempts:
        return PENDING_STATE
    last = attempts[-1].ended
    if last == "completed":
        return COMPLETED_STATE
    if last == "interrupted":
        return REQUEUED_STATE if not (run_dir / NOT_REQUEUED_FILE).exists() else FAILED_STATE
    if last == "cancelled":
        return STOPPED_STATE
    if last == "failed":
        return FAILED_STATE
    return RUNNING_STATE


# --- what the scheduler says ------------------------------------------------------------------------------------------

# a job SLURM still holds, or holds again (a requeued one waits PENDING, then RUNNING), as squeue and sacct name them
QUEUED_STATES = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RUNNING", "COMPLETING")


@dataclass(frozen=True)
class JobRecord:
    """What the scheduler that ran a run's job says of it, beside what the job's own log says: SLURM (squeue while it
    holds the job, then sacct) or Ray's job API. A cancel is only here: the job's log shows SLURM's bare cancel line
    (scancel, a preemption under PreemptMode=CANCEL, or the batch script's end look the same), sacct says who."""

    scheduler: str  # "SLURM" or "Ray"
    job_id: str
    state: str  # as the scheduler says it: 'CANCELLED by 1000', 'TIMEOUT', 'PENDING (BeginTime)', Ray's 'FAILED'
    attempts: tuple[str, ...] = ()  # SLURM: each run of the job's final state, oldest first (sacct -D)
    message: str = ""  # Ray: the first line of its message for a job that ended

    @property
    def cancelled(self) -> bool:
        """Ended by a person (or a script) through the scheduler: scancel (CANCELLED by <uid>), Ray's stop_job."""
        return self.state.startswith("CANCELLED") or (self.scheduler == "Ray" and self.state == "STOPPED")

    @property
    def queued(self) -> bool:
        """SLURM holds the job (again): a requeued job waits for, or runs, its next attempt."""
        return self.scheduler == "SLURM" and self.state.split(" ")[0] in QUEUED_STATES


@dataclass(frozen=True)
class JobRecords:
    """Each run's JobRecord (by run id); where the scheduler did not answer, why (its own words)."""

    by_run: dict[str, JobRecord] = field(default_factory=dict)
    silent: str | None = None


def job_records(manifest: Manifest) -> JobRecords:
    """What the scheduler the sweep went to says of each run's job (nothing for a dry run)."""
    submitted = [run for run in manifest.runs if run.job_id]
    if manifest.dry_run or not submitted:
        return JobRecords()
    if manifest.cluster == "ray":
        from launch import ray_status

        try:
            states = ray_status.job_states(manifest)
        except UserError as gone:
            return JobRecords(silent=f"the Ray cluster did not answer ({gone})")
        records = {}
        for run in submitted:
            state, message = states[str(run.job_id)]
            records[run.run_id] = JobRecord("Ray", str(run.job_id), state, message=message)
        return JobRecords(records)
    from launch import slurm

    try:
        queued, accounted = slurm.squeue_states(manifest.array_ids), slurm.sacct_attempts(manifest.array_ids)
    except slurm.SlurmSilent as silent:
        return JobRecords(silent=f"SLURM did not answer ({silent})")
    records = {}
    for run in submitted:
        job_id = str(run.job_id)
        # an array cancelled before its tasks started has one sacct line for all of them: 12_[0-3%4]
        pending_array = next((v for k, v in accounted.items() if k.startswith(f"{run.array_job_id}_[")), [])
        attempts = tuple(attempt["State"] for attempt in accounted.get(job_id, pending_array))
        state = queued.get(job_id) or (attempts[-1] if attempts else None)
        if state:
            records[run.run_id] = JobRecord("SLURM", job_id, state, attempts)
    return JobRecords(records)


def sweep_records(sweep_dir: Path) -> JobRecords:
    """job_records for the sweep whose directory this is (nothing for one without a manifest: cluster=local)."""
    if not (sweep_dir / MANIFEST).is_file():
        return JobRecords()
    return job_records(read_manifest(sweep_dir))


def records_of(run_dirs: Iterable[Path]) -> JobRecords:
    """What the schedulers say of these runs' jobs: each sweep they are in asked once, merged."""
    said = [sweep_records(sweep) for sweep in dict.fromkeys(run_dir.parent for run_dir in run_dirs)]
    by_run = {run_id: record for one in said for run_id, record in one.by_run.items()}
    return JobRecords(by_run, "; ".join(dict.fromkeys(one.silent for one in said if one.silent)) or None)
