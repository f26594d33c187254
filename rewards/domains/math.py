"""math: the final answer (rewards/extract.py) against the ground truth with math-verify, gold first.

Runs in: `prepare` in the scorer (verl's reward worker): extraction only, so that repeated (gold, answer) pairs —
common with 16 rollouts a prompt — are graded once; `grade` in a pool worker's main thread, where math-verify's
SIGALRM timeouts work. Any math-verify exception or timeout is an error (reported and counted), never a wrong answer:
an answer is wrong only when every comparison finished and none matched.

One shortcut before math-verify: when gold and answer are both plain numerals (`12`, `-0.75`, `3/4`, `\\frac{3}{4}`)
with the same exact rational value, the answer is right — math-verify agrees, and parsing LaTeX is most of its cost.
Anything else, unequal numerals included (math-verify rounds: 0.333333 can equal 1/3), goes to math-verify.
"""

from __future__ import annotations

import re
from fractions import Fraction
from itertools import product
from typing import Any

from rewards import extract
from rewards.result import judged, unjudged
from rewards.settings import RewardSettings
from rewards.task import Task, text_of

# longer numerals go to math-verify (int() refuses over 4300 digits, and they are no fast path anyway)
MAX_NUMERAL = 100
DECIMAL = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)")
SLASH = re.compile(r"(-?)(\d+)/(\d+)")
FRACTION = re.compile(r"(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}")


def gold_text(ground_truth: Any) -> str:
    """GURU and verl store the bare answer (`\\frac{1}{2}`, `72`); some sets keep it boxed or in $...$."""
    gold = text_of(ground_truth).strip()
    boxed = extract.last_boxed(gold)
    if boxed is not None:
        gold = boxed
    return gold.strip().strip("$").strip()


def prepare(data_source: str, solution: str, ground_truth: Any, extra_info: dict, settings: RewardSettings) -> Task:
    gold = gold_text(ground_truth)
    if not gold:
        return Task.done(unjudged("empty ground truth"))
    hashes = "gsm8k" in data_source.lower()  # openai/gsm8k and GURU-style math__gsm8k
    answer = extract.final_answer(solution, hashes=hashes)
    if answer is None:
        return Task.done(judged(0.0))
    return Task.pool("rewards.domains.math:grade", (gold, answer, settings.math_verify_timeout_s), settings.timeout_s)


def exact_value(text: str) -> Fraction | None:
    """The exact value of a plain numeral, or None."""
    text = text.strip()
    if len(text) > MAX_NUMERAL:
        return None
    if match := FRACTION.fullmatch(text) or SLASH.fullmatch(text):
        sign, numerator, denominator = match.groups()
        if int(denominator) == 0:
            return None
        return Fraction(int(numerator), int(denominator)) * (-1 if sign else 1)
    if DECIMAL.fullmatch(text):
        return Fraction(text)
    return None


def _latex(expression: str) -> str:
    # math-verify finds bare LaTeX only between delimiters; "$...$" parses `\frac12`, `(1,2]`, `10\%` alike
    return f"${expression.strip().strip('$')}$"


def _parse(text: str, what: str, timeout_s: int) -> tuple[list, str]:
    """math-verify's parse, with a timeout or an internal error reported as such (never as a wrong answer)."""
    from math_verify import parse
    from math_verify.errors import TimeoutException

    try:
        return parse(_latex(text), parsing_timeout=timeout_s, raise_on_error=True), ""
    except TimeoutException:
        return [], f"timeout: math-verify parsing {what}"
    except Exception as exc:
        return [], f"math-verify error on {what}: {type(exc).__name__}: {exc}"[:300]


def grade(gold: str, answer: str, verify_timeout_s: int) -> dict[str, Any]:
    expected = exact_value(gold)
    if expected is not None and exact_value(answer) == expected:
        return judged(1.0)
    from math_verify import verify
    from math_verify.errors import TimeoutException

    gold_parsed, error = _parse(gold, "the ground truth", verify_timeout_s)
    if error:
        return unjudged(error)
    if not gold_parsed:
        return unjudged(f"ground truth not parseable by math-verify: {gold[:100]!r}")
    answer_parsed, error = _parse(answer, "the answer", verify_timeout_s)
    if error:
        return unjudged(error)
    if not answer_parsed:
        return judged(0.0)
    failures: list[str] = []
    # verify() stops at the first exception when raising: one pair at a time keeps the other pairs' verdicts
    for g, a in product(gold_parsed, answer_parsed):
        try:
            if verify(g, a, timeout_seconds=verify_timeout_s, raise_on_error=True):
                return judged(1.0)
        except TimeoutException:
            failures.append("timeout")
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
    if failures:
        return unjudged(f"math-verify could not compare: {'; '.join(failures)}"[:300])
    return judged(0.0)


def warmup() -> None:
    """Imports and first-call caches, so a fresh worker's first real item is not slower than the rest."""
    grade("\\frac{1}{2}", "0.5", 5)
