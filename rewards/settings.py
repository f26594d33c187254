"""Settings of the reward code, as verl hands them over: `reward.custom_reward_function.reward_kwargs` in the config
(conf/algo/guru_baseline.yaml lists every key with its default) arrive as keyword arguments of each call.

Runs in: verl's reward workers (Ray) and any caller of rewards' batch API.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rewards.sandbox import Limits

# verl adds these to every call when a reward model router exists; they mean nothing to rule-based rewards
VERL_CALL_KWARGS = ("reward_router_address", "reward_model_tokenizer")
# numbers that may be 0 (no retries, no cache); every other number is a time, a size or a count, and must be positive
MAY_BE_ZERO = ("stem_judge_retries", "cache_size")


@dataclass(frozen=True, slots=True, kw_only=True)
class RewardSettings:
    # scoring processes per reward worker; null = the node's cores / 8 (verl runs reward.num_workers = 8 workers),
    # at least 1, at most 16
    procs: int | None = None
    # wall clock per item in the pool for math, logic, simulation and table (process-level: the worker is killed)
    timeout_s: float = 30.0
    # math-verify's own per-call timeout (SIGALRM, inside the worker's main thread); a timeout is an error
    math_verify_timeout_s: int = 5
    # distinct (ground truth, answer) results remembered per reward worker; repeats are not graded again
    cache_size: int = 65536
    # codegen sandbox, per test program
    code_cpu_s: int = 5
    code_wall_s: float = 10.0
    code_memory_mb: int = 1024
    code_file_mb: int = 16
    code_disk_mb: int = 64
    code_procs: int = 32
    code_output_kb: int = 1024
    code_python: str = "/usr/bin/python3"
    sandbox_uid: int = 65534
    # tests of one sample run this many at a time; all of a sample's tests share code_budget_s
    code_parallel: int = 4
    code_budget_s: float = 120.0
    # stem: the verifier model behind an OpenAI-compatible API (base URL or a full .../chat/completions URL)
    stem_judge_url: str | None = None
    stem_judge_model: str | None = None
    stem_judge_timeout_s: float = 60.0
    stem_judge_retries: int = 2
    stem_judge_concurrency: int = 16

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> RewardSettings:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - known - set(VERL_CALL_KWARGS))
        if unknown:
            raise ValueError(
                f"unknown reward setting(s) {', '.join(unknown)} in reward.custom_reward_function.reward_kwargs; "
                f"valid: {', '.join(sorted(known))}"
            )
        return cls(**{k: v for k, v in kwargs.items() if k in known})

    @classmethod
    def problems(cls, kwargs: Mapping[str, Any], where: str) -> list[str]:
        """What in these keyword arguments the reward would refuse at every call (an unknown key) or run wrongly (a
        number out of range: every sample an error, or model code run as root), one line each naming key, value and
        fix; `where` is the config key that holds them. Asked before the queue (launch/readiness.py)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        found = []
        for key, value in kwargs.items():
            key = str(key)
            if key in VERL_CALL_KWARGS:
                continue
            if key not in fields:
                near = difflib.get_close_matches(key, list(fields), n=1)
                fix = f"did you mean {where}.{near[0]}={value}?" if near else f"valid: {', '.join(sorted(fields))}"
                found.append(
                    f"{where}.{key}={value}: no such reward setting (rewards/settings.py), and the reward would raise "
                    f"ValueError at every call; {fix}"
                )
                continue
            default = fields[key].default
            if isinstance(default, bool) or not isinstance(default, int | float) and key != "procs":
                continue  # text (code_python, the judge's URL and model), checked where used
            if value is None and default is None:
                continue
            try:
                number = float(value)
            except (TypeError, ValueError):
                found.append(f"{where}.{key}={value}: must be a number; the default is {default}")
                continue
            if key == "sandbox_uid" and number <= 0:
                found.append(
                    f"{where}.{key}={value}: model code would run as root (uid 0), for which RLIMIT_NPROC does not "
                    f"hold; give an unprivileged uid (the default is {default}, nobody)"
                )
            elif number < 0 or (number == 0 and key not in MAY_BE_ZERO):
                least = "0 or more" if key in MAY_BE_ZERO else "positive"
                found.append(
                    f"{where}.{key}={value}: must be {least}, or every sample it governs is an error; the default is "
                    f"{default}"
                )
        return found

    def pool_procs(self) -> int:
        if self.procs is not None:
            return max(1, int(self.procs))
        return max(1, min(16, len(os.sched_getaffinity(0)) // 8))

    def sandbox_limits(self) -> Limits:
        return Limits(
            cpu_s=self.code_cpu_s,
            wall_s=self.code_wall_s,
            memory_mb=self.code_memory_mb,
            file_mb=self.code_file_mb,
            disk_mb=self.code_disk_mb,
            procs=self.code_procs,
            output_kb=self.code_output_kb,
            python=self.code_python,
            uid=self.sandbox_uid,
        )
