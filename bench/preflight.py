"""Wall time of the fit table (every gpu profile x GPU count, with tuning) for one model: the preflight should feel
instant. Baseline in the same run: composing the same configurations without any preflight, so the ratio shows what
the estimator adds on top of Hydra.

Usage: python bench/preflight.py [llm=qwen2_5_7b]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))


def main() -> None:
    from hydra import compose, initialize_config_dir

    from bench.common import commit_tag
    from launch.fit_table import GPU_COUNTS, rows
    from launch.gpu import load_profiles
    from launch.schema import register_schemas

    overrides = sys.argv[1:] or ["llm=qwen2_5_7b"]
    register_schemas()
    rows(overrides, gpu_counts=(8,))  # warm-up: imports and Hydra's first composition, for both measurements
    started = time.perf_counter()
    with initialize_config_dir(config_dir=str(PROJECT / "conf"), version_base="1.3"):
        for gpu in load_profiles():
            compose("config", overrides=[f"gpu={gpu}", "cluster=local", *overrides])
    compose_only = time.perf_counter() - started
    started = time.perf_counter()
    table = rows(overrides)
    with_preflight = time.perf_counter() - started
    print(
        f"[commit {commit_tag()}] fit table {' '.join(overrides)}: {len(table)} rows "
        f"({len(load_profiles())} profiles x {len(GPU_COUNTS)} GPU counts) in {with_preflight:.2f} s; composing the "
        f"same profiles alone {compose_only:.2f} s; ratio {with_preflight / compose_only:.1f}x"
    )


if __name__ == "__main__":
    main()
