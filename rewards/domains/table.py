"""table (HiTab, MultiHiertt): a boxed answer after the thinking; numbers within a tolerance, `a|b|c` as a set.

Runs in: `prepare` in the scorer (verl's reward worker); `grade` in a pool worker.

Numbers: thousands separators, $ and % are ignored; equal within a relative 1e-4, or when the answer rounded to
the ground truth's decimals (when it shows any) is the ground truth (33.33 for 33.3). Text: case, spaces, \\text{}
and a final full stop are ignored. `a|b|c`: every part must be matched by a distinct part of the answer, in any
order; `passed` is the fraction of the ground truth's parts matched. Numbers are read with float(), never eval().
"""

from __future__ import annotations

import math
import re
from typing import Any

from rewards import extract
from rewards.result import judged
from rewards.settings import RewardSettings
from rewards.task import Task, text_of

TEXT_COMMAND = re.compile(r"\\(?:text|mathrm|textbf)\{([^{}]*)\}")
NOISE = ("$", "\\$", "\\%", "%", ",", "\\,", "\\!")


def prepare(data_source: str, solution: str, ground_truth: Any, extra_info: dict, settings: RewardSettings) -> Task:
    answer = extract.final_answer(solution)
    if answer is None:
        return Task.done(judged(0.0))
    return Task.pool("rewards.domains.table:grade", (answer, text_of(ground_truth)), settings.timeout_s)


def _text(value: str) -> str:
    value = TEXT_COMMAND.sub(r"\1", value)
    return " ".join(value.strip().strip("'\"").rstrip(".").split()).lower()


def _number(value: str) -> tuple[float, int] | None:
    """(value, decimals written) or None."""
    text = _text(value)
    for noise in NOISE:
        text = text.replace(noise, "")
    text = text.strip()
    try:
        number = float(text)
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return number, decimals


def same(answer: str, truth: str) -> bool:
    a, t = _number(answer), _number(truth)
    if a is not None and t is not None:
        (x, _), (y, decimals) = a, t
        # rounding only toward a ground truth that shows decimals: 33.33 for 33.3, but never 33.4 for 33
        return math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-9) or (decimals > 0 and round(x, decimals) == y)
    return _text(answer) == _text(truth)


def grade(answer: str, truth: str) -> dict[str, Any]:
    if "|" not in truth:
        return judged(1.0 if same(answer, truth) else 0.0)
    parts = [p for p in truth.split("|") if p.strip()]
    guesses = [g for g in answer.split("|") if g.strip()]
    matched = 0
    for part in parts:
        hit = next((i for i, guess in enumerate(guesses) if same(guess, part)), None)
        if hit is not None:
            guesses.pop(hit)
            matched += 1
    right = matched == len(parts) and not guesses
    return judged(1.0 if right else 0.0, passed=matched / len(parts) if parts else 0.0)
