"""The plan's `positions` line where the model's own config.json is not readable here (launch/facts.py
borrowed_positions): one plain sentence saying what was not read and how to read it."""

from __future__ import annotations

from launch.facts import borrowed_positions


def test_a_local_model_without_a_readable_config_json_is_said_in_a_plain_sentence():
    llm = {
        "name": "qwen2_5_7b",
        "path": "/data/models/Qwen2.5-7B-Instruct",
        "source": "conf/llm/qwen2_5_7b.yaml (llm=qwen2_5_7b)",
        "max_position_embeddings": 32768,
    }
    said = borrowed_positions(llm)
    assert "/data/models/Qwen2.5-7B-Instruct has no config.json readable here, and its positions may differ" in said
    assert "is its directory" not in said and "hf download" not in said
    assert said.endswith("make its config.json readable here to plan with its own")
    hub = borrowed_positions({**llm, "path": "Qwen/Qwen2.5-7B"})
    assert "Qwen/Qwen2.5-7B's own config.json is not in the HF cache here" in hub
    assert "cache its config.json (hf download Qwen/Qwen2.5-7B config.json) to plan with its own" in hub
