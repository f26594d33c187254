"""Find the final answer in a model's response: plain string scanning, linear in the text, no eval.

Runs in: verl's reward worker (the scorer extracts before it looks up repeats) and the pool's worker processes.
"""

from __future__ import annotations

import re

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
BOX_COMMANDS = ("\\boxed", "\\fbox")
# "Answer: 42", "**Final answer:** 42", "The answer is: 42"
ANSWER_LINE = re.compile(
    r"^[ \t*#>_-]*(?:the\s+)?(?:final\s+)?answer(?:\s+is)?[ \t*]*[:：][ \t*]*(\S[^\n]*)$", re.IGNORECASE | re.MULTILINE
)
CODE_FENCE = "```"
PYTHON_TAGS = ("", "python", "python3", "py")


def after_thinking(text: str) -> str | None:
    """The part after the last </think>; None when a thinking block was opened and never closed (no answer yet).
    Boxes inside the thinking are drafts, never the answer."""
    close = text.rfind(THINK_CLOSE)
    if close >= 0:
        return text[close + len(THINK_CLOSE) :]
    if THINK_OPEN in text:
        return None
    return text


def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} (or \\fbox{...}, or `\\boxed 5`), braces balanced."""
    start = max(text.rfind(command) for command in BOX_COMMANDS)
    if start < 0:
        return None
    command = next(c for c in BOX_COMMANDS if text.startswith(c, start))
    i = start + len(command)
    if text.startswith(" ", i) and not text.startswith(" {", i):
        # `\boxed 5`: one token
        token = text[i + 1 :].split(maxsplit=1)
        return token[0].rstrip("$.") if token else None
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text) or text[i] != "{":
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{" and text[j - 1] != "\\":
            depth += 1
        elif text[j] == "}" and text[j - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip()
    return None


def answer_line(text: str) -> str | None:
    """The last `Answer: ...` line, without trailing markdown, $ or full stop."""
    lines = ANSWER_LINE.findall(text)
    if not lines:
        return None
    answer = lines[-1].strip().rstrip(".").strip("*").rstrip(".").strip()
    if answer.startswith("$") and answer.endswith("$") and len(answer) > 1:
        answer = answer.strip("$").strip()
    return answer or None


def gsm8k_hashes(text: str) -> str | None:
    """GSM8K's `#### 72` convention."""
    at = text.rfind("####")
    if at < 0:
        return None
    answer = text[at + 4 :].strip().split("\n", 1)[0].strip().rstrip(".")
    return answer or None


def final_answer(text: str, *, hashes: bool = False) -> str | None:
    """The math answer: after the thinking; the last box, else `####` (gsm8k), else the last `Answer:` line."""
    visible = after_thinking(text)
    if visible is None:
        return None
    answer = last_boxed(visible)
    if answer is None and hashes:
        answer = gsm8k_hashes(visible)
    if answer is None:
        answer = answer_line(visible)
    return answer or None


def tagged(text: str, tag: str = "answer") -> str | None:
    """The content of the last <tag>...</tag>, after the thinking."""
    visible = after_thinking(text)
    if visible is None:
        return None
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    start = visible.rfind(open_tag)
    if start < 0:
        return None
    end = visible.find(close_tag, start)
    if end < 0:
        return None
    return visible[start + len(open_tag) : end].strip()


def last_code_block(text: str) -> str | None:
    """The last fenced Python (or untagged) code block after the thinking."""
    visible = after_thinking(text)
    if visible is None:
        return None
    code = None
    i = 0
    while (start := visible.find(CODE_FENCE, i)) >= 0:
        line_end = visible.find("\n", start)
        if line_end < 0:
            break
        end = visible.find(CODE_FENCE, line_end)
        if end < 0:
            break
        tag = visible[start + len(CODE_FENCE) : line_end].strip().lower()
        if tag in PYTHON_TAGS:
            code = visible[line_end + 1 : end]
        i = end + len(CODE_FENCE)
    return code.strip("\n") if code and code.strip() else None
