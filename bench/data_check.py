"""Wall time of the readiness data check (launch/readiness.py::read_file) on a GURU-size parquet file: 92k rows in
GURU's layout (chat prompt, data_source over the six domains, reward_model with long codegen ground truths), written
by this script. The check reads parquet metadata and the data_source column only; the baseline in the same run reads
the whole file with pyarrow, as a check that loads the data would. Target: under 1 s.

Usage: python bench/data_check.py [rows]
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

ROWS = 92_000
TARGET_S = 1.0
# GURU's train split by domain, roughly (math dominates; <domain>__<dataset> names: docs/facts.md#guru)
SOURCES = {
    "math__combined": 0.59,
    "codegen__leetcode2k": 0.015,
    "codegen__primeintellect": 0.08,
    "codegen__taco": 0.095,
    "logic__barc": 0.02,
    "logic__zebra_puzzle": 0.015,
    "logic__ordering_puzzle": 0.02,
    "simulation__codeio": 0.04,
    "table__hitab": 0.047,
    "table__multihier": 0.016,
    "stem__web": 0.062,
}


def write_guru_like(path: Path, rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(0)
    sources = rng.choices(list(SOURCES), weights=list(SOURCES.values()), k=rows)
    words = [f"w{index}" for index in range(5000)]
    # distinct text per row, as real prompts are: parquet's dictionary encoding and compression get no free ride

    def text(count: int) -> str:
        return " ".join(rng.choices(words, k=count))

    def tests() -> str:  # codegen ground truths are test suites: kilobytes each
        return str([[rng.randrange(10**6), rng.randrange(10**6)] for _ in range(150)])

    table = pa.table(
        {
            "data_source": sources,
            "prompt": [[{"role": "user", "content": text(150)}] for _ in range(rows)],
            "ability": [source.split("__")[0] for source in sources],
            "reward_model": [
                {"style": "rule", "ground_truth": tests() if source.startswith("codegen") else str(index)}
                for index, source in enumerate(sources)
            ],
            "extra_info": [{"split": "train", "index": index} for index in range(rows)],
        }
    )
    pq.write_table(table, path)


def main() -> None:
    import pyarrow.parquet as pq

    from bench.common import commit_tag
    from launch.readiness import read_file

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else ROWS
    columns = {"data.prompt_key": "prompt", "data.reward_fn_key": "data_source", "reward_model": "reward_model"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "guru_like.parquet"
        write_guru_like(path, rows)
        size_mb = path.stat().st_size / 1e6
        read_file("data.train_files", str(path), columns)  # warm-up: imports; the file is in the page cache for both
        started = time.perf_counter()
        checked = read_file("data.train_files", str(path), columns)
        check_s = time.perf_counter() - started
        started = time.perf_counter()
        whole = pq.read_table(path)
        whole_s = time.perf_counter() - started
    assert checked.rows == whole.num_rows == rows and not checked.problem, checked
    verdict = "under" if check_s < TARGET_S else "OVER"
    print(
        f"[commit {commit_tag()}] data check on {rows} GURU-like rows ({size_mb:.0f} MB, {len(checked.sources)} data "
        f"sources): {check_s:.3f} s ({verdict} the {TARGET_S:.0f} s target); reading the whole file with pyarrow "
        f"{whole_s:.3f} s; ratio {whole_s / check_s:.1f}x"
    )
    if check_s >= TARGET_S:
        sys.exit(1)


if __name__ == "__main__":
    main()
