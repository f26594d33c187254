"""A local model whose config.json has a model_type transformers does not know: the planner reads its tokenizer and
config with transformers, which warns on stderr through its own handler ("You are using a model of type ...",
transformers/configuration_utils.py). The user sees rlaunch's one line or its plan, never that second line
(launch/facts.py quiet_transformers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PROJECT, run_cli
from tiny_assets import hf_config, make_tiny_dataset, make_tiny_model, tiny_run_overrides

TRANSFORMERS_WARNING = "You are using a model of type `my_arch`"


@pytest.fixture(scope="module")
def unknown_arch_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with its model_type renamed to one transformers has never heard of (its sizes kept)."""
    model = make_tiny_model(tmp_path_factory.mktemp("arch") / "model", weights=False)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(config | {"model_type": "my_arch"}))
    return model


def stderr_of(code: str) -> str:
    """stderr of a fresh interpreter running `code`: transformers binds its handler to the stderr it first sees."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT, capture_output=True, text=True, timeout=120, check=True
    )
    return done.stderr


def test_transformers_warnings_are_held_back_inside_and_put_back_after(unknown_arch_model: Path):
    load = f"AutoTokenizer.from_pretrained({str(unknown_arch_model)!r}, local_files_only=True)"
    code = (
        "from transformers import AutoTokenizer\n"
        "from transformers.utils import logging\n"
        "from launch.facts import quiet_transformers\n"
        "before = logging.get_verbosity()\n"
        f"with quiet_transformers():\n    {load}\n"
        "assert logging.get_verbosity() == before, 'verbosity not restored'\n"
        "import sys; print('--- outside', file=sys.stderr)\n"
        f"{load}\n"
    )
    inside, _, outside = stderr_of(code).partition("--- outside")
    assert TRANSFORMERS_WARNING not in inside
    assert TRANSFORMERS_WARNING in outside  # the warning is real: held back only where rlaunch asks


def test_lora_targets_builds_the_model_without_a_word(tmp_path: Path):
    """A rope_scaling key transformers does not know: its config validation warns (modeling_rope_utils.py) as the
    LoRA check builds the model on the meta device."""
    model = tmp_path / "rope"
    model.mkdir()
    rope = {"rope_type": "linear", "factor": 2.0, "original_scaling": 1}
    (model / "config.json").write_text(
        hf_config(2, 64, 4, 2, 128, 1000, architectures=["LlamaForCausalLM"], rope_scaling=rope)
    )
    code = (
        "from pathlib import Path\n"
        "from launch.lora_targets import reach\n"
        f"found = reach(Path({str(model / 'config.json')!r}), {{'lora_rank': 8, 'target_modules': ['q_proj']}})\n"
        "assert found is not None and not found.refusal, found\n"
    )
    assert "Unrecognized keys" not in stderr_of(code)


def test_the_planner_prints_rlaunch_s_words_only(unknown_arch_model: Path, tmp_path: Path):
    train, val = make_tiny_dataset(tmp_path / "data")
    done = run_cli(*tiny_run_overrides(unknown_arch_model, train, val), "launch.dry_run=true", cwd=tmp_path)
    assert TRANSFORMERS_WARNING not in done.stdout + done.stderr
    assert "[transformers]" not in done.stderr
