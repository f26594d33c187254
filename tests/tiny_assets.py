"""Tiny, offline stand-ins for a real model and for GURU's parquet files, built in seconds for tests.

Runs on: the test process. Nothing is downloaded: the tokenizer is trained on a few sentences with the `tokenizers`
library and carries a Qwen-style chat template; the model is a randomly initialised Qwen2 built from a config. Other
tests reuse these builders (any test that needs a local model directory or GURU-shaped data).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

# Qwen-style ChatML, enough for verl's RLHFDataset (apply_chat_template with add_generation_prompt)
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "Solve the problem and put the final answer in a box.",
    "What is 12 plus 30? The answer is 42.",
    "Write a function that returns the sum of a list of numbers.",
    "def add(a, b): return a + b",
    "Which object comes first in the ordering puzzle?",
    "Read the table and report the value in the second row.",
    "Simulate the program and print its output.",
    "The derivative of x squared is 2 x.",
    "user assistant system 0 1 2 3 4 5 6 7 8 9",
]
# GURU's data_source names are <domain>__<dataset> (docs/facts.md#guru); one dataset per domain is enough here
GURU_DATASETS = {
    "math": "math__deepscaler",
    "codegen": "codegen__leetcode2k",
    "logic": "logic__zebra_puzzle",
    "simulation": "simulation__codeio",
    "table": "table__hitab",
    "stem": "stem__web",
}


def make_tiny_tokenizer(directory: Path) -> Path:
    """A byte-level BPE tokenizer (vocab ~300) with ChatML special tokens, saved as a HF fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(directory))
    return directory


def make_tiny_model(
    directory: Path, *, layers: int = 2, hidden: int = 64, heads: int = 4, kv_heads: int = 2, weights: bool = True
) -> Path:
    """A local HF model directory: tokenizer, config.json (a Qwen2 architecture sized to the tokenizer) and, unless
    weights=False, random safetensors weights (verl's engine loads them with from_pretrained)."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    directory = Path(directory)
    make_tiny_tokenizer(directory)
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        dtype="float32",
    )
    config.architectures = ["Qwen2ForCausalLM"]
    if weights:
        torch.manual_seed(0)
        Qwen2ForCausalLM(config).save_pretrained(str(directory))
    else:
        config.save_pretrained(str(directory))
    (directory / "generation_config.json").write_text(
        json.dumps({"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id})
    )
    return directory


def guru_rows(data_sources: Sequence[str], per_source: int, split: str) -> list[dict]:
    """Rows in verl's RL parquet layout (data_source, chat prompt, ability, reward_model, extra_info)."""
    rows = []
    for source in data_sources:
        domain = source.split("__", 1)[0]
        for index in range(per_source):
            rows.append(
                {
                    "data_source": source,
                    "prompt": [{"role": "user", "content": f"What is {index} plus {index}? ({domain})"}],
                    "ability": domain,
                    "reward_model": {"style": "rule", "ground_truth": str(2 * index)},
                    "extra_info": {"split": split, "index": index},
                }
            )
    return rows


def make_tiny_dataset(
    directory: Path, domains: Sequence[str] = tuple(GURU_DATASETS), *, per_source: int = 8
) -> tuple[Path, Path]:
    """train.parquet and val.parquet with GURU-style data_source values, one dataset per domain."""
    import pandas as pd

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    sources = [GURU_DATASETS.get(domain, f"{domain}__tiny") for domain in domains]
    train, val = directory / "train.parquet", directory / "val.parquet"
    pd.DataFrame(guru_rows(sources, per_source, "train")).to_parquet(train)
    pd.DataFrame(guru_rows(sources, max(1, per_source // 4), "test")).to_parquet(val)
    return train, val


def tiny_run_overrides(model: Path, train: Path, val: Path) -> list[str]:
    """A small, complete run on one GPU: the tiny model, its data, short prompts, and a batch its 16 rows hold."""
    return [
        "gpu=a40",
        "mode=quick_test",
        f"actor_rollout_ref.model.path={model}",
        f"data.train_files={train}",
        f"data.val_files={val}",
        "data.max_prompt_length=256",
        "data.train_batch_size=8",  # a 512-prompt batch would be refused: verl would train 0 steps
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "trainer.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    ]


def make_hub_snapshot(cache_dir: Path, repo_id: str, files: dict[str, str], commit: str = "0" * 40) -> Path:
    """An HF hub cache entry as huggingface_hub lays it out (models--org--name/refs/main -> snapshots/<commit>/...),
    holding exactly `files` (name -> text). Returns the snapshot directory."""
    repo_dir = Path(cache_dir) / f"models--{repo_id.replace('/', '--')}"
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / "main").write_text(commit)
    snapshot = repo_dir / "snapshots" / commit
    for name, text in files.items():
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).write_text(text)
    return snapshot


def hf_config(
    layers: int, hidden: int, heads: int, kv_heads: int, intermediate: int, vocab: int, **extra: object
) -> str:
    """A config.json of a decoder-only HF model (Llama/Qwen2 key names)."""
    return json.dumps(
        {
            "model_type": extra.pop("model_type", "llama"),
            "num_hidden_layers": layers,
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "num_key_value_heads": kv_heads,
            "intermediate_size": intermediate,
            "vocab_size": vocab,
            "tie_word_embeddings": False,
            "max_position_embeddings": extra.pop("max_position_embeddings", 131072),
            **extra,
        }
    )
