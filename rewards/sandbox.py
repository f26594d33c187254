"""Run model-written programs where they can hurt nothing: Debian's bubblewrap, as an unprivileged uid.

Runs in: the scoring pool's worker processes (rewards/pool.py), in their main thread (asyncio subprocesses), never in
verl's reward worker itself.

Every program gets its own sandbox (`command` renders it):
- bubblewrap always runs WITHOUT privileges: as root we first drop to `uid` (65534, nobody) with setpriv, because
  RLIMIT_NPROC is ignored for root (docs/facts.md#rewards); an unprivileged caller keeps its own uid. Either way
  bubblewrap then creates unprivileged user, pid, network, ipc and uts namespaces: no network (only a dead loopback), no
  other process visible or killable, no capability left, and no nested user namespace to gain one in.
- the file system is /usr read-only plus a fresh /proc and a minimal /dev; the root and /dev are remounted
  read-only, so the ONLY writable place is /sandbox, a private tmpfs capped at `disk_mb` that vanishes with the
  sandbox. Nothing of the host's /tmp, home directories or the project is visible.
- the environment is empty (bwrap itself starts with a clean one too: its pid 1 would otherwise expose the
  caller's variables, API keys included, through /proc/1/environ), and the program is handed over through a memfd,
  so no host file is ever written.
- limits (prlimit inside the sandbox, so RLIMIT_NPROC counts this sandbox's processes only): CPU seconds, address
  space, file size, processes, open files, no core dumps; plus a wall-clock timeout after which bwrap is killed, and
  with it (die-with-parent, pid namespace) every process the program started. setpriv's pdeathsig kills bwrap if
  the scoring process itself dies.
Where bubblewrap cannot run (not installed, no user namespaces), programs are refused with the reason, never run
unconfined (`unavailable_reason`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

MIB = 1 << 20
# stderr is only kept for diagnostics: its tail is enough
STDERR_KEEP = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    cpu_s: int = 5  # RLIMIT_CPU per process
    wall_s: float = 10.0  # wall clock for the whole sandbox, startup included
    memory_mb: int = 1024  # RLIMIT_AS per process
    file_mb: int = 16  # RLIMIT_FSIZE
    disk_mb: int = 64  # size of the private tmpfs /sandbox, the only writable place
    procs: int = 32  # RLIMIT_NPROC inside the sandbox's user namespace
    output_kb: int = 1024  # stdout beyond this kills the program
    python: str = "/usr/bin/python3"  # must live under /usr: nothing else of the host is mounted
    uid: int = 65534  # the uid bubblewrap runs as when the caller is root


@dataclass(frozen=True, slots=True)
class Outcome:
    status: Literal["exited", "timeout", "output_limit", "sandbox_error"]
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float


def _tool(name: str) -> str | None:
    return shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")


def _root_filesystem() -> list[str]:
    """/usr read-only, and the top-level links into it (merged /usr) or the directories themselves (older layouts)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def command(
    limits: Limits, program_fd: int, status_fd: int, files: Sequence[tuple[int, str]] = (), args: Sequence[str] = ()
) -> list[str]:
    """The full argv: setpriv (drop root, die with the caller) -> bwrap -> prlimit -> python on the program.
    `files`: more read-only files (memfd, name under /program); `args`: the program's own arguments."""
    setpriv, bwrap, prlimit = _tool("setpriv"), _tool("bwrap"), _tool("prlimit")
    if not (setpriv and bwrap and prlimit):
        raise FileNotFoundError("bwrap, setpriv or prlimit not found")
    drop = ["--reuid", str(limits.uid), "--regid", str(limits.uid), "--clear-groups"] if os.geteuid() == 0 else []
    return [
        setpriv,
        *drop,
        "--pdeathsig",
        "KILL",
        "--",
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",  # no nested user namespace: the program never holds a capability, not even its own
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
        *_root_filesystem(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(limits.disk_mb * MIB),
        "--tmpfs",
        "/sandbox",
        "--ro-bind-data",
        str(program_fd),
        "/program/main.py",
        *[arg for fd, name in files for arg in ("--ro-bind-data", str(fd), f"/program/{name}")],
        "--remount-ro",
        "/dev",
        "--remount-ro",
        "/",
        "--chdir",
        "/sandbox",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "HOME",
        "/sandbox",
        "--setenv",
        "TMPDIR",
        "/sandbox",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--json-status-fd",
        str(status_fd),
        "--",
        prlimit,
        f"--cpu={limits.cpu_s}",
        f"--as={limits.memory_mb * MIB}",
        f"--fsize={limits.file_mb * MIB}",
        f"--nproc={limits.procs}",
        "--nofile=256",
        "--core=0",
        "--",
        limits.python,
        "-I",
        "-B",
        "/program/main.py",
        *args,
    ]


async def _feed(stream: asyncio.StreamWriter | None, data: bytes) -> None:
    if stream is None:
        return
    # a program that never reads its input, or dies early, must not fail the run
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stream.write(data)
        await stream.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stream.close()


async def _drain(stream: asyncio.StreamReader | None, keep: int, tail: bool, on_overflow: Callable[[], None]) -> bytes:
    """Read to EOF (so the pipe is released), keeping the first (or last) `keep` bytes; call `on_overflow` once
    when the stream outgrows `keep` and the head is kept."""
    if stream is None:
        return b""
    kept = b""
    overflowed = False
    while chunk := await stream.read(65536):
        if tail:
            kept = (kept + chunk)[-keep:]
        elif not overflowed:
            kept += chunk
            if len(kept) > keep:
                overflowed = True
                kept = kept[:keep]
                on_overflow()
    return kept


def _kill(process: asyncio.subprocess.Process) -> None:
    # setpriv exec'd into bwrap, so this pid is bwrap: its death takes the pid namespace, and every process in it
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGKILL)


async def _finish(task: asyncio.Future[bytes]) -> bytes:
    # after the kill every holder of the pipe is gone; the bound only guards against the unforeseen
    try:
        return await asyncio.wait_for(task, timeout=2.0)
    except TimeoutError:
        return b""


def _memfd(name: str, text: str) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.write(fd, text.encode("utf-8", errors="surrogatepass"))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _secret_pipe(secret: str) -> int:
    """The read end of a pipe holding `secret`, then its end (a marker is far smaller than the pipe's buffer)."""
    read_end, write_end = os.pipe()
    os.write(write_end, secret.encode())
    os.close(write_end)
    return read_end


async def run_program(
    program: str, stdin: str, limits: Limits, files: Mapping[str, str] | None = None, secret: str = ""
) -> Outcome:
    """Run one Python program on one input inside a fresh sandbox. `files`: more read-only files beside it under
    /program (name -> text). `secret`: readable once by the program from the file descriptor its first argument
    names (a pipe, never a file): for a harness that must not share it with the code it runs (rewards/domains/
    codegen.py)."""
    started = time.monotonic()
    program_fd = _memfd("program", program)
    file_fds = [(_memfd(name, text), name) for name, text in (files or {}).items()]
    secret_r = _secret_pipe(secret) if secret else -1
    status_r, status_w = os.pipe()
    try:
        try:
            argv = command(limits, program_fd, status_w, file_fds, [str(secret_r)] if secret else [])
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(program_fd, status_w, *(fd for fd, _ in file_fds), *([secret_r] if secret else [])),
                env={"PATH": "/usr/bin:/bin"},
                cwd="/",
            )
        except OSError as exc:
            return Outcome("sandbox_error", None, "", f"cannot start the sandbox: {exc}", time.monotonic() - started)
        os.close(status_w)
        status_w = -1
        if secret:  # the sandbox holds it now; the host needs it no more
            os.close(secret_r)
            secret_r = -1
        try:
            outcome = await _watch(process, stdin, limits, started)
        finally:
            if process.returncode is None:  # cancelled: never leave a sandbox running
                _kill(process)
        with os.fdopen(status_r, "rb") as status_file:
            status_r = -1
            bwrap_status = status_file.read().decode(errors="replace")
        if outcome.status == "exited" and "child-pid" not in bwrap_status:
            # bwrap reported no child: the sandbox itself never came up (no user namespaces, missing tool, ...)
            return Outcome("sandbox_error", None, outcome.stdout, outcome.stderr, outcome.seconds)
        return Outcome(
            outcome.status, _exit_code(bwrap_status, outcome.exit_code), outcome.stdout, outcome.stderr, outcome.seconds
        )
    finally:
        for fd in (program_fd, status_r, status_w, secret_r, *(fd for fd, _ in file_fds)):
            if fd >= 0:
                os.close(fd)


async def _watch(process: asyncio.subprocess.Process, stdin: str, limits: Limits, started: float) -> Outcome:
    """Feed stdin, collect output, enforce the wall clock and the output cap."""
    status: Literal["exited", "timeout", "output_limit", "sandbox_error"] = "exited"

    def overflow() -> None:
        nonlocal status
        status = "output_limit"
        _kill(process)

    feeding = asyncio.ensure_future(_feed(process.stdin, stdin.encode("utf-8", errors="surrogatepass")))
    reading = asyncio.ensure_future(_drain(process.stdout, limits.output_kb * 1024, False, overflow))
    tailing = asyncio.ensure_future(_drain(process.stderr, STDERR_KEEP, True, overflow))
    try:
        async with asyncio.timeout(limits.wall_s):
            await asyncio.shield(reading)
            await process.wait()
    except TimeoutError:
        status = "timeout"
        _kill(process)
    await process.wait()
    feeding.cancel()
    stdout, stderr = await _finish(reading), await _finish(tailing)
    return Outcome(
        status,
        process.returncode,
        stdout.decode("utf-8", errors="replace"),
        stderr.decode("utf-8", errors="replace"),
        time.monotonic() - started,
    )


def _exit_code(bwrap_status: str, returncode: int | None) -> int | None:
    """The program's own exit code, from bwrap's status lines (its own return code mixes in setup failures)."""
    for line in reversed(bwrap_status.splitlines()):
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and "exit-code" in record:
                return int(record["exit-code"])
    return returncode


async def run_all(
    jobs: Sequence[tuple[str, str]],
    limits: Limits,
    parallel: int,
    budget_s: float | None = None,
    files: Mapping[str, str] | None = None,
    secret: str = "",
) -> list[Outcome]:
    """(program, stdin) pairs, at most `parallel` sandboxes at a time, results in order; `files` and `secret` go to
    each (run_program). Jobs not started within `budget_s` are not run (status "timeout"): the whole set ends within
    budget_s + wall_s."""
    gate = asyncio.Semaphore(max(1, parallel))
    deadline = None if budget_s is None else time.monotonic() + budget_s

    async def one(program: str, stdin: str) -> Outcome:
        async with gate:
            if deadline is not None and time.monotonic() >= deadline:
                return Outcome("timeout", None, "", "not run: the sample's time budget was used up", 0.0)
            return await run_program(program, stdin, limits, files, secret)

    return list(await asyncio.gather(*(one(program, stdin) for program, stdin in jobs)))


_working: set[Limits] = set()


def unavailable_reason(limits: Limits) -> str | None:
    """None when the sandbox works here; otherwise why programs are refused. A success is remembered for the
    process; a failure is checked again next time (it may have been passing)."""
    if limits in _working:
        return None
    missing = [tool for tool in ("bwrap", "setpriv", "prlimit") if _tool(tool) is None]
    if missing:
        return (
            f"sandbox unavailable: {', '.join(missing)} not found (install Debian's bubblewrap and util-linux); "
            "model code is never run unconfined"
        )
    if not limits.python.startswith("/usr/") or not os.path.exists(limits.python):
        return f"sandbox unavailable: code_python {limits.python!r} must be an interpreter under /usr"
    probe = asyncio.run(run_program("print('ok')", "", limits))
    if probe.status != "exited" or probe.stdout.strip() != "ok":
        return (
            f"sandbox unavailable: bubblewrap could not start ({probe.status}: {probe.stderr.strip()[-300:]}); "
            "user namespaces may be disabled; model code is never run unconfined"
        )
    _working.add(limits)
    return None
