"""The one shape of a reward, for every domain: verl aggregates the extra keys across a batch, so they never vary.

Runs in: everywhere rewards/ runs (graders in the pool's worker processes, the scorer in verl's reward worker).

- score:   the reward (float)
- acc:     the answer is right (bool)
- passed:  the fraction that was right — tests of a program, cells of a grid, parts of a set answer — 1.0 or 0.0
           where an answer is simply right or wrong
- error:   "" when judged; otherwise why the sample could NOT be judged (timeout, crash, sandbox or judge
           unavailable). Then score is 0.0 and `errored` is 1.0, so the batch mean of `errored` is the error rate.
- errored: 1.0 or 0.0 (a float so verl's metrics average it)
A wrong or missing answer is judged (score 0.0, error ""); an error is never silently a wrong answer.
"""

from __future__ import annotations

from typing import Any

RESULT_KEYS = ("score", "acc", "passed", "error", "errored")


def judged(score: float, *, acc: bool | None = None, passed: float | None = None) -> dict[str, Any]:
    score = float(score)
    right = score >= 1.0 if acc is None else bool(acc)
    return {
        "score": score,
        "acc": right,
        "passed": float(score if passed is None else passed),
        "error": "",
        "errored": 0.0,
    }


def unjudged(error: str) -> dict[str, Any]:
    return {"score": 0.0, "acc": False, "passed": 0.0, "error": error or "unknown error", "errored": 1.0}
