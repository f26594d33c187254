"""The job's software where it changes memory: a fact about the cluster, not about the machine that plans.

Runs on: the login node (planning). The preflight's coefficients depend on code that runs on the GPU nodes: with
flash-attn in the job's environment verl computes log-probs with its in-place cross-entropy (half the logits' bytes
of the pure-torch path), and the rollout engine's version decides how it sleeps (vLLM >= 0.18 under verl 0.9 drops
its weights, older engines and SGLang keep them in host RAM). `cluster.flash_attn` and `cluster.engine_version` say
what the job has; `auto` takes the planning venv's packages, which is right when the login node shares the job's
venv, and the plan records which was taken and why.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from launch.errors import UserError
from launch.schema import ClusterSettings, choices_of

SWITCHES = choices_of(ClusterSettings, "flash_attn")
# verl 0.9.1 (verl/third_party/vllm): vLLM from this version on sleeps at level 2 (weights and KV cache dropped)
VLLM_LEVEL_2_FROM = (0, 18)
# the pure-torch log-prob path is forced by this variable even where flash-attn is installed (verl's torch_functional)
DISABLE_FLASH_CE = "VERL_DISABLE_FLASH_ATTN_CE"


@dataclass(frozen=True)
class JobSoftware:
    flash_attn: bool  # verl's log-probs use flash-attn's cross-entropy in the job
    flash_attn_source: str  # how that was decided, for the plan
    engine: str
    engine_version: str | None  # None: unknown (auto with no engine installed where this was planned)
    engine_version_source: str
    engine_weights_in_host_ram: bool  # the sleeping engine keeps its weights in host RAM (sleep level 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self, megatron: bool = False, engine_sleeps: bool = True) -> list[str]:
        """The plan's lines, each for a part of the estimate this software changes. A Megatron actor computes its
        log-probs with Megatron's vocab-parallel cross-entropy (verl/workers/engine/megatron/transformer_impl.py
        vocab_parallel_log_probs_from_logits), never flash-attn's: its plan has no log-prob line. algo=rft's engine
        generates alone (verl's generation server) and never sleeps."""
        version = self.engine_version or "version unknown"
        sleep = "keeps its weights in host RAM" if self.engine_weights_in_host_ram else "drops its weights"
        sleep = f"asleep it {sleep}" if engine_sleeps else "it generates alone and never sleeps (algo=rft)"
        engine = f"{self.engine} {version} ({self.engine_version_source}); {sleep}"
        return [engine] if megatron else [self.log_prob_line(), engine]

    def log_prob_line(self) -> str:
        """What FSDP's log-prob pass runs in the job (verl/utils/torch_functional.py logprobs_from_logits)."""
        flash = "flash-attn cross-entropy" if self.flash_attn else "pure-torch log-probs"
        return f"{flash} ({self.flash_attn_source})"


def switch(value: Any, key: str) -> str:
    text = str(value).lower()
    if text not in SWITCHES:
        raise UserError(f"{key}={value} is not one of {', '.join(SWITCHES)}: say whether the job's environment has it")
    return text


def version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def job_software(cluster: Any, engine: str, packages: dict[str, str]) -> JobSoftware:
    """cluster: the composed `cluster` node; engine: actor_rollout_ref.rollout.name; packages: the planning venv's."""
    flash = switch(cluster.get("flash_attn", "auto"), "cluster.flash_attn")
    env = dict(cluster.get("env") or {})
    if str(env.get(DISABLE_FLASH_CE, "0")) == "1":
        has_flash, flash_source = False, f"cluster.env sets {DISABLE_FLASH_CE}=1"
    elif flash == "auto":
        installed = packages.get("flash-attn")
        has_flash = installed is not None
        flash_source = (
            f"cluster.flash_attn=auto: flash-attn {installed} where this was planned"
            if installed
            else "cluster.flash_attn=auto: no flash-attn where this was planned; set cluster.flash_attn=true if the "
            "job's environment has it"
        )
    else:
        has_flash, flash_source = flash == "true", f"cluster.flash_attn={flash}"
    wanted = str(cluster.get("engine_version", "auto"))
    if wanted.lower() == "auto":
        version = packages.get(engine)
        version_source = (
            f"cluster.engine_version=auto: {engine} {version} where this was planned"
            if version
            else f"cluster.engine_version=auto: no {engine} where this was planned"
        )
    else:
        version, version_source = wanted, f"cluster.engine_version={wanted}"
    # unknown counts as the engine that keeps its weights: the host-RAM estimate stays on the safe side
    drops = engine == "vllm" and version is not None and version_tuple(version)[:2] >= VLLM_LEVEL_2_FROM
    return JobSoftware(has_flash, flash_source, engine, version, version_source, not drops)


def skipped_engine_check(verl: Mapping[str, Any]) -> str:
    """verl checks a LoRA rank against the installed vLLM and refuses when the planning machine has none ("vllm
    version None not supported"): that is the job's environment, not this one's. The note when it is skipped."""
    model, rollout = verl["actor_rollout_ref"]["model"], verl["actor_rollout_ref"]["rollout"]
    lora = (model.get("lora") or {}).get("rank", 0) or model.get("lora_rank", 0)
    if not lora or rollout["name"] != "vllm" or importlib.util.find_spec("vllm") is not None:
        return ""
    return (
        "verl's vLLM version and LoRA-rank check skipped: vllm is not installed where this was planned "
        "(the job's environment decides)"
    )
