"""What the hang watchdog sees on a real GPU: processes blocked on the device, dumped as a hung job's are.

Runs on: a bare CUDA machine with torch (no verl, no Ray); launch/ needs hydra-core and omegaconf importable and
py-spy on PATH or beside the interpreter.

    python bench/gpu_hang.py --out DIR        # on the GPU node; ~1 minute

A hung collective on a GPU rarely blocks the Python thread inside the collective call: NCCL enqueues its kernel and
returns, and the thread blocks at the next point that waits for the device (`.item()`, `torch.cuda.synchronize()`,
a copy to the host). Each child here launches a kernel that does not end within the run (torch.cuda._sleep), then
makes one such call, as a rank whose collective never completes would. A child in a pure-Python loop is the control
(busy in code). The watchdog's own `dump_node` then dumps them all, `judge` gives its verdict, and each child is also
dumped raw by py-spy, with and without native frames, timed: what a stack of a rank waiting on its GPU looks like.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import gpu_output_dir  # noqa: E402
from launch.gpu import choose_profile, detect_gpus, load_profiles  # noqa: E402
from launch.report.failures import classify  # noqa: E402
from launch.watchdog import dump_node, judge, py_spy_dump  # noqa: E402

KERNEL_CYCLES = 4 * 10**12  # ~30 min of clock64 cycles at 2 GHz: longer than the run, killed with its process
PRELUDE = """
import sys, time, torch
from pathlib import Path
def ready():
    Path(sys.argv[1]).touch()
x = torch.ones(1024, device="cuda")
torch.cuda.synchronize()
"""
BLOCKERS = {
    "item": f"torch.cuda._sleep({KERNEL_CYCLES}); ready(); total = x.sum().item()",
    "synchronize": f"torch.cuda._sleep({KERNEL_CYCLES}); ready(); torch.cuda.synchronize()",
    "to_host": f"torch.cuda._sleep({KERNEL_CYCLES}); ready(); host = x.cpu()",
    "python_loop": "ready()\nwhile True:\n    pass",
}


def start_children(work: Path) -> dict[str, subprocess.Popen]:
    children = {}
    for rank, (name, block) in enumerate(BLOCKERS.items()):
        script = work / f"{name}.py"
        script.write_text(PRELUDE + block + "\n")
        environment = {**os.environ, "RANK": str(rank)}
        children[name] = subprocess.Popen([sys.executable, str(script), str(work / f"{name}.ready")], env=environment)
    return children


def wait_ready(work: Path, children: dict[str, subprocess.Popen], timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not all((work / f"{name}.ready").exists() for name in children):
        dead = {name: child.returncode for name, child in children.items() if child.poll() is not None}
        if dead or time.monotonic() > deadline:
            raise SystemExit(f"children not ready: exited {dead}, or {timeout_s:.0f} s passed")
        time.sleep(0.1)


def raw_dumps(children: dict[str, subprocess.Popen], out: Path) -> dict[str, dict]:
    """Each child dumped as the watchdog dumps it, with and without native frames, timed."""
    timings = {}
    for name, child in children.items():
        for native in (False, True):
            started = time.monotonic()
            threads, error = py_spy_dump(child.pid, native=native)
            took = time.monotonic() - started
            kind = "native" if native else "python"
            (out / f"raw-{name}-{kind}.json").write_text(json.dumps(threads, indent=1) if threads else error)
            timings[f"{name}-{kind}"] = {"s": round(took, 2), "rc": 0 if threads is not None else 1, "error": error}
    return timings


def cuda_oom(out: Path) -> dict:
    """torch's own out-of-memory on this card, as a job's log would hold it, and what the doctor names."""
    result = subprocess.run(
        [sys.executable, "-c", "import torch; torch.empty(2**45, dtype=torch.uint8, device='cuda')"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    (out / "cuda_oom.log").write_text(result.stderr)
    failure = classify(result.stderr)
    return {"rc": result.returncode, "kind": failure.kind, "fix": failure.fix, "evidence": failure.evidence}


def main() -> None:
    out = gpu_output_dir(Path(__file__).name, __doc__.splitlines()[0])
    if out is None:
        return
    gpus = detect_gpus()
    choice = choose_profile(gpus, load_profiles())
    report: dict = {"gpus": asdict(gpus), "profile": f"gpu=auto picks {choice.profile}: {choice.reason}"}
    work = out / "work"
    work.mkdir(exist_ok=True)
    children = start_children(work)
    try:
        wait_ready(work, children)
        stacks_dir = out / "stacks"
        started = time.monotonic()
        stacks = dump_node("gpu-node", {"driver": os.getpid()}, stacks_dir)
        report["dump_node_s"] = round(time.monotonic() - started, 2)
        report["stacks"] = [asdict(stack) for stack in stacks]
        report["verdict"] = asdict(judge(stacks, [], None))
        report["raw"] = raw_dumps(children, out)
    finally:
        for child in children.values():
            child.kill()
    shutil.rmtree(work)
    report["cuda_oom"] = cuda_oom(out)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(summary(report, stacks_dir))


def summary(report: dict, stacks_dir: Path) -> str:
    """What bench/results/gpu_hang_<card>.txt records."""
    lines = [
        report["profile"],
        f"dump_node: {len(report['stacks'])} processes in {report['dump_node_s']} s",
    ]
    for stack in report["stacks"]:
        lines.append(f"  rank {stack['rank']}  {stack['state']:<5} {stack['blocked_call']}")
    verdict = report["verdict"]
    lines.append(f"verdict: transient={verdict['transient']}  {verdict['evidence']}")
    lines.append("py-spy alone, per process:")
    for name, raw in report["raw"].items():
        lines.append(f"  {name:<20} {raw['s']:5.2f} s  rc {raw['rc']}")
    smi = next(stacks_dir.glob("*nvidia-smi.txt"), None)
    lines += ["nvidia-smi as the watchdog records it:", *(smi.read_text().splitlines() if smi else ["(none)"])]
    oom = report["cuda_oom"]
    lines += [f"torch's own OOM on this card: doctor names {oom['kind']}: {oom['fix']}"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
