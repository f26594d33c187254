"""stem (GURU's WebInstruct): a verifier model judges the boxed answer against the reference, over an
OpenAI-compatible chat-completions API.

Runs in: `prepare` in the scorer (verl's reward worker); the HTTP calls in the Judge's own small thread pool in
that same process (network waits, no grading work, so threads are right here), at most `stem_judge_concurrency` at
a time. Each call has a timeout; connection failures, timeouts and 5xx answers are retried `stem_judge_retries`
times with backoff; 4xx answers are not. A judge that cannot be reached, or a reply without a grade, is an error
(reported, counted), never a silent zero. The verifier model itself is not part of this project: tests talk to a
small HTTP server that plays it.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from rewards import extract
from rewards.result import judged, unjudged
from rewards.settings import RewardSettings
from rewards.task import Task, text_of

PROMPT = """You are grading an answer to a university-level STEM problem against a reference answer.

Question:
{question}

Reference answer:
{reference}

Student answer:
{answer}

Decide whether the student answer is equivalent to the reference answer. A different but equivalent form
(units converted, algebraically equal, rounded sensibly) is correct; a different value or meaning is incorrect.
End your reply with exactly one line:
<Final Grade>: CORRECT
or
<Final Grade>: INCORRECT
"""
# the settings without which no stem answer can be judged (asked before the queue too: launch/readiness.py)
JUDGE_KEYS = ("stem_judge_url", "stem_judge_model")
GRADE = re.compile(r"Final Grade>?\s*:?\s*\**\s*(INCORRECT|CORRECT)", re.I)
BACKOFF_S = (0.5, 2.0, 5.0)


def prepare(data_source: str, solution: str, ground_truth: Any, extra_info: dict, settings: RewardSettings) -> Task:
    visible = extract.after_thinking(solution)
    answer = extract.last_boxed(visible) if visible is not None else None
    if not answer:
        return Task.done(judged(0.0))
    question = (extra_info or {}).get("question")
    if not question:
        return Task.done(unjudged("stem needs the question in extra_info['question'] for the judge"))
    return Task.judge((str(question), text_of(ground_truth), answer))


def unset_judge_keys(settings: Mapping[str, Any]) -> list[str]:
    """The judge's settings (reward_kwargs) left unset, without which every stem sample is an error."""
    return [key for key in JUDGE_KEYS if not settings.get(key)]


def endpoint(url: str) -> str:
    url = url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    return url + ("/chat/completions" if url.endswith("/v1") else "/v1/chat/completions")


class Judge:
    def __init__(self, settings: RewardSettings) -> None:
        self.settings = settings
        workers = max(1, settings.stem_judge_concurrency)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="stem-judge")

    def submit(self, args: tuple) -> Future[dict[str, Any]]:
        return self._executor.submit(self._ask_safely, *args)

    def _ask_safely(self, question: str, reference: str, answer: str) -> dict[str, Any]:
        try:
            return self.ask(question, reference, answer)
        except Exception as exc:  # a bug here must cost one item, never leave an exception in verl's reward loop
            return unjudged(f"crash: judge client: {type(exc).__name__}: {exc}"[:300])

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def ask(self, question: str, reference: str, answer: str) -> dict[str, Any]:
        settings = self.settings
        if unset_judge_keys({key: getattr(settings, key) for key in JUDGE_KEYS}):
            return unjudged(
                "judge unreachable: set reward.custom_reward_function.reward_kwargs.stem_judge_url and "
                ".stem_judge_model (an OpenAI-compatible server of the verifier model)"
            )
        body = json.dumps(
            {
                "model": settings.stem_judge_model,
                "messages": [
                    {"role": "user", "content": PROMPT.format(question=question, reference=reference, answer=answer)}
                ],
                "temperature": 0.0,
            }
        ).encode()
        url = endpoint(settings.stem_judge_url)
        problem = ""
        for attempt in range(settings.stem_judge_retries + 1):
            if attempt:
                time.sleep(BACKOFF_S[min(attempt - 1, len(BACKOFF_S) - 1)])
            request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=settings.stem_judge_timeout_s) as response:
                    reply = json.loads(response.read())
            except urllib.error.HTTPError as exc:
                problem = f"HTTP {exc.code}"
                if exc.code < 500:
                    break
                continue
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                problem = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
                continue
            except ValueError:
                problem = "reply is not JSON"
                continue
            return self._verdict(reply)
        return unjudged(f"judge unreachable at {url} after {attempt + 1} attempt(s): {problem}"[:300])

    @staticmethod
    def _verdict(reply: Any) -> dict[str, Any]:
        try:
            content = reply["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            return unjudged("judge reply has no choices[0].message.content")
        grades = GRADE.findall(content)
        if not grades:
            return unjudged(f"judge reply has no final grade: {content[-120:]!r}")
        return judged(1.0 if grades[-1].upper() == "CORRECT" else 0.0)
