"""The hang watchdog: an attempt in which no training step completes within max(K x the expected step time, a floor)
is stopped as a hang, after every process's stack has been recorded.

Runs on: the job head (launch/job.py: it watches the driver's progress in verl's per-attempt metrics file, asks every
node for its stacks, writes <run_dir>/hang.json) and every other node of a SLURM job (its task, waiting for the head
to finish, records its own node's stacks when the head asks through the shared run directory).

Every process: a node's processes are the descendants of its own `ray start --block` (the raylet and every Ray worker
it spawned: verl's workers, its TaskRunner, reward and rollout actors, Ray's agents), and on the head also the
driver and its children. Each Python process among them is dumped with py-spy (`py-spy dump --json`), which reads a
running interpreter's stacks without stopping it for long; the per-node task owns exactly its node's Ray, so no Ray
call (which a hung cluster may never answer) is needed to find them. Where py-spy cannot attach (no ptrace: a
container without CAP_SYS_PTRACE, kernel.yama.ptrace_scope), the attempt is still stopped and the record says why
its stacks are missing.

What the stacks say: each process's task thread is idle, waiting on Ray (ray.get: a consequence, never the cause),
blocked in a collective (torch.distributed, NCCL, gloo), in a network read (socket, HTTP, gRPC), or elsewhere in code.
A hang whose blocked processes all wait on a collective or the network may pass (a flaky link, a stalled peer); one
blocked in code (a deadlock, a reward function spinning on one input) would hang the same way again. Only the first
kind is requeued, and a run's hang at most once.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from launch.readiness import VerlSteps, rows_verl_trains
from launch.rundir import (
    HANG_DIR,
    HANG_FILE,
    STARTUP_PHASE,
    STEP_TIME_METRIC,
    Plan,
    attempt_log_path,
    hang_records,
    parse_records,
)

DUMP_REQUEST = ".hang_dump-{tag}"  # in the run dir: the head asks every node for its stacks (content: the stacks dir)
NODE_STACKS = "{node}.json"  # in the stacks dir: one node's processes, classified; written last, so it marks "done"
RAY_STATUS_FILE = "ray_status.txt"
SUMMARY_FILE = "summary.txt"
STEP_TIME = STEP_TIME_METRIC  # verl's step timer: it includes checkpoint saves, not validation
# verl 0.9.1 times a validation among the steps apart from the step (trainer/ppo/ray_trainer.py; since verl#3117)
TEST_TIME = "timing_s/testing"
PY_SPY_TIMEOUT_S = 30.0
NODE_ANSWER_TIMEOUT_S = 120.0  # a node whose task does not answer by then is named in the record instead
RAY_STATUS_TIMEOUT_S = 60.0
PARALLEL_DUMPS = 8

# --- the window -------------------------------------------------------------------------------------------------------


def predicted_step_s(plan: Plan) -> float | None:
    """The plan's predicted seconds per step (its step-time forecast), else the readiness record's time check's;
    None when nothing predicts one."""
    checked = plan.predicted_time
    forecast = plan.time.step_s if plan.time is not None else checked.step_s if checked is not None else None
    return float(forecast) if isinstance(forecast, int | float) and forecast > 0 else None


# The typical step: the median of the last few steady steps (each attempt's first step, which compiles and warms up,
# left out), so a run whose steps grow slower is followed and one old stall is forgotten.
RECENT_STEPS = 5
# The slowest step counts (a checkpoint save recurs), but at most this many typical steps: one step that stalled for
# hours and then went on is a one-off, and K x it would hold the window open past the job's time limit for the rest of
# the run. A save slower than this is what the floor is for.
SLOWEST_OVER_TYPICAL = 4.0


def expected_step_s(predicted: float | None, measured: list[float], steady: list[float] | None = None) -> float | None:
    """Once the run has measured steps, the slowest of them (steps that save a checkpoint are slower, and they
    recur), but at most SLOWEST_OVER_TYPICAL x the median of the last RECENT_STEPS `steady` ones (no cap before
    there is one); before any step, the plan's prediction."""
    if not measured:
        return predicted
    recent = (steady or [])[-RECENT_STEPS:]
    slowest = max(measured)
    return min(slowest, SLOWEST_OVER_TYPICAL * statistics.median(recent)) if recent else slowest


def expected_validation_s(predicted_s: float, measured: list[float]) -> float:
    """One validation as expected_step_s expects a step: the slowest measured, but at most SLOWEST_OVER_TYPICAL x the
    median of the last RECENT_STEPS (every validation is steady: each runs the same validation set), so one outlier
    does not hold the window open for the rest of the run; before any, the plan's (0: none predicted)."""
    return expected_step_s(predicted_s or None, measured, measured) or 0.0


def steady_times(times_per_attempt: Iterable[list[float]]) -> list[float]:
    """The step times of each attempt after its first (which compiles, captures graphs, warms the allocator)."""
    return [seconds for times in times_per_attempt for seconds in times[1:]]


def planned_steps(plan: Plan) -> VerlSteps | None:
    """The steps verl's fit loop runs for this plan (readiness's VerlSteps: the fewer of trainer.total_training_steps
    and total_epochs x the steps per epoch, and whether the epochs end the run, without a last-step validation or
    save), from the steps per epoch of the plan's time check, else from the training rows readiness read. Where
    neither is known (the data was not read), trainer.total_training_steps as written, None where it is null."""
    trainer = plan.verl.get("trainer", {})
    checked = plan.predicted_time
    per_epoch = checked.steps_per_epoch if checked is not None else planned_steps_per_epoch(plan)
    if per_epoch is not None:
        return VerlSteps.of(trainer, per_epoch)
    limit = trainer.get("total_training_steps")
    return VerlSteps(int(limit), 0, by_epochs=False) if limit else None  # 0 per epoch: not known here


def planned_steps_per_epoch(plan: Plan) -> int | None:
    """Whole batches of the training rows readiness read (verl drops the last incomplete one; data.train_max_samples
    caps the rows), as readiness's predict_time counts them; None where a training file was not read."""
    rows = [file.rows for file in (plan.readiness.data if plan.readiness else ()) if file.key == "data.train_files"]
    if not rows or any(count is None for count in rows):
        return None
    data = plan.verl.get("data", {})
    return rows_verl_trains(data, sum(rows)) // int(data["train_batch_size"])


@dataclass(frozen=True)
class Validations:
    """When verl validates and how long one takes (the plan's prediction until the run measured one): the metrics
    record of a step that validates comes that much later, and so does the attempt's first record when verl validates
    before training."""

    predicted_s: float = 0.0  # 0: nothing predicts one (no validation file was read)
    test_freq: int = -1
    total_steps: int | None = None
    before_training: bool = False
    # verl validates at its last step only where trainer.total_training_steps ends the run (VerlSteps.by_epochs)
    at_the_last_step: bool = True

    @classmethod
    def of(cls, plan: Plan) -> Validations:
        checked = plan.predicted_time
        trainer = plan.verl.get("trainer", {})
        steps = planned_steps(plan)
        return cls(
            predicted_s=float(getattr(checked, "validation_s", 0.0) or 0.0),
            test_freq=int(trainer.get("test_freq") or -1),
            total_steps=steps.total if steps is not None else None,
            before_training=bool(trainer.get("val_before_train", True)),
            at_the_last_step=steps is None or not steps.by_epochs,
        )

    def before_next_record(self, last_step: int | None) -> int:
        """Validations verl runs before the attempt's next metrics record. At its start: the one before training
        (logged as a record of its own, at the step it resumed from); after step k: one where step k + 1 validates."""
        if last_step is None:
            return 1 if self.before_training else int(self.test_freq == 1)
        step = last_step + 1
        last = self.at_the_last_step and step == self.total_steps
        return int(self.test_freq > 0 and (step % self.test_freq == 0 or last))


def hang_window_s(expected: float | None, factor: float, floor_s: float, validation_s: float = 0.0) -> float:
    """max(K x (the expected step time + the validations before the next record), the floor); the floor alone when
    nothing predicts either."""
    expected_s = (expected or 0.0) + validation_s
    return max(factor * expected_s, floor_s) if expected_s else floor_s


def window_text(
    expected: float | None, factor: float, floor_s: float, validations: Validations, validation_s: float
) -> str:
    """The window as the plan and the job's log say it."""
    step = f"{expected:.0f} s" if expected else "? (no step time)"
    text = (
        f"no step within max({factor:g} x {step}, {floor_s:.0f} s) = {hang_window_s(expected, factor, floor_s):.0f} s"
    )
    last = " and the last" if validations.at_the_last_step else ""
    when = [f"every {validations.test_freq} steps{last}"] if validations.test_freq > 0 else []
    when += ["before training"] if validations.before_training else []
    if validation_s and when:
        both = f"({expected:.0f} + {validation_s:.0f}) s" if expected else f"{validation_s:.0f} s"
        longer = hang_window_s(expected, factor, floor_s, validation_s)
        first = f"where verl validates first ({', '.join(when)})"
        text += f"; {first}: max({factor:g} x {both}, {floor_s:.0f} s) = {longer:.0f} s"
    return text


def poll_interval_s(floor_s: float) -> float:
    """How often the head looks at the metrics file: a small part of the shortest possible window, 1-10 s."""
    return min(10.0, max(1.0, floor_s / 20))


# --- progress ---------------------------------------------------------------------------------------------------------


class MetricsTail:
    """The records verl's file logger appended since the last read: whole lines only (a line being written is read
    next time); a file that shrank (a logger that started over) is read again from its start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def new_records(self) -> list[tuple[int, dict[str, Any]]]:
        try:
            size = self.path.stat().st_size
        except OSError:
            return []
        if size < self.offset:
            self.offset = 0
        with self.path.open("rb") as metrics:
            metrics.seek(self.offset)
            chunk = metrics.read(size - self.offset)
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        return list(parse_records(complete.decode(errors="replace").splitlines()))


def measured_times(records: Iterable[tuple[int, dict[str, Any]]], timer: str = STEP_TIME) -> list[float]:
    return [float(data[timer]) for _, data in records if isinstance(data.get(timer), int | float)]


@dataclass
class Progress:
    """The attempt's progress as the head sees it: when the driver started, when the last step record appeared, and
    every step time measured so far (this attempt's and earlier attempts' of the run)."""

    started_at: float  # time.monotonic() when the driver started
    predicted_s: float | None
    factor: float
    floor_s: float
    validations: Validations = field(default_factory=Validations)
    last_progress_at: float = 0.0
    last_step: int | None = None
    measured: list[float] = field(default_factory=list)
    steady: list[float] = field(default_factory=list)  # the measured steps but each attempt's first (steady_times)
    measured_validations: list[float] = field(default_factory=list)
    observed_intervals: list[float] = field(default_factory=list)  # between records, for loggers without step times
    timed_this_attempt: int = 0  # step times this attempt logged: its first is no steady step

    def __post_init__(self) -> None:
        self.last_progress_at = self.last_progress_at or self.started_at

    def observe(self, records: list[tuple[int, dict[str, Any]]], now: float) -> None:
        """New step records read at `now`: the clock restarts."""
        if not records:
            return
        self.observed_intervals.append(now - self.last_progress_at)
        times = measured_times(records)
        self.measured += times
        self.steady += times[1:] if self.timed_this_attempt == 0 else times
        self.timed_this_attempt += len(times)
        self.measured_validations += measured_times(records, TEST_TIME)
        self.last_step = records[-1][0]
        self.last_progress_at = now

    @property
    def expected_s(self) -> float | None:
        # a logger without verl's step timer: the intervals the head saw between records (the first one includes
        # the start-up, so it is left out while there are others)
        if self.measured:
            return expected_step_s(self.predicted_s, self.measured, self.steady)
        intervals = self.observed_intervals[1:]
        return expected_step_s(self.predicted_s, intervals, intervals)

    @property
    def validation_s(self) -> float:
        """The validations expected before the next record, each at expected_validation_s."""
        one = expected_validation_s(self.validations.predicted_s, self.measured_validations)
        return self.validations.before_next_record(self.last_step) * one

    @property
    def window_s(self) -> float:
        return hang_window_s(self.expected_s, self.factor, self.floor_s, self.validation_s)

    def waited_s(self, now: float) -> float:
        return now - self.last_progress_at

    def overdue(self, now: float) -> bool:
        return self.waited_s(now) >= self.window_s


# --- one node's processes ---------------------------------------------------------------------------------------------


def children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])  # the command name may hold spaces and parentheses
        children.setdefault(parent, []).append(int(entry))
    return children


def process_tree(root: int, children: dict[int, list[int]] | None = None) -> list[int]:
    """`root` and all its descendants, parents first."""
    children = children_by_parent() if children is None else children
    tree, pending = [], [root]
    while pending:
        pid = pending.pop(0)
        tree.append(pid)
        pending += sorted(children.get(pid, []))
    return tree


def ancestor_named(name: str, pid: int) -> int | None:
    """The nearest process above `pid` whose command name is `name` (a Ray worker's raylet), or None."""
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        command, rest = stat.split("(", 1)[1].rsplit(")", 1)
        if command == name:
            return pid
        pid = int(rest.split()[1])
    return None


def has_environment(pid: int, entry: str) -> bool:
    """Whether `entry` (NAME=value) is in the process's environment."""
    return entry.encode() in read_proc(pid, "environ").split(b"\0")


def read_proc(pid: int, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


def command_line(pid: int) -> str:
    """As the process shows it (a Ray worker retitles itself ray::Class.method)."""
    return read_proc(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace").strip()


def is_python(pid: int) -> bool:
    try:
        executable = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return False
    return executable.startswith("python") or command_line(pid).startswith("ray::")


def rank_of(pid: int) -> str | None:
    """RANK from the process's environment: verl gives each worker of a group its rank through Ray's runtime env."""
    for entry in read_proc(pid, "environ").split(b"\0"):
        if entry.startswith(b"RANK="):
            return entry[5:].decode(errors="replace") or None
    return None


def py_spy() -> str | None:
    """The py-spy next to this interpreter (the venv's), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def py_spy_dump(pid: int, native: bool = False) -> tuple[list[dict[str, Any]] | None, str]:
    """(threads as py-spy's JSON gives them, "") or (None, why not); `native` adds the C/C++ frames (slower: a
    process with CUDA's libraries loaded took 0.2-1.5 s on an H200, against 0.01 s without)."""
    executable = py_spy()
    if executable is None:
        return None, "py-spy is not installed here (pip install py-spy)"
    command = [executable, "dump", "--json", "--pid", str(pid)] + (["--native"] if native else [])
    for _ in range(2):  # an interpreter that has just started is not readable yet: once more, a second later
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=PY_SPY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, f"py-spy did not answer within {PY_SPY_TIMEOUT_S:.0f} s"
        if result.returncode == 0:
            try:
                return json.loads(result.stdout), ""
            except json.JSONDecodeError:
                return None, f"py-spy wrote no JSON: {result.stdout.strip()[:200]}"
        why = next((line for line in result.stderr.splitlines() if line.strip()), f"exit {result.returncode}")
        if "python version" not in why:
            break
        time.sleep(1.0)
    if re.search(r"permission denied|not permitted|EPERM|os error 1\b", why, re.IGNORECASE):
        why += " (ptrace refused: kernel.yama.ptrace_scope, or a container without CAP_SYS_PTRACE)"
    return None, why.strip()[:300]


# --- what a stack says ------------------------------------------------------------------------------------------------

IDLE, RAY_WAIT, COLLECTIVE, NETWORK, GPU_WAIT, CODE, UNREADABLE = (
    "idle",
    "ray_wait",
    "collective",
    "network",
    "gpu",
    "code",
    "unreadable",
)
# A thread waiting on its GPU waits for a kernel that does not end; in a training job the kernels that can wait forever
# are the collectives' (an NCCL kernel waits for its peers), so it counts with them. Compute kernels end.
TRANSIENT_STATES = (COLLECTIVE, NETWORK, GPU_WAIT)
# installed packages whose frames are the run's own work; every other package's, the standard library's and console
# scripts' are plumbing between a blocking call and the application code that made it (or all of a Ray daemon's stack)
APPLICATION_PACKAGES = ("verl", "vllm", "sglang", "transfer_queue", "algos", "rewards", "launch")
COLLECTIVE_FILE = re.compile(r"torch/distributed/|nccl|gloo|ray/util/collective/|pynccl")
NETWORK_FILE = re.compile(
    r"(^|/)(socket|ssl)\.py$|(^|/)http/client\.py$|(^|/)(urllib3|requests|httpx|httpcore|aiohttp|grpc|zmq)/"
)
RAY_WAIT_CALL = re.compile(r"(^|\.)(get|wait|get_objects|wait_objects)$")
# A server's loop waiting for its next request (TransferQueue's controller, an engine core's input socket) is idle,
# not stalled: its caller is a serving loop and the blocked call a receive, a poll or an accept
SERVING_LOOP = re.compile(r"loop|serve|server|listen|accept|poll", re.IGNORECASE)
RECEIVING_CALL = re.compile(r"recv|poll|accept|select|read", re.IGNORECASE)
RAY_EXECUTOR = re.compile(r"actor_method_executor|function_executor")
# verl's phase, named as its timers name them (timing_s/<phase>), by the method the stacks show
PHASE_OF_METHOD = {
    "generate_sequences": "gen",
    "_fetch_one_gen_batch": "gen",
    "_submit_batch_to_rollout": "gen",
    "_add_batch_to_generate": "gen",
    "_compute_reward_colocate": "reward",
    "compute_reward": "reward",
    "compute_score": "reward",
    "compute_rm_score": "reward",
    "_compute_old_log_prob": "old_log_prob",
    "compute_log_prob": "old_log_prob",
    "_compute_ref_log_prob": "ref",
    "compute_ref_log_prob": "ref",
    "_compute_values": "values",
    "compute_values": "values",
    "_compute_advantage": "adv",
    "_update_critic": "update_critic",
    "update_critic": "update_critic",
    "_update_actor": "update_actor",
    "update_actor": "update_actor",
    "train_mini_batch": "update_actor",
    "_save_checkpoint": "save_checkpoint",
    "save_checkpoint": "save_checkpoint",
    "_validate": "testing",
}


INSTALLED_FILE = re.compile(r"/(?:site|dist)-packages/")
# the standard library's files, a console script and the interpreter's frozen modules
STDLIB_FILE = re.compile(r"/lib/python3\.\d+/|/bin/[^/]+$|^<frozen ")


def frame_text(frame: dict[str, Any]) -> str:
    """`name (file:line)`. An installed package's or the standard library's file by py-spy's short name, which says
    which it is (torch/distributed/distributed_c10d.py); the user's own file (a reward, a recipe's code) by its full
    path: its short name is the bare file name, which many share (reward.py, main.py) and which does not say where."""
    path = str(frame.get("filename") or "")
    own = path.endswith(".py") and not INSTALLED_FILE.search(path) and not STDLIB_FILE.search(path)
    shown = path if own else frame.get("short_filename") or path
    return f"{frame.get('name')} ({shown}:{frame.get('line')})"


def is_library(frame: dict[str, Any]) -> bool:
    """A frame of the plumbing (the standard library, Ray, torch, HTTP clients, a console script), not of the run's
    own code (verl, an engine, a reward function, a script)."""
    path = str(frame.get("filename") or "")
    if INSTALLED_FILE.search(path):
        package = INSTALLED_FILE.split(path)[-1].split("/")[0]
        return package not in APPLICATION_PACKAGES
    return bool(STDLIB_FILE.search(path))


def task_frames(thread: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A thread's frames (innermost first) if it runs a task; None for a thread that waits for work (a Ray worker's
    loop, Ray's and the standard library's own background threads)."""
    frames = thread.get("frames") or []
    executor = next((i for i, frame in enumerate(frames) if RAY_EXECUTOR.search(str(frame.get("name")))), None)
    if executor is not None:  # a Ray worker: the frames inside the executor are the task's
        return frames[: executor + 1] if executor > 0 else None
    if any("ray/_private/worker.py" in str(f.get("filename")) and "main_loop" in str(f.get("name")) for f in frames):
        return None  # a Ray worker waiting for its next task
    if thread.get("thread_name") == "MainThread" or thread.get("os_thread_id") == thread.get("pid"):
        return frames
    return None if all(is_library(frame) for frame in frames) else frames


def classify_frames(frames: list[dict[str, Any]]) -> tuple[str, str, str]:
    """(state, the blocked call, the application's frame that made it) of one task thread."""
    if all(is_library(frame) for frame in frames):  # Ray's own daemons, an event loop waiting: no work of the run's
        return IDLE, frame_text(frames[0]) if frames else "", ""
    blocked = frame_text(frames[0])
    walked = []
    for frame in frames:
        walked.append(frame)
        if not is_library(frame):
            break
    caller = frame_text(walked[-1]) if len(walked) > 1 else ""
    # a module that is being imported runs its top level, which is not a call blocked in it: `import socket` must not
    # read as a network wait (a process caught while still importing is only busy in code)
    walked = [frame for frame in walked if frame.get("name") != "<module>"]
    for frame in walked:
        path = str(frame.get("filename") or "")
        if COLLECTIVE_FILE.search(path) or re.search(r"nccl|gloo", str(frame.get("name")), re.IGNORECASE):
            return COLLECTIVE, blocked, caller
    for frame in walked:
        if NETWORK_FILE.search(str(frame.get("filename") or "")):
            serving = SERVING_LOOP.search(str(walked[-1].get("name") or "").rsplit(".", 1)[-1])
            if serving and RECEIVING_CALL.search(str(frames[0].get("name") or "")) and len(walked) > 1:
                return IDLE, blocked, caller
            return NETWORK, blocked, caller
    first = frames[0]
    if "ray/" in str(first.get("filename")) and RAY_WAIT_CALL.search(str(first.get("name"))):
        return RAY_WAIT, blocked, caller
    return CODE, blocked, caller


# A rank whose collective never completes is rarely blocked in the collective's own Python call: NCCL enqueues its
# kernel and returns, and the thread blocks at the next call that waits for the device (`.item()`, a copy to the host,
# torch.cuda.synchronize, a launch behind a full queue), which its Python frames show as plain code. Its native frames
# show the CUDA call it waits in (measured on an H200: bench/gpu_hang.py, bench/results/gpu_hang_h200.txt).
CUDA_LIBRARY = re.compile(r"(^|/)lib(cuda|cudart)\.so")
NCCL_NATIVE = re.compile(r"(^|/)libnccl\.so|^nccl|^c10d::ProcessGroupNCCL")


def native_wait(frames: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(state, the call) when a thread's native frames, below its innermost Python frame, are in NCCL (a collective)
    or in CUDA's driver or runtime (waiting on the GPU); None when they are elsewhere (a lock, a syscall, code)."""
    native = []
    for frame in frames:
        if str(frame.get("filename") or "").endswith(".py") or frame.get("line"):
            break  # the innermost Python frame: what the Python dump already shows
        native.append(frame)
    nccl = [
        frame
        for frame in native
        if NCCL_NATIVE.search(str(frame.get("filename"))) or NCCL_NATIVE.search(str(frame.get("name")))
    ]
    cuda = [frame for frame in native if CUDA_LIBRARY.search(str(frame.get("filename") or ""))]
    named = [frame for frame in (nccl or cuda) if not str(frame.get("name", "")).startswith("0x")]
    if not named:
        return None
    # the outermost named one: the runtime API call the program made (cudaDeviceSynchronize), not the driver's inside
    call = f"{named[-1].get('name')} ({Path(str(named[-1].get('filename'))).name})"
    return (COLLECTIVE if nccl else GPU_WAIT), call


def phase_of(frames: list[dict[str, Any]]) -> str | None:
    """The outermost verl phase method on the stack (validation's generation is `testing`, not `gen`)."""
    for frame in reversed(frames):
        name = str(frame.get("name") or "").rsplit(".", 1)[-1]
        if name in PHASE_OF_METHOD:
            return PHASE_OF_METHOD[name]
    return None


@dataclass(frozen=True)
class ProcessStack:
    """One process of the job, as its stack shows it."""

    node: str
    pid: int
    role: str  # driver (the driver's process group on the head) | ray (under the node's `ray start`)
    title: str
    rank: str | None
    state: str  # idle | ray_wait | collective | network | gpu | code | unreadable
    blocked_call: str  # the innermost frame of its task thread
    caller: str  # the application's frame that made that call
    phase: str | None
    trainer: bool  # verl's training loop (fit) is on its stack: its phase is the run's
    file: str  # the dump, in the stacks dir
    error: str = ""  # why it could not be read

    @property
    def label(self) -> str:
        return f"{self.node}:rank{self.rank}" if self.rank is not None else f"{self.node}:pid{self.pid}"

    @property
    def stuck(self) -> bool:
        """Blocked itself (not only waiting on another process through Ray)."""
        return self.state in (COLLECTIVE, NETWORK, GPU_WAIT, CODE)


def file_name(node: str, pid: int, role: str, rank: str | None, title: str) -> str:
    if role == "driver":
        return safe_name(f"{node}-driver-pid{pid}.txt")
    if rank is not None:
        return safe_name(f"{node}-rank{rank}-pid{pid}.txt")
    return safe_name(f"{node}-pid{pid}-{process_name(title)}.txt")


def process_name(title: str) -> str:
    """ray::RuntimeEnvAgent -> ray-RuntimeEnvAgent; python -m ray.util.client.server -> ray.util.client.server;
    python .../log_monitor.py -> log_monitor; python .../bin/ray start ... -> ray-start."""
    if title.startswith("ray::"):
        return title.split(" ")[0].replace("::", "-")
    args = title.split(" ")[1:]
    if "-m" in args[:-1]:
        return args[args.index("-m") + 1]
    script = next((arg for arg in args if arg and not arg.startswith("-")), None)
    if script is None:
        return "python"
    rest = args[args.index(script) + 1 :]
    command = f"-{rest[0]}" if not script.endswith(".py") and rest and not rest[0].startswith("-") else ""
    return Path(script).stem + command


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:160]


def render_dump(pid: int, title: str, rank: str | None, threads: list[dict[str, Any]] | None, error: str) -> str:
    """py-spy's own text layout, with the process's rank and what the kernel says it waits in."""
    wchan = read_proc(pid, "wchan").decode(errors="replace") or "?"
    lines = [f"Process {pid}: {title}", f"rank: {rank if rank is not None else '-'}   kernel wait: {wchan}", ""]
    if threads is None:
        lines.append(f"no stack: {error}")
    return "\n".join(lines) + "\n" + render_threads(threads or [])


def render_threads(threads: list[dict[str, Any]]) -> str:
    lines = []
    for thread in threads:
        state = "active" if thread.get("active") else "idle"
        lines.append(f'Thread {thread.get("os_thread_id")} ({state}): "{thread.get("thread_name") or ""}"')
        lines += [f"    {frame_text(frame)}" for frame in thread.get("frames") or []]
        lines.append("")
    return "".join(line + "\n" for line in lines)


def dump_process(pid: int, node: str, role: str, stacks_dir: Path) -> ProcessStack:
    title, rank = command_line(pid)[:300], rank_of(pid)
    threads, error = py_spy_dump(pid)
    name = file_name(node, pid, role, rank, title)
    (stacks_dir / name).write_text(render_dump(pid, title, rank, threads, error))
    if threads is None:
        return ProcessStack(node, pid, role, title, rank, UNREADABLE, "", "", None, False, name, error)
    task_threads = [(thread, frames) for thread in threads if (frames := task_frames({**thread, "pid": pid}))]
    tasks = [frames for _, frames in task_threads]
    judged = [classify_frames(frames) for frames in tasks]
    if any(state == CODE for state, _, _ in judged):
        judged = native_look(pid, [thread for thread, _ in task_threads], judged, stacks_dir / name)
    # the thread that tells most: blocked itself before waiting on Ray, before idle
    order = {COLLECTIVE: 0, NETWORK: 0, GPU_WAIT: 0, CODE: 1, RAY_WAIT: 2, IDLE: 3}
    best = min(range(len(judged)), key=lambda i: order[judged[i][0]], default=None)
    state, blocked, caller = judged[best] if best is not None else (IDLE, "", "")
    frames = tasks[best] if best is not None else []
    trainer = any(
        str(frame.get("name", "")).endswith("fit") and "verl/" in str(frame.get("filename")) for frame in frames
    )
    return ProcessStack(node, pid, role, title, rank, state, blocked, caller, phase_of(frames), trainer, name)


def native_look(
    pid: int, threads: list[dict[str, Any]], judged: list[tuple[str, str, str]], dump_file: Path
) -> list[tuple[str, str, str]]:
    """The task threads that look busy in code, looked at again with their native frames: one waiting on its GPU or
    inside NCCL says so. The native dump is appended to the process's file; where it fails, the Python view stands."""
    native, error = py_spy_dump(pid, native=True)
    with dump_file.open("a") as out:
        out.write("With native frames (py-spy dump --native):\n\n")
        out.write(render_threads(native) if native is not None else f"no native stack: {error}\n")
    by_thread = {thread.get("os_thread_id"): thread.get("frames") or [] for thread in native or []}
    looked = []
    for thread, (state, blocked, caller) in zip(threads, judged, strict=True):
        waiting = native_wait(by_thread.get(thread.get("os_thread_id"), [])) if state == CODE else None
        looked.append((waiting[0], f"{waiting[1]} in {blocked}", caller) if waiting else (state, blocked, caller))
    return looked


def gpu_utilisation(node: str, stacks_dir: Path) -> None:
    """Each GPU's utilisation and the processes on it, where the node has nvidia-smi."""
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        return
    queries = (
        ["--query-gpu=index,name,utilization.gpu,memory.used,memory.total", "--format=csv"],
        ["--query-compute-apps=gpu_uuid,pid,process_name,used_memory", "--format=csv"],
    )
    out = []
    for query in queries:
        try:
            result = subprocess.run([nvidia_smi, *query], capture_output=True, text=True, timeout=60)
            out.append(result.stdout + result.stderr)
        except (OSError, subprocess.TimeoutExpired) as error:
            out.append(f"nvidia-smi {query[0]}: {error}\n")
    (stacks_dir / safe_name(f"{node}-nvidia-smi.txt")).write_text("\n".join(out))


def dump_node(
    node: str, roots: dict[str, int | None], stacks_dir: Path, ray_marker: str | None = None
) -> list[ProcessStack]:
    """Every Python process under each root (role -> pid) of this node, dumped in parallel; the node's JSON is
    written last (the head reads it as this node's answer). `ray_marker` (NAME=value): under the `ray` root, only
    the processes whose environment holds it (a standing cluster's raylet also runs other jobs' workers)."""
    stacks_dir.mkdir(parents=True, exist_ok=True)
    children = children_by_parent()
    targets: dict[int, str] = {}
    for role, root in roots.items():
        for pid in process_tree(root, children) if root is not None else []:
            if pid == os.getpid() or not is_python(pid):
                continue
            if role == "ray" and ray_marker is not None and not has_environment(pid, ray_marker):
                continue
            targets.setdefault(pid, role)
    with ThreadPoolExecutor(PARALLEL_DUMPS) as pool:
        stacks = list(pool.map(lambda item: dump_process(item[0], node, item[1], stacks_dir), targets.items()))
    gpu_utilisation(node, stacks_dir)
    write_atomically(stacks_dir / safe_name(NODE_STACKS.format(node=node)), [asdict(stack) for stack in stacks])
    return stacks


def write_atomically(path: Path, data: Any) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=1) + "\n")
    partial.rename(path)


# --- the verdict ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    phase: str | None
    stuck: list[str]
    transient: bool
    evidence: str


def judge(stacks: list[ProcessStack], missing_nodes: list[str], stacks_missing: str | None) -> Verdict:
    """What the stacks show: the phase (verl's training loop says it; else most of the blocked processes), the
    processes blocked themselves, whether all of them wait on a collective or the network, and one line of
    evidence grouped by the call they are blocked in."""
    stuck = [stack for stack in stacks if stack.stuck]
    ranked = [stack for stack in stuck if stack.rank is not None]
    named = sorted(ranked or stuck, key=lambda s: (s.rank is None, int(s.rank) if (s.rank or "").isdigit() else 0))
    trainer = [stack.phase for stack in stacks if stack.trainer and stack.phase]
    phases = [stack.phase for stack in stuck if stack.phase] or [stack.phase for stack in stacks if stack.phase]
    phase = trainer[0] if trainer else (statistics.mode(phases) if phases else None)
    transient = bool(stuck) and all(stack.state in TRANSIENT_STATES for stack in stuck) and not missing_nodes
    groups: dict[tuple[str, str, str], list[str]] = {}
    for stack in named:
        groups.setdefault((stack.state, stack.blocked_call, stack.caller), []).append(stack.label)
    parts = []
    for (state, blocked, caller), labels in list(groups.items())[:4]:
        shown = ", ".join(labels[:6]) + (f" (+{len(labels) - 6})" if len(labels) > 6 else "")
        parts.append(f"{shown} in {blocked}" + (f" from {caller}" if caller else "") + f" [{state}]")
    if len(groups) > 4:
        parts.append(f"{len(groups) - 4} more group(s) in the stacks dir")
    if not parts:
        waiting = sum(stack.state == RAY_WAIT for stack in stacks)
        parts.append(
            f"no process blocked outside Ray's own waits ({waiting} waiting on ray.get, "
            f"{sum(stack.state == IDLE for stack in stacks)} idle): the work may be in native code or an async actor"
        )
    if missing_nodes:
        parts.append(f"no stacks from {', '.join(missing_nodes)} (its task did not answer)")
    if stacks_missing:
        parts.append(f"stacks missing: {stacks_missing}")
    return Verdict(phase, [stack.label for stack in named], transient, "; ".join(parts))


def hang_phase(verdict: Verdict, last_step: int | None, stacks: list[ProcessStack]) -> str | None:
    """The stacks' phase; before the first step, with stacks read and none in verl's training loop (fit), verl is
    still starting (building its workers, engines and queues): `start-up`."""
    read = [stack for stack in stacks if stack.state != UNREADABLE]
    starting = last_step is None and bool(read) and not any(stack.trainer for stack in read)
    return verdict.phase or (STARTUP_PHASE if starting else None)


# --- the head ---------------------------------------------------------------------------------------------------------


@dataclass
class HangWatch:
    """The head's watch over one attempt's driver."""

    run_dir: Path
    attempt: int
    nodes: tuple[str, ...]  # the head's node first, then the nodes whose tasks dump their own stacks
    attempt_tag: str  # names the dump request in the (shared) run directory
    ray_root: int | None  # the head's `ray start --block` process (cluster=ray: the node's raylet, if found)
    ray_status_command: list[str]
    ray_env: dict[str, str]
    predicted_s: float | None
    factor: float
    floor_s: float
    earlier_step_times: list[float] = field(default_factory=list)
    earlier_steady_times: list[float] = field(default_factory=list)  # steady_times of the earlier attempts
    validations: Validations = field(default_factory=Validations)
    earlier_validation_times: list[float] = field(default_factory=list)
    ray_marker: str | None = None  # NAME=value in the environment of this run's Ray workers (dump_node)
    # what no stack can come from, said in the record (cluster=ray: the standing cluster's other nodes)
    unreached: str | None = None
    hang: dict[str, Any] | None = None  # the record, once the attempt was stopped as hung
    clock: Callable[[], float] = time.monotonic
    time_limit_at: float | None = None  # on `clock`, when the job's time limit ends it (None: no limit known)

    def wait(self, driver: subprocess.Popen) -> int:
        """The driver's exit code; or, when no step comes within the window, HUNG once every stack is recorded
        (the caller stops the driver)."""
        progress = Progress(self.clock(), self.predicted_s, self.factor, self.floor_s, self.validations)
        progress.measured += self.earlier_step_times
        progress.steady += self.earlier_steady_times
        progress.measured_validations += self.earlier_validation_times
        tail = MetricsTail(attempt_log_path(self.run_dir, self.attempt))
        poll_s = poll_interval_s(self.floor_s)
        beyond_the_limit = False  # said once each time the window grows past the time left
        while True:
            try:
                return driver.wait(timeout=poll_s)
            except subprocess.TimeoutExpired:
                pass
            now = self.clock()
            progress.observe(tail.new_records(), now)
            left = self.time_left_s(now)
            if (left is not None and progress.window_s > left) != beyond_the_limit:
                beyond_the_limit = not beyond_the_limit
                if beyond_the_limit:
                    print(f"rlaunch: hang watchdog: {beyond_time_left(progress, left)}", flush=True)
            if progress.overdue(now):
                self.hang = self.record_hang(progress, now, driver.pid)
                return HUNG

    def time_left_s(self, now: float) -> float | None:
        return None if self.time_limit_at is None else self.time_limit_at - now

    def record_hang(self, progress: Progress, now: float, driver_pid: int) -> dict[str, Any]:
        """Every node's stacks, `ray status`, then the record appended to hang.json."""
        stacks_dir = self.run_dir / HANG_DIR / f"attempt-{self.attempt}"
        stacks_dir.mkdir(parents=True, exist_ok=True)
        relative = str(stacks_dir.relative_to(self.run_dir))
        print(
            f"rlaunch: hang watchdog: no step for {progress.waited_s(now):.0f} s (window {progress.window_s:.0f} s"
            f"{'' if progress.last_step is None else f', last step {progress.last_step}'}): recording every "
            f"process's stack into {relative}",
            flush=True,
        )
        try:
            (self.run_dir / DUMP_REQUEST.format(tag=self.attempt_tag)).write_text(relative + "\n")
            roots = {"driver": driver_pid, "ray": self.ray_root}
            stacks = dump_node(self.nodes[0], roots, stacks_dir, self.ray_marker)
            self.ray_status(stacks_dir)
            others, missing = collect_nodes(stacks_dir, self.nodes[1:], time.monotonic() + NODE_ANSWER_TIMEOUT_S)
            stacks += others
            why_missing = "; ".join(part for part in (stacks_missing(stacks), self.unreached) if part) or None
        except Exception as error:  # the hung attempt is stopped and recorded whatever recording its stacks met
            stacks, missing, why_missing = [], [], f"recording the stacks failed: {type(error).__name__}: {error}"
        verdict = judge(stacks, missing, why_missing)
        record = {
            "attempt": self.attempt,
            "phase": hang_phase(verdict, progress.last_step, stacks),
            "stuck_ranks": verdict.stuck,
            "last_step": progress.last_step,
            "waited_s": round(progress.waited_s(now), 1),
            "window_s": round(progress.window_s, 1),
            "expected_step_s": None if progress.expected_s is None else round(progress.expected_s, 1),
            "expected_validation_s": round(progress.validation_s, 1),
            "transient": verdict.transient,
            "evidence": verdict.evidence,
            "stacks_dir": relative,
            "stacks_missing": why_missing,
        }
        write_summary(stacks_dir, stacks, record)
        append_hang(self.run_dir, record)
        return record

    def ray_status(self, stacks_dir: Path) -> None:
        try:
            result = subprocess.run(
                self.ray_status_command, capture_output=True, text=True, timeout=RAY_STATUS_TIMEOUT_S, env=self.ray_env
            )
            text = result.stdout + result.stderr
        except (OSError, subprocess.TimeoutExpired) as error:
            text = f"{' '.join(self.ray_status_command)}: {error}\n"
        (stacks_dir / RAY_STATUS_FILE).write_text(text)


HUNG = -1  # HangWatch.wait's answer for an attempt it found hung


def beyond_time_left(progress: Progress, left_s: float) -> str:
    """What a window longer than the attempt's time left means (the log's line): the time limit, not the watchdog,
    would end a hang from here."""
    step = f"{progress.expected_s:.0f} s" if progress.expected_s else "no step time"
    return (
        f"the window ({progress.window_s:.0f} s: {progress.factor:g} x {step}"
        f"{f' + {progress.validation_s:.0f} s of validation' if progress.validation_s else ''}, floor "
        f"{progress.floor_s:.0f} s) is longer than the {max(left_s, 0.0):.0f} s left before the job's time limit: a "
        "hang from here is ended by the time limit, without stacks (a smaller launch.hang.factor or floor_s keeps it "
        "within)"
    )


def time_limit_at(plan: Plan, clock: Callable[[], float] = time.monotonic) -> float | None:
    """When the job's time limit ends this attempt, on `clock`: SLURM's own end time where the job's environment has
    it (SLURM_JOB_END_TIME, SLURM 23.02 on), else the plan's time limit from this process's start; None off SLURM."""
    if plan.cluster != "slurm" or not plan.resources.time_min:
        return None
    end = os.environ.get("SLURM_JOB_END_TIME", "")
    if end.isdigit():
        return clock() + int(end) - time.time()
    return clock() - process_age_s() + plan.resources.time_min * 60


def process_age_s(pid: int | str = "self") -> float:
    """Seconds since the process started (/proc: its start in clock ticks after boot, against the uptime)."""
    try:
        started_ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime_s - started_ticks / os.sysconf("SC_CLK_TCK"))


def collect_nodes(stacks_dir: Path, nodes: Iterable[str], deadline: float) -> tuple[list[ProcessStack], list[str]]:
    """The other nodes' answers, polled until each has written its JSON or the deadline passed."""
    pending = list(nodes)
    stacks: list[ProcessStack] = []
    while True:
        for node in list(pending):
            path = stacks_dir / safe_name(NODE_STACKS.format(node=node))
            if path.exists():
                stacks += [ProcessStack(**item) for item in json.loads(path.read_text())]
                pending.remove(node)
        if not pending or time.monotonic() > deadline:
            return stacks, pending
        time.sleep(0.5)


def stacks_missing(stacks: list[ProcessStack]) -> str | None:
    """Why there are no stacks to judge, when py-spy could read no process at all."""
    if not stacks:
        return "no Python process found under the driver or Ray"
    if all(stack.state == UNREADABLE for stack in stacks):
        return f"py-spy could read none of {len(stacks)} processes: {stacks[0].error}"
    return None


def write_summary(stacks_dir: Path, stacks: list[ProcessStack], record: dict[str, Any]) -> None:
    lines = [f"hang, attempt {record['attempt']}: {record['evidence']}", ""]
    for stack in sorted(stacks, key=lambda s: (s.node, s.role != "driver", s.rank is None, s.rank or "", s.pid)):
        where = f"{stack.blocked_call} from {stack.caller}" if stack.caller else stack.blocked_call or stack.error
        lines.append(f"{stack.label:<16} {stack.state:<10} {stack.phase or '-':<15} {stack.file}  {where}")
    (stacks_dir / SUMMARY_FILE).write_text("\n".join(lines) + "\n")


def append_hang(run_dir: Path, record: dict[str, Any]) -> None:
    write_atomically(run_dir / HANG_FILE, [*hang_records(run_dir), record])


def summary(record: dict[str, Any]) -> str:
    """One line for the job's log."""
    phase = record["phase"] or "an unknown phase"
    return (
        f"no step for {record['waited_s']:.0f} s (window {record['window_s']:.0f} s) in {phase}: "
        f"{record['evidence']} (stacks in {record['stacks_dir']})"
    )


def requeue_refusal(run_dir: Path, attempt: int) -> str | None:
    """Why attempt `attempt`, stopped as hung, must not be requeued; None when it hung on a transient cause and is
    the run's first hang (a hang is requeued at most once), or did not hang at all."""
    records = hang_records(run_dir)
    hung = next((record for record in records if record.get("attempt") == attempt), None)
    if hung is None:
        return None
    earlier = sorted(record["attempt"] for record in records if record.get("attempt", attempt) < attempt)
    if earlier:
        return f"attempt {attempt} hung again after attempt {earlier[-1]}'s hang was requeued: a hang is requeued once"
    if not hung.get("transient"):
        return (
            f"attempt {attempt} hung and its stacks show no transient cause (a collective or network wait): a requeue "
            f"would hang the same way; see {hung.get('stacks_dir')}"
        )
    return None


# --- the other nodes --------------------------------------------------------------------------------------------------


def answer_dump_request(run_dir: Path, attempt_tag: str, node: str, ray_root: int) -> bool:
    """On a node other than the head: when the head has asked, record this node's stacks. True once done."""
    request = run_dir / DUMP_REQUEST.format(tag=attempt_tag)
    if not request.exists():
        return False
    stacks_dir = run_dir / request.read_text().strip()
    try:
        dump_node(node, {"ray": ray_root}, stacks_dir)
    except OSError as error:  # the head names this node as unanswered; this task goes on waiting for the end
        print(f"rlaunch: hang watchdog: could not record the stacks of {node}: {error}", flush=True)
    return True


def watch_off_reason(plan: Plan) -> str:
    """Why the job starts no hang watch ("" where it does): the plan says the same (launch/render.py)."""
    if not getattr(plan.cluster_settings, "hang_enabled", False):
        return "launch.hang.enabled=false"
    if plan.driver != "ppo":
        return f"the {plan.driver} pipeline logs no training steps to watch"
    if "file" not in (plan.verl.get("trainer", {}).get("logger") or []):
        return "trainer.logger has no 'file': verl's per-step metrics are what it watches"
    return ""


def watch_for(
    plan: Plan,
    attempt: int,
    nodes: tuple[str, ...],
    attempt_tag: str,
    ray_root: int | None,
    ray_status_command: list[str],
    ray_env: dict[str, str],
    ray_marker: str | None = None,
    unreached: str | None = None,
) -> HangWatch | None:
    """The watch over this attempt, or None with the reason printed (off in the plan, or no per-step progress to
    read)."""
    settings = plan.cluster_settings
    reason = watch_off_reason(plan)
    if reason:
        print(f"rlaunch: hang watchdog off: {reason}", flush=True)
        return None
    run_dir = Path(plan.run_dir)
    records_per_attempt = [  # the run's own records in its earlier attempts
        list(parse_records(attempt_log_path(run_dir, number).read_text(errors="replace").splitlines()))
        for number in range(1, attempt)
        if attempt_log_path(run_dir, number).exists()
    ]
    earlier_records = [record for records in records_per_attempt for record in records]
    earlier = measured_times(earlier_records)
    watch = HangWatch(
        run_dir=run_dir,
        attempt=attempt,
        nodes=nodes,
        attempt_tag=attempt_tag,
        ray_root=ray_root,
        ray_status_command=ray_status_command,
        ray_env=ray_env,
        predicted_s=predicted_step_s(plan),
        factor=float(settings.hang_factor),
        floor_s=float(settings.hang_floor_s),
        earlier_step_times=earlier,
        earlier_steady_times=steady_times(measured_times(records) for records in records_per_attempt),
        validations=Validations.of(plan),
        earlier_validation_times=measured_times(earlier_records, TEST_TIME),
        ray_marker=ray_marker,
        unreached=unreached,
        time_limit_at=time_limit_at(plan),
    )
    expected = expected_step_s(watch.predicted_s, earlier, watch.earlier_steady_times)
    source = "earlier steps" if earlier else "the plan" if expected else "no prediction"
    validation_s = expected_validation_s(watch.validations.predicted_s, watch.earlier_validation_times)
    window = window_text(expected, watch.factor, watch.floor_s, watch.validations, validation_s)
    print(
        f"rlaunch: hang watchdog on: {window} is a hang (step time from {source}; measured steps replace it)",
        flush=True,
    )
    return watch
