"""Why a run failed: the cause of each failed attempt, read from its logs, with the evidence and the fix.

Runs on: any machine that sees the run directories (login node, laptop with the shared filesystem). Owns the failure
kinds, the signatures that recognise them in real logs (submitit's output of each attempt, which carries the driver's
and Ray's forwarded output, the copied Ray logs and rlaunch's ray_start logs), the split of a requeued job's log into
its attempts, and the fix for each kind. The plan-aware numbers a fix quotes (the preflight's prediction, the steps
an attempt reached) come in a `FixContext` that launch/report/doctor.py builds, so this module needs only the plan.

The signatures were taken from real reports (tests/data/failures/, one directory per kind, each excerpt with its
source) and from runs on the dev cluster. A log usually shows several errors: the first failure unwinds the rest
(an OOM'd worker makes NCCL time out and Ray report a dead actor), so kinds are tried in `KINDS` order, root causes
and external interruptions before the symptoms they cause, and only `unknown` falls back to the last error line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from launch.manifest import MANIFEST
from launch.rundir import NOT_REQUEUED_FILE, Plan

# Tried in this order: an interruption explains whatever errors the kill caused; memory and missing inputs explain
# the collective timeouts and dead actors that follow them; `unknown` is what is left.
KINDS = (
    "preempted",
    "time_limit",
    "host_oom",
    "engine_memory",
    "cuda_oom",
    "gpu_unavailable",
    "model_not_cached",
    "data_missing",
    "data_error",
    "ray_start_failed",
    "reward_error",
    "config_error",
    "ray_node_lost",
    "nccl_timeout",
    "unknown",
)

SIGNATURES: dict[str, tuple[str, ...]] = {
    "preempted": (
        r"DUE TO PREEMPTION",
        r"Caught signal SIGUSR2 on \S+: this job is preempted",
    ),
    "time_limit": (
        r"DUE TO TIME LIMIT",
        r"Caught signal SIGUSR2 on \S+: this job is timed-out",
    ),
    "host_oom": (
        r"OutOfMemoryError: Task was killed due to the node running low on memory",
        r"Workers \(tasks / actors\) killed due to memory pressure \(OOM\)",
        r"Detected \d+ oom[-_]kill event",
        r"exceeded memory limit \(\d+ > \d+\), being killed|Exceeded job memory limit",
        r"oom-kill event\(s\)|Out of memory: Killed process",
    ),
    "engine_memory": (
        r"No available memory for the cache blocks",
        r"Not enough memory\. Please try to (?:increase|decrease) --mem-fraction-static",
        r"Free memory on device .* is less than desired GPU memory utilization",
        r"larger than the maximum number of tokens that can be stored in KV cache",
        r"cuda error: out of memory at \S*cumem_allocator",
        r"\((?:EngineCore\w*|RayWorkerWrapper|VllmWorker\S*) pid=\d+.*CUDA out of memory",
        r"Worker failed with error 'CUDA out of memory",
    ),
    "cuda_oom": (
        r"OutOfMemoryError: CUDA out of memory",
        r"CUDA out of memory\. Tried to allocate",
        r"RuntimeError: CUDA error: out of memory",
    ),
    "gpu_unavailable": (
        r"Total available GPUs \S+ is less than total desired GPUs \S+",
        r"No CUDA GPUs are available",
        r"Found no NVIDIA driver on your system",
        r"CUDA driver initialization failed|cudaErrorNoDevice|no CUDA-capable device is detected",
    ),
    "model_not_cached": (
        r"We couldn't connect to '?https://huggingface\.co'? to load",
        r"LocalEntryNotFoundError",
        r"OfflineModeIsEnabled",
        r"is not the path to a directory containing a file named config\.json",
        r"Incorrect path_or_model_id",
    ),
    "data_missing": (
        r"FileNotFoundError: .*\.(?:parquet|jsonl?|arrow)\b",
        r"Unable to find '[^']+\.(?:parquet|jsonl?)'",
        r"No such file or directory.*\.parquet",
    ),
    "data_error": (
        r"ArrowInvalid",
        r"Parquet magic bytes not found",
        r"DatasetGenerationError",
        r"ArrowTypeError|ArrowNotImplementedError",
        r"KeyError: '(?:prompt|data_source|reward_model|ground_truth|extra_info)'",
    ),
    "ray_start_failed": (
        r"ray start failed on node",
        r"Ray did not come up",
        r"Ray node\(s\) .* did not register",
        r"the Ray head on \S+ .*did not come up|the Ray head on \S+ exited with code",
        r"Could not find any running Ray instance",
        r"Failed to connect to GCS|Failed to send request to gcs",
        r"Token authentication is enabled but no authentication token was found",
    ),
    "reward_error": (
        r"Reward function is not implemented for data_source",
        r"Error in (?:custom )?reward",
    ),
    "config_error": (
        r"omegaconf\.errors\.\w+",
        r"ConfigAttributeError|ConfigKeyError|MissingMandatoryValue",
        r"Key '[^']+' is not in struct",
        r"Could not override '[^']+'",
        r"\bmust be divisible by\b|\bis not divisible by\b",
    ),
    "ray_node_lost": (
        r"has been marked dead because the detector has missed too many heartbeats",
        r"NodeDiedError",
        r"its node has died|node \S+ (?:has )?died|The node .* has been marked dead",
        r"health check failed due to missing too many heartbeats",
        r"raylet (?:has )?died|RayletDied|Owner's node has crashed",
        r"ActorUnavailableError: .*(?:failed to connect|Failed to connect)",  # the actor's node no longer answers
        r"the Ray worker on \S+ exited with code",  # rlaunch's worker task: its `ray start --block` died mid-run
    ),
    "nccl_timeout": (
        r"Watchdog caught collective operation timeout",
        r"NCCL (?:communicator was aborted|timeout)|ncclSystemError|ncclInternalError|ncclRemoteError",
        r"DistBackendError",
    ),
}
COMPILED = {kind: [re.compile(pattern) for pattern in patterns] for kind, patterns in SIGNATURES.items()}

# The frames of a traceback that say the exception came out of reward code (verl's managers, rewards/).
REWARD_FRAME = re.compile(r'File "[^"]*(?:reward_score|reward_manager|/rewards/|reward_loop|compute_score)')
EXCEPTION_LINE = re.compile(r"^(?:\([^)]*\)\s*)?(?:[\w.]+\.)?(?:\w*Error|\w*Exception|Killed)\b[:(]?")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# rlaunch's own wrapper line names no cause; it is never evidence (launch/job.py raises it)
WRAPPER = re.compile(r"verl exited with code|Submitted job triggered an exception|submitit ERROR")

# Where a line names the node it comes from: Ray's prefixes and messages, rlaunch's Ray bring-up, SLURM.
NODE_PATTERNS = (
    re.compile(r"\[node (\S+)\]\s*$"),  # ray_texts marks each line of a node's copied logs
    re.compile(r"on node (\S+?)[\s:(]"),
    re.compile(r"Ray node\(s\) (\S+)"),
    re.compile(r"Ray did not come up\b.*?\bnode(?:\(s\)|s)? ([\w.-]+)"),  # launch/job.py's fail-fast message
    re.compile(r"node name: (\S+?)[,\s]"),
    re.compile(r"the Ray (?:head|worker) on ([\w.-]+)"),
    re.compile(r"ipv4:([\d.]+\d):\d+"),
    re.compile(r"\bip[=:] ?([\d.]+\d)"),
    re.compile(r"\bIP: ([\d.]+\d)"),
    re.compile(r"JOB \d+ ON (\S+) CANCELLED"),
    re.compile(r"^slurmstepd-([\w.-]+): "),  # slurmd -N <node> prefixes its step daemon's lines
    re.compile(r"Local node IP: (\S+)"),
)

# submitit logs this (on stdout) when an attempt starts; with open-mode=append a requeued job's attempts follow each
# other in the same files.
ATTEMPT_START = re.compile(r"submitit INFO \([^)]*\) - Starting with JobEnvironment\((?P<env>[^)]*)\)")
MAX_LOG_BYTES = 4 << 20  # a log's tail this large holds the cause; Ray's logs can grow to gigabytes
EVIDENCE_CHARS = 300

# run state (sweep status and compare show it)
COMPLETED_STATE, FAILED_STATE, RUNNING_STATE, REQUEUED_STATE, PENDING_STATE = (
    "COMPLETED",
    "FAILED",
    "RUNNING",
    "REQUEUED",
    "PENDING",
)


@dataclass
class Failure:
    """One failed (or interrupted) attempt: what went wrong, the lines that show it, and what to change."""

    kind: str  # one of KINDS
    evidence: list[str]  # the line or few lines that show it, as they appear in the log
    attempt: int | None = None  # 1-based, in the order the job ran them
    node: str | None = None  # the host (or Ray IP) the evidence names
    fix: str = ""
    details: dict[str, float | str] = field(default_factory=dict)  # numbers parsed from the evidence

    def short(self, chars: int = 60) -> str:
        """kind: the start of the evidence, for a table cell."""
        text = self.evidence[0].strip() if self.evidence else ""
        text = strip_prefix(text)
        return f"{self.kind}: {text[:chars]}" if text else self.kind

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value not in (None, {}, "")}


@dataclass(frozen=True)
class Attempt:
    """One run of the job as its log shows it."""

    number: int
    text: str
    host: str | None
    ended: str  # "completed", "failed", "interrupted" (preempted / time limit), "running" (no end yet)


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


def strip_prefix(line: str) -> str:
    """The line without Ray's `(WorkerDict pid=..., ip=...)` prefix and indentation."""
    return re.sub(r"^\([^)]*\)\s*", "", line).strip()


def tracebacks(lines: list[str]) -> list[tuple[list[str], str]]:
    """(frames, exception line) of each Python traceback in the log, Ray's prefixes kept."""
    found = []
    frames: list[str] | None = None
    for line in lines:
        body = strip_prefix(line)
        if body.startswith("Traceback (most recent call last)"):
            frames = []
        elif frames is not None:
            if body.startswith("File "):
                frames.append(body)
            elif EXCEPTION_LINE.match(body) and not body.startswith("File "):
                found.append((frames, line))
                frames = None
    return found


def is_source(line: str) -> bool:
    """A traceback's source line (`raise RuntimeError(f"the Ray worker on {...}`) quotes a message without being it."""
    body = strip_prefix(line)
    return body.startswith(("raise ", "return ")) or 'f"' in body or "f'" in body


def match_kind(kind: str, lines: list[str]) -> list[str]:
    """The lines that show `kind`, in log order: the first is the cause, the later ones mostly its echoes."""
    lines = [line for line in lines if not is_source(line)]
    if kind == "reward_error":
        hits = [line for line in lines if any(p.search(line) for p in COMPILED[kind])]
        for frames, exception in tracebacks(lines):
            reward_frames = [frame for frame in frames if REWARD_FRAME.search(frame)]
            if reward_frames and not WRAPPER.search(exception):
                hits += [reward_frames[-1], exception]
        return hits
    return [line for line in lines if any(p.search(line) for p in COMPILED[kind])]


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


INTERRUPTIONS = ("preempted", "time_limit")


def classify(text: str, attempt: int | None = None, host: str | None = None) -> Failure:
    """The cause of one attempt's failure from its log text (a bare log is one attempt)."""
    lines = [clean(line) for line in text.splitlines()]
    for kind in KINDS[:-1]:
        hits = match_kind(kind, lines)
        if hits:
            evidence = list(dict.fromkeys(evidence_line(line) for line in hits))[:3]
            failure = Failure(kind, evidence, attempt, node_near(lines, hits) or host)
            failure.details = parse_details(kind, hits)
            if kind in INTERRUPTIONS:
                failure.details |= before_interruption(lines[: lines.index(hits[0])])
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


PHASE_FRAMES = (  # verl's function and Ray task names -> the preflight's phase
    ("log-prob", re.compile(r"compute_(?:ref_)?log_prob|infer_batch|logprob")),
    ("training", re.compile(r"update_actor|update_policy|train_batch|train_mini_batch|forward_backward|backward")),
    ("rollout", re.compile(r"generate_sequences|wake_up|rollout")),
)
# only names from tracebacks and Ray's task names: a log also prints overrides such as actor_rollout_ref.* that
# name every phase
CALL_NAMES = re.compile(r'File "[^"]*", line \d+, in (\w+)|ray::\w+\.(\w+)\(')


def phase_of(text: str) -> str | None:
    """The preflight phase an OOM happened in, from the function names of its traceback (None: it names none)."""
    names = [first or second for first, second in CALL_NAMES.findall(text)]
    for phase, pattern in PHASE_FRAMES:
        if any(pattern.search(name) for name in names):
            return phase
    return None


# --- fixes ------------------------------------------------------------------------------------------------------------


GENERIC_FIXES = {
    "preempted": "nothing to change: SLURM gave the node to a higher-priority job and the run was requeued; if "
    "attempts lose much work, save more often (trainer.save_freq)",
    "time_limit": "the attempt ran out of time: give the mode more time (mode.time_budget_min) or save more often "
    "(trainer.save_freq) so that a requeued attempt resumes from a checkpoint",
    "host_oom": "the node ran out of host RAM: raise --mem (cluster.mem_gb) or offload less "
    "(actor_rollout_ref.actor.fsdp_config.{param,optimizer}_offload=false)",
    "engine_memory": "the rollout engine cannot fit the weights and KV cache in its share: change the engine's "
    "memory fraction (actor_rollout_ref.rollout.gpu_memory_utilization) or raise rollout TP",
    "cuda_oom": "a GPU ran out of memory: halve the micro-batch or token budget per GPU, or offload; "
    "launch.preflight=fix applies the preflight's fixes",
    "gpu_unavailable": "verl found fewer GPUs than trainer.nnodes x trainer.n_gpus_per_node: run on a partition whose "
    "nodes have GPUs (check --gres and that nvidia-smi works in the job)",
    "model_not_cached": "the nodes cannot load the model offline: download it into the HF cache the nodes read "
    "(HF_HOME) with `hf download <model>` on a machine with internet, or point actor_rollout_ref.model.path at a "
    "local directory",
    "data_missing": "a data file does not exist where the nodes look: fix data.train_files / data.val_files (absolute "
    "paths on the shared filesystem)",
    "data_error": "a data file cannot be read as verl expects: check it is parquet with verl's columns (prompt, "
    "data_source, reward_model.ground_truth)",
    "ray_start_failed": "Ray did not start on every node: read that node's ray_start log in the run directory "
    "(ports taken, auth token, a node that never ran its task)",
    "reward_error": "the reward function raised: fix the scoring code for that data source (rewards/) or the data "
    "source's name",
    "config_error": "verl refused its config: fix the override the error names (python launch/run.py ... --cfg job "
    "shows the composed config)",
    "ray_node_lost": "a Ray node died during the run: look at that node (host OOM, hardware, preemption of a node) "
    "and resubmit; the run resumes from its last checkpoint",
    "nccl_timeout": "a collective timed out: one rank stopped (read the other ranks' errors first) or the "
    "interconnect failed; rerun with NCCL_DEBUG=INFO",
    "unknown": "no known cause: read the log around the evidence",
}


def generic_fix(failure: Failure) -> str:
    before = failure.details.get("before")
    return GENERIC_FIXES[failure.kind] + (f" (before it, the log shows {before})" if before else "")


@dataclass(frozen=True)
class FixContext:
    """What the plan and the run's files say, for fixes with numbers (launch/report/doctor.py builds it)."""

    plan: Plan
    predicted_peaks_gib: dict[str, float] = field(default_factory=dict)  # phase -> the preflight's predicted peak
    next_fixes: dict[str, list[str]] = field(default_factory=dict)  # phase -> the preflight's next fix (overrides)
    steps_reached: dict[int, int] = field(default_factory=dict)  # attempt -> training steps it logged past its start
    checkpointed_step: dict[int, int] = field(default_factory=dict)  # attempt -> the checkpoint it started from
    saves_per_attempt: int = 2


def save_freq_that_fits(steps_reached: int, saves_per_attempt: int) -> int:
    """The trainer.save_freq that saves `saves_per_attempt` times in the steps one attempt reaches (at least 1)."""
    return max(1, steps_reached // saves_per_attempt)


def verl_value(plan: Plan, dotted: str) -> Any:
    node: Any = plan.verl
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def fix_cuda_oom(failure: Failure, context: FixContext, log_text: str) -> str:
    phase = phase_of(log_text)
    peaks = context.predicted_peaks_gib
    # no phase in the traceback: compare with the phase the preflight expected to peak
    phase_or_peak = phase or (max(peaks, key=peaks.__getitem__) if peaks else None)
    failure.details["phase"] = phase or "?"
    parts = [f"{phase} phase ran out of GPU memory" if phase else "a GPU ran out of memory (no verl phase in the log)"]
    needed = float(failure.details.get("in_use_gib", failure.details.get("torch_allocated_gib", 0.0))) + float(
        failure.details.get("tried_gib", 0.0)
    )
    predicted = peaks.get(phase_or_peak) if phase_or_peak else None
    if predicted and needed > 0:
        failure.details["predicted_gib"] = round(predicted, 2)
        failure.details["needed_gib"] = round(needed, 2)
        parts.append(
            f"it needed at least {needed:.1f} GiB where the preflight predicted {predicted:.1f} GiB "
            f"for {phase_or_peak} ({needed / predicted:.2f}x)"
        )
    overrides = context.next_fixes.get(phase_or_peak) if phase_or_peak else None
    if overrides:
        parts.append("the preflight's next fix for it: " + " ".join(overrides))
    else:
        parts.append("halve the micro-batch or token budget per GPU, or offload (launch.preflight=fix)")
    return "; ".join(parts)


def fix_engine_memory(failure: Failure, context: FixContext, log_text: str) -> str:
    fraction = verl_value(context.plan, "actor_rollout_ref.rollout.gpu_memory_utilization")
    tp = verl_value(context.plan, "actor_rollout_ref.rollout.tensor_model_parallel_size")
    gpus = context.plan.resources.gpus_per_node
    # "increase" messages: the reservation is too small for weights + KV cache; an OOM inside the engine (or a wake-up
    # that finds the card taken) means the reservation is larger than what is free.
    too_small = re.search(r"No available memory for the cache blocks|increase --mem-fraction|KV cache", log_text)
    options = []
    if fraction is not None:
        fraction = float(fraction)
        new = round(min(0.9, fraction + 0.1), 2) if too_small else round(max(0.1, fraction - 0.1), 2)
        if new != fraction:
            options.append(f"actor_rollout_ref.rollout.gpu_memory_utilization={new} (now {fraction})")
    if tp is not None and too_small and (not gpus or int(tp) * 2 <= gpus):
        options.append(f"actor_rollout_ref.rollout.tensor_model_parallel_size={int(tp) * 2} (now {tp})")
    if not options:
        return GENERIC_FIXES["engine_memory"]
    reason = "the engine's share holds too little for weights + KV cache" if too_small else "the engine asked for "
    reason += "" if too_small else "more than the card had free"
    return f"{reason}: try " + " or ".join(options)


def fix_host_oom(failure: Failure, context: FixContext, log_text: str) -> str:
    mem = context.plan.resources.mem_gb
    options = []
    if mem:
        options.append(f"cluster.mem_gb={int(mem) * 2} (now --mem={mem}G)")
    for key in ("param_offload", "optimizer_offload"):
        if verl_value(context.plan, f"actor_rollout_ref.actor.fsdp_config.{key}"):
            options.append(f"actor_rollout_ref.actor.fsdp_config.{key}=false")
    predicted = (context.plan.preflight or {}).get("host_ram_gib_per_node")
    note = f" (the preflight predicted {predicted} GiB per node)" if predicted else ""
    return "the node ran out of host RAM" + note + ": raise --mem or offload less: " + " or ".join(options or ["-"])


def fix_time_limit(failure: Failure, context: FixContext, log_text: str) -> str:
    attempt = failure.attempt or 1
    trainer = verl_value(context.plan, "trainer") or {}
    save_freq = trainer.get("save_freq")
    start = context.checkpointed_step.get(attempt, 0)
    reached = context.steps_reached.get(attempt)
    minutes = context.plan.resources.time_min
    limit = f" of {minutes} min" if minutes else ""
    if reached is None:
        return GENERIC_FIXES["time_limit"]
    failure.details["steps_reached"] = reached
    if reached == 0:
        fix = "trainer.val_before_train=false" if trainer.get("val_before_train") else "mode.time_budget_min=<longer>"
        return f"the attempt reached no training step in its time limit{limit}: {fix}"
    if start == 0 and save_freq is not None and int(save_freq) > reached:
        fits = save_freq_that_fits(reached, context.saves_per_attempt)
        return (
            f"the time limit{limit} came at step {reached}, before the first checkpoint (trainer.save_freq="
            f"{save_freq}): trainer.save_freq={fits} saves {context.saves_per_attempt}x per attempt"
        )
    return f"the time limit{limit} came at step {start + reached}; the run was requeued from its last checkpoint"


PLAN_FIXES: dict[str, Callable[[Failure, FixContext, str], str]] = {
    "cuda_oom": fix_cuda_oom,
    "engine_memory": fix_engine_memory,
    "host_oom": fix_host_oom,
    "time_limit": fix_time_limit,
}


def with_plan_fix(failure: Failure, context: FixContext | None, log_text: str) -> Failure:
    """The failure with its fix computed from the run's plan where the kind has one."""
    if context is not None and failure.kind in PLAN_FIXES:
        before = failure.details.get("before")
        failure.fix = PLAN_FIXES[failure.kind](failure, context, log_text)
        failure.fix += f" (before it, the log shows {before})" if before else ""
    elif failure.kind == "cuda_oom":
        failure.details["phase"] = phase_of(log_text) or "?"
    return failure


# --- a run's logs -----------------------------------------------------------------------------------------------------


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
        or TASK_DIED.search(text)
        or match_kind("host_oom", text.splitlines())
    ):
        return "failed"
    return "running"


def manifest_entry(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir.parent / MANIFEST
    if not path.exists():
        return None
    for run in json.loads(path.read_text()).get("runs", []):
        if Path(run.get("run_dir", "")).name == run_dir.name:
            return run
    return None


def job_logs(run_dir: Path) -> list[Path]:
    """The job's submitit logs (every task: node 0 runs the driver, the others their Ray worker), stderr first."""
    entry = manifest_entry(run_dir)
    if entry is None or not entry.get("stderr"):
        return []
    folder = Path(entry["stderr"]).parent
    prefix = Path(entry["stderr"]).name.rsplit("_", 2)[0]  # <job id>_<task>_log.err
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


def summary(failures: list[Failure], chars: int = 60) -> str:
    """Each failed attempt's cause in order: 'preempted > cuda_oom: torch.OutOfMemoryError: ...'."""
    if not failures:
        return ""
    kinds = " > ".join(failure.kind for failure in failures[:-1])
    return (kinds + " > " if kinds else "") + failures[-1].short(chars)


def render(failure: Failure) -> list[str]:
    """The lines a terminal shows for one failure: cause, evidence, fix."""
    where = ", ".join(
        part
        for part in (f"attempt {failure.attempt}" if failure.attempt else "", failure.node and f"node {failure.node}")
        if part
    )
    lines = [f"[{failure.kind}]" + (f" ({where})" if where else "")]
    lines += [f"  evidence: {line}" for line in failure.evidence] or ["  evidence: (no error line in the log)"]
    lines.append(f"  fix: {failure.fix}")
    return lines
