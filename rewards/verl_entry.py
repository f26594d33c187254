"""The file verl loads by path (reward.custom_reward_function.path): it imports the installed `rewards` package, so
the domain modules keep ordinary absolute imports."""

from rewards import compute_score

__all__ = ["compute_score"]
