"""Stage 1, generate: `rft.oversample` samples per prompt, by verl's own generation server on the run's config.

Runs on: the job head (the pipeline), which starts `python -m verl.trainer.main_generation_server` on the dumped
verl_config.yaml: verl brings up `trainer.nnodes x n_gpus_per_node / rollout TP` rollout replicas on the job's Ray
cluster (RAY_ADDRESS) and sends every prompt `actor_rollout_ref.rollout.n` (= rft.oversample) chat requests, which
the engine batches itself (max_num_seqs, max_num_batched_tokens: the GPU profile's knobs). The RFT run of
docs/background.md#rft-sampling batched its questions by hand; the engine's continuous batching does it.

Before that, the prompts verl will read are written here once: the same selection verl's RL dataset makes from the
same keys (`data.train_max_samples`, `data.shuffle` + `data.seed`, `data.filter_overlong_prompts`; the generation
server itself reads the files whole and an over-long prompt would fail the engine's request), each row given a
stable `rft_prompt_id` that travels through the candidates into the fine-tuning set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from algos.rft.stages import file_identity
from algos.verl_entry_points import render_value

PROMPT_ID = "rft_prompt_id"
PROMPTS_FILE = "prompts.parquet"
CANDIDATES_FILE = "candidates.parquet"
RESPONSES_COLUMN = "responses"  # where verl's generation server puts the n samples of each prompt
VERL_CONFIG_NAME = "verl_config"  # launch/plan.py dumps the resolved config under this name


def train_files(data: dict[str, Any]) -> list[str]:
    files = data["train_files"]
    return [str(files)] if isinstance(files, str) else [str(path) for path in files]


def stage_config(verl: dict[str, Any]) -> dict[str, Any]:
    """What the candidates depend on: the model, every rollout setting, the prompt files and their selection."""
    data = verl["data"]
    return {
        "model_path": verl["actor_rollout_ref"]["model"]["path"],
        "rollout": verl["actor_rollout_ref"]["rollout"],
        "train_files": [file_identity(path) for path in train_files(data)],
        "selection": {
            key: data.get(key)
            for key in (
                "prompt_key",
                "train_max_samples",
                "shuffle",
                "seed",
                "filter_overlong_prompts",
                "max_prompt_length",
                "apply_chat_template_kwargs",
            )
        },
    }


def prompt_lengths(model_path: str, prompts: list[Any], chat_template_kwargs: dict[str, Any]) -> list[int]:
    """Tokens of each chat prompt with the generation prompt appended: what the engine will be sent."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    texts = [
        tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, tokenize=False, **chat_template_kwargs
        )
        for messages in prompts
    ]
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def write_prompts(verl: dict[str, Any], destination: Path) -> dict[str, Any]:
    """The prompts stage 1 generates for, with their ids; returns counts for the stage summary."""
    import numpy as np
    import pandas as pd

    data = verl["data"]
    frame = pd.concat([pd.read_parquet(path) for path in train_files(data)], ignore_index=True)
    total = len(frame)
    max_samples = int(data.get("train_max_samples") or -1)
    if 0 < max_samples < total:
        if data.get("shuffle", True):
            seed = data.get("seed")
            rng = np.random.default_rng(*((seed,) if seed is not None else ()))
            frame = frame.iloc[sorted(rng.choice(total, size=max_samples, replace=False))]
        else:
            frame = frame.iloc[:max_samples]
    selected = len(frame)
    if data.get("filter_overlong_prompts"):
        lengths = prompt_lengths(
            str(verl["actor_rollout_ref"]["model"]["path"]),
            frame[data["prompt_key"]].tolist(),
            dict(data.get("apply_chat_template_kwargs") or {}),
        )
        frame = frame[[length <= int(data["max_prompt_length"]) for length in lengths]]
    if frame.empty:
        raise RuntimeError(
            f"no prompt left for stage 1 out of {total} in {', '.join(train_files(data))} "
            f"(data.train_max_samples={max_samples}, data.max_prompt_length={data['max_prompt_length']})"
        )
    frame = frame.reset_index(drop=True)
    frame[PROMPT_ID] = np.arange(len(frame))
    destination.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(destination)
    return {
        "prompts_in_files": total,
        "selected": selected,
        "prompts": len(frame),
        "overlong_dropped": selected - len(frame),
    }


def generation_command(python: str, run_dir: Path, stage_dir: Path) -> list[str]:
    """verl's own generation entry point on the run's dumped config; only the prompt file and the output move."""
    return [
        python,
        "-m",
        "verl.trainer.main_generation_server",
        f"--config-path={run_dir}",
        f"--config-name={VERL_CONFIG_NAME}",
        f"hydra.run.dir={render_value(str(stage_dir / 'hydra'))}",
        f"data.train_files=[{render_value(str(stage_dir / PROMPTS_FILE))}]",
        f"++data.output_path={render_value(str(stage_dir / CANDIDATES_FILE))}",
    ]
