"""Stage 2, filter: score every candidate with rewards/ (the batch API, the same graders PPO's reward uses) and keep
at most `k` correct, distinct samples per prompt, as verl's SFT dataset reads them (a `messages` column: the prompt's
chat plus the sample as the assistant's turn) with their provenance.

Runs on: the job head (the pipeline), in-process: rewards' own process pool does the grading in parallel, with
per-item timeouts, and serves repeated answers from its cache (many of a prompt's samples end in the same answer).

Correct means the reward judged the answer right (`acc`); a sample whose grading errored (timeout, sandbox, judge
unavailable) is never kept, and the statistics count those separately. Distinct means different text once runs of
whitespace are collapsed: samples are taken in sample order, so the choice is deterministic.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from algos.rft.generate import PROMPT_ID, RESPONSES_COLUMN

SFT_FILE = "sft.parquet"
STATS_FILE = "stats.json"
PER_PROMPT_FILE = "per_prompt.parquet"
METRICS_FILE = "rft_filter.jsonl"  # in <run_dir>/metrics/, beside verl's own file-logger output
MESSAGES_COLUMN = "messages"  # verl's sft_trainer_engine default data.messages_key


@dataclass(frozen=True)
class Candidate:
    prompt_id: int
    sample_index: int
    data_source: str
    prompt: list[dict[str, Any]]
    response: str
    ground_truth: Any
    extra_info: dict[str, Any] | None


@dataclass
class PromptCounts:
    prompt_id: int
    data_source: str
    domain: str
    candidates: int = 0
    correct: int = 0
    errored: int = 0
    distinct_correct: int = 0
    kept: int = 0


def plain(value: Any) -> Any:
    """Parquet hands nested values back as numpy arrays; graders and JSON want lists and dicts."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return [plain(item) for item in value.tolist()]
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def read_candidates(path: Path, prompt_key: str) -> list[Candidate]:
    """One Candidate per (prompt, sample) of the generation server's output, in prompt then sample order."""
    import pandas as pd

    frame = pd.read_parquet(path)
    candidates = []
    for row in frame.to_dict("records"):
        reward_model = plain(row.get("reward_model")) or {}
        extra_info = plain(row.get("extra_info"))
        for sample_index, response in enumerate(plain(row[RESPONSES_COLUMN])):
            candidates.append(
                Candidate(
                    prompt_id=int(row[PROMPT_ID]),
                    sample_index=sample_index,
                    data_source=str(row["data_source"]),
                    prompt=plain(row[prompt_key]),
                    response=response or "",
                    ground_truth=reward_model.get("ground_truth"),
                    extra_info=extra_info if isinstance(extra_info, dict) else None,
                )
            )
    return candidates


def distinct_key(response: str) -> str:
    return " ".join(response.split())


def select(
    candidates: Sequence[Candidate], results: Sequence[Mapping[str, Any]], k: int
) -> tuple[list[tuple[Candidate, Mapping[str, Any]]], list[PromptCounts]]:
    """At most k correct, distinct samples per prompt, in sample order; and what each prompt had."""
    from rewards import domain_of

    kept: list[tuple[Candidate, Mapping[str, Any]]] = []
    counts: dict[int, PromptCounts] = {}
    seen: dict[int, set[str]] = {}
    for candidate, result in zip(candidates, results, strict=True):
        count = counts.setdefault(
            candidate.prompt_id,
            PromptCounts(candidate.prompt_id, candidate.data_source, domain_of(candidate.data_source)),
        )
        count.candidates += 1
        if result.get("errored"):
            count.errored += 1
            continue
        if not result.get("acc"):
            continue
        count.correct += 1
        texts = seen.setdefault(candidate.prompt_id, set())
        key = distinct_key(candidate.response)
        if key in texts:
            continue
        texts.add(key)
        count.distinct_correct += 1
        if count.kept < k:
            count.kept += 1
            kept.append((candidate, result))
    return kept, list(counts.values())


def statistics(counts: Sequence[PromptCounts], k: int) -> dict[str, Any]:
    """Per domain and overall: prompts, candidates, correct, errored, distinct correct, kept, prompts with at least
    one kept sample; and how many prompts kept 0, 1, ..., k samples."""
    domains: dict[str, dict[str, Any]] = {}
    for count in counts:
        domain = domains.setdefault(
            count.domain,
            dict.fromkeys(
                ("prompts", "candidates", "correct", "errored", "distinct_correct", "kept", "prompts_with_kept"), 0
            ),
        )
        domain["prompts"] += 1
        domain["prompts_with_kept"] += int(count.kept > 0)
        for name in ("candidates", "correct", "errored", "distinct_correct", "kept"):
            domain[name] += getattr(count, name)
    for domain in domains.values():
        domain["correct_rate"] = domain["correct"] / domain["candidates"] if domain["candidates"] else 0.0
        domain["kept_per_prompt"] = domain["kept"] / domain["prompts"] if domain["prompts"] else 0.0
    histogram = Counter(count.kept for count in counts)
    total = {name: sum(domain[name] for domain in domains.values()) for name in next(iter(domains.values()), {})}
    total.pop("correct_rate", None)
    total.pop("kept_per_prompt", None)
    return {
        "k": k,
        "total": total,
        "per_domain": dict(sorted(domains.items())),
        "kept_per_prompt_histogram": {str(kept): histogram.get(kept, 0) for kept in range(k + 1)},
    }


def metric_line(stats: Mapping[str, Any]) -> dict[str, Any]:
    """The statistics as one record of verl's file logger, so the run's metric reader shows them with verl's."""
    data: dict[str, float] = {}
    for domain, values in stats["per_domain"].items():
        for name in ("kept", "candidates", "correct_rate", "errored", "prompts_with_kept", "kept_per_prompt"):
            data[f"rft/{name}/{domain}"] = values[name]
    for name, value in stats["total"].items():
        data[f"rft/{name}"] = value
    return {"step": 0, "data": data}


def sft_rows(kept: Sequence[tuple[Candidate, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    return [
        {
            MESSAGES_COLUMN: [*candidate.prompt, {"role": "assistant", "content": candidate.response}],
            "prompt_id": candidate.prompt_id,
            "sample_index": candidate.sample_index,
            "score": float(result["score"]),
            "data_source": candidate.data_source,
        }
        for candidate, result in kept
    ]


def run_filter(
    candidates_path: Path,
    stage_dir: Path,
    metrics_dir: Path,
    *,
    k: int,
    prompt_key: str,
    reward_settings: Mapping[str, Any],
) -> dict[str, Any]:
    """Score, select and write sft.parquet, per_prompt.parquet, stats.json and the metrics line; returns the stats."""
    import pandas as pd

    from rewards import score_batch

    candidates = read_candidates(candidates_path, prompt_key)
    items = [
        {
            "data_source": candidate.data_source,
            "solution_str": candidate.response,
            "ground_truth": candidate.ground_truth,
            "extra_info": candidate.extra_info,
        }
        for candidate in candidates
    ]
    results = score_batch(items, **reward_settings)
    kept, counts = select(candidates, results, k)
    stats = statistics(counts, k)
    stage_dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([asdict(count) for count in counts]).to_parquet(stage_dir / PER_PROMPT_FILE)
    (stage_dir / STATS_FILE).write_text(json.dumps(stats, indent=2) + "\n")
    metrics_dir.mkdir(parents=True, exist_ok=True)
    (metrics_dir / METRICS_FILE).write_text(json.dumps(metric_line(stats)) + "\n")
    if not kept:
        raise RuntimeError(
            f"stage 2 kept no sample: none of {len(candidates)} candidates was judged correct "
            f"(statistics in {stage_dir / STATS_FILE}); raise rft.oversample or check the rewards"
        )
    pd.DataFrame(sft_rows(kept)).to_parquet(stage_dir / SFT_FILE)
    return stats
