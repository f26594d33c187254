"""Typical prompt and response lengths: what most steps see, beside the worst case (every sequence at full length).

Runs on: the login node, while a job is planned. The memory verdict stays the worst case; the preflight's "typical"
line (and the step-time forecast) take these. Precedence: the user's `launch.expect.*` keys, then lengths measured
(a calibration store's, the data's), then half of verl's maximum (`data.max_prompt_length` /
`data.max_response_length`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

HALF = 0.5  # without anything better, a typical sequence is half its maximum length


@dataclass(frozen=True)
class TypicalLengths:
    prompt_tokens: float
    response_tokens: float
    source: str  # where each came from, e.g. "prompt: half of data.max_prompt_length; response: launch.expect..."

    @property
    def sequence_tokens(self) -> int:
        return max(1, int(self.prompt_tokens + self.response_tokens))


@dataclass(frozen=True)
class PromptStats:
    """Prompt lengths in tokens (chat template applied, as verl's RLHFDataset builds them) over a sample of rows."""

    p50: int
    p95: int
    max: int
    rows: int
    lengths: tuple[int, ...] = ()  # every measured prompt's, ascending

    def longer_than(self, limit: int) -> int:
        """How many of the measured prompts are longer than `limit` tokens."""
        return sum(1 for length in self.lengths if length > limit)


def typical_lengths(
    cfg: DictConfig, measured_prompt_tokens: float | None = None, measured_response_tokens: float | None = None
) -> TypicalLengths:
    """The typical lengths of a run: `launch.expect.prompt_tokens` / `.response_tokens` where set, else the measured
    ones given, else half the maximum. Each is capped at its maximum: data.max_*_length (verl truncates or filters
    longer ones), or the engine's own actor_rollout_ref.rollout.prompt_length / response_length where set lower (the
    agent loop keeps a prompt's last tokens, the engine stops a response there)."""
    expect = cfg.launch.get("expect") or {}
    rollout = cfg.actor_rollout_ref.get("rollout") or {}
    chosen = []
    for side, measured in (("prompt", measured_prompt_tokens), ("response", measured_response_tokens)):
        maximum, limit_key = int(cfg.data[f"max_{side}_length"]), f"data.max_{side}_length"
        engine = rollout.get(f"{side}_length")
        if engine is not None and int(engine) < maximum:
            maximum, limit_key = int(engine), f"actor_rollout_ref.rollout.{side}_length"
        stated = expect.get(f"{side}_tokens")
        if stated is not None:
            chosen.append((min(float(stated), maximum), f"{side}: launch.expect.{side}_tokens"))
        elif measured is not None:
            chosen.append((min(float(measured), maximum), f"{side}: measured"))
        else:
            chosen.append((HALF * maximum, f"{side}: half of {limit_key}"))
    (prompt, prompt_source), (response, response_source) = chosen
    return TypicalLengths(prompt, response, f"{prompt_source}; {response_source}")


def percentile(ordered: list[int], fraction: float) -> int:
    """Nearest-rank percentile of an ascending list."""
    return ordered[min(len(ordered) - 1, max(0, int(round(fraction * len(ordered) + 0.5)) - 1))]


@cache  # read-only here (a custom chat template is passed per call, never set on it): planning loads it once
def load_cached_tokenizer(tokenizer_path: str) -> Any | None:
    """The tokenizer from a local directory or the local HF cache, never the network; None when it is not there."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None
    from launch.facts import quiet_transformers  # here: facts is heavy, and most planning never loads a tokenizer

    try:
        with quiet_transformers():  # a model_type transformers does not know warns as a stray line beside the plan
            return AutoTokenizer.from_pretrained(tokenizer_path, local_files_only=True)
    # not cached (OSError), not a tokenizer transformers knows (ValueError), or files it cannot read (a tokenizer.json
    # without its added_tokens raises KeyError): the lengths fall back to the next source, and the planner never stops
    except (OSError, ValueError, KeyError, TypeError):
        return None


JSON_SUFFIXES = (".json", ".jsonl")  # verl's RLHFDataset reads these with datasets' json loader, the rest as parquet


@cache
def json_records(path: str, _stamp: int) -> tuple[dict[str, Any], ...]:
    """The rows of a .json / .jsonl data file as datasets' json loader reads them for verl: JSON lines, or one JSON
    array of objects. Raises ValueError where neither holds. `_stamp`: the file's mtime (a rewritten file is read
    again)."""
    import json

    text = Path(path).read_text()
    if text.lstrip().startswith("["):
        rows = json.loads(text)
    else:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not all(isinstance(row, dict) for row in rows):
        raise ValueError("its rows are not JSON objects")
    return tuple(rows)


def file_records(path: str) -> tuple[dict[str, Any], ...]:
    return json_records(path, Path(path).stat().st_mtime_ns)


def sample_prompts(files: list[str], prompt_key: str, sample_rows: int) -> list[Any]:
    """Up to `sample_rows` prompts, the first rows of each file in equal parts (only the prompt column is read)."""
    import pyarrow.parquet as pq

    prompts: list[Any] = []
    per_file = max(1, -(-sample_rows // max(1, len(files))))
    for path in files:
        if path.endswith(JSON_SUFFIXES):
            prompts += [row[prompt_key] for row in file_records(path)[:per_file] if prompt_key in row]
            continue
        parquet = pq.ParquetFile(path)
        if prompt_key not in parquet.schema_arrow.names:
            continue
        taken = 0
        for batch in parquet.iter_batches(batch_size=min(per_file, 1024), columns=[prompt_key]):
            column = batch.column(0).to_pylist()[: per_file - taken]
            prompts += column
            taken += len(column)
            if taken >= per_file:
                break
    return prompts[:sample_rows]


def message_problem(prompt: Any) -> str:
    """What a chat prompt lacks for verl's chat template, which reads every message's role and content (jinja fails
    on a message without them); "" where nothing does, or where the prompt is text (read_data says so). A content of
    None stays: an assistant's tool call has one."""
    if isinstance(prompt, str) or prompt is None:
        return ""
    for message in prompt:
        if not isinstance(message, dict):
            return f"a message is {type(message).__name__}, not a {{role, content}} object"
        missing = (["role"] if message.get("role") is None else []) + ([] if "content" in message else ["content"])
        if missing:
            has = ", ".join(message) or "nothing"
            return f"a message has no {' or '.join(repr(name) for name in missing)} (it has {has})"
    return ""


def prompt_tokens(
    tokenizer: Any, prompt: Any, chat_template_kwargs: dict[str, Any], chat_template: str | None = None
) -> int:
    """One prompt's length as verl's RLHFDataset counts it: a list of chat messages through the chat template with
    the generation prompt; a plain string tokenized as it is. `chat_template`: the model's custom_chat_template,
    which verl sets on its tokenizer (workers/config/model.py)."""
    if isinstance(prompt, str):
        return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    template = {"chat_template": chat_template} if chat_template is not None else {}
    ids = tokenizer.apply_chat_template(
        list(prompt), add_generation_prompt=True, tokenize=True, **template, **chat_template_kwargs
    )
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 may answer a BatchEncoding
        ids = ids["input_ids"]
    return len(ids)


def chat_prompts_without_template(
    files: list[str], tokenizer_path: str, prompt_key: str, chat_template: str | None, sample_rows: int = 64
) -> bool:
    """The prompts are chat messages, and neither the tokenizer (a base model's) nor the config has a chat template:
    verl's RLHFDataset applies one to every prompt. False when the tokenizer is not here to tell."""
    if chat_template is not None:
        return False
    tokenizer = load_cached_tokenizer(tokenizer_path)
    if tokenizer is None or getattr(tokenizer, "chat_template", None):
        return False
    return any(not isinstance(prompt, str) for prompt in sample_prompts(files, prompt_key, sample_rows))


def measure_prompt_lengths(
    files: list[str],
    tokenizer_path: str,
    sample_rows: int = 512,
    prompt_key: str = "prompt",
    chat_template_kwargs: dict[str, Any] | None = None,
    chat_template: str | None = None,
) -> PromptStats | None:
    """p50, p95 and max of the prompt lengths in a sample of the parquet files' rows, tokenized as verl's RLHFDataset
    does (data.prompt_key, chat template with the generation prompt, data.apply_chat_template_kwargs). None when the
    tokenizer is not in the local cache or no row could be read."""
    tokenizer = load_cached_tokenizer(tokenizer_path)
    if tokenizer is None:
        return None
    from jinja2 import TemplateError  # transformers' own dependency, loaded with the tokenizer

    lengths = []
    for prompt in sample_prompts(files, prompt_key, sample_rows):
        try:
            lengths.append(prompt_tokens(tokenizer, prompt, dict(chat_template_kwargs or {}), chat_template))
        # a row verl would skip too (its filter prints and drops it); read_data refuses the files whose sampled
        # messages the template cannot read, and a row beyond that sample must not end the planner with a traceback
        except (TypeError, ValueError, KeyError, TemplateError):
            continue
    if not lengths:
        return None
    ordered = sorted(lengths)
    return PromptStats(
        p50=percentile(ordered, 0.5),
        p95=percentile(ordered, 0.95),
        max=ordered[-1],
        rows=len(ordered),
        lengths=tuple(ordered),
    )
