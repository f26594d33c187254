"""The wiring verl uses, with verl's own parts: the composed config's live reward keys, verl's loader, and verl 0.9.1's
RewardLoopManager (real Ray actors, the naive manager calling our coroutine once per sample)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import PROJECT, compose_config, local_ray
from omegaconf import DictConfig, OmegaConf

import rewards
from rewards import RESULT_KEYS, RewardSettings


def test_conf_sets_the_live_keys_and_every_setting():
    cfg = compose_config("algo=guru_baseline")  # mtl_pcgrad inherits this reward section
    function = cfg.reward.custom_reward_function
    assert function.path == str(PROJECT / "rewards" / "verl_entry.py")
    assert function.name == "compute_score"
    assert cfg.custom_reward_function.path is None  # the legacy key, silently ignored by verl 0.9, stays unused
    listed = OmegaConf.to_container(function.reward_kwargs)
    defaults = {field.name: field.default for field in dataclasses.fields(RewardSettings)}
    assert listed == defaults, "conf/algo/guru_baseline.yaml must list every reward setting with its default"


def test_verl_loader_gets_a_coroutine_function():
    from verl.trainer.ppo.reward import get_custom_reward_fn

    function = get_custom_reward_fn(compose_config())
    # the check verl's reward managers make before deciding between awaiting and run_in_executor
    assert inspect.iscoroutinefunction(function)
    result = asyncio.run(
        function(data_source="math__x", solution_str="\\boxed{\\frac{1}{2}}", ground_truth="0.5", extra_info={})
    )
    assert result == {"score": 1.0, "acc": True, "passed": 1.0, "error": "", "errored": 0.0}


# (data_source, response, ground truth, extra_info, expected reward)
BATCH = [
    ("math__deepscaler", "<think>\\boxed{3}</think> So \\boxed{\\frac{1}{2}}.", "0.5", {}, 1.0),
    ("math__deepscaler", "So \\boxed{\\frac{1}{3}}.", "0.5", {}, 0.0),
    ("openai/gsm8k", "Twelve and thirty. #### 42", "42", {}, 1.0),
    (
        "codegen__leetcode2k",
        "```python\nn = int(input())\nprint(n * 2)\n```",
        '{"inputs": ["4"], "outputs": ["8"]}',
        {},
        1.0,
    ),
    ("logic__ordering_puzzle_dataset", "<answer>['owl', 'hawk']</answer>", np.array(["owl", "hawk"]), {}, 1.0),
    ("table__hitab", "\\boxed{12.50}", "12.5", {}, 1.0),
    ("simulation__codeio", '```json\n{"output": 3}\n```', '"output": 4', {}, 0.0),
    ("stem__web", "\\boxed{3 m}", "3 m", {"question": "How far?"}, 0.0),  # no judge configured: an error
]


@pytest.fixture(scope="module")
def ray_of_this_module() -> Iterator[None]:
    with local_ray(num_cpus=4, log_to_driver=False):
        yield


def verl_config(tokenizer_dir: Path) -> DictConfig:
    """The composed config as verl receives it (resolved), with a local tokenizer and 2 reward workers."""
    cfg = OmegaConf.create(OmegaConf.to_container(compose_config("llm=qwen2_5_0_5b"), resolve=True))
    cfg.actor_rollout_ref.model.path = str(tokenizer_dir)
    cfg.actor_rollout_ref.model.tokenizer_path = None
    cfg.reward.num_workers = 2
    cfg.reward.custom_reward_function.reward_kwargs.procs = 1
    return cfg


def batch_of(tokenizer, rows: list[tuple]) -> object:
    """A DataProto shaped like a rollout batch: left-padded prompts, right-padded responses, one mask for both."""
    from verl import DataProto

    prompts = [tokenizer.encode("Solve it.") for _ in rows]
    responses = [tokenizer.encode(response) for _, response, *_ in rows]
    for (_, response, *_), ids in zip(rows, responses, strict=True):
        assert tokenizer.decode(ids, skip_special_tokens=True) == response  # the text survives the round trip
    width_p, width_r = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (width_p - len(p)) + p for p in prompts])
    response_ids = torch.tensor([r + [pad] * (width_r - len(r)) for r in responses])
    mask = torch.tensor(
        [
            [0] * (width_p - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (width_r - len(r))
            for p, r in zip(prompts, responses, strict=True)
        ]
    )
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_ids,
            "responses": response_ids,
            "input_ids": torch.cat([prompt_ids, response_ids], dim=1),
            "attention_mask": mask,
        },
        non_tensors={
            "data_source": np.array([row[0] for row in rows], dtype=object),
            "reward_model": np.array([{"ground_truth": row[2]} for row in rows], dtype=object),
            "extra_info": np.array([dict(row[3]) for row in rows], dtype=object),
        },
    )


def orphaned_workers() -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if b"worker_main()" in cmdline and ppid == 1:
            found.append(pid)
    return found


def test_verl_reward_loop_manager_scores_a_mixed_batch(tmp_path, ray_of_this_module):
    from tiny_assets import make_tiny_tokenizer
    from transformers import AutoTokenizer
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    tokenizer_dir = make_tiny_tokenizer(tmp_path / "tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    manager = RewardLoopManager(verl_config(tokenizer_dir))
    data = batch_of(tokenizer, BATCH)

    output = manager.compute_rm_score(data)

    # verl puts each reward on the response's last valid token; the row sum is the reward
    assert output.batch["rm_scores"].sum(dim=1).tolist() == [row[4] for row in BATCH]
    assert output.meta_info["reward_extra_keys"] == list(RESULT_KEYS)
    errors = list(output.non_tensor_batch["error"])
    assert errors[:-1] == [""] * (len(BATCH) - 1), errors  # math graded in processes: no SIGALRM-in-thread error
    assert errors[-1].startswith("judge unreachable") and output.non_tensor_batch["errored"].tolist()[-1] == 1.0
    assert output.non_tensor_batch["acc"].tolist() == [row[4] == 1.0 for row in BATCH]


def test_reward_workers_leave_no_scoring_process_behind():
    """Runs after the Ray test in this module: ray.shutdown() killed the reward actors; their scoring processes
    die with them (parent-death signal), so none is left orphaned."""
    deadline = time.monotonic() + 10
    while orphaned_workers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert orphaned_workers() == []
    assert rewards.RESULT_KEYS == RESULT_KEYS
