"""The scoring pool on its own: real worker processes; a hang or a crash costs one item, never the batch."""

from __future__ import annotations

import os
import time

from rewards.pool import Pool


def test_hang_and_crash_cost_one_item_each():
    pool = Pool(2)
    try:
        started = time.monotonic()
        futures = [
            pool.submit("time:sleep", (600,), 1.5),  # hangs: killed at its own deadline
            pool.submit("os:_exit", (3,), 30),  # the worker dies mid-task
            pool.submit("time:time", (), 30),  # a grader that returns no dict
            *[pool.submit("rewards.domains.table:grade", ("12.0", "12"), 30) for _ in range(6)],
        ]
        results = [future.result(timeout=60) for future in futures]
        elapsed = time.monotonic() - started
    finally:
        pool.close()
    hang, crash, not_a_dict, *fine = results
    assert hang["error"] == "timeout after 1.5s" and hang["score"] == 0.0 and hang["errored"] == 1.0
    assert crash["error"] == "crash: scoring worker died (exit code 3)"
    assert not_a_dict["error"].startswith("crash: TypeError: grader time:time returned float")
    assert all(result["score"] == 1.0 and result["error"] == "" for result in fine)
    assert pool.restarts == 2
    # the six good items never waited for the hanging one: the whole batch took about one timeout
    assert elapsed < 10, elapsed


def test_closing_kills_the_workers():
    pool = Pool(1)
    busy = pool.submit("time:sleep", (600,), 600)
    time.sleep(1.5)
    pool.close()
    assert busy.result(timeout=10)["error"] == "scoring pool closed"
    assert pool.submit("time:time", (), 5).result(timeout=10)["error"] == "scoring pool closed"


def test_a_pool_that_cannot_start_says_so(monkeypatch):
    monkeypatch.setattr("rewards.pool.WORKER_CODE", "import os; os._exit(7)")
    pool = Pool(1)
    try:
        result = pool.submit("time:time", (), 5).result(timeout=60)
    finally:
        pool.close()
    assert result["error"].startswith("scoring pool cannot start workers (3 died before ready, last exit code 7")
    assert os.getpid()  # the caller is untouched
