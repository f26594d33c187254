"""Reward functions for GURU's six domains, behind verl's signature.

Runs in: verl's reward workers (Ray). verl loads `rewards/verl_entry.py` by path and calls `compute_score`.
The domain scorers are registered in DOMAIN_SCORERS; a data_source whose domain has no scorer is an error, never a
silent zero (the six domains are the rewards issue's work: math, codegen, logic, simulation, table, stem).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Scorer = Callable[[str, str, str, dict | None], dict[str, Any]]

# domain -> scorer; filled by the domain modules as they land
DOMAIN_SCORERS: dict[str, Scorer] = {}


def domain_of(data_source: str) -> str:
    """GURU names data sources <domain>__<dataset>; verl's own math sets are plain names."""
    if "__" in data_source:
        return data_source.split("__", 1)[0]
    if data_source in (
        "openai/gsm8k",
        "lighteval/MATH",
        "DigitalLearningGmbH/MATH-lighteval",
        "HuggingFaceH4/MATH-500",
    ):
        return "math"
    return data_source


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None
) -> dict[str, Any]:
    domain = domain_of(data_source)
    scorer = DOMAIN_SCORERS.get(domain)
    if scorer is None:
        registered = ", ".join(sorted(DOMAIN_SCORERS)) or "none yet"
        raise ValueError(f"no reward for data_source '{data_source}' (domain '{domain}'); registered: {registered}")
    return scorer(data_source, solution_str, ground_truth, extra_info)
