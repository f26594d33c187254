"""What a run that selects PCGrad must hold for the plug-in to run at all, checked on the login node before the queue:
each of these otherwise gives a run that is silently plain GRPO, or one that fails only at the first actor update.

Runs in: the planner (launch/validate.py::check_pcgrad, launch/preflight.py, launch/plan.py); pure Python, no verl
import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from algos.tasks import task_of

TRAINER_NAME = "mtl_pcgrad"  # the verl trainer mode the plug-in registers (algos/verl_pcgrad.py)
# The fields verl 0.9.1 adds to every sample besides the data file's own columns (utils/dataset/rl_dataset.py's
# __getitem__, and the trainer's prompt uid), all carried to the actor's update batch as non-tensor fields.
VERL_SAMPLE_FIELDS = ("uid", "index", "tools_kwargs", "interaction_kwargs", "raw_prompt")
# The column verl's own reward reads from every row: present whatever file the run reads.
ALWAYS_A_COLUMN = "data_source"


def selects_pcgrad(verl: Mapping[str, Any]) -> bool:
    """A resolved verl config that runs the plug-in's trainer (conf/algo/mtl_pcgrad.yaml sets the mode)."""
    return (verl["trainer"].get("v1") or {}).get("trainer_mode") == TRAINER_NAME


def tasks_in(sources: Iterable[str], task_map: Mapping[str, str]) -> list[str]:
    """The tasks the plug-in sees for these data sources (or domains: task_of maps a domain to itself), task_map
    applied: what PCGrad allocates one gradient buffer for."""
    return sorted({task_of(str(source), task_map) for source in sources})


def pcgrad_tasks(cfg: Any) -> list[str]:
    """The tasks of a composed config's run (algo=mtl_pcgrad): the data's domains (readiness.apply_data_facts sets
    dataset.domains from the files read, else the dataset group's), folded by algo.pcgrad.task_map as the plug-in
    folds them. A task_map entry keyed by a whole data_source is seen here only through its domain."""
    return tasks_in(cfg.dataset.domains, cfg.algo.pcgrad.get("task_map") or {})


def single_task_warning(cfg: Any) -> list[str]:
    """PCGrad with one task projects nothing: its update is exactly the plain gradient (algos/pcgrad.py), at the cost
    of the task buffers' memory and the extra pass."""
    if not cfg.algo.pcgrad.enabled:
        return []
    tasks = pcgrad_tasks(cfg)
    if len(tasks) != 1:
        return []
    return [
        f"algo=mtl_pcgrad with a single task ({tasks[0]}: the data's every domain, algo.pcgrad.task_map applied): "
        "PCGrad's update is then exactly the plain gradient, plus its buffers' memory; algo=guru_baseline "
        "trains the same without them"
    ]


def pcgrad_refusal(verl: Mapping[str, Any], task_key: str, data_columns: frozenset[str] | None) -> str | None:
    """Why the PCGrad plug-in would not run on this verl config, as one line naming key, value and fix; None if it
    would. `data_columns`: the columns every train file has, where they were read here (None: none was)."""
    if not verl["trainer"].get("use_v1", True):
        # main_ppo runs main_ppo_v0's TaskRunner, which never reads trainer.v1.trainer_mode: plain GRPO, no error
        return (
            "trainer.use_v1=false with algo=mtl_pcgrad: verl's legacy trainer never reads trainer.v1.trainer_mode, so "
            "the run would be plain GRPO without PCGrad; drop trainer.use_v1=false (PCGrad runs on verl's v1 trainer)"
        )
    if verl["actor_rollout_ref"]["actor"].get("strategy") == "megatron":
        # algos/sharded.py captures parameter.grad; Megatron's engine keeps gradients in its own grad buffers
        return (
            "backend=megatron with algo=mtl_pcgrad: the PCGrad plug-in reads FSDP's parameter gradients, and Megatron "
            "keeps them in its own grad buffers, so PCGrad would not see them; use backend=fsdp with algo=mtl_pcgrad, "
            "or algo=guru_baseline on Megatron"
        )
    known = (data_columns if data_columns is not None else frozenset({ALWAYS_A_COLUMN})) | set(VERL_SAMPLE_FIELDS)
    if task_key not in known:
        where = (
            f"the train files' columns are {', '.join(sorted(data_columns))}"
            if data_columns is not None
            else f"the train files are not readable here, and only '{ALWAYS_A_COLUMN}' is sure to reach the actor"
        )
        # algos/verl_pcgrad.py::sample_tasks looks the key up in the actor's update batch: a KeyError after a rollout
        return (
            f"algo.pcgrad.task_key={task_key}: no such field in verl's batch ({where}; verl adds "
            f"{', '.join(VERL_SAMPLE_FIELDS)}); write algo.pcgrad.task_key={ALWAYS_A_COLUMN}"
        )
    return None
