"""Which layers a LoRA run's target_modules reach, asked of peft itself on the model built without weights.

Runs on: the login node (readiness, for a run with LoRA on: lora_rank > 0 and no adapter to load). verl builds the
LoRA actor with peft's get_peft_model as the job's workers start (verl/workers/engine/fsdp/transformer_impl.py
_build_lora_module), after the queue and Ray's bring-up: a target_modules that names no layer of the model raises
there ("Target modules ... not found in the base model"), one that names a block rather than a layer raises "Target
module ... is not supported", and a list entry that names nothing is silently ignored (LoRA on fewer layers than
written). Here the model is built from its config.json on the meta device (no weights, ~0.1 s for 72B) with the class
verl's workers choose, and peft injects the same LoraConfig into it: the refusal is peft's own, before the queue.
Only where the config.json is readable here (a local directory, or a hub id in the HF cache), and only for a model
transformers builds without remote code; anything else is left to the job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launch.facts import quiet_transformers

ALL_LINEAR = "all-linear"  # peft's shorthand (INCLUDE_LINEAR_LAYERS_SHORTHAND): every linear layer, always found


@dataclass(frozen=True)
class TargetReach:
    """What peft did with the run's target_modules on this model: its refusal ("" where it took them), the list
    entries that named no layer, and the model's own linear layer names (for the fix)."""

    refusal: str
    unmatched: tuple[str, ...]
    linear_names: tuple[str, ...]
    model_class: str


def judged_targets(model: Mapping[str, Any]) -> bool:
    """A LoRA model block whose targets peft would resolve against the model: LoRA on, no adapter (its own config
    names the targets), and target_modules other than all-linear (or target_parameters / exclude_modules set)."""
    if int(model.get("lora_rank") or 0) <= 0 or model.get("lora_adapter_path") is not None:
        return False
    targets = model.get("target_modules")
    shorthand = isinstance(targets, str) and targets.lower() == ALL_LINEAR
    return not shorthand or bool(model.get("target_parameters")) or bool(model.get("exclude_modules"))


def as_plain(value: Any) -> Any:
    """An OmegaConf list as the list peft expects (verl's convert_to_regular_types)."""
    if isinstance(value, str) or value is None:
        return value
    return list(value) if isinstance(value, Sequence) or hasattr(value, "__iter__") else value


def reach(config_file: Path, model: Mapping[str, Any]) -> TargetReach | None:
    """peft's answer for this model's config.json and the run's LoRA settings; None where the model cannot be built
    here (a model_type this transformers does not know, or one that needs its remote code)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig
    from verl.utils.model import get_hf_auto_model_class

    try:
        with quiet_transformers():
            hf_config = AutoConfig.from_pretrained(str(config_file.parent), trust_remote_code=False)
            auto_class = get_hf_auto_model_class(hf_config)
            with torch.device("meta"):
                module = auto_class.from_config(hf_config)
    except Exception:  # unknown model_type, remote code, a config transformers refuses: the job will say
        return None
    linear = sorted(
        {name.rsplit(".", 1)[-1] for name, layer in module.named_modules() if isinstance(layer, torch.nn.Linear)}
    )
    targets = as_plain(model.get("target_modules"))
    unmatched: list[str] = []
    if isinstance(targets, list):
        names = [name for name, _ in module.named_modules()]
        unmatched = [
            entry for entry in targets if not any(name == entry or name.endswith(f".{entry}") for name in names)
        ]
    lora = LoraConfig(
        task_type="CAUSAL_LM",
        r=int(model.get("lora_rank") or 0),
        lora_alpha=int(model.get("lora_alpha") or 16),
        target_modules=targets,
        target_parameters=as_plain(model.get("target_parameters")),
        exclude_modules=as_plain(model.get("exclude_modules")),
        bias="none",
    )
    try:
        with quiet_transformers():
            get_peft_model(module, lora)
    except (ValueError, TypeError, KeyError) as error:  # peft's NoMatchingPeftModuleError is a ValueError
        return TargetReach(peft_words(str(error)), tuple(unmatched), tuple(linear), type(module).__name__)
    return TargetReach("", tuple(unmatched), tuple(linear), type(module).__name__)


def peft_words(message: str) -> str:
    """peft's refusal in one line: "Target module Qwen2MLP(...) is not supported" prints the whole module; its class
    name is what it says."""
    unsupported = re.match(r"Target module (\w+)\(", message)
    if unsupported and "is not supported" in message:
        allowed = ", ".join(re.findall(r"`([\w.]+?)\.?`", message.split("supported:", 1)[-1])) or "layers"
        return f"Target module {unsupported.group(1)} is not supported: peft adapts {allowed}, not a block"[:300]
    lines = message.strip().splitlines()
    return lines[0][:300] if lines else "peft refused the LoRA config"
