"""simulation (CodeIO): the predicted input or output of a program, as JSON, equal to the ground truth after
normalization. ARC-style grid sets filed under simulation go to logic's grid grader.

Runs in: `prepare` in the scorer (verl's reward worker); `grade` in a pool worker.

The answer is the last ```json block after the thinking, else the last complete {...} object; a top-level object
with an "output" (or "input") key stands for that value. Normalization: strings holding JSON objects or arrays are
parsed, "true"/"false" in any case are booleans, containers are normalized element-wise.
"""

from __future__ import annotations

import json
from typing import Any

from rewards import extract
from rewards.domains import logic, structured
from rewards.result import judged
from rewards.settings import RewardSettings
from rewards.task import Task, canonical


def prepare(data_source: str, solution: str, ground_truth: Any, extra_info: dict, settings: RewardSettings) -> Task:
    dataset = data_source.split("__", 1)[-1].lower()
    if "arcagi" in dataset or "barc" in dataset:
        return logic.prepare(data_source, solution, ground_truth, extra_info, settings)
    visible = extract.after_thinking(solution)
    if visible is None or not visible.strip():
        return Task.done(judged(0.0))
    return Task.pool("rewards.domains.simulation:grade", (visible, canonical(ground_truth)), settings.timeout_s)


def normalize(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if (text.startswith("{") and text.endswith("}")) or (text.startswith("[") and text.endswith("]")):
            try:
                return normalize(json.loads(text))
            except (ValueError, RecursionError):
                pass
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        return value
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    return value


def _unwrap(value: Any) -> Any:
    if isinstance(value, dict) and len(value) == 1 and ("output" in value or "input" in value):
        return value.get("output", value.get("input"))
    return value


def _last_json_object(text: str) -> Any:
    """The last balanced top-level {...} that parses as JSON (braces inside strings are rare enough to ignore)."""
    found = None
    depth, start = 0, -1
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                try:
                    found = json.loads(text[start : i + 1])
                except (ValueError, RecursionError):
                    pass
    return found


def predicted(text: str) -> Any:
    blocks = text.split("```")
    # odd pieces are fenced; a json (or untagged) fence holds the answer
    for block in reversed(blocks[1::2]):
        tag, _, body = block.partition("\n")
        if tag.strip().lower() in ("json", ""):
            try:
                return _unwrap(json.loads(body))
            except (ValueError, RecursionError):
                continue
    found = _last_json_object(text)
    return None if found is None else _unwrap(found)


def truth_of(text: str) -> Any:
    """CodeIO stores `"output": {...}` (a JSON member without braces) or a JSON document."""
    stripped = text.strip()
    if stripped.startswith(('"output"', '"input"')):
        stripped = "{" + stripped + "}"
    return _unwrap(structured.ground_truth(stripped))


def grade(text: str, truth_text: str) -> dict[str, Any]:
    guess = predicted(text)
    if guess is None:
        return judged(0.0)
    return judged(1.0 if normalize(guess) == normalize(truth_of(truth_text)) else 0.0)
