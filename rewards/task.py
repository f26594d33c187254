"""What a domain's `prepare` hands the scorer: a result decided on the spot, or a grading task for the process pool
or the stem judge. Tasks are plain, picklable and hashable: equal tasks are graded once.

Runs in: verl's reward worker (the scorer) and the pool's worker processes (which receive the arguments).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Task:
    where: Literal["done", "pool", "judge"]
    result: dict[str, Any] | None = None
    grader: str = ""  # "module:function", run in a pool worker
    args: tuple = ()
    timeout_s: float = 0.0

    @classmethod
    def done(cls, result: dict[str, Any]) -> Task:
        return cls("done", result=result)

    @classmethod
    def pool(cls, grader: str, args: tuple, timeout_s: float) -> Task:
        return cls("pool", grader=grader, args=args, timeout_s=timeout_s)

    @classmethod
    def judge(cls, args: tuple) -> Task:
        return cls("judge", args=args)

    @property
    def key(self) -> tuple:
        return (self.where, self.grader, self.args)


def plain(value: Any) -> Any:
    """Parquet hands verl numpy arrays and dicts of them; graders and JSON want lists, dicts and scalars."""
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        return plain(value.tolist())
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def missing(ground_truth: Any) -> bool:
    """A null ground truth (parquet's null, or a one-element list of it): nothing to judge an answer against. Said
    as an error, never turned into the text "None" that an answer could match."""
    value = plain(ground_truth)
    return value is None or (isinstance(value, list) and len(value) == 1 and value[0] is None)


def canonical(value: Any) -> str:
    """A ground truth as one stable string: hashable for the cache, picklable for the pool."""
    value = plain(value)
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def text_of(ground_truth: Any) -> str:
    """A ground truth that should be one answer: a one-element list (some sets store it so) counts as its element."""
    value = plain(ground_truth)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value if isinstance(value, str) else str(value)
