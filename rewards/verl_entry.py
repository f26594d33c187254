"""The file verl loads by path (reward.custom_reward_function.path, .name = compute_score).

Runs in: verl's reward workers (Ray actors). It imports the installed `rewards` package, so the domain modules
keep ordinary absolute imports. `compute_score` here is a coroutine function on purpose: verl awaits it on the
worker's event loop instead of running it in a thread (why: rewards/__init__.py).
"""

from rewards import compute_score_async as compute_score

__all__ = ["compute_score"]
