"""A pool of scoring processes with per-item timeouts: one item's crash or hang never zeroes or stalls the others.

Runs in: the scoring process (verl's reward worker actor, a test, the bench) — one dispatcher THREAD that only moves
bytes — and `procs` worker processes (`python -c "...worker_main()"`), where every grader runs in the MAIN thread.
That is the point: math-verify's timeouts use SIGALRM, which fails in any other thread (docs/facts.md#rewards).

A task names its grader as "module:function" and carries picklable arguments; the worker returns the grader's dict.
The dispatcher gives each task to an idle worker and starts its clock then (time queued does not count). A worker
past its task's deadline is killed with its whole process group and replaced: the task gets an error "timeout after
…s". A worker that dies mid-task (segfault, os._exit, OOM kill) gives "crash: …". Neither touches any other task.
Frames on the pipes are 4-byte length + pickle; workers only ever receive pickles from their own parent.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import pickle
import queue
import selectors
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewards.result import unjudged

log = logging.getLogger(__name__)

HEADER = struct.Struct("!I")
READY = "ready"
# a worker that dies before it is ready this many times in a row means the pool cannot work here at all
MAX_START_FAILURES = 3
PROJECT = Path(__file__).resolve().parent.parent
WORKER_CODE = "from rewards.pool import worker_main; worker_main()"


@dataclass(slots=True)
class _Task:
    grader: str
    args: tuple
    timeout_s: float
    future: Future[dict[str, Any]]


@dataclass(slots=True)
class _Worker:
    process: subprocess.Popen[bytes]
    buffer: bytearray = field(default_factory=bytearray)
    ready: bool = False
    task: _Task | None = None
    deadline: float = 0.0


def _frame(obj: object) -> bytes:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


class Pool:
    """`submit` from any thread; results arrive on concurrent.futures.Future objects (asyncio: wrap_future)."""

    def __init__(self, procs: int, warmup: str | None = None) -> None:
        self.procs = max(1, procs)
        self.warmup = warmup  # "module:function" run once in each worker before it reports ready
        self._inbox: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._broken: str | None = None
        self.restarts = 0

    def submit(self, grader: str, args: tuple, timeout_s: float) -> Future[dict[str, Any]]:
        future: Future[dict[str, Any]] = Future()
        if self._broken:
            _settle(future, unjudged(self._broken))
            return future
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._dispatch, name="rewards-pool", daemon=True)
                self._thread.start()
        self._inbox.put(_Task(grader, args, timeout_s, future))
        os.write(self._wake_w, b"x")
        return future

    def close(self) -> None:
        self._broken = self._broken or "scoring pool closed"
        if self._thread is not None and self._thread.is_alive():
            self._inbox.put(None)
            os.write(self._wake_w, b"x")
            self._thread.join(timeout=10)

    # --- the dispatcher thread ---

    def _spawn(self) -> _Worker:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT), env.get("PYTHONPATH")]))
        argv = [sys.executable, "-c", WORKER_CODE] + ([self.warmup] if self.warmup else [])
        # own session: a timed-out worker is killed together with everything it started
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True, cwd=PROJECT
        )
        assert process.stdout is not None
        os.set_blocking(process.stdout.fileno(), False)
        return _Worker(process)

    def _dispatch(self) -> None:
        pending: deque[_Task] = deque()
        workers: list[_Worker] = []
        try:
            self._serve(workers, pending)
        except BaseException as exc:  # the pool must never leave a caller waiting on a future nobody completes
            self._broken = f"scoring pool failed: {type(exc).__name__}: {exc}"
            log.exception("rewards pool dispatcher failed")
            raise
        finally:
            for worker in workers:
                if worker.task is not None and not worker.task.future.done():
                    _settle(worker.task.future, unjudged(self._broken or "scoring pool closed"))
                _kill_group(worker.process)
            while pending:
                _settle(pending.popleft().future, unjudged(self._broken or "scoring pool closed"))
            while True:
                try:
                    task = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if task is not None:
                    _settle(task.future, unjudged(self._broken or "scoring pool closed"))

    def _serve(self, workers: list[_Worker], pending: deque[_Task]) -> None:
        workers.extend(self._spawn() for _ in range(self.procs))
        start_failures = 0
        closing = False
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_r, selectors.EVENT_READ)
            for worker in workers:
                selector.register(worker.process.stdout, selectors.EVENT_READ, worker)  # type: ignore[arg-type]
            while not closing:
                busy = [w.deadline for w in workers if w.task is not None]
                wait = max(0.0, min(busy) - time.monotonic()) if busy else None
                for key, _ in selector.select(wait):
                    if key.data is None:
                        with contextlib.suppress(BlockingIOError):
                            os.read(self._wake_r, 65536)
                        continue
                    worker: _Worker = key.data
                    if worker not in workers:  # replaced earlier in this round
                        continue
                    if not self._receive(worker):
                        try:
                            code: int | None = worker.process.wait(timeout=2)
                        except subprocess.TimeoutExpired:
                            code = None
                        if not worker.ready:
                            start_failures += 1
                        if start_failures >= MAX_START_FAILURES:
                            self._broken = (
                                f"scoring pool cannot start workers ({start_failures} died before ready, last exit "
                                f"code {code}; see the worker's stderr)"
                            )
                        self._replace(worker, workers, selector, f"crash: scoring worker died (exit code {code})")
                    elif worker.ready:
                        start_failures = 0
                while True:
                    try:
                        task = self._inbox.get_nowait()
                    except queue.Empty:
                        break
                    if task is None:
                        closing = True
                        break
                    pending.append(task)
                now = time.monotonic()
                for worker in list(workers):
                    if worker.task is not None and now >= worker.deadline:
                        reason = f"timeout after {worker.task.timeout_s:g}s"
                        self._replace(worker, workers, selector, reason)
                if self._broken:
                    while pending:
                        _settle(pending.popleft().future, unjudged(self._broken))
                for worker in list(workers):
                    if not pending:
                        break
                    if worker.ready and worker.task is None:
                        task = pending.popleft()
                        if task.future.set_running_or_notify_cancel():
                            self._send(worker, task, workers, selector)

    def _send(self, worker: _Worker, task: _Task, workers: list[_Worker], selector: selectors.BaseSelector) -> None:
        worker.task = task
        worker.deadline = time.monotonic() + task.timeout_s
        try:
            assert worker.process.stdin is not None
            worker.process.stdin.write(_frame((task.grader, task.args)))
            worker.process.stdin.flush()
        except (BrokenPipeError, OSError):
            self._replace(worker, workers, selector, f"crash: scoring worker died (exit code {worker.process.poll()})")

    def _receive(self, worker: _Worker) -> bool:
        """Read what the worker wrote; complete its task if a whole frame arrived. False = the worker is gone."""
        assert worker.process.stdout is not None
        try:
            chunk = os.read(worker.process.stdout.fileno(), 1 << 20)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        worker.buffer += chunk
        while len(worker.buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(worker.buffer)
            if len(worker.buffer) < HEADER.size + size:
                break
            message = pickle.loads(bytes(worker.buffer[HEADER.size : HEADER.size + size]))
            del worker.buffer[: HEADER.size + size]
            if message == READY:
                worker.ready = True
            elif worker.task is not None:
                _settle(worker.task.future, message)
                worker.task = None
        return True

    def _replace(self, worker: _Worker, workers: list[_Worker], selector: selectors.BaseSelector, reason: str) -> None:
        selector.unregister(worker.process.stdout)  # type: ignore[arg-type]
        _kill_group(worker.process)
        workers.remove(worker)
        if not self._broken:
            self.restarts += 1
            fresh = self._spawn()
            workers.append(fresh)
            selector.register(fresh.process.stdout, selectors.EVENT_READ, fresh)  # type: ignore[arg-type]
        if worker.task is not None:
            log.warning("rewards pool: %s (%s)", reason, worker.task.grader)
            _settle(worker.task.future, unjudged(reason))


def _settle(future: Future[dict[str, Any]], result: dict[str, Any]) -> None:
    # a caller may cancel a queued item (asyncio cancellation reaches the concurrent future) at any moment
    with contextlib.suppress(InvalidStateError):
        future.set_result(result)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


# --- the worker process ---


def _resolve(name: str, cache: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    if name not in cache:
        module, _, function = name.partition(":")
        cache[name] = getattr(importlib.import_module(module), function)
    return cache[name]


def _read_exact(stream: Any, size: int) -> bytes:
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return data


def worker_main() -> None:
    """Serve tasks from stdin until it closes. The graders' own prints go to stderr, never into the protocol."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # die with the parent even when busy in a long grade (stdin EOF is only seen between tasks)
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    graders: dict[str, Callable[..., Any]] = {}
    if len(sys.argv) > 1:
        _resolve(sys.argv[1], graders)()
    out.write(_frame(READY))
    out.flush()
    stdin = sys.stdin.buffer
    while True:
        try:
            (size,) = HEADER.unpack(_read_exact(stdin, HEADER.size))
            grader, args = pickle.loads(_read_exact(stdin, size))
        except EOFError:
            return
        try:
            result = _resolve(grader, graders)(*args)
            if not isinstance(result, dict):
                raise TypeError(f"grader {grader} returned {type(result).__name__}, not a dict")
        except Exception as exc:  # a grader bug must cost one item, not the worker
            result = unjudged(f"crash: {type(exc).__name__}: {exc}"[:500])
        out.write(_frame(result))
        out.flush()
