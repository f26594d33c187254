"""Code snapshots: the project's code as it was at submission, copied under the runs directory, so that a job that
waits hours in the queue runs the code that was submitted, not whatever the checkout holds when it starts.

Runs on: the login node. `read_checkout` reads the checkout ONCE per process (tracked files with their working-tree
content, i.e. uncommitted changes included; never `runs/` or `.venv`) into memory and names it by the sha256 of its
contents; the plan derives `<runs_dir>/code/<digest>` from that digest (a pure function), and `materialize` writes
exactly the bytes that were hashed, so an edit while a sweep is being planned cannot slip in. Content-addressed:
every sweep submitted with the same code shares one directory, written once (into a temporary directory, then
renamed: concurrent submissions never see or leave half a snapshot); other code gets a directory beside it. Only a
submission writes it (launch/slurm.py, launch/ray_submit.py): the checks read the files verl will load through
`at_checkout`, and a dry run copies nothing. Files are copied, never hard-linked: editors that write in place would
change a hard-linked snapshot too.

Inside the job the snapshot is the working directory and the first PYTHONPATH entry (launch/plan.py puts both in the
sbatch script), so submitit's unpickling of `launch.job.RunInAllocation`, verl's `verl.plugins` entry point
`algos.verl_plugin`, and the reward file (its path relocated into the snapshot) all resolve there, ahead of the
editable install's finder (which Python consults after sys.path).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CODE_DIR = "code"  # under the runs directory, beside the sweeps
NEVER = ("runs/", ".venv/")  # run directories and the venv are not code, even if someone tracked them
DIGEST_CHARS = 16


@dataclass(frozen=True)
class CodeSnapshot:
    """What was read: the checkout, the content digest, how many files and bytes."""

    source: str
    digest: str
    files: int
    bytes: int


# digest -> (relative path, executable bit, content): filled by read_checkout, written by materialize
_CONTENTS: dict[str, tuple[tuple[str, bool, bytes], ...]] = {}
_READ: dict[str, CodeSnapshot] = {}


def code_files(source: Path) -> list[str]:
    """Tracked files that exist in the working tree. Untracked files stay out, as they stay out of provenance's diff:
    a stray file (a key, a notebook's output) never reaches the shared filesystem; `git add -N new.py` brings one in."""
    result = subprocess.run(
        ["git", "ls-files", "-z", "--cached"],
        cwd=source,
        capture_output=True,
        check=True,
    )
    names = sorted({name for name in result.stdout.decode().split("\0") if name})
    return [name for name in names if not name.startswith(NEVER) and (source / name).is_file()]


def read_checkout(source: Path) -> CodeSnapshot:
    """The checkout's code, read once per process (every job of a sweep gets the same snapshot)."""
    key = str(source.resolve())
    if key in _READ:
        return _READ[key]
    entries = []
    digest = hashlib.sha256()
    for name in code_files(source):
        path = source / name
        content = path.read_bytes()
        executable = os.access(path, os.X_OK)
        entries.append((name, executable, content))
        for part in (name.encode(), b"x" if executable else b"-", hashlib.sha256(content).digest()):
            digest.update(len(part).to_bytes(8, "big") + part)
    snapshot = CodeSnapshot(key, digest.hexdigest()[:DIGEST_CHARS], len(entries), sum(len(e[2]) for e in entries))
    _CONTENTS[snapshot.digest] = tuple(entries)
    _READ[key] = snapshot
    return snapshot


def code_dir(runs_dir: Path, digest: str) -> Path:
    return runs_dir / CODE_DIR / digest


def materialize(directory: Path) -> Path:
    """Write the snapshot named by the directory's digest (read earlier in this process); an existing one is kept
    (content-addressed: same name, same bytes). Written beside, then renamed: a half-written snapshot never has the
    final name."""
    if directory.is_dir():
        return directory
    entries = _CONTENTS.get(directory.name)
    if entries is None:
        raise RuntimeError(f"no code read in this process has digest {directory.name} (launch/snapshot.py)")
    directory.parent.mkdir(parents=True, exist_ok=True)
    # a unique name, not the pid: two login nodes writing to one shared filesystem can share a pid
    partial = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    partial.chmod(0o755)  # mkdtemp's 0700 would keep a container's other user (or a colleague) out
    for name, executable, content in entries:
        target = partial / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(0o755 if executable else 0o644)
    try:
        partial.rename(directory)
    except OSError:  # another submission wrote it first: same digest, same content
        shutil.rmtree(partial, ignore_errors=True)
    return directory


def at_checkout(value: Any, directory: str) -> Any:
    """A config tree as the checks should read it before the snapshot `directory` exists: each path to a file the
    snapshot will hold points at the checkout file it was read from (the same bytes). A path to anything the snapshot
    will not hold (an untracked reward file) keeps its snapshot path, so the check that the file exists fails as the
    job would."""
    digest = Path(directory).name
    source = next((read.source for read in _READ.values() if read.digest == digest), None)
    if source is None or Path(directory).is_dir():
        return value
    held = {name for name, _, _ in _CONTENTS[digest]}
    prefix = directory.rstrip("/") + "/"

    def moved(path: str) -> str:
        inside = path.startswith(prefix) and path[len(prefix) :] in held
        return f"{source}/{path[len(prefix) :]}" if inside else path

    return _map_strings(value, moved)


def relocate(value: Any, source: str, target: str) -> Any:
    """Every string in a config tree that is a path inside `source` (the checkout), moved into `target` (the
    snapshot): verl loads the reward file by path inside its Ray workers."""
    root = source.rstrip("/")

    def moved(path: str) -> str:
        return target + path[len(root) :] if path == source or path.startswith(root + "/") else path

    return _map_strings(value, moved)


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, Mapping):
        return {key: _map_strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_map_strings(item, change) for item in value]
    return change(value) if isinstance(value, str) else value


def job_setup(directory: str) -> list[str]:
    """Shell lines that make a job's processes import from the snapshot: its working directory (sys.path[0] of
    `python -m ...`) and the first PYTHONPATH entry (inherited by srun's tasks, `ray start`, its raylets and verl's
    workers)."""
    quoted = shlex.quote(directory)
    # a snapshot removed while the job waited: stop, rather than run whatever code the shell's directory holds
    gone = shlex.quote(
        f"rlaunch: error: the code snapshot {directory} is gone (cd failed): the job would not run the submitted "
        "code; resubmit (a new snapshot is written)"
    )
    return [
        f"cd {quoted} || {{ echo {gone} >&2; exit 1; }}",
        f"export PYTHONPATH={quoted}" + "${PYTHONPATH:+:$PYTHONPATH}",
    ]
