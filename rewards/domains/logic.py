"""logic: GURU's puzzles, each answered inside <answer>...</answer> after the thinking.

Runs in: `prepare` in the scorer (verl's reward worker); `grade` in a pool worker.

- zebra puzzles: the solution table {"header": [...], "rows": [[...], ...]}; score = the fraction of correct cells
  (GURU's reward), acc = every cell right
- ordering puzzles: the list of names in order; right or wrong
- graph questions: one short answer (a node, a word or a number); right or wrong
- ARC grids (arcagi1/2, barc): the output grid, exact match; `passed` = the fraction of equal cells when the shapes
  agree
"""

from __future__ import annotations

import math
from typing import Any

from rewards import extract
from rewards.domains import structured
from rewards.result import judged, unjudged
from rewards.settings import RewardSettings
from rewards.task import Task, canonical

# dataset-name fragment -> puzzle kind
KINDS = {"zebra": "zebra", "ordering": "ordering", "graph": "graph", "arcagi": "arc", "barc": "arc"}


def kind(data_source: str) -> str | None:
    """The puzzle kind a data_source's dataset name says, or None where it says none."""
    dataset = data_source.split("__", 1)[-1].lower()
    return next((kind for fragment, kind in KINDS.items() if fragment in dataset), None)


def refusal(data_source: str) -> str | None:
    """Why this domain cannot score a data_source, or None where it can: asked by the scorer at each reward and by
    the readiness check of the data before the queue (launch/readiness.py), so both refuse the same names."""
    if kind(data_source) is not None:
        return None
    return (
        f"no logic reward for data_source '{data_source}': the dataset name must contain one of "
        f"{', '.join(KINDS)} (GURU: zebra_puzzle, ordering_puzzle, graph_logical, arcagi1, arcagi2, barc)"
    )


def kind_of(data_source: str) -> str:
    found = kind(data_source)
    if found is None:
        raise ValueError(refusal(data_source))
    return found


def prepare(data_source: str, solution: str, ground_truth: Any, extra_info: dict, settings: RewardSettings) -> Task:
    kind = kind_of(data_source)
    answer = extract.tagged(solution, "answer")
    if answer is None:
        return Task.done(judged(0.0))
    return Task.pool("rewards.domains.logic:grade", (kind, answer, canonical(ground_truth)), settings.timeout_s)


def grade(kind: str, answer: str, truth_text: str) -> dict[str, Any]:
    truth = structured.ground_truth(truth_text)
    if kind == "zebra":
        return _zebra(answer, truth)
    if kind == "ordering":
        return _ordering(answer, truth)
    if kind == "graph":
        return _short(answer, truth)
    if kind == "arc":
        return _grid(answer, truth)
    return unjudged(f"unknown logic kind {kind!r}")


def _zebra(answer: str, truth: Any) -> dict[str, Any]:
    if not isinstance(truth, dict) or not isinstance(truth.get("rows"), list):
        return unjudged("zebra ground truth has no 'rows' table")
    rows = truth["rows"]
    cells = sum(len(row) for row in rows)
    if cells == 0:
        return unjudged("zebra ground truth has an empty table")
    predicted = structured.load(answer)
    predicted_rows = predicted.get("rows") if isinstance(predicted, dict) else None
    if not isinstance(predicted_rows, list):
        return judged(0.0, acc=False, passed=0.0)
    right = 0
    for i, row in enumerate(rows):
        guess = predicted_rows[i] if i < len(predicted_rows) and isinstance(predicted_rows[i], list) else []
        right += sum(1 for j, value in enumerate(row) if j < len(guess) and _same_cell(guess[j], value))
    fraction = right / cells
    return judged(fraction, acc=right == cells, passed=fraction)


def _same_cell(guess: Any, value: Any) -> bool:
    return structured.cell(guess) == structured.cell(value)


def _names(answer: str) -> list[str] | None:
    parsed = structured.load(answer)
    if isinstance(parsed, list | tuple):
        return [structured.cell(x) for x in parsed]
    # `[robin, owl, hawk]` or `robin, owl, hawk`: names without quotes
    inner = answer.strip()
    if inner.startswith("[") and inner.endswith("]"):
        inner = inner[1:-1]
    names = [structured.cell(x) for x in inner.split(",")]
    return names if all(names) else None


def _ordering(answer: str, truth: Any) -> dict[str, Any]:
    if not isinstance(truth, list):
        return unjudged("ordering ground truth is not a list")
    expected = [structured.cell(x) for x in truth]
    predicted = _names(answer)
    if predicted is None:
        return judged(0.0)
    same = sum(1 for a, b in zip(predicted, expected, strict=False) if a == b)
    right = predicted == expected
    return judged(1.0 if right else 0.0, passed=same / len(expected) if expected else 0.0)


def _number(text: str) -> float | None:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _short(answer: str, truth: Any) -> dict[str, Any]:
    expected = structured.cell(truth if not isinstance(truth, list) or len(truth) != 1 else truth[0]).rstrip(".")
    predicted = structured.cell(answer).rstrip(".")
    a, b = _number(predicted), _number(expected)
    right = math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) if a is not None and b is not None else predicted == expected
    return judged(1.0 if right else 0.0)


def _grid_of(value: Any) -> list[list[Any]] | None:
    if isinstance(value, list | tuple) and value and all(isinstance(row, list | tuple) for row in value):
        return [list(row) for row in value]
    return None


def _grid(answer: str, truth: Any) -> dict[str, Any]:
    expected = _grid_of(truth)
    if expected is None:
        return unjudged("ARC ground truth is not a grid (a list of rows)")
    start, end = answer.find("[["), answer.rfind("]]")
    predicted = _grid_of(structured.load(answer[start : end + 2])) if 0 <= start < end else None
    if predicted is None:
        return judged(0.0)
    same_shape = len(predicted) == len(expected) and all(
        len(p) == len(e) for p, e in zip(predicted, expected, strict=True)
    )
    if not same_shape:
        return judged(0.0, passed=0.0)
    cells = sum(len(row) for row in expected)
    equal = sum(1 for p, e in zip(predicted, expected, strict=True) for a, b in zip(p, e, strict=True) if a == b)
    return judged(1.0 if equal == cells else 0.0, passed=equal / cells if cells else 0.0)
