"""The hang watchdog's evidence names the user's own file by its full path (a reward's stuck.py, a recipe's main.py:
many share a bare name, which does not say where it is) and a library's by py-spy's short name, which says which
package it is (torch/distributed/distributed_c10d.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from launch import watchdog
from launch.report.failures.classify import blocked_groups

GPU_DUMPS = Path(__file__).parent / "data" / "gpu_hang_h200"

STUCK_REWARD = """\
import sys, threading
def compute_score(solution):
    print("ready", flush=True)
    threading.Event().wait()
compute_score("x")
"""


def test_a_recorded_py_spy_dump_names_the_users_file_in_full_and_torchs_by_its_short_name(tmp_path: Path, monkeypatch):
    """py-spy's `dump --json` of a rank in torch.cuda.synchronize() on an H200: `short_filename` is the bare
    synchronize.py for the user's script and torch/cuda/__init__.py for torch's file."""
    dumps = {
        native: json.loads((GPU_DUMPS / f"synchronize.{kind}.json").read_text())
        for native, kind in ((False, "python"), (True, "native"))
    }
    monkeypatch.setattr(watchdog, "py_spy_dump", lambda pid, native=False: (dumps[native], ""))
    stack = watchdog.dump_process(dumps[False][0]["pid"], "gpu1", "ray", tmp_path)
    assert stack.blocked_call.endswith("in synchronize (torch/cuda/__init__.py:1162)")
    written = (tmp_path / stack.file).read_text()
    assert "<module> (/tmp/h/work/synchronize.py:8)" in written
    assert "(synchronize.py:8)" not in written


def test_library_frames_keep_their_short_name():
    site, stdlib = "/venv/lib/python3.11/site-packages/", "/usr/lib/python3.11/"

    def frame(filename: str, short: str) -> dict:
        return {"name": "f", "filename": filename, "short_filename": short, "line": 3}

    assert watchdog.frame_text(frame(site + "verl/trainer/ppo/ray_trainer.py", "verl/trainer/ppo/ray_trainer.py")) == (
        "f (verl/trainer/ppo/ray_trainer.py:3)"
    )
    assert watchdog.frame_text(frame(stdlib + "threading.py", "threading.py")) == "f (threading.py:3)"
    assert watchdog.frame_text(frame("/usr/lib/python3/dist-packages/ray/x.py", "ray/x.py")) == "f (ray/x.py:3)"
    assert watchdog.frame_text(frame("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap>")) == (
        "f (<frozen importlib._bootstrap>:3)"
    )
    assert watchdog.frame_text(frame("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6")) == "f (libc.so.6:3)"
    assert watchdog.frame_text(frame("/home/u/proj/rewards/stuck.py", "stuck.py")) == (
        "f (/home/u/proj/rewards/stuck.py:3)"
    )


def test_a_stuck_reward_is_found_by_the_path_the_evidence_gives(tmp_path: Path):
    """A real process stuck in its reward, read by py-spy: the caller is the reward at its full path, the blocked
    call the standard library's by its short name; the hang's fix still tells that group from a collective's."""
    reward = tmp_path / "proj" / "rewards" / "stuck.py"
    reward.parent.mkdir(parents=True)
    reward.write_text(STUCK_REWARD)
    process = subprocess.Popen([sys.executable, str(reward)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        threads, error = watchdog.py_spy_dump(process.pid)
        if threads is None:
            pytest.skip(f"py-spy cannot read a process here: {error}")
        stack = watchdog.dump_process(process.pid, "c1", "ray", tmp_path)
    finally:
        process.kill()
        process.wait()
    assert stack.caller == f"compute_score ({reward}:4)"
    assert stack.blocked_call.startswith("Condition.wait (threading.py:") or stack.blocked_call.startswith(
        "wait (threading.py:"
    )
    evidence = "c1:rank0 in all_reduce (torch/distributed/distributed_c10d.py:3252) [collective]; c1:rank1 in " + (
        f"{stack.blocked_call} from {stack.caller} [code]"
    )
    waiting, elsewhere = blocked_groups(evidence)
    assert waiting == ["c1:rank0"]
    assert elsewhere == [f"c1:rank1 in {stack.blocked_call} from compute_score ({reward}:4) [code]"]
