"""The failure classifier on the second held-out corpus (tests/data/failures_heldout2/<kind>/): public logs collected
after the signatures were tuned, labelled from their threads before the classifier ran on them, never tuned on.

The score is pinned at what was measured once on 2026-11-24 (bench/results/failures.txt, `held-out-2`): a change that
loses one of these excerpts fails here. A change that wins one back must come with a new, honest measurement: tuning a
signature on a miss of this set spends it, and the pin and the results file must then say so."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.failures import CORPORA, Excerpt, load_corpus, score
from launch.report import failures

HELD_OUT_2 = load_corpus(CORPORA["held-out-2"])
EARLIER = [*load_corpus(CORPORA["tuning"]), *load_corpus(CORPORA["held-out"])]

MEASURED_RIGHT = 21  # of 31, 2026-11-24, on the classifier that scored the tuning and spent held-out sets 100 %
MEASURED_MISSES = {
    "gpu_unavailable/vllm-7107-required-gpus": "unknown",
    "host_oom/easyrec-60-oom-killer": "unknown",
    "preempted/submitit-1656-misread-as-timeout": "time_limit",
    "ray_node_lost/ray-22425-raylet-marked-dead": "unknown",
    "ray_start_failed/ray-11843-worker-before-head": "unknown",
    "ray_start_failed/ray-18707-redis-retries": "unknown",
    "ray_start_failed/ray-23611-gcs-unreachable": "unknown",
    "reward_error/reasoning-gym-417-boxnet-score": "unknown",
    "reward_error/verl-3150-prime-pickle-reward-fn": "unknown",
    "unknown/verl-1611-sglang-illegal-memory-access": "nccl_timeout",
}
# out-of-vocabulary excerpts that the measured classifier already names wrongly: see the xfail below
OOV_MISSED = {"verl-1611-sglang-illegal-memory-access"}


def name(excerpt: Excerpt) -> str:
    return f"{excerpt.kind}/{excerpt.path.stem}"


def test_the_corpus_is_fresh_real_and_labelled_with_known_kinds() -> None:
    assert len(HELD_OUT_2) == 31
    assert {excerpt.kind for excerpt in HELD_OUT_2} <= set(failures.KINDS)
    assert sum(excerpt.kind == "unknown" for excerpt in HELD_OUT_2) >= 3
    for excerpt in HELD_OUT_2:
        assert excerpt.source.startswith("https://github.com/"), name(excerpt)
        assert excerpt.text.strip(), name(excerpt)
    sources = [excerpt.source for excerpt in HELD_OUT_2]
    assert len(set(sources)) == len(sources), "one thread, one excerpt"
    assert not set(sources) & {excerpt.source for excerpt in EARLIER}, "a thread of an earlier corpus is not held out"


def test_held_out_score_is_pinned_at_the_measured_one() -> None:
    result = score(HELD_OUT_2)
    misses = {name(excerpt): found for excerpt, found in result.rows if found != excerpt.kind}
    assert (result.right, result.total) == (MEASURED_RIGHT, len(HELD_OUT_2))
    assert misses == MEASURED_MISSES


OOV = [excerpt for excerpt in HELD_OUT_2 if excerpt.kind == "unknown"]


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(
            excerpt.path,
            marks=pytest.mark.xfail(strict=True, reason="measured miss: the driver's NCCL store error wins")
            if excerpt.path.stem in OOV_MISSED
            else (),
            id=excerpt.path.stem,
        )
        for excerpt in OOV
    ],
)
def test_out_of_vocabulary_failures_stay_unknown(path: Path) -> None:
    excerpt = next(excerpt for excerpt in OOV if excerpt.path == path)
    assert failures.classify(excerpt.text).kind == "unknown"
