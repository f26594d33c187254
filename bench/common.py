"""What the benchmarks share: the commit tag on every printed result, and a dev SLURM cluster of their own.

Runs on: the benchmark machine (root, for the dev cluster).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent


def commit_tag() -> str:
    """Short sha of HEAD, +dirty when the working tree differs: a result is only comparable to its own code."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=PROJECT, capture_output=True, text=True).stdout.strip()

    return (git("rev-parse", "--short", "HEAD") or "unknown") + ("+dirty" if git("status", "--porcelain") else "")


@contextlib.contextmanager
def dev_cluster(prefix: str, port_base: str, *shape: str) -> Iterator[dict[str, str]]:
    """scripts/dev_cluster.sh up under its own prefix and ports; yields the environment pointing SLURM at it (also
    exported in this process), and stops exactly its daemons afterwards."""
    script = PROJECT / "scripts" / "dev_cluster.sh"
    subprocess.run(
        ["bash", str(script), "up", *shape, "--prefix", prefix, "--port-base", port_base],
        check=True,
        capture_output=True,
    )
    os.environ["SLURM_CONF"] = f"{prefix}/etc/slurm.conf"
    try:
        yield {**os.environ}
    finally:
        subprocess.run(["bash", str(script), "down", "--prefix", prefix], check=False, capture_output=True)
        os.environ.pop("SLURM_CONF", None)


def gpu_output_dir(script: str, description: str) -> Path | None:
    """A GPU kit's --out (default: a new temporary directory), or None where no CUDA device is (said on stdout, so
    that `make bench` passes on a CPU machine)."""
    parser = argparse.ArgumentParser(prog=script, description=description)
    parser.add_argument("--out", type=Path, help="where the logs and dumps go (default: a new temporary directory)")
    out = parser.parse_args().out
    import torch

    if not torch.cuda.is_available():
        print(f"{script}: no CUDA device here, nothing measured; run it on a GPU node")
        return None
    out = out or Path(tempfile.mkdtemp(prefix=f"{Path(script).stem}-"))
    out.mkdir(parents=True, exist_ok=True)
    return out
