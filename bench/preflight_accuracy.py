"""How often the preflight's verdict matches public reports of verl runs that fit or ran out of memory.

Runs on: any machine (no GPU, no cluster). Plans each case of tests/data/public_cases.yaml as reported (rlaunch's
config tree with the case's overrides, the job's flash-attn as the case says, launch.preflight=warn so that memory is
judged here and not refused by the checks), runs rlaunch's own checks first (a case they refuse is never queued: right
only if it did not fit) and compares the memory with the reported outcome: the typical line where the case states its
data's lengths as a user does (launch.expect.prompt_tokens / .response_tokens), else the worst-case verdict. Baseline
in the same run: the same cases judged by the pure-torch log-prob coefficients of the planning machine (flash-attn
not taken from the job), the mistake the old preflight made.

Usage: python bench/preflight_accuracy.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))
CASES_FILE = PROJECT / "tests" / "data" / "public_cases.yaml"


def load_cases() -> list[dict[str, Any]]:
    data = yaml.safe_load(CASES_FILE.read_text())
    defaults = data.get("defaults", {})
    return [case | {"overrides": [*defaults.get(case.get("with"), []), *case["overrides"]]} for case in data["cases"]]


def plan_case(case: dict[str, Any], flash_attn: bool | None = None) -> tuple[Any, Any]:
    """The case's composed config and plan, as reported (flash_attn overrides the case's own, for the baseline)."""
    from hydra import compose, initialize_config_dir

    from launch.facts import Facts
    from launch.plan import make_plan
    from launch.schema import register_schemas

    register_schemas()
    flash = case["flash_attn"] if flash_attn is None else flash_attn
    overrides = [
        *case["overrides"],
        f"cluster.flash_attn={str(flash).lower()}",
        "cluster.engine_version=auto",
        "launch.preflight=warn",
    ]
    with initialize_config_dir(config_dir=str(PROJECT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["cluster=local", "launch.sweep_id=public-cases", *overrides])
    return cfg, make_plan(cfg, Facts(), overrides, working_dir=Path("/tmp"), python=sys.executable)


def evaluate(case: dict[str, Any], flash_attn: bool | None = None) -> dict[str, Any]:
    """The case planned as reported (flash_attn overrides the case's own, for the baseline)."""
    from launch import preflight
    from launch.errors import UserError
    from launch.facts import Facts
    from launch.validate import validate

    cfg, plan = plan_case(case, flash_attn)
    reported = {
        "name": case["name"],
        "source": case["source"],
        "reported": case["outcome"],
        "judged": "typical" if stated_lengths(case) else "worst case",
        "capacity_gib": float(cfg.gpu.usable_gib),
    }
    try:  # what rlaunch checks before the preflight: a case it refuses there is never judged by memory at all
        validate(cfg, plan, Facts())
    except UserError as error:  # never queued: right only for a run that did not fit
        refusal = {"refused": str(error).splitlines()[0], "peaks_gib": {}}
        return reported | {"predicted": "refused", "right": case["outcome"] == "oom"} | refusal
    verdict = preflight.check_plan(cfg, plan, {})
    judged = verdict.typical if stated_lengths(case) and verdict.typical is not None else verdict
    predicted = "fit" if judged.fits else "oom"
    return reported | {
        "predicted": predicted,
        "right": predicted == case["outcome"],
        "peaks_gib": judged.peaks_gib,
        **({"reported_peak_gib": case["peak_gib"]} if "peak_gib" in case else {}),
    }


def stated_lengths(case: dict[str, Any]) -> bool:
    """Whether the case states its data's lengths (launch.expect.*), as a user who knows them does."""
    return any(override.startswith("launch.expect.") for override in case["overrides"])


def accuracy(results: list[dict[str, Any]]) -> float:
    return sum(result["right"] for result in results) / len(results)


def main() -> None:
    parser = argparse.ArgumentParser(prog="preflight_accuracy.py", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from bench.common import commit_tag

    cases = load_cases()
    results = [evaluate(case) for case in cases]
    baseline = [evaluate(case, flash_attn=False) for case in cases]
    if args.json:
        print(json.dumps({"results": results, "accuracy": accuracy(results), "baseline": accuracy(baseline)}))
        return
    for result in results:
        mark = "right" if result["right"] else "WRONG"
        if "refused" in result:
            print(f"{mark:5}  reported {result['reported']:3}  refused: {result['refused']}  {result['name']}")
            continue
        peak = max(result["peaks_gib"].values())
        print(
            f"{mark:5}  reported {result['reported']:3}  predicted {result['predicted']:3}  "
            f"peak {peak:5.1f} / {result['capacity_gib']:.1f} GiB  {result['name']}"
        )
    print(
        f"[commit {commit_tag()}] public cases: {sum(r['right'] for r in results)}/{len(results)} right "
        f"({accuracy(results):.0%}); baseline without the job's flash-attn: {accuracy(baseline):.0%}"
    )


if __name__ == "__main__":
    main()
