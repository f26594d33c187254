"""Which cause explains a failed attempt: the kind whose signature a log shows first in `KINDS` order, with its
evidence, its node and the numbers a fix can use; for a run directory, one cause per attempt that failed.

Runs on: any machine that sees the run directories (login node, laptop with the shared filesystem).

A log usually shows several errors: the first failure unwinds the rest (an OOM'd worker makes NCCL time out and Ray
report a dead actor), so kinds are tried in `KINDS` order, root causes and external interruptions before the
symptoms they cause. A log no signature names is read by likeness.py: the kind its words look like, when that is
clear, marked as read by likeness; else `unknown`, with the last error line. Where the job's own log shows only
rlaunch's wrapper, the node-local logs copied into the run (launch/report/failures/logs.py) are read as well.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from launch.ray_submit import ENTRY_STOPPED
from launch.report.failures.fixes import (
    BARE_CANCEL,
    GENERIC_FIXES,
    FixContext,
    cancelled_fix,
    generic_fix,
    saved_step,
    with_plan_fix,
)
from launch.report.failures.likeness import likeness
from launch.report.failures.logs import Attempt, JobRecord, ray_texts, read_attempts, read_tail
from launch.report.failures.signatures import (
    EXCEPTION_LINE,
    INTERRUPTIONS,
    KINDS,
    NODE_PATTERNS,
    RLAUNCH_HANG_END,
    RLAUNCH_HANG_STOP,
    SLURM_REQUEUED,
    WRAPPER,
    Failure,
    match_kind,
    strip_prefix,
    unlabelled,
    unwrap,
)
from launch.rundir import HANG_DIR, STARTUP_PHASE, hang_records
from launch.rundir import attempts as rundir_attempts

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# likeness.py reads a log, not a line or two: its weights were trained and measured on excerpts of 5 to 20 lines, and a
# few lines give too few words to weigh (a bare `KeyError: 'question'` could be any dict of any code); shorter text is
# judged by the signatures alone
LIKENESS_MIN_LINES = 5
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


# one entry of a config dump: verl pretty-prints its whole config at start (`'truncation': 'error',`), OmegaConf and
# Hydra as YAML (`truncation: error`): a setting whose value is the word error, not an error; a bare `error: ...` key
# (a tool's own message) is not taken for one
CONFIG_KEY = r"""(?:'[^']*'|"[^"]*"|(?!(?i:error|fatal|err)\b)[A-Za-z_][\w.]*)\s*:\s*"""
CONFIG_ENTRY = re.compile(
    rf"""^[{{\[(]*\s*(?:{CONFIG_KEY}[{{\[]\s*)*{CONFIG_KEY}(?:'[^']*'|"[^"]*"|[\w.+-]+)?\s*[,}}\])]*\s*$"""
)


def last_error(lines: list[str]) -> list[str]:
    """For `unknown`: the last exception line that is not rlaunch's own wrapper (else the last line saying error that
    is not an entry of a config dump)."""
    exceptions = [line for line in lines if EXCEPTION_LINE.match(strip_prefix(line)) and not WRAPPER.search(line)]
    if not exceptions:
        exceptions = [
            line
            for line in lines
            if re.search(r"\b(?:Error|error|FATAL)\b", line)
            and not WRAPPER.search(line)
            and not CONFIG_ENTRY.match(strip_prefix(line))
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


# srun's summary of a task that ended badly names its node as SLURM does (`srun: error: c1: task 0: Exited with exit
# code 1`), where submitit's JobEnvironment names it by its hostname (`hostname=vm`) and Ray by its IP; submitit's
# `node=0(1)` says the job had one node, so an IP the evidence gives is that node
SRUN_TASK_NODE = re.compile(r"^srun: error: (?P<node>[\w.-]+): tasks? [\d,-]+: ")
ONE_NODE_JOB = re.compile(r"JobEnvironment\(.*\bnode=\d+\(1\)")
IP_ADDRESS = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def classify(text: str, attempt: int | None = None, host: str | None = None) -> Failure:
    """The cause of one attempt's failure from its log text (a bare log is one attempt), its node named as SLURM
    names it where srun's own line says (a run directory's records say it too: classify.with_slurm_node). A log of
    `srun --label` is read, and its evidence shown, without the task labels: the summary reads a line by its start,
    and srun's own summary line, which no label hides, names the node."""
    text = unlabelled(text)
    failure = cause_in_log(text, attempt, host)
    lines = [clean(line) for line in text.splitlines()]
    named = {found["node"] for line in lines if (found := SRUN_TASK_NODE.match(strip_prefix(line)))}
    if len(named) != 1:  # none, or tasks of several nodes: which one failed is the evidence's
        return failure
    unnamed = failure.node is None or failure.node == host
    by_ip = failure.node is not None and IP_ADDRESS.match(failure.node) and any(map(ONE_NODE_JOB.search, lines))
    return replace(failure, node=named.pop()) if unnamed or by_ip else failure


def cause_in_log(text: str, attempt: int | None = None, host: str | None = None) -> Failure:
    """The cause of one attempt's failure from its log text: the first kind whose signature the log shows, else the
    kind its words read like when that is clear (likeness.py), else unknown."""
    lines = [clean(line) for line in text.splitlines()]
    matched = logged_hang(lines, attempt, host) or by_signature(lines, text, attempt, host)
    if not matched:  # a log hard-wrapped at a fixed width can cut a signature in two: a second look at it rejoined
        rejoined = [clean(line) for line in unwrap(ANSI.sub("", text).splitlines())]
        if len(rejoined) < len(lines):
            matched = by_signature(rejoined, "\n".join(rejoined), attempt, host)
    if matched:
        return matched
    requeued_by_slurm = [line for line in lines if SLURM_REQUEUED.search(line)][:2]
    if requeued_by_slurm:  # and no signal submitit caught (a time-out, a preemption) or other cause: scontrol requeue
        failure = Failure(
            "preempted",
            [evidence_line(line) for line in requeued_by_slurm],
            attempt,
            node_near(lines, requeued_by_slurm) or host,
            details={"requeued_by": "scontrol requeue"}
            | before_interruption(lines[: lines.index(requeued_by_slurm[0])]),
        )
        failure.fix = generic_fix(failure, text)
        return failure
    errors = last_error(lines)
    # SLURM's own cancel line says more than the srun error it leaves after it (the fix says what decides its cause)
    cancels = [line for line in lines if BARE_CANCEL.search(line)][:1]
    shown = list(dict.fromkeys(evidence_line(line) for line in [*cancels, *errors]))
    failure = Failure("unknown", shown, attempt, node_near(lines, errors) or host)
    failure.fix = generic_fix(failure, text)
    undecided = failure.fix != GENERIC_FIXES["unknown"]  # the log narrows it to a choice the fix spells out
    enough = sum(bool(line.strip()) for line in lines) >= LIKENESS_MIN_LINES
    read = likeness("\n".join(lines)) if errors and enough and not undecided else None
    if read and read.names_a_cause:
        # the lines that weigh most for the kind, then the error the log ends on (what unknown would have shown)
        evidence = list(dict.fromkeys(evidence_line(line) for line in [*read.evidence[:2], *errors]))
        failure = Failure(read.kind, evidence, attempt, failure.node)
        failure.details["likeness"] = read.probability
        failure.fix = (
            f"no signature matched; the log's words read like the {read.kind} logs rlaunch knows "
            f"(p={read.probability:.2f}), so check the lines above first. " + generic_fix(failure, text)
        )
    return failure


def by_signature(lines: list[str], text: str, attempt: int | None, host: str | None) -> Failure | None:
    """The first kind in `KINDS` order whose signature the log shows, with its evidence, numbers and fix."""
    for kind in KINDS[:-1]:
        hits = match_kind(kind, lines)
        if hits:
            evidence = list(dict.fromkeys(evidence_line(line) for line in hits))[:3]
            details = parse_details(kind, hits)
            if kind in INTERRUPTIONS:
                details |= before_interruption(lines[: lines.index(hits[0])])
            failure = Failure(kind, evidence, attempt, node_near(lines, hits) or host, details=details)
            failure.fix = generic_fix(failure, text)
            return failure
    return None


def logged_hang(lines: list[str], attempt: int | None, host: str | None) -> Failure | None:
    """rlaunch's own hang watchdog's lines in the job's log (RLAUNCH_HANG_STOP, RLAUNCH_HANG_END): a `hang`, with what
    they say of it; the run directory's hang.json says more (read_hang_records)."""
    stops = [line for line in lines if RLAUNCH_HANG_STOP.search(line)]
    ends = [(line, found) for line in lines if (found := RLAUNCH_HANG_END.search(line))]
    if not stops and not ends:
        return None
    evidence = list(dict.fromkeys(evidence_line(line) for line in [*stops[:1], *(line for line, _ in ends[:1])]))
    stop = RLAUNCH_HANG_STOP.search(stops[0]) if stops else None
    end = ends[0][1] if ends else None
    said = end or stop
    assert said is not None
    details: dict[str, float | str] = {"waited_s": float(said["waited"]), "window_s": float(said["window"])}
    if stop is not None and stop["step"]:
        details["last_step"] = int(stop["step"])
    step = f" after step {details['last_step']}" if "last_step" in details else ""
    fix = f"the hang watchdog stopped the attempt: no step for {said['waited']} s (window {said['window']} s)"
    if end is None:  # the log stops before the job's end on it
        fix += f"{step}; every process's stack is in the run directory's {HANG_DIR}/ folder"
    else:
        known = end["phase"] != "an unknown phase"  # watchdog.summary's words for none
        details |= {"phase": end["phase"] if known else "?", "stacks_dir": end["stacks"]}
        requeue = (
            "requeued once (the stacks point to a transient cause)"
            if end["requeue"] == "requeued once"
            else f"not requeued: {end['why']}"
        )
        fix += (
            f" in {end['phase']}{step}: {end['evidence']}; every process's stack is in the run directory's "
            f"{end['stacks']}; {requeue}"
        )
    fix += "; python launch/report/doctor.py <run dir> reads its hang.json"
    return Failure("hang", evidence, attempt, node_near(lines, evidence) or host, fix=fix, details=details)


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
        # each name's forms in the order to trust them: torch lists other processes on the card before "this process"
        patterns = {
            "tried_gib": (r"Tried to allocate ([\d.]+) ([GM]iB)",),
            # "GPU had 12.44 GiB free of 79.19": a shorter form, its total's unit that of the free memory before it
            "capacity_gib": (
                r"total capacity of ([\d.]+) ([GM]iB)|([\d.]+) ([GM]iB) total capacity",
                r"[\d.]+ ([GM]iB) free of ([\d.]+)(?: ?([GM]iB))?",
            ),
            "free_gib": (r"of which ([\d.]+) ([GM]iB) is free|([\d.]+) ([GM]iB) free;|had ([\d.]+) ([GM]iB) free",),
            "in_use_gib": (
                r"this process has ([\d.]+) ([GM]iB) memory in use",
                r"Process \d+ has ([\d.]+) ([GM]iB) memory in use|([\d.]+) ([GM]iB) already allocated",
            ),
            "torch_allocated_gib": (r"([\d.]+) ([GM]iB) is allocated by PyTorch",),
        }
        for name, forms in patterns.items():
            match = next((found for form in forms if (found := re.search(form, text))), None)
            if match:
                found = [group for group in match.groups() if group]
                if found[0].endswith("iB"):  # the short form: the free memory's unit, then the total without its own
                    value, unit = found[1], found[2] if len(found) > 2 else found[0]
                else:
                    value, unit = found[:2]
                details[name] = round(gib(value, unit), 2)
    return details


def run_failures(run_dir: Path, context: FixContext | None = None, record: JobRecord | None = None) -> list[Failure]:
    """One Failure per attempt that did not complete and is over (a running attempt has no cause yet). An attempt the
    hang watchdog stopped is a `hang`, whatever its log shows after the stop (the kill, the time limit). `record`: what
    the scheduler says of the job (logs.job_records), where it answered: a cancel is only there, and an attempt it
    holds again was requeued."""
    attempts = read_attempts(run_dir)
    hangs = {hung.attempt: hung for hung in read_hang_records(run_dir)}
    hung_attempts = set(hangs)
    cancelled = record is not None and record.cancelled
    failures = []
    for attempt in attempts:
        if attempt.number in hangs and attempt.ended != "completed":
            hung_before = any(earlier < attempt.number for earlier in hung_attempts)
            failures.append(hang_failure(hangs.pop(attempt.number), run_dir, attempt.host, hung_before))
            continue
        # a cancel ends the attempt it finds running; one that finds the job requeued (its last attempt interrupted)
        # ends the wait for the next one, below
        ran_into = cancelled and attempt.ended not in ("completed", "interrupted")
        if attempt is attempts[-1] and (attempt.ended == "cancelled" or ran_into):
            failures.append(cancel_failure(attempt, record, run_dir.parent.name, saved=saved_step(run_dir)))
            continue
        if attempt.ended in ("completed", "running"):
            continue
        failure = classify(attempt.text, attempt.number, attempt.host)
        if failure.kind == "unknown" and attempt.number == len(attempts):
            # the job's log shows only rlaunch's wrapper: the cause is in the node-local logs copied into the run
            extra = ray_texts(run_dir)
            if extra:  # each unlabelled on its own: the copied logs never carry srun's labels
                deeper = classify(unlabelled(attempt.text) + "\n" + extra, attempt.number, attempt.host)
                if deeper.kind != "unknown":
                    failure = deeper
        failure = requeued(failure, attempt, attempts, record)
        failures.append(with_plan_fix(failure, context, attempt.text))
    # a hang record whose attempt the job log does not show (the log was cut, or the run has no manifest)
    failures += [
        hang_failure(hung, run_dir, None, any(earlier < hung.attempt for earlier in hung_attempts))
        for hung in hangs.values()
    ]
    failures.sort(key=lambda failure: failure.attempt or 0)
    if cancelled and (not attempts or attempts[-1].ended == "interrupted"):  # while it waited in the queue
        failures.append(
            cancel_failure(None, record, run_dir.parent.name, requeued=bool(attempts), saved=saved_step(run_dir))
        )
    return [with_slurm_node(failure, run_dir, attempts) for failure in with_requeue_outcomes(failures)]


# --- node names -------------------------------------------------------------------------------------------------------

RAY_NODE_IP = re.compile(r"Local node IP: (?P<ip>[\d.]+\d)")


def slurm_node_names(run_dir: Path, attempts: list[Attempt]) -> dict[int | None, dict[str, str]]:
    """attempt -> {a name the logs give a node (its hostname, its Ray IP): SLURM's name for it}, from the run's own
    records: each ray_start-<node>-<rank>.log (rlaunch names it by SLURM's node and writes Ray's 'Local node IP' in
    it), and each attempt's record (attempts.jsonl: the hostname and SLURM's node list; a one-node job's list is its
    node, a multi-node job's hostname is its driver's, the rank-0 node). None's map holds the IPs, for every attempt."""
    by_ip: dict[str, str] = {}
    head = None
    for path in sorted(run_dir.glob("ray_start-*-*.log")):
        node, rank = path.stem.removeprefix("ray_start-").rsplit("-", 1)
        head = node if rank == "0" else head
        found = RAY_NODE_IP.search(ANSI.sub("", read_tail(path, 1 << 16)))
        if found:
            by_ip[found.group("ip")] = node
    names: dict[int | None, dict[str, str]] = {None: by_ip}
    for number, attempt_record in enumerate(rundir_attempts(run_dir), start=1):
        listed = str(attempt_record.get("SLURM_JOB_NODELIST") or "")
        single = listed if listed and not re.search(r"[\[,]", listed) else None
        node = single or head
        hosts = {attempt_record.get("host"), *(a.host for a in attempts if a.number == number)}
        if node:
            names[number] = {str(host): node for host in hosts if host and host != node}
    return names


def with_slurm_node(failure: Failure, run_dir: Path, attempts: list[Attempt]) -> Failure:
    """The failure with its node named as SLURM names it where the run's records tell (status, logs and the doctor
    had named one node by its hostname, its Ray IP or SLURM's name in turn)."""
    if failure.node is None:
        return failure
    names = slurm_node_names(run_dir, attempts)
    slurm = names.get(failure.attempt, {}).get(failure.node) or names[None].get(failure.node)
    return replace(failure, node=slurm) if slurm else failure


# the kinds whose fix says what to do next about the job (resubmit it), which a requeue has already done
REQUEUE_AWARE = ("ray_node_lost",)


def requeued(failure: Failure, attempt: Attempt, attempts: list[Attempt], record: JobRecord | None) -> Failure:
    """The failure of an attempt the job was requeued after (another attempt followed, or SLURM holds the job
    again), with a fix that says so where its own would have said to resubmit."""
    after = attempt.number + 1 if attempt is not attempts[-1] or (record is not None and record.queued) else None
    if after is None or failure.kind not in REQUEUE_AWARE or "likeness" in failure.details:
        return failure
    failure = replace(failure, details=failure.details | {"requeued_as": after})
    return replace(failure, fix=generic_fix(failure, attempt.text))


def cancel_failure(
    attempt: Attempt | None,
    record: JobRecord | None,
    sweep_id: str | None,
    requeued: bool = False,
    saved: int | None = None,
) -> Failure:
    """A job ended through its scheduler (scancel, Ray's stop_job): the scheduler's record and the log's own cancel
    line as evidence; what the log showed before the cancel, if anything, as an interruption's `before`. Without a
    record, the Ray job's own stop line says it (a SLURM log's cancel line does not say who cancelled). No attempt: it
    was cancelled while it waited to start (`requeued`: to start again)."""
    text = attempt.text if attempt is not None else ""
    lines = [clean(line) for line in text.splitlines()]
    ends = [index for index, line in enumerate(lines) if BARE_CANCEL.search(line) or ENTRY_STOPPED in line]
    evidence = [evidence_line(lines[index]) for index in ends[:1]]
    if record is not None:
        evidence.insert(0, f"{record.scheduler}: job {record.job_id} {record.state}")
    details = before_interruption(lines[: ends[0]] if ends else lines)
    scheduler, state = (record.scheduler, record.state) if record is not None else ("Ray", "STOPPED")
    waited = "" if attempt is not None else " while it waited to start again" if requeued else " before it started"
    fix = cancelled_fix(scheduler, state, waited, sweep_id, saved)
    fix += f" (before it, the log shows {details['before']})" if details else ""
    number, host = (attempt.number, attempt.host) if attempt is not None else (None, None)
    return Failure("cancelled", evidence, number, host, fix=fix, details=details)


# --- across attempts --------------------------------------------------------------------------------------------------

# what a requeued attempt that could not meet its peers says: the old head's address, a port or store still held
STALE_RENDEZVOUS = re.compile(
    r"Rendezvous\w*Error|DistNetworkError|Address already in use|EADDRINUSE|Connection refused|"
    r"Failed to connect to GCS|Couldn't reconnect to GCS|TCPStore|ncclRemoteError|ncclSystemError"
)


def with_requeue_outcomes(failures: list[Failure]) -> list[Failure]:
    """An interruption was 'nothing to change' only if the requeued attempt went on: when the next attempt failed
    on meeting its peers (a stale rendezvous: the old head's address, a port or a store still held), the
    interruption's fix says so."""
    by_attempt = {failure.attempt: failure for failure in failures if failure.attempt}
    out = []
    for failure in failures:
        after = by_attempt.get((failure.attempt or 0) + 1)
        stale = (
            after is not None
            and after.kind in ("ray_start_failed", "nccl_timeout", "unknown")
            and any(STALE_RENDEZVOUS.search(line) for line in after.evidence)
        )
        if failure.kind in INTERRUPTIONS and after is not None and stale:
            evidence = strip_prefix(after.evidence[0])[:120]
            failure = replace(
                failure,
                fix=f"not nothing to change: the requeued attempt {after.attempt} then failed on a stale rendezvous "
                f"({after.kind}: {evidence}); an interrupted attempt left its head address, port or store behind: "
                "make every attempt start its own Ray head and ports (read attempt "
                f"{after.attempt}'s ray_start log) before requeueing again",
                details=failure.details | {"requeue_failed": after.kind},
            )
        out.append(failure)
    return out


# --- hangs: the watchdog's record -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HangRecord:
    """What launch/watchdog.py wrote when it stopped an attempt (launch.rundir.HANG_FILE)."""

    attempt: int
    phase: str | None
    stuck_ranks: list[str]
    last_step: int | None
    waited_s: float
    window_s: float
    expected_step_s: float | None
    transient: bool
    evidence: str
    stacks_dir: str


def read_hang_records(run_dir: Path) -> list[HangRecord]:
    """The watchdog's records of the run (rundir.hang_records reads the file), typed."""
    return [
        HangRecord(
            attempt=item["attempt"],
            phase=item.get("phase"),
            stuck_ranks=[str(rank) for rank in item.get("stuck_ranks") or []],
            last_step=item.get("last_step"),
            waited_s=float(item.get("waited_s") or 0.0),
            window_s=float(item.get("window_s") or 0.0),
            expected_step_s=item.get("expected_step_s"),
            transient=bool(item.get("transient")),
            evidence=str(item.get("evidence") or ""),
            stacks_dir=str(item.get("stacks_dir") or f"{HANG_DIR}/attempt-{item['attempt']}"),
        )
        for item in hang_records(run_dir)
    ]


COLLECTIVE_CALL = re.compile(r"all_reduce|allreduce|all_gather|allgather|broadcast|barrier|reduce_scatter|all_to_all")
# one group of the watchdog's evidence line (watchdog.judge): "<labels> in <blocked call>[ from <caller>] [<state>]"
BLOCKED_GROUP = re.compile(r"^(?P<labels>.+?) in (?P<call>\S+ \([^)]*\))(?: from .+?)? \[[^\]]+\]$")


def blocked_groups(evidence: str) -> tuple[list[str], list[str]]:
    """The watchdog's evidence split into the ranks blocked in a collective (their labels) and the groups blocked
    anywhere else, as written ("c2:rank3 in SocketIO.readinto (socket.py:717) from ask_judge [network]")."""
    waiting: list[str] = []
    elsewhere: list[str] = []
    for part in evidence.split("; "):
        group = BLOCKED_GROUP.match(part.strip())
        if group is None:
            continue
        if COLLECTIVE_CALL.search(group["call"].lower()):
            waiting.append(group["labels"])
        else:
            elsewhere.append(part.strip())
    return waiting, elsewhere


def hang_failure(record: HangRecord, run_dir: Path, host: str | None, hung_before: bool = False) -> Failure:
    """The hang as a failure: the record's evidence, and a fix that says what the stacks show. `hung_before`: an
    earlier attempt of the run hung too (the watchdog requeues a hang once: launch/watchdog.py requeue_refusal)."""
    stacks = run_dir / record.stacks_dir
    phase = record.phase or "an unknown phase"
    step = f" after step {record.last_step}" if record.last_step is not None else " before the first step"
    waited = f"no step for {record.waited_s:.0f} s (window {record.window_s:.0f} s"
    waited += f", a step takes ~{record.expected_step_s:.0f} s)" if record.expected_step_s else ")"
    ranks = ", ".join(record.stuck_ranks)
    waiting, elsewhere = blocked_groups(record.evidence)
    if waiting and elsewhere:  # the stacks show who never joined: the ranks blocked outside the collective
        what = (
            f"stuck in a collective in {phase}{step}: {', '.join(waiting)} waited in it, and "
            f"{'; '.join(elsewhere)} never joined it: that is where to look (an OOM, a reward call or I/O there)"
        )
    elif COLLECTIVE_CALL.search(record.evidence.lower()) and ranks:
        what = (
            f"stuck in a collective in {phase}{step}: {ranks} waited in it; the rank that never joined is the one "
            "whose stack is elsewhere (compare the stacks: an OOM, a reward call or I/O on that rank is the cause)"
        )
    elif ranks:
        what = f"stuck in {phase}{step} on {ranks}: {record.evidence or 'see the stacks'}"
    elif record.phase == STARTUP_PHASE:  # no process blocked itself: verl may only be slow to start here
        what = (
            f"no step yet and no process blocked in its own work: verl was still starting (building its workers, "
            f"engines and queues; {record.evidence or 'see the stacks'})"
        )
    else:
        what = f"stuck in {phase}{step}: {record.evidence or 'see the stacks'}"
    if record.phase == STARTUP_PHASE:  # blocked or not, a start-up only slow here passes a larger floor
        what += (
            "; where start-up is only slow here (a loaded node, a model read over a network filesystem) raise "
            f"launch.hang.floor_s above {record.window_s:.0f} s"
        )
    if hung_before:
        requeue = "not requeued: an earlier attempt hung and was requeued, and a hang is requeued once"
    elif record.transient:
        requeue = "the stacks point to a transient cause, so it is requeued once"
    else:
        requeue = "not requeued: the same config would hang again"
    fix = f"{what}; {waited}; stacks of every process in {stacks}; {requeue}"
    evidence = [line for line in (record.evidence, f"{waited}; stuck ranks: {ranks or '?'}") if line]
    details: dict[str, float | str] = {"phase": record.phase or "?", "stacks_dir": str(stacks)}
    if record.last_step is not None:
        details["last_step"] = record.last_step
    return Failure("hang", evidence, record.attempt, host, fix=fix, details=details)
