"""Math reward throughput on a synthetic GRPO batch, against a baseline measured in the same run.

The batch (fixed seed): 256 prompts x 16 rollouts. Per prompt, 9 rollouts give the gold answer in one of 3 written
forms (\\frac{3}{4}, 3/4, 0.75), 5 give one of 2 wrong answers, 2 give no boxed answer; every rollout has its own
reasoning text of 20-60 sentences (GRPO responses run to kilobytes). Baseline: one process calling math-verify's
`verify(parse(gold), parse(response))` per sample in a loop, no timeout wrapper. Ours: `rewards.score_batch` (the
process pool, repeated (gold, answer) pairs graded once).
Both warm up first on a different batch (imports, the pool's processes), so the numbers are steady-state GRPO steps;
the cold start is printed too. Prints the speed ratio and the verdict agreement (must be 100 %).

Usage: python bench/rewards.py [--prompts 256] [--procs 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

DENOMINATORS = (2, 4, 5, 8, 10, 16, 20, 25, 40, 50)
FILLER = (
    "Let me work through this step by step.",
    "First I set up the equation from the 2 given conditions.",
    "Substituting and simplifying the expression gives a cleaner form.",
    "I double-check the arithmetic once more.",
    "Dividing both sides by the common factor leaves the ratio.",
)
NO_ANSWER = (
    "I tried 3 approaches but could not finish the computation.",
    "The problem seems to need more information than I have.",
)


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=PROJECT, capture_output=True, text=True).stdout.strip()

    sha = git("rev-parse", "--short", "HEAD") or "unknown"
    return sha + ("+dirty" if git("status", "--porcelain", "--", "rewards", "bench") else "")


def forms(value: Fraction) -> list[str]:
    """Three ways to write a terminating fraction."""
    n, d = value.numerator, value.denominator
    return [f"\\frac{{{n}}}{{{d}}}", f"{n}/{d}", str(float(value))]


def make_batch(prompts: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    items = []
    for _ in range(prompts):
        values: set[Fraction] = set()
        while len(values) < 3:
            d = rng.choice(DENOMINATORS)
            value = Fraction(rng.randint(1, 4 * d), d)
            if value.denominator > 1:
                values.add(value)
        gold, *wrong = sorted(values, key=lambda _: rng.random())
        wrong_answers = [rng.choice(forms(value)) for value in wrong]
        finals = [rng.choice(forms(gold)) for _ in range(9)]
        finals += [rng.choice(wrong_answers) for _ in range(5)]
        finals += [None, None]
        rng.shuffle(finals)
        for final in finals:
            # GRPO responses run to thousands of characters: 20-60 sentences of reasoning (~1.5-4.5 kB)
            reasoning = " ".join(rng.choice(FILLER) for _ in range(rng.randint(20, 60)))
            tail = f" So the answer is \\boxed{{{final}}}." if final else " " + rng.choice(NO_ANSWER)
            items.append(
                {"data_source": "math__synthetic", "solution_str": reasoning + tail, "ground_truth": forms(gold)[0]}
            )
    return items


def baseline(items: list[dict]) -> list[bool]:
    from math_verify import parse, verify

    return [bool(verify(parse(item["ground_truth"]), parse(item["solution_str"]))) for item in items]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import rewards

    items = make_batch(args.prompts, args.seed)
    warmup = make_batch(4, args.seed + 1)
    print(f"rewards bench @ {commit()}: {len(items)} samples ({args.prompts} prompts x 16), procs={args.procs}")

    started = time.perf_counter()
    rewards.score_batch(warmup, procs=args.procs)
    cold = time.perf_counter() - started
    baseline(warmup)

    started = time.perf_counter()
    expected = baseline(items)
    base_s = time.perf_counter() - started

    scorer = rewards.scorer(procs=args.procs)
    before = dict(scorer.stats)
    started = time.perf_counter()
    results = rewards.score_batch(items, procs=args.procs)
    ours_s = time.perf_counter() - started
    graded = scorer.stats["graded"] - before.get("graded", 0)
    errors = scorer.stats["errors"] - before.get("errors", 0)

    agree = sum(1 for want, got in zip(expected, results, strict=True) if want == got["acc"])
    print(f"  baseline  (verify(parse(gold), parse(answer)) per sample, 1 process): {base_s:7.2f} s")
    print(f"  rewards   (score_batch, pool of {args.procs}, warm):                      {ours_s:7.2f} s")
    print(f"  pool cold start (first batch of {len(warmup)} incl. starting workers):       {cold:7.2f} s")
    print(f"  distinct tasks graded: {graded} of {len(items)}; errors: {errors}")
    print(f"  speed-up vs baseline: {base_s / ours_s:.2f}x")
    print(f"  verdict agreement: {agree}/{len(items)} = {100 * agree / len(items):.1f} %")
    if agree != len(items):
        for item, want, got in zip(items, expected, results, strict=True):
            if want != got["acc"]:
                print(f"  DISAGREE baseline={want} ours={got}: {item['solution_str'][-80:]!r}")
                print(f"  gold: {item['ground_truth']}")
                break
        sys.exit(1)


if __name__ == "__main__":
    main()
