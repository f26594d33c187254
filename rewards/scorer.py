"""The scorer: routes each sample to its domain, grades each distinct task once, and never waits forever.

Runs in: verl's reward workers (Ray actors; one scorer per worker and settings), tests and the bench.

`submit` is cheap and callable from any thread or event loop: the domain's `prepare` extracts the answer (string
scanning only), then the task is looked up among results already known or in flight — in GRPO, 16 rollouts of one
prompt often give the same final answer, and those repeats cost nothing — and otherwise handed to the process pool
(rewards/pool.py: per-item timeouts, crash isolation) or, for stem, to the HTTP judge. Errors are counted in
`stats`, logged (rate-limited) and not remembered, so a later repeat is graded again.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from rewards.domains import codegen, logic, simulation, stem, table
from rewards.domains import math as math_domain
from rewards.domains.stem import Judge
from rewards.pool import Pool
from rewards.result import unjudged
from rewards.settings import RewardSettings
from rewards.sources import MATH_SOURCES, domain_of
from rewards.task import Task, missing

log = logging.getLogger(__name__)

Prepare = Callable[[str, str, Any, dict, RewardSettings], Task]
# domain (the data_source prefix before "__") -> its prepare step
DOMAINS: dict[str, Prepare] = {
    "math": math_domain.prepare,
    "codegen": codegen.prepare,
    "logic": logic.prepare,
    "simulation": simulation.prepare,
    "table": table.prepare,
    "stem": stem.prepare,
}
# every error kind is logged this many times, then every LOG_EVERY-th time
LOG_FIRST, LOG_EVERY = 10, 100


# domain -> why it cannot score a data_source of its own (None: it can); a domain not listed scores all of its own
REFUSALS: dict[str, Callable[[str], str | None]] = {"logic": logic.refusal}


def refusal(data_source: str) -> str | None:
    """Why no reward scores this data_source, or None where one does: the scorer raises it at the first reward, and
    the readiness check of the data (launch/readiness.py) refuses the run with it before the queue."""
    domain = domain_of(data_source)
    if domain not in DOMAINS:
        return (
            f"no reward for data_source '{data_source}' (domain '{domain}'): registered domains are "
            f"{', '.join(sorted(DOMAINS))} (as <domain>__<dataset>) and {', '.join(MATH_SOURCES)}"
        )
    domain_refusal = REFUSALS.get(domain)
    return domain_refusal(data_source) if domain_refusal is not None else None


def prepare(data_source: str, solution: str, ground_truth: Any, extra_info: dict, settings: RewardSettings) -> Task:
    why_not = refusal(data_source)
    if why_not is not None:
        raise ValueError(why_not)
    if missing(ground_truth):
        return Task.done(unjudged(f"no ground truth: reward_model.ground_truth is null for this {data_source} row"))
    return DOMAINS[domain_of(data_source)](data_source, str(solution), ground_truth, extra_info, settings)


def _digest(task: Task) -> bytes:
    """What the cache keeps instead of the task: a codegen task holds the program and every test (megabytes for
    some TACO problems), and thousands of them are remembered."""
    return hashlib.blake2b(repr(task.key).encode("utf-8", errors="surrogatepass"), digest_size=20).digest()


class Scorer:
    def __init__(self, settings: RewardSettings) -> None:
        self.settings = settings
        self.pool = Pool(settings.pool_procs(), warmup="rewards.domains.math:warmup")
        self._judge: Judge | None = None
        self._lock = threading.Lock()
        # task digest -> its result (or the future of one in flight)
        self._known: OrderedDict[bytes, Future[dict[str, Any]]] = OrderedDict()
        self.stats: Counter[str] = Counter()
        atexit.register(self.close)

    def submit(
        self, data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None
    ) -> Future[dict[str, Any]]:
        """The reward of one sample, as a future of the result dict (rewards/result.py). Shared between repeats:
        copy before changing it. Raises ValueError at once for a data_source no domain claims."""
        task = prepare(data_source, solution_str, ground_truth, extra_info or {}, self.settings)
        with self._lock:
            self.stats["items"] += 1
            if task.where == "done":
                self.stats["decided_without_grading"] += 1
                future: Future[dict[str, Any]] = Future()
                future.set_result(task.result or {})
                self._count(future)
                return future
            key = _digest(task)
            known = self._known.get(key)
            if known is not None:
                self._known.move_to_end(key)
                self.stats["repeats"] += 1
                return known
            self.stats["graded"] += 1
            future = self._start(task)
            self._known[key] = future
            while len(self._known) > self.settings.cache_size:
                self._known.popitem(last=False)
        future.add_done_callback(lambda done: self._settled(key, done))
        return future

    def _start(self, task: Task) -> Future[dict[str, Any]]:
        if task.where == "judge":
            if self._judge is None:
                self._judge = Judge(self.settings)
            return self._judge.submit(task.args)
        return self.pool.submit(task.grader, task.args, task.timeout_s)

    def _settled(self, key: bytes, future: Future[dict[str, Any]]) -> None:
        with self._lock:
            if self._count(future) and self._known.get(key) is future:
                # an error is not an answer: the next repeat is graded again
                del self._known[key]

    def _count(self, future: Future[dict[str, Any]]) -> bool:
        """Count an error (caller holds the lock); True if the result is one."""
        error = future.result().get("error", "")
        if not error:
            return False
        kind = error.split(":", 1)[0]
        self.stats["errors"] += 1
        self.stats[f"errors/{kind}"] += 1
        seen = self.stats[f"errors/{kind}"]
        if seen <= LOG_FIRST or seen % LOG_EVERY == 0:
            log.warning("reward not judged (%s so far of this kind): %s", seen, error)
        return True

    def close(self) -> None:
        self.pool.close()
        if self._judge is not None:
            self._judge.close()


_scorers: dict[RewardSettings, Scorer] = {}
_scorers_lock = threading.Lock()


def scorer_for(settings: RewardSettings) -> Scorer:
    """One scorer (one pool) per process and settings."""
    with _scorers_lock:
        if settings not in _scorers:
            _scorers[settings] = Scorer(settings)
        return _scorers[settings]
