"""The fit table: python launch/fit_table.py [llm=...] [algo=...] [any override] [--json]

Runs on: the login node (or anywhere: no GPU, no cluster needed). For one model and algorithm, every gpu profile x
GPU count with the predicted per-phase peaks (worst case; typical lengths in the JSON), the verdict, the cheapest
fix of a misfit and what tune would set for a row that fits: docs/background.md's hand-made A40/A100 tables,
computed. The cheapest fix is the one the preflight's refusal names (Verdict.cheapest_fix: its own search, in the
order verdict.CHEAPEST states, which the table's title repeats).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from launch import preflight
from launch.errors import UserError, exit_with_message
from launch.facts import Facts, package_versions
from launch.gpu import load_profiles
from launch.overrides import as_overrides, find
from launch.plan import make_plan
from launch.ranges import check_ranges
from launch.render import beyond_the_search
from launch.schema import PROJECT_DIR, register_schemas
from launch.verdict import CHEAPEST

GPU_COUNTS = (1, 2, 4, 8, 16)


def rows(overrides: list[str], gpu_counts: tuple[int, ...] = GPU_COUNTS) -> list[dict[str, Any]]:
    register_schemas()
    facts = Facts(packages=package_versions())
    table = []
    with initialize_config_dir(config_dir=str(PROJECT_DIR / "conf"), version_base="1.3"):
        for gpu in sorted(load_profiles()):
            cfg = compose("config", overrides=[f"gpu={gpu}", "cluster=local", "launch.preflight=tune", *overrides])
            check_ranges(cfg)  # as run.py: a mistyped number is one line, before any arithmetic reads it
            for count in gpu_counts:
                with open_dict(cfg):
                    cfg.trainer.n_gpus_per_node = min(count, 8)
                    cfg.trainer.nnodes = max(1, count // 8)
                plan = make_plan(cfg, facts, overrides, working_dir=Path("/tmp"), python=sys.executable)
                verdict, tuned = preflight.judge(cfg, plan.verl, plan.llm, plan.overrides, facts.packages)
                cheapest = " ".join(verdict.cheapest_fix) or beyond_the_search(verdict)
                table.append(
                    {
                        "gpu": gpu,
                        "gpus": count,
                        "fits": verdict.fits,
                        "too_close": list(verdict.at_the_edge),  # phases within the estimate's band of the card
                        "peaks_gib": verdict.peaks_gib,
                        "typical_peaks_gib": verdict.typical.peaks_gib if verdict.typical is not None else {},
                        "capacity_gib": float(cfg.gpu.usable_gib),
                        # a row that fits needs no fix; one that does not names the set, or says none is enough
                        "cheapest_fix": None if verdict.fits else cheapest,
                        "tuned": as_overrides(tuned),
                        "predicted_mfu": verdict.predicted.mfu,
                    }
                )
    return table


def print_table(table: list[dict[str, Any]], title: str) -> None:
    """Every override in full, one per line in its cell; piped, the table is as wide as its content (rich would
    otherwise cut it to 80 columns)."""
    from rich.console import Console
    from rich.table import Table

    view = Table(title=title)
    for column in ("gpu", "GPUs", "training", "log-prob", "rollout", "capacity", "verdict"):
        view.add_column(column, no_wrap=True)
    view.add_column("cheapest fix (misfit) / tuned (fits)", overflow="fold")
    for row in table:
        peaks = row["peaks_gib"]  # algo=rft has no log-prob pass: "-"
        verdict = "[green]fits[/green]" if row["fits"] else "[red]OOM[/red]"
        verdict += " [yellow](too close)[/yellow]" if row["too_close"] else ""
        advice = row["tuned"] if row["fits"] else (row["cheapest_fix"] or "").split()
        view.add_row(
            row["gpu"],
            str(row["gpus"]),
            *(f"{peaks[phase]:.1f}" if phase in peaks else "-" for phase in ("training", "log-prob", "rollout")),
            f"{row['capacity_gib']:.1f}",
            verdict,
            "\n".join(advice),
        )
    Console(width=None if sys.stdout.isatty() else 100_000).print(view)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="fit_table.py", description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. llm=qwen2_5_1_5b algo=mtl_pcgrad")
    parser.add_argument("--json", action="store_true", help="one JSON array on stdout")
    args = parser.parse_args(argv)
    try:
        if find(args.overrides, "gpu") is not None:  # each row is its own profile: a gpu= would relabel them all
            raise UserError("fit_table.py plans every gpu profile in its rows: drop gpu=... (run.py plans one)")
        table = rows(args.overrides)
    except Exception as error:  # bad input: one line, exit 2 (a bug keeps its traceback)
        exit_with_message(error)
    if args.json:
        print(json.dumps(table))
    else:
        title = f"predicted per-GPU peak GiB; {' '.join(args.overrides) or 'defaults'}; cheapest: {CHEAPEST}"
        print_table(table, title)


if __name__ == "__main__":
    main()
