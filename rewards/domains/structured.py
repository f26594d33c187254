"""Reading structured answers (lists, dicts, grids) out of model text without ever evaluating it.

Runs in: the pool's worker processes (logic and simulation graders): the size cap and the process-level timeout
bound what a hostile answer can cost.
"""

from __future__ import annotations

import ast
import json
from typing import Any

# an answer longer than this is not a puzzle answer; parsing it would only cost time and memory
MAX_ANSWER_CHARS = 200_000


def load(text: str) -> Any:
    """JSON first, then a Python literal (ast.literal_eval: literals only, no names, calls or operators).
    None when neither parses."""
    text = text.strip()
    if not text or len(text) > MAX_ANSWER_CHARS:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def ground_truth(text: str) -> Any:
    """Ground truths are trusted data, stored as JSON or as Python's repr of it; a plain string stays a string."""
    value = load(text)
    return text if value is None else value


def cell(value: Any) -> str:
    """One puzzle cell or name, compared without case, quotes or surrounding space."""
    return " ".join(str(value).strip().strip("'\"").split()).lower()
