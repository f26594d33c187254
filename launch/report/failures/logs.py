"""Where the logs of a run's attempts are and what they say about its state: submitit's layout (every task's
<job>_<task>_log.err/.out, found through the sweep's manifest), the copied Ray and ray_start logs, reading a log's
tail, the split of a requeued job's log into its attempts, and the run's state from its last attempt.

Runs on: any machine that sees the run directories (login node, laptop with the shared filesystem).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from launch.manifest import MANIFEST, ManifestRun
from launch.manifest import read as read_manifest
from launch.report.failures.signatures import COMPILED, SCRIPT_STOPPED, match_kind
from launch.rundir import NOT_REQUEUED_FILE

# submitit logs this (on stdout) when an attempt starts; with open-mode=append a requeued job's attempts follow each
# other in the same files.
STOPPED_BEFORE_PYTHON = re.compile(SCRIPT_STOPPED)  # the job script's setup stopped it: no submitit line follows
ATTEMPT_START = re.compile(r"submitit INFO \([^)]*\) - Starting with JobEnvironment\((?P<env>[^)]*)\)")
MAX_LOG_BYTES = 4 << 20  # a log's tail this large holds the cause; Ray's logs can grow to gigabytes

# run state (sweep status and compare show it)
COMPLETED_STATE, FAILED_STATE, RUNNING_STATE, REQUEUED_STATE, PENDING_STATE = (
    "COMPLETED",
    "FAILED",
    "RUNNING",
    "REQUEUED",
    "PENDING",
)


@dataclass(frozen=True)
class Attempt:
    """One run of the job as its log shows it."""

    number: int
    text: str
    host: str | None
    ended: str  # "completed", "failed", "interrupted" (preempted / time limit), "running" (no end yet)


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


def ending(text: str) -> str:
    if "Job completed successfully" in text:
        return "completed"
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


def manifest_entry(run_dir: Path) -> ManifestRun | None:
    """The run's entry in its sweep's manifest (None: no manifest, or the run is not in it)."""
    if not (run_dir.parent / MANIFEST).exists():
        return None
    return next((run for run in read_manifest(run_dir.parent).runs if Path(run.run_dir).name == run_dir.name), None)


def job_logs(run_dir: Path) -> list[Path]:
    """The job's submitit logs (every task: node 0 runs the driver, the others their Ray worker), stderr first."""
    entry = manifest_entry(run_dir)
    if entry is None or not entry.stderr:
        return []
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


def attempts_in(logs: list[Path]) -> list[Attempt]:
    """The attempts in a job's log files (stdout and stderr of its tasks), split at the attempt starts submitit wrote
    to task 0's stdout (else the first file that has any)."""
    texts = [read_tail(path) for path in logs]
    if not any(text.strip() for text in texts):
        return []
    ordered = sorted(zip(logs, texts, strict=True), key=lambda item: not item[0].name.endswith("_0_log.out"))
    matches = next((found for _, text in ordered if (found := list(ATTEMPT_START.finditer(text)))), [])
    starts = [stamp(match.group(0)) or "" for match in matches]
    hosts = [re.search(r"hostname=([^,\s)]+)", match.group("env")) for match in matches]
    per_attempt: dict[int, list[str]] = {}
    for text in texts:
        for number, lines in lines_by_attempt(text, starts).items():
            per_attempt.setdefault(number, []).extend(lines)
    attempts = []
    for number in range(1, max(len(starts), max(per_attempt)) + 1):
        text = "\n".join(per_attempt.get(number, []))
        host = hosts[number - 1].group(1) if number <= len(hosts) and hosts[number - 1] else None
        attempts.append(Attempt(number, text, host, ending(text)))
    return attempts


def read_attempts(run_dir: Path) -> list[Attempt]:
    """The run's attempts from its job logs."""
    return attempts_in(job_logs(run_dir))


def log_with_sibling(path: Path) -> list[Path]:
    """A submitit log and its other half (<job>_<task>_log.err / .out): the attempt starts are on stdout."""
    other = {".err": ".out", ".out": ".err"}.get(path.suffix)
    sibling = path.with_suffix(other) if other else None
    return [path, sibling] if sibling is not None and sibling.is_file() else [path]


def run_state(run_dir: Path) -> str | None:
    """COMPLETED / FAILED / RUNNING / REQUEUED / PENDING from the job's own log (no sacct needed); None for a run that
    no manifest lists (cluster=local, or a directory copied without its sweep)."""
    if manifest_entry(run_dir) is None:
        return None
    attempts = read_attempts(run_dir)
    if not attempts:
        return PENDING_STATE
    last = attempts[-1].ended
    if last == "completed":
        return COMPLETED_STATE
    if last == "interrupted":
        return REQUEUED_STATE if not (run_dir / NOT_REQUEUED_FILE).exists() else FAILED_STATE
    if last == "failed":
        return FAILED_STATE
    return RUNNING_STATE
