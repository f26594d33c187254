"""Prompts longer than the engine's prompt length with data.filter_overlong_prompts=false: verl keeps them and its
agent loop keeps each one's last rollout.prompt_length tokens (agent_loop.py _cap_text_prompt_length), so their
beginning is lost. The plan says so with the measured count, where it had said nothing."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from test_readiness import dry_run, tiny_run
from tiny_assets import guru_rows


def test_prompts_verl_would_cut_without_the_filter_are_said(tmp_path: Path):
    overrides = tiny_run(tmp_path)
    train = next(override.split("=", 1)[1] for override in overrides if override.startswith("data.train_files="))
    long = [row | {"prompt": [{"role": "user", "content": "plus " * 400}]} for row in guru_rows(["math__x"], 8, "t")]
    pd.DataFrame(long).to_parquet(train)
    plan = dry_run(tmp_path, *overrides, "data.filter_overlong_prompts=false")
    said = [warning for warning in plan.warnings if "agent loop keeps each one's last" in warning]
    assert said and said[0].startswith("8 of 8 prompts sampled from data.train_files are longer than"), plan.warnings
    assert "or set data.filter_overlong_prompts=true" in said[0]
    filtered = dry_run(tmp_path, *overrides, "data.filter_overlong_prompts=true")  # the filter's own refusal instead
    assert not any("agent loop keeps" in warning for warning in filtered.warnings), filtered.warnings
