"""Measure training-step peaks of tiny HF Qwen2 models on CPU (tests/memory_measure.py) over a grid of shapes and
store them in tests/data/memory_measurements.json, the data the estimator's coefficients (launch/memory.py) were fit
on and are tested against (a fit subset and a held-out subset). Re-run after changing the measurement or the model
family; it takes a few minutes on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT / "tests"))

from memory_measure import Shape, measure_train_step  # noqa: E402

# (layers, hidden, heads, kv_heads, intermediate, vocab, batch, seq, checkpointing); "fit" rows set the
# coefficients, "held_out" rows only test them.
GRID = {
    "fit": [
        Shape(4, 256, 4, 2, 704, 32000, 2, 512, True),
        Shape(4, 256, 4, 2, 704, 32000, 2, 512, False),
        Shape(2, 512, 8, 2, 1408, 16000, 2, 512, False),
        Shape(8, 256, 4, 2, 704, 8000, 4, 512, False),
        Shape(8, 256, 4, 2, 704, 8000, 4, 512, True),
        Shape(2, 128, 4, 2, 352, 32000, 4, 512, True),
    ],
    "held_out": [
        Shape(6, 384, 6, 2, 1024, 24000, 2, 768, True),
        Shape(6, 384, 6, 2, 1024, 24000, 2, 768, False),
        Shape(3, 256, 4, 2, 704, 48000, 1, 1024, True),
        Shape(4, 512, 8, 4, 1408, 12000, 2, 512, False),
    ],
}


def main() -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT, capture_output=True, text=True)
    rows = []
    for split, shapes in GRID.items():
        for shape in shapes:
            started = time.perf_counter()
            peak = measure_train_step(shape)
            rows.append({"split": split, "shape": shape.to_dict(), "peak": peak})
            print(f"{split:8} {shape} total {peak['total'] / 2**20:8.1f} MiB ({time.perf_counter() - started:.1f} s)")
    out = PROJECT / "tests" / "data" / "memory_measurements.json"
    out.write_text(json.dumps({"commit": commit.stdout.strip(), "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
