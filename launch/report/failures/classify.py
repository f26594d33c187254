"""Which cause explains a failed attempt: the kind whose signature a log shows first in `KINDS` order, with its
evidence, its node and the numbers a fix can use; for a run directory, one cause per attempt that failed.

Runs on: any machine that sees the run directories (login node, laptop with the shared filesystem).

A log usually shows several errors: the first failure unwinds the rest (an OOM'd worker makes NCCL time out and Ray
report a dead actor), so kinds are tried in `KINDS` order, root causes and external interruptions before the
symptoms they cause, and only `unknown` falls back to the last error line. Where the job's own log shows only
rlaunch's wrapper, the node-local logs copied into the run (launch/report/failures/logs.py) are read as well.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from launch.report.failures.fixes import FixContext, generic_fix, with_plan_fix
from launch.report.failures.logs import ray_texts, read_attempts
from launch.report.failures.signatures import (
    EXCEPTION_LINE,
    INTERRUPTIONS,
    KINDS,
    NODE_PATTERNS,
    WRAPPER,
    Failure,
    match_kind,
    strip_prefix,
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")
EVIDENCE_CHARS = 300


def clean(line: str) -> str:
    return ANSI.sub("", line).rstrip()


def evidence_line(line: str) -> str:
    line = clean(line).strip()
    return line if len(line) <= EVIDENCE_CHARS else line[: EVIDENCE_CHARS - 3] + "..."


def node_of(lines: Iterable[str]) -> str | None:
    """The first node named, host names (rlaunch's, SLURM's) before Ray's IP addresses: NODE_PATTERNS' order."""
    lines = list(lines)
    for pattern in NODE_PATTERNS:
        for line in lines:
            match = pattern.search(line + " ")
            if match:
                return match.group(1).rstrip(".,:;)")
    return None


def last_error(lines: list[str]) -> list[str]:
    """For `unknown`: the last exception line that is not rlaunch's own wrapper (else the last line saying error)."""
    exceptions = [line for line in lines if EXCEPTION_LINE.match(strip_prefix(line)) and not WRAPPER.search(line)]
    if not exceptions:
        exceptions = [
            line for line in lines if re.search(r"\b(?:Error|error|FATAL)\b", line) and not WRAPPER.search(line)
        ]
    return exceptions[-1:]


def node_near(lines: list[str], hits: list[str], window: int = 12) -> str | None:
    """The node the evidence names, else the nearest line around the first piece of evidence that names one (Ray
    prints `ip: ...` below an ActorDiedError, `Local node IP` above a failed start)."""
    named = node_of(hits)
    if named or not hits:
        return named
    index = lines.index(hits[0]) if hits[0] in lines else -1
    if index < 0:
        return None
    around = sorted(range(max(0, index - window), min(len(lines), index + window + 1)), key=lambda i: abs(i - index))
    return node_of(lines[i] for i in around)


def classify(text: str, attempt: int | None = None, host: str | None = None) -> Failure:
    """The cause of one attempt's failure from its log text (a bare log is one attempt)."""
    lines = [clean(line) for line in text.splitlines()]
    for kind in KINDS[:-1]:
        hits = match_kind(kind, lines)
        if hits:
            evidence = list(dict.fromkeys(evidence_line(line) for line in hits))[:3]
            details = parse_details(kind, hits)
            if kind in INTERRUPTIONS:
                details |= before_interruption(lines[: lines.index(hits[0])])
            failure = Failure(kind, evidence, attempt, node_near(lines, hits) or host, details=details)
            failure.fix = generic_fix(failure)
            return failure
    errors = last_error(lines)
    failure = Failure("unknown", [evidence_line(line) for line in errors], attempt, node_near(lines, errors) or host)
    failure.fix = generic_fix(failure)
    return failure


def before_interruption(lines: list[str]) -> dict[str, float | str]:
    """What the attempt was stuck on when SLURM interrupted it (Ray that never came up, a hung collective): the
    interruption is the cause of the kill, this is why no progress was made before it."""
    for kind in KINDS[len(INTERRUPTIONS) : -1]:
        hits = match_kind(kind, lines)
        if hits:
            return {"before": f"{kind}: {strip_prefix(evidence_line(hits[0]))[:120]}"}
    return {}


# --- numbers in the evidence ------------------------------------------------------------------------------------------


def gib(value: str, unit: str) -> float:
    return float(value) / (1024 if unit.startswith("M") else 1)


def parse_details(kind: str, hits: list[str]) -> dict[str, float | str]:
    """What a fix can use: an OOM's allocation sizes and the phase its traceback was in."""
    text = "\n".join(hits)
    details: dict[str, float | str] = {}
    if kind in ("cuda_oom", "engine_memory"):
        patterns = {
            "tried_gib": r"Tried to allocate ([\d.]+) ([GM]iB)",
            "capacity_gib": r"total capacity of ([\d.]+) ([GM]iB)|([\d.]+) ([GM]iB) total capacity",
            "in_use_gib": r"(?:this process|Process \d+) has ([\d.]+) ([GM]iB) memory in use|([\d.]+) ([GM]iB) already "
            r"allocated",
            "torch_allocated_gib": r"([\d.]+) ([GM]iB) is allocated by PyTorch",
        }
        for name, pattern in patterns.items():
            match = re.search(pattern, text)
            if match:
                value, unit = [group for group in match.groups() if group][:2]
                details[name] = round(gib(value, unit), 2)
    return details


def run_failures(run_dir: Path, context: FixContext | None = None) -> list[Failure]:
    """One Failure per attempt that did not complete and is over (a running attempt has no cause yet)."""
    attempts = read_attempts(run_dir)
    failures = []
    for attempt in attempts:
        if attempt.ended in ("completed", "running"):
            continue
        failure = classify(attempt.text, attempt.number, attempt.host)
        if failure.kind == "unknown" and attempt.number == len(attempts):
            # the job's log shows only rlaunch's wrapper: the cause is in the node-local logs copied into the run
            extra = ray_texts(run_dir)
            if extra:
                deeper = classify(attempt.text + "\n" + extra, attempt.number, attempt.host)
                if deeper.kind != "unknown":
                    failure = deeper
        failures.append(with_plan_fix(failure, context, attempt.text))
    return failures
