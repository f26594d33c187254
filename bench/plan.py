"""How long planning takes, as a user runs it (launch/run.py in a fresh process), side by side in one run:

- one dry run against `python -c "import torch"` (goal <= 1.5x), verl's verdict cached (launch/verl_checks.py) and
  cold (verl imported and asked);
- a 64-job dry-run sweep (4 gpu x 2 algo x 8 lr) against one dry run (goal <= 3x), cached and cold;
- the fit table (launch/fit_table.py: 11 profiles x 5 GPU counts planned and tuned) with omegaconf's interpolations
  and YAML parsed once per distinct text (launch/parse_once.py) against parsed on every use;
- with --jobs N (e.g. 1000): an N-job dry-run sweep of one shape (goal for 1000: under 60 s) over data.seed (verl's
  checks do not read it: asked once, cold; then cached) and over the lr (cold: verl asked for every job).

Every run plans into a temporary directory; each cold run has a verl-check cache of its own. Timings are medians
of --repeat runs; the machine is shared, so read the ratios and the CPU seconds beside the wall-clock ones.

Usage: python bench/plan.py [--repeat 3] [--jobs 1000]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

LRS = [f"{i}e-6" for i in range(1, 9)]
SWEEP_64 = [
    "gpu=a40,a100_40,a100_80,h100",
    "algo=guru_baseline,mtl_pcgrad",
    f"actor_rollout_ref.actor.optim.lr={','.join(LRS)}",
]


# launch/run.py imports the `launch` package found first: this checkout's, not an editable install's elsewhere (a
# second worktree sharing one venv would otherwise measure the other tree's code)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")]))}
UNCACHED_ENV = {**ENV, "RLAUNCH_PARSE_ONCE": "off"}


def timed(command: list[str], cwd: Path, env: dict[str, str] = ENV) -> tuple[float, float]:
    """Wall seconds, and CPU seconds of the process and everything it forked (a sweep plans on every core)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def rlaunch(cache: Path, *args: str) -> list[str]:
    return [sys.executable, str(PROJECT / "launch" / "run.py"), *args, f"launch.verl_check_cache={cache}"]


def median_of(repeat: int, command: list[str], cwd: Path, env: dict[str, str] = ENV) -> tuple[float, float]:
    runs = [timed(command, cwd, env) for _ in range(repeat)]
    return statistics.median(wall for wall, _ in runs), statistics.median(cpu for _, cpu in runs)


def main() -> None:
    from bench.common import commit_tag

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=0, help="also plan an N-job sweep of one shape")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rlaunch-bench-plan-") as tmp:
        work = Path(tmp)
        cache = work / "verl_checks"
        single = rlaunch(cache, "gpu=a40", "launch.dry_run=true")
        sweep = rlaunch(cache, *SWEEP_64, "launch.dry_run=json", "-m")
        load = os.getloadavg()[0]

        torch_s = median_of(args.repeat, [sys.executable, "-c", "import torch"], work)
        single_cold = timed(single, work)  # the first plan asks verl and records its verdict
        single_warm = median_of(args.repeat, single, work)
        sweep_cold = timed(rlaunch(work / "verl_checks_64", *SWEEP_64, "launch.dry_run=json", "-m"), work)
        timed(sweep, work)  # records the sweep's verdicts in the cache the cached runs read
        sweep_warm = median_of(args.repeat, sweep, work)
        fit_table = [sys.executable, str(PROJECT / "launch" / "fit_table.py"), "llm=qwen2_5_1_5b", "--json"]
        fit_cached = median_of(args.repeat, fit_table, work)
        fit_uncached = median_of(args.repeat, fit_table, work, UNCACHED_ENV)

        tag = commit_tag()
        print(f"[commit {tag}] planning, {args.repeat} runs each (medians), verl verdicts cached unless cold")
        print(f"  (cpu: seconds of CPU of the run and the processes it forked; load average {load:.2f} at the start)")
        rows = [
            ("python -c 'import torch'", torch_s, ""),
            ("one dry run", single_warm, f"{single_warm[0] / torch_s[0]:5.2f}x import torch (goal <= 1.5x)"),
            ("one dry run, cold (verl asked)", single_cold, f"{single_cold[0] / torch_s[0]:5.2f}x import torch"),
            ("64-job dry-run sweep", sweep_warm, f"{sweep_warm[0] / single_warm[0]:5.2f}x one dry run (goal <= 3x)"),
            (
                "64-job dry-run sweep, cold",
                sweep_cold,
                f"{sweep_cold[0] / single_warm[0]:5.2f}x one dry run, "
                f"{sweep_cold[0] / single_cold[0]:.2f}x one cold dry run (goal <= 3x)",
            ),
            ("fit table, parsed on every use", fit_uncached, ""),
            ("fit table", fit_cached, f"{fit_cached[1] / fit_uncached[1]:5.2f}x the CPU of parsing on every use"),
        ]
        if args.jobs:
            seeds = ",".join(str(seed) for seed in range(args.jobs))
            lrs = ",".join(f"{index + 1}e-9" for index in range(args.jobs))
            cases = [  # verl's checks read the lr (one verdict per job), not the data seed (one for the sweep)
                ("cold", work / "verl_checks_seeds", f"data.seed={seeds}"),
                ("cached", work / "verl_checks_seeds", f"data.seed={seeds}"),
                ("cold, lr: verl asked per job", work / "verl_checks_lrs", f"actor_rollout_ref.actor.optim.lr={lrs}"),
            ]
            for label, case_cache, values in cases:
                measured = timed(rlaunch(case_cache, "gpu=a40", values, "launch.dry_run=json", "-m"), work)
                per_job = (
                    f"{measured[0] / args.jobs * 1000:.0f} ms/job, {measured[0] / single_warm[0]:.1f}x one dry run"
                )
                rows.append((f"{args.jobs}-job sweep, {label}", measured, per_job + " (1000 jobs: < 60 s)"))
        for label, (seconds, cpu), ratio in rows:
            print(f"  {label:<36} {seconds:7.2f} s  cpu {cpu:7.2f} s  {ratio}")


if __name__ == "__main__":
    main()
