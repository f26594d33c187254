"""Real failures on a real GPU, and what the doctor names for each: torch's and NCCL's own words on today's stack.

Runs on: a bare CUDA machine with torch (one GPU is enough); launch/ needs hydra-core and omegaconf importable.

    python bench/gpu_failures.py --out DIR        # on the GPU node; ~1 minute

Each case runs in a process of its own and fails as a job would; its output is the log the doctor reads. The kind
each case should get is written here before the run, from what the failure is, not from what the classifier says.

Not yet run on a GPU: written on 2026-11-28 after bench/gpu_hang.py's two runs on the lent H200, when the device was
not lent again. Its first run on a card is its first measurement; record it in bench/results/gpu_failures_<card>.txt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import gpu_output_dir  # noqa: E402
from launch.report.failures import classify  # noqa: E402

# the kind, then the program; RANK/WORLD_SIZE/MASTER_* are set for the two-rank cases
CASES: dict[str, tuple[str, str]] = {
    # a training step's activations filling the card, 8 GiB at a time, as a too-large micro-batch does
    "oom_growing": (
        "cuda_oom",
        "import torch\nheld = []\nwhile True:\n"
        "    held.append(torch.empty(8 * 2**30, dtype=torch.uint8, device='cuda'))\n",
    ),
    # two ranks on a node with one GPU: both take cuda:0, as a job whose n_gpus_per_node exceeds the node's GPUs
    "two_ranks_one_gpu": (
        "gpu_unavailable",
        "import os, torch, torch.distributed as dist\n"
        "torch.cuda.set_device(0)\n"
        "dist.init_process_group('nccl')\n"
        "x = torch.ones(1, device='cuda')\n"
        "dist.all_reduce(x)\n"
        "torch.cuda.synchronize()\n"
        "print('all_reduce done', x.item())\n",
    ),
    # a rank asking for a GPU the node does not have
    "device_ordinal": ("gpu_unavailable", "import torch\ntorch.cuda.set_device(7)\ntorch.ones(1, device='cuda')\n"),
    # token ids past the embedding (a tokenizer that does not match the model): the log does not say which
    "device_assert": (
        "unknown",
        "import torch\nemb = torch.nn.Embedding(100, 8).cuda()\nids = torch.tensor([5, 500], device='cuda')\n"
        "print(emb(ids).sum().item())\n",
    ),
}


def run_case(name: str, program: str, out: Path) -> str:
    script = out / f"{name}.py"
    script.write_text(program)
    ranks = 2 if name == "two_ranks_one_gpu" else 1
    environment = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533", "WORLD_SIZE": str(ranks)}
    processes = [
        subprocess.Popen(
            [sys.executable, str(script)],
            env={**environment, "RANK": str(rank), "LOCAL_RANK": str(rank), "NCCL_DEBUG": "WARN"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(ranks)
    ]
    logs = []
    for process in processes:
        try:
            output, _ = process.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            process.kill()
            output = process.communicate()[0] + "\n(killed after 180 s)\n"
        logs.append(output + f"(exit {process.returncode})\n")
    log = "".join(logs)
    (out / f"{name}.log").write_text(log)
    return log


def main() -> None:
    out = gpu_output_dir(Path(__file__).name, __doc__.splitlines()[0])
    if out is None:
        return
    results = {}
    for name, (expected, program) in CASES.items():
        failure = classify(run_case(name, program, out))
        results[name] = {"expected": expected, "named": failure.label, "fix": failure.fix, "evidence": failure.evidence}
        mark = "right" if failure.kind == expected else "WRONG"
        print(f"{name:<18} expected {expected:<16} named {failure.label:<16} {mark}")
        print(f"    evidence: {' | '.join(failure.evidence)[:300]}")
        print(f"    fix: {failure.fix[:300]}")
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    right = sum(result["named"].rstrip("?") == result["expected"] for result in results.values())
    print(f"{right}/{len(results)} named as expected")


if __name__ == "__main__":
    main()
