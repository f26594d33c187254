"""A vision-language model's vision tower is counted from its config.json's vision_config (launch/facts.py
vision_params_of): trained, stored and served with the decoder, so the preflight's params, grads, optimizer and
checkpoint include it."""

from __future__ import annotations

import copy

from launch.facts import architecture_of
from launch.memory import Architecture

# Qwen/Qwen2.5-VL-7B-Instruct's config.json on the Hugging Face hub, as verl's worker prints it in a public run log
# (ray WorkerDict "Model config after override") and as serving code pins it; the model-level keys that matter here
QWEN2_5_VL_7B = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 128000,
    "tie_word_embeddings": False,
    "rope_theta": 1000000.0,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {
        "depth": 32,
        "hidden_act": "silu",
        "hidden_size": 1280,
        "intermediate_size": 3420,
        "num_heads": 16,
        "in_chans": 3,
        "out_hidden_size": 3584,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "spatial_patch_size": 14,
        "window_size": 112,
        "fullatt_block_indexes": [7, 15, 23, 31],
        "tokens_per_second": 2,
        "temporal_patch_size": 2,
    },
}
# transformers' Qwen2_5_VLForConditionalGeneration of that config, built on the meta device: its parameters, and
# those under model.visual (patch_embed 1,505,280 + blocks 630,470,400 + merger 44,574,464)
TRANSFORMERS_TOTAL, TRANSFORMERS_VISUAL = 8_292_166_656, 676_550_144
# Qwen2-VL-7B's vision tower names its width embed_dim and its output hidden_size; transformers counts it at
# 675,759,104 (LayerNorms with biases, which the count here leaves out)
QWEN2_VL_7B_VISION = {
    "depth": 32,
    "embed_dim": 1280,
    "mlp_ratio": 4,
    "num_heads": 16,
    "in_chans": 3,
    "hidden_size": 3584,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
}


def test_qwen2_5_vl_counts_its_vision_tower_as_transformers_does():
    table = architecture_of(QWEN2_5_VL_7B)
    assert table["vision_params"] == TRANSFORMERS_VISUAL
    arch = Architecture.from_llm(table)
    assert arch.params == TRANSFORMERS_TOTAL  # before: 7.6B, the language model only
    assert arch.active_params == TRANSFORMERS_TOTAL - TRANSFORMERS_VISUAL  # a text token does not pass the tower


def test_qwen2_vl_names_its_vision_width_embed_dim():
    config = copy.deepcopy(QWEN2_5_VL_7B) | {"model_type": "qwen2_vl", "vision_config": QWEN2_VL_7B_VISION}
    assert abs(architecture_of(config)["vision_params"] - 675_759_104) / 675_759_104 < 0.001


def test_a_text_model_has_no_vision_field():
    text = {key: value for key, value in QWEN2_5_VL_7B.items() if key != "vision_config"}
    assert "vision_params" not in architecture_of(text)
    assert Architecture.from_llm(architecture_of(text)).params == TRANSFORMERS_TOTAL - TRANSFORMERS_VISUAL
