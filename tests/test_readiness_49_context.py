"""verl's DAPO scripts (examples/gmpo_trainer/test_dapo_7b_math.sh) train Qwen2.5-Math-7B, whose config.json has 4096
positions, on 2048 + 8192 tokens with `+actor_rollout_ref.model.override_config.max_position_embeddings=32768`. verl
applies the override to its own copy of the HF config (its trainer; the max_model_len its rollout server asks for),
but the engine reads the model directory's config.json: vLLM refuses max_model_len 32768 as it starts unless
VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 reaches it, and SGLang, given no context length, keeps config.json's. The refusal names
the override and what to do (the script's own comment: change config.json too); with vLLM's switch in cluster.env the
run plans."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_readiness import dry_run, tiny_run

from launch.errors import UserError

OVERRIDE = "+actor_rollout_ref.model.override_config.max_position_embeddings=32768"
DAPO_LENGTHS = ["data.max_prompt_length=2048", "data.max_response_length=8192"]
SWITCH = "+cluster.env.VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
VLLM, SGLANG = "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.name=sglang"


def test_lengths_within_an_override_vllm_does_not_read_are_refused_naming_it_and_the_fixes(tmp_path: Path):
    with pytest.raises(UserError) as refused:
        dry_run(tmp_path, *tiny_run(tmp_path), *DAPO_LENGTHS, OVERRIDE, VLLM)
    assert str(refused.value) == (
        "data.max_prompt_length + max_response_length (10240) exceeds the 4096 positions of the model's config.json, "
        "which vLLM reads (it refuses a longer max_model_len as it starts): "
        "actor_rollout_ref.model.override_config.max_position_embeddings=32768 changes verl's copy of the config only; "
        "set max_position_embeddings to 32768 in the model's config.json, as verl's own DAPO scripts ask, set "
        "cluster.env.VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (vLLM then extrapolates positions beyond them), or shorten them "
        "to 4096 in all (e.g. data.max_response_length=2048)"
    )


def test_vllms_own_switch_in_the_workers_environment_takes_the_override(tmp_path: Path):
    plan = dry_run(tmp_path, *tiny_run(tmp_path), *DAPO_LENGTHS, OVERRIDE, VLLM, SWITCH)
    assert plan.verl["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"


def test_sglang_keeps_config_jsons_context_and_no_switch_is_offered(tmp_path: Path):
    with pytest.raises(UserError, match=r"which SGLang reads \(verl passes it no context length, so longer") as e:
        dry_run(tmp_path, *tiny_run(tmp_path), *DAPO_LENGTHS, OVERRIDE, SGLANG)
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in str(e.value)


def test_the_override_alone_makes_vllm_start_beyond_config_json(tmp_path: Path):
    """Short lengths, max_model_len null: verl gives vLLM the override's 32768, which vLLM refuses as it starts."""
    vllm = [*tiny_run(tmp_path), OVERRIDE, VLLM]
    with pytest.raises(UserError, match=r"^max_model_len 32768, which verl gives vLLM from the override .* or set "):
        dry_run(tmp_path, *vllm)
    assert dry_run(tmp_path, *vllm, "actor_rollout_ref.rollout.max_model_len=512").preflight is not None
    assert dry_run(tmp_path, *vllm, SWITCH).preflight is not None
