"""A LoRA run's target_modules against its model's layers, asked of peft on the model built on the meta device
(launch/lora_targets.py), before the queue: verl would stop as it builds the LoRA actor."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import compose_config
from tiny_assets import make_tiny_model

from launch.lora_targets import peft_words
from launch.readiness import Findings, judge_lora_targets


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("lora") / "model", weights=False)


def judged(model: Path, *overrides: str) -> Findings:
    cfg = compose_config(f"actor_rollout_ref.model.path={model}", "actor_rollout_ref.model.lora_rank=8", *overrides)
    findings = Findings()
    judge_lora_targets(cfg, findings)
    return findings


def test_targets_that_name_no_layer_are_peft_s_refusal_with_the_models_linear_layers(tiny_model: Path):
    findings = judged(tiny_model, "actor_rollout_ref.model.target_modules=[qproj,vproj]")
    ((check, problem),) = findings.problems
    assert check == "model" and "peft refuses it on" in problem and "as verl builds the LoRA actor" in problem
    assert "Target modules {" in problem and "not found in the base model" in problem  # peft's own words
    assert "Qwen2ForCausalLM: down_proj, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj" in problem
    # a regex that compiles but matches no whole module name: the same refusal
    regex = judged(tiny_model, r"actor_rollout_ref.model.target_modules='.*\.qproj'")
    assert "not found in the base model" in regex.problems[0][1]


def test_a_block_rather_than_a_layer_is_refused_by_its_class(tiny_model: Path):
    ((_, problem),) = judged(tiny_model, "actor_rollout_ref.model.target_modules=[mlp]").problems
    assert "Target module Qwen2MLP is not supported: peft adapts torch.nn.Linear" in problem
    assert "\n" not in problem


def test_a_list_entry_that_names_nothing_is_a_note_as_peft_adapts_the_others(tiny_model: Path):
    findings = judged(tiny_model, "actor_rollout_ref.model.target_modules=[q_proj,v_prj]")
    assert not findings.problems
    (note,) = findings.notes
    assert "v_prj name(s) no layer of" in note and "peft ignores them" in note and "q_proj," not in note.split(":")[0]


@pytest.mark.parametrize(
    "setting",
    [
        "actor_rollout_ref.model.target_modules=[q_proj,v_proj]",
        "actor_rollout_ref.model.target_modules=all-linear",
        "actor_rollout_ref.model.target_modules=[self_attn.q_proj]",  # peft matches a dotted suffix too
    ],
)
def test_targets_peft_takes_pass(tiny_model: Path, setting: str):
    findings = judged(tiny_model, setting)
    assert not findings.problems and not findings.notes


def test_what_cannot_be_judged_here_is_left_to_the_job(tiny_model: Path, tmp_path: Path):
    adapter = judged(
        tiny_model,
        "actor_rollout_ref.model.target_modules=[qproj]",
        f"+actor_rollout_ref.model.lora_adapter_path={tmp_path}",
    )
    assert not adapter.problems  # the adapter's own config names its targets
    off = judged(tiny_model, "actor_rollout_ref.model.target_modules=[qproj]", "actor_rollout_ref.model.lora_rank=0")
    assert not off.problems
    unknown = tmp_path / "remote"
    unknown.mkdir()
    (unknown / "config.json").write_text('{"model_type": "no_such_model", "architectures": ["X"]}')
    assert not judged(unknown, "actor_rollout_ref.model.target_modules=[qproj]").problems
    hub = compose_config("actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.target_modules=[qproj]")
    findings = Findings()
    judge_lora_targets(hub, findings)  # a hub id no cache here holds: nothing to build the model from
    assert not findings.problems


def test_peft_s_unsupported_module_message_is_one_line_naming_the_class():
    message = (
        "Target module Qwen2MLP(\n  (gate_proj): Linear()\n) is not supported. Currently, only the following modules "
        "are supported: `torch.nn.Linear`, `torch.nn.Embedding`, `torch.nn.MultiheadAttention.`."
    )
    assert peft_words(message) == (
        "Target module Qwen2MLP is not supported: peft adapts torch.nn.Linear, torch.nn.Embedding, "
        "torch.nn.MultiheadAttention, not a block"
    )
