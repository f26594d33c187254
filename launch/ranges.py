"""The range table: what the numeric keys that matter may hold, checked before anything reads them.

Runs on: the login node, first thing in planning (launch/readiness.py's prepare), before any arithmetic on the
values: `data.train_batch_size=abc` or `ppo_mini_batch_size=0` would otherwise surface as a TypeError or a
ZeroDivisionError in our own checks, and `optim.lr=-1` would be planned and queued.

A key's type is verl's own: the field annotation of the config dataclass its node names with `_target_` (ActorConfig,
RolloutConfig, OptimizerConfig, ...), read from verl's source with `ast` (importing verl takes ~3 s of torch and Ray,
which planning avoids: launch/validate.py asks verl only through a cache); where no dataclass has the field (data.*,
trainer.*), the type of verl's yaml default. rlaunch's own roots are typed by launch/schema.py (OmegaConf refuses a
wrong type at compose), so only their ranges are checked here. The table holds only ranges.
"""

from __future__ import annotations

import ast
import math
import typing
from dataclasses import dataclass, fields, is_dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from launch.errors import UserError, closest
from launch.memory import trains_critic
from launch.schema import RlaunchSchema, mappings, select, verl_defaults, verl_package_dir

NUMBER_TYPES = ("int", "float")
_ABSENT = object()


@dataclass(frozen=True)
class Range:
    """low (<= value, or < value when low_open) and high (value <= high); `never`: the one value outside that means
    "never"; `nullable`: null allowed; `verl_does`: what verl 0.9.1 does with a value outside (said where we are
    stricter than verl, or where verl's own failure comes only in the job)."""

    low: float
    low_open: bool = False
    high: float | None = None
    never: int | None = None
    nullable: bool = False
    verl_does: str = ""
    words: tuple[str, ...] = ()  # strings verl also takes (the SFT trainer's save_freq=after_each_epoch)
    integer: bool = False  # a whole number where neither verl nor launch/schema.py declares a type (data.seed)

    def holds(self, value: float) -> bool:
        if value == self.never:
            return True
        above = value > self.low if self.low_open else value >= self.low
        return above and (self.high is None or value <= self.high)

    def fallback_kind(self) -> str:
        """Where neither verl nor launch/schema.py declares a type (a null default): a closed range of whole numbers
        from 1 counts something (prompts, steps) and takes an integer."""
        return "int" if self.integer or (self.low >= 1 and not self.low_open) else "float"

    def describe(self, kind: str) -> str:
        noun = "an integer" if kind == "int" else "a number"
        if not math.isfinite(self.low):
            bound = f"a finite {noun.split()[-1]}"
        else:
            bound = f"{noun} {'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            bound += f" and <= {self.high:g}"
        text = f"{self.never} (never) or {bound}" if self.never is not None else bound
        text = " or ".join((text, *self.words))
        return f"{text} or null" if self.nullable else text


SIZE = Range(1)
OPTIONAL_SIZE = Range(1, nullable=True)
FRACTION = Range(0, low_open=True, high=1)
NON_NEGATIVE = Range(0)
# verl checks `freq > 0` before saving or validating: every other value means "never", which -1 says plainly
FREQUENCY = Range(
    1,
    never=-1,
    verl_does="verl 0.9.1 treats every value <= 0 as never (ray_trainer.py checks freq > 0): write -1 for that",
)
# verl's checkpoint manager keeps every checkpoint unless `max_ckpt_to_keep > 0` (checkpoint_manager.py)
RETENTION = Range(
    1,
    nullable=True,
    verl_does="verl 0.9.1 keeps every checkpoint for 0 or less (it removes old ones only for a value > 0): write null "
    "for that",
)
COEFFICIENT = Range(0, verl_does="verl 0.9.1 would run it, rewarding the policy for moving away from the reference")
CLIP = Range(0, verl_does="verl 0.9.1 would run it with the clip range turned inside out")
LEARNING_RATE = Range(
    0, low_open=True, verl_does="verl 0.9.1 would run it: 0 trains nothing, a negative rate climbs the loss"
)
# torch's AdamW, which verl builds as the worker starts, raises "Invalid weight_decay value" below 0
WEIGHT_DECAY = Range(0, verl_does="verl 0.9.1 would fail as the worker builds its optimizer (torch's AdamW)")
# GAE's discount and its lambda (core_algos.compute_gae_advantage_return): above 1 a return grows with every token
DISCOUNT = Range(0, high=1, verl_does="verl 0.9.1 would run it, each token's return growing with the ones after it")
# verl trains LoRA only for a rank > 0 (its engines' `lora_rank > 0`): a negative one quietly trains the whole model
LORA_RANK = Range(0, verl_does="verl 0.9.1 would quietly train every parameter instead (LoRA only for a rank > 0)")
# peft (FSDP) and Megatron-Bridge alike scale LoRA's update by alpha / rank
LORA_ALPHA = Range(
    0,
    low_open=True,
    verl_does="verl 0.9.1 would run it, LoRA's update scaled by alpha / rank: 0 trains nothing, a negative alpha "
    "turns it around",
)
# verl's FSDP and Megatron trees both carry the Megatron LoRA block (model.lora); only Megatron reads it
LORA_RANGES = {
    f"{model}.{key}": allowed
    for model in ("actor_rollout_ref.model", "critic.model")
    for key, allowed in {
        "lora_rank": LORA_RANK,
        "lora_alpha": LORA_ALPHA,
        "lora.rank": LORA_RANK,
        "lora.alpha": LORA_ALPHA,
    }.items()
}
# verl splits each batch into chunks, one per worker (agent_loop.py prompts.chunk, reward_loop.py
# pad_dataproto_to_divisor): 0 or fewer workers fail at the first rollout or the first reward
# verl passes top_k to the engine's sampling parameters as it is (-1: all tokens); vLLM and SGLang refuse below -1
TOP_K = Range(
    -1,
    integer=True,
    verl_does="verl 0.9.1 passes it to vLLM's and SGLang's sampling parameters, which refuse it when generating",
)
WORKERS = Range(1, verl_does="verl 0.9.1 would fail at the first step, splitting the batch over no workers")
# the engine's own prompt and response lengths (rollout.yaml: data.max_prompt_length / max_response_length unless set):
# the agent loop keeps a prompt's last prompt_length tokens (agent_loop.py _cap_text_prompt_length) and the engine
# generates at most response_length
ENGINE_PROMPT = Range(
    1,
    verl_does="verl 0.9.1 would run it, the agent loop keeping each prompt's last N tokens (-1: all but the first; "
    "0: the whole prompt, padded to no length)",
)
ENGINE_RESPONSE = Range(1, verl_does="verl 0.9.1 would run it, the engine generating at most N tokens (0: none)")
# any sign (a negative coefficient rewards a sharper policy), but a number: NaN or inf makes every loss NaN, and verl's
# engines skip each optimizer step whose gradient norm is not finite (transformer_impl.py), so nothing is trained
ANY_FINITE = Range(-math.inf, verl_does="verl 0.9.1 would run it, every loss NaN and every optimizer step skipped")
# verl's adaptive KL controller (core_algos.AdaptiveKLController.update) divides by both
KL_CONTROLLER = Range(
    0,
    low_open=True,
    verl_does="verl 0.9.1's adaptive KL controller divides by it: its coefficient turns inf or NaN at the first step",
)

# verl's PPO and SFT trainers alike
EPOCHS = Range(1, verl_does="verl 0.9.1 would train 0 steps")
STEPS = Range(1, nullable=True, verl_does="verl 0.9.1 takes any value that is not null as the step count")
WARMUP_RATIO = Range(
    0, high=1, verl_does="verl 0.9.1 would warm up for longer than the run: the rate never reaches optim.lr"
)
# verl's SFT trainer takes a step count or after_each_epoch, and computes `global_step % freq` at every step before it
# asks whether freq > 0
SFT_FREQUENCY = Range(
    1,
    never=-1,
    words=("after_each_epoch",),
    verl_does="verl 0.9.1's SFT trainer fails at its first step for 0 (global_step % 0) and treats every other "
    "value <= 0 as never: write -1 for that",
)
# torch's clip_grad_norm_, which verl's engines call with optim.clip_grad: 0 scales every gradient to 0, a negative
# norm turns every gradient around
GRADIENT_CLIP = Range(
    0, low_open=True, verl_does="verl 0.9.1 would run it: 0 zeroes every gradient, a negative one turns them around"
)
MIN_LR_RATIO = Range(
    0,
    high=1,
    nullable=True,
    verl_does="verl 0.9.1 asserts 0 <= min_lr_ratio <= 1 as the worker builds a cosine schedule",
)
# Megatron-core's parallel sizes (verl's McoreEngineConfig), per role: whole numbers of GPUs; ETP and VPP may be null
MEGATRON_ROLES = ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic")
MEGATRON_RANGES = {
    f"{role}.megatron.{size}": SIZE
    for role in MEGATRON_ROLES
    for size in (
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "context_parallel_size",
        "expert_model_parallel_size",
    )
} | {
    f"{role}.megatron.{size}": OPTIONAL_SIZE
    for role in MEGATRON_ROLES
    for size in ("expert_tensor_parallel_size", "virtual_pipeline_model_parallel_size")
}

# algo=rft's own settings come first: rollout.n and rollout.temperature follow two of them (conf/algo/rft.yaml), and
# a bad value is named as the user wrote it, not as the key that follows it
RFT_RANGES = {"rft.oversample": SIZE, "rft.temperature": NON_NEGATIVE, "rft.k": SIZE}
# stage 3's keys of verl's sft_trainer_engine tree, where rft.sft sets them (typed by that tree: sft_defaults): a table
# of their own, as only algo=rft has them; checked after the PPO keys, as rft.sft.trainer.total_epochs follows
# trainer.total_epochs
SFT_PREFIX = "rft.sft."
SFT_RANGES = {
    f"{SFT_PREFIX}{key}": allowed
    for key, allowed in {
        "data.train_batch_size": SIZE,
        "data.micro_batch_size_per_gpu": OPTIONAL_SIZE,
        "data.max_token_len_per_gpu": SIZE,
        "data.max_length": SIZE,
        "optim.lr": LEARNING_RATE,
        "optim.weight_decay": WEIGHT_DECAY,
        "optim.lr_warmup_steps_ratio": WARMUP_RATIO,
        "optim.clip_grad": GRADIENT_CLIP,
        "optim.min_lr_ratio": MIN_LR_RATIO,
        "model.lora_rank": LORA_RANK,
        "engine.ulysses_sequence_parallel_size": SIZE,
        "trainer.total_epochs": EPOCHS,
        "trainer.total_training_steps": STEPS,
        "trainer.save_freq": SFT_FREQUENCY,
        "trainer.test_freq": SFT_FREQUENCY,
        "trainer.max_ckpt_to_keep": RETENTION,
    }.items()
}

# key -> the values it may hold. Sizes count prompts, sequences, tokens or GPUs: verl 0.9.1 compares some of them
# (train_batch_size >= ppo_mini_batch_size) but checks none is positive, and our own arithmetic divides by them.
RANGES: dict[str, Range] = {
    **RFT_RANGES,
    "data.train_batch_size": SIZE,
    "data.val_batch_size": OPTIONAL_SIZE,
    "data.max_prompt_length": SIZE,
    "data.max_response_length": SIZE,
    "data.dataloader_num_workers": Range(
        0, verl_does="verl 0.9.1 would fail as the trainer builds its data loader (torch's DataLoader)"
    ),
    "actor_rollout_ref.actor.ppo_mini_batch_size": SIZE,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": OPTIONAL_SIZE,
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": SIZE,
    "actor_rollout_ref.actor.ppo_epochs": SIZE,
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size": SIZE,
    "actor_rollout_ref.actor.optim.lr": LEARNING_RATE,
    "actor_rollout_ref.actor.optim.weight_decay": WEIGHT_DECAY,
    "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio": WARMUP_RATIO,
    "actor_rollout_ref.actor.optim.clip_grad": GRADIENT_CLIP,
    "actor_rollout_ref.actor.optim.min_lr_ratio": MIN_LR_RATIO,
    "critic.optim.lr": LEARNING_RATE,
    "critic.optim.weight_decay": WEIGHT_DECAY,
    "critic.optim.clip_grad": GRADIENT_CLIP,
    "critic.optim.min_lr_ratio": MIN_LR_RATIO,
    "critic.ppo_mini_batch_size": SIZE,
    "critic.ppo_micro_batch_size_per_gpu": OPTIONAL_SIZE,
    "critic.ppo_max_token_len_per_gpu": SIZE,
    "actor_rollout_ref.actor.clip_ratio": CLIP,
    "actor_rollout_ref.actor.clip_ratio_low": CLIP,
    "actor_rollout_ref.actor.clip_ratio_high": CLIP,
    "actor_rollout_ref.actor.clip_ratio_c": Range(
        1,
        low_open=True,
        verl_does="verl 0.9.1 asserts clip_ratio_c > 1.0 in core_algos.compute_policy_loss_vanilla, at the first "
        "actor update",
    ),
    "actor_rollout_ref.actor.kl_loss_coef": COEFFICIENT,
    "actor_rollout_ref.rollout.n": SIZE,
    "actor_rollout_ref.rollout.temperature": NON_NEGATIVE,
    "actor_rollout_ref.rollout.top_p": FRACTION,
    "actor_rollout_ref.rollout.top_k": TOP_K,
    "actor_rollout_ref.rollout.val_kwargs.top_k": TOP_K,
    "actor_rollout_ref.rollout.val_kwargs.n": SIZE,
    "actor_rollout_ref.rollout.val_kwargs.temperature": NON_NEGATIVE,
    "actor_rollout_ref.rollout.val_kwargs.top_p": FRACTION,
    "actor_rollout_ref.rollout.gpu_memory_utilization": FRACTION,
    "actor_rollout_ref.rollout.tensor_model_parallel_size": SIZE,
    "actor_rollout_ref.rollout.max_num_seqs": SIZE,
    "actor_rollout_ref.rollout.max_num_batched_tokens": SIZE,
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": OPTIONAL_SIZE,
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": SIZE,
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": OPTIONAL_SIZE,
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": SIZE,
    "algorithm.kl_ctrl.kl_coef": COEFFICIENT,
    "algorithm.kl_ctrl.horizon": KL_CONTROLLER,
    "algorithm.kl_ctrl.target_kl": KL_CONTROLLER,
    "actor_rollout_ref.actor.entropy_coeff": ANY_FINITE,
    "actor_rollout_ref.rollout.prompt_length": ENGINE_PROMPT,
    "actor_rollout_ref.rollout.response_length": ENGINE_RESPONSE,
    "algorithm.gamma": DISCOUNT,
    "algorithm.lam": DISCOUNT,
    **LORA_RANGES,
    "actor_rollout_ref.rollout.agent.num_workers": WORKERS,
    "reward.num_workers": WORKERS,
    "reward_model.num_workers": Range(1, nullable=True, verl_does=WORKERS.verl_does),  # legacy: moved to reward.*
    # torch's Generator.manual_seed, as verl builds the shuffling sampler (trainer/ppo/utils.py), takes an integer:
    # a word fails there; a negative one it takes modulo 2**64, so no seed of verl's is lost by refusing it
    "data.seed": Range(
        0,
        nullable=True,
        integer=True,
        verl_does="verl 0.9.1 would hand it to torch's manual_seed, which wraps a negative seed around 2**64",
    ),
    "critic.ppo_epochs": Range(1, verl_does="verl 0.9.1 would run it, never updating the critic"),
    "critic.ulysses_sequence_parallel_size": SIZE,
    "critic.fsdp.ulysses_sequence_parallel_size": SIZE,
    "trainer.total_epochs": EPOCHS,
    "trainer.total_training_steps": STEPS,
    "trainer.nnodes": SIZE,
    "trainer.n_gpus_per_node": SIZE,
    "trainer.save_freq": FREQUENCY,
    "trainer.max_actor_ckpt_to_keep": RETENTION,
    "trainer.max_critic_ckpt_to_keep": RETENTION,
    "trainer.test_freq": FREQUENCY,
    "mode.time_budget_min": Range(0, low_open=True),
    "mode.checkpoint_every_min": OPTIONAL_SIZE,
    "cluster.max_requeues": NON_NEGATIVE,
    # sbatch's own numbers: --mem and --cpus-per-task of 0 or less, a negative margin or signal delay, are no request
    # SLURM can honour (null derives them from the profile)
    "cluster.mem_gb": OPTIONAL_SIZE,
    "cluster.cpus_per_task": OPTIONAL_SIZE,
    "cluster.time_margin_min": NON_NEGATIVE,
    "cluster.signal_delay_s": NON_NEGATIVE,
    "cluster.ray_timeout_s": Range(0, low_open=True),
    "cluster.array_parallelism": OPTIONAL_SIZE,
    "launch.expect.response_tokens": OPTIONAL_SIZE,
    "launch.expect.prompt_tokens": OPTIONAL_SIZE,
    "launch.calibrate_after_step": SIZE,
    "launch.hang.factor": Range(1, low_open=True),
    "launch.hang.floor_s": Range(0, low_open=True),
    **MEGATRON_RANGES,
}


@dataclass(frozen=True)
class KeyType:
    """A key's type as its owner declares it: `kind` int | float | bool | str | "" (unknown), and where it says so.
    Whether null is allowed is the range table's to say (verl declares Optional[int] for fields it requires)."""

    kind: str
    source: str


# --- verl's declared types, read from its source -------------------------------------------------------------------


def annotation_type(node: ast.expr | None) -> tuple[str, bool]:
    """(int | float | bool | str, nullable) of a field annotation; ("", nullable) for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        return annotation_type(ast.parse(node.value, mode="eval").body)
    if isinstance(node, ast.Name):
        return (node.id if node.id in ("int", "float", "bool", "str") else ""), False
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Optional":
        return annotation_type(node.slice)[0], True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        parts = [
            part for part in (node.left, node.right) if not (isinstance(part, ast.Constant) and part.value is None)
        ]
        return (annotation_type(parts[0])[0] if len(parts) == 1 else ""), True
    return "", False


@cache
def verl_classes(module: str) -> dict[str, tuple[tuple[str, ...], dict[str, tuple[str, bool]]]]:
    """The classes of a verl module, by name: their base class names and annotated fields. A `_target_` often names
    a package that re-exports the class (verl.workers.config.RolloutConfig, defined in verl/workers/config/rollout.py):
    then every file of the package."""
    relative = Path(*module.split(".")[1:])
    path = verl_package_dir() / relative
    # a module file before a directory of that name: verl/trainer/config/algorithm/ holds yaml, algorithm.py the code
    module_file = path.with_suffix(".py")
    files = [module_file] if module_file.is_file() else sorted(path.glob("*.py"))
    classes = {}
    for file in files:
        for node in ast.parse(file.read_text()).body:
            if isinstance(node, ast.ClassDef):
                bases = tuple(base.id for base in node.bases if isinstance(base, ast.Name))
                annotated = {
                    item.target.id: annotation_type(item.annotation)
                    for item in node.body
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                }
                classes[node.name] = (bases, annotated)
    return classes


def verl_field_type(target: str, name: str) -> tuple[str, tuple[str, bool]] | None:
    """(the class that declares it, its type) of field `name` of the dataclass `target` (verl's `_target_`, e.g.
    verl.workers.config.FSDPActorConfig), its base classes included; None where the class has no such field."""
    module, _, class_name = target.rpartition(".")
    if not module.startswith("verl."):
        return None
    classes = verl_classes(module)
    pending = [class_name]
    while pending:
        current = pending.pop(0)
        if current not in classes:
            continue
        bases, annotated = classes[current]
        if name in annotated:
            return current, annotated[name]
        pending += bases
    return None


SFT_BASE = "sft_trainer_engine"  # verl's SFT tree, which algos/rft/sft.py composes stage 3's config over


@cache
def sft_defaults() -> dict[str, Any]:
    """verl's sft_trainer_engine tree with the group options its defaults list puts in place (model@model: hf_model,
    ...), read as yaml: verl ships no generated file of it, and Hydra's composition would import verl."""
    config_dir = verl_package_dir() / "trainer" / "config"
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    tree = yaml.load((config_dir / f"{SFT_BASE}.yaml").read_text(), Loader=loader)
    for entry in tree.pop("defaults", []):
        for group_at, option in entry.items() if isinstance(entry, dict) else ():
            group, _, place = group_at.partition("@")
            options = yaml.load((config_dir / group / f"{option}.yaml").read_text(), Loader=loader) or {}
            tree[place or group] = {**options, **(tree.get(place or group) or {})}  # the tree's own keys come last
    return tree


def sft_key_message(key: str) -> str | None:
    """An unknown rft.sft.* key (launch/errors.py explain): one verl's sft_trainer_engine has is added with `+` (rft.sft
    sets only some of them); one it lacks is not, as stage 3 would refuse it: the nearest names instead."""
    if not key.startswith(SFT_PREFIX):
        return None
    rest = key.removeprefix(SFT_PREFIX)
    parent, _, name = rest.rpartition(".")
    if select(sft_defaults(), rest, _ABSENT) is not _ABSENT:
        return (
            f"unknown key '{key}': rft.sft does not set {rest} of verl's sft_trainer_engine (stage 3's trainer): add a "
            f"new key on purpose with +{key}=..."
        )
    siblings = select(sft_defaults(), parent, None) if parent else sft_defaults()
    names = [str(sibling) for sibling in siblings] if isinstance(siblings, dict) else []
    elsewhere = [
        f"{SFT_PREFIX}{path}.{name}" if path else f"{SFT_PREFIX}{name}"
        for path, node in mappings(sft_defaults())
        if name in node
    ]
    where = f" (it has {name} at {' and '.join(elsewhere)})" if elsewhere else closest(name, names)
    return (
        f"unknown key '{key}'{where}: verl's sft_trainer_engine (stage 3's trainer) has no {rest} and would refuse it: "
        "fix the key"
    )


def kind_of(value: Any) -> str:
    return "bool" if isinstance(value, bool) else type(value).__name__ if isinstance(value, int | float | str) else ""


# --- rlaunch's own declared types ----------------------------------------------------------------------------------


def schema_field_type(key: str) -> KeyType | None:
    """The type launch/schema.py gives one of our keys (mode.time_budget_min: ModeSettings.time_budget_min is int)."""
    schema: Any = RlaunchSchema
    parts = key.split(".")
    for index, part in enumerate(parts):
        if not is_dataclass(schema) or part not in {item.name for item in fields(schema)}:
            return None
        declared = typing.get_type_hints(schema)[part]
        if index == len(parts) - 1:
            args = [arg for arg in typing.get_args(declared) if arg is not type(None)]
            name = getattr(args[0] if args else declared, "__name__", "")
            return KeyType(name, f"rlaunch's {schema.__name__}.{part} is {name}")
        schema = declared
    return None


def declared_type(cfg: DictConfig, key: str) -> KeyType:
    """verl's dataclass field (through the `_target_` of the key's node), else verl's yaml default, else ours; an
    rft.sft key's from verl's SFT tree."""
    if key.startswith(SFT_PREFIX):
        return sft_declared_type(key.removeprefix(SFT_PREFIX))
    parent = key.rpartition(".")[0]
    target = OmegaConf.select(cfg, f"{parent}._target_", default=None)
    return declared_type_under(key, str(target) if target else "")


@cache
def declared_type_under(key: str, target: str) -> KeyType:
    """declared_type for a key whose node names `target` (""; none): asked once per process, not once per job."""
    ours = schema_field_type(key)
    if ours is not None:
        return ours
    return verl_declared_type(key, target, verl_defaults())


@cache
def sft_declared_type(key: str) -> KeyType:
    """The type of `rft.sft.<key>`: the field of verl's SFT config dataclass its section names (optim, engine, model,
    checkpoint), else the type of its default in verl's sft_trainer_engine tree (data, trainer)."""
    tree = sft_defaults()
    target = select(tree, f"{key.rpartition('.')[0]}._target_")
    return verl_declared_type(key, str(target or ""), tree)


def verl_declared_type(key: str, target: str, defaults: dict[str, Any]) -> KeyType:
    """The field `key` names in verl's dataclass `target` (""; none), else the type of its value in `defaults`."""
    name = key.rpartition(".")[2]
    found = verl_field_type(target, name) if target else None
    if found is not None:
        owner, (kind, nullable) = found
        return KeyType(kind, f"verl's {owner}.{name} is {f'Optional[{kind}]' if nullable else kind}")
    default = select(defaults, key, _ABSENT)
    if default is _ABSENT or (isinstance(default, str) and "${" in default):  # an interpolation: no type of its own
        return KeyType("", "")
    kind = kind_of(default)
    return KeyType(kind, f"verl's default is {f'the {kind} {default}' if kind else shown(default)}")


# --- the check -----------------------------------------------------------------------------------------------------


def shown(value: Any, kind: str = "float") -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer() and kind != "int":
        return str(int(value))  # a float field holds the user's `2` as 2.0: say it as typed
    return str(value)


def reads_as_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def value_problem(value: Any, kind: str, allowed: Range) -> bool:
    """True when `value` is not of `kind` (an int where a float is declared is fine) or outside `allowed`."""
    if value is None:
        return not allowed.nullable
    if isinstance(value, str) and value in allowed.words:
        return False
    if isinstance(value, bool) or not isinstance(value, int | float):
        return True
    if kind == "int" and not isinstance(value, int):
        return True
    return not math.isfinite(value) or not allowed.holds(value)


def check_ranges(cfg: DictConfig) -> None:
    """Every key of RANGES, then of SFT_RANGES, that the config holds, in the tables' order; the first bad value stops
    the run."""
    critic = trains_critic(cfg)
    for key, allowed in (*RANGES.items(), *SFT_RANGES.items()):
        if key.startswith("critic.") and not critic:
            continue  # verl builds no critic: its values are never read (verl's need_critic)
        parent, _, name = key.rpartition(".")
        node = OmegaConf.select(cfg, parent)
        if not isinstance(node, DictConfig) or name not in node or OmegaConf.is_missing(node, name):
            continue  # a key this config lacks, or ??? (validate.check_placeholders names what is unset)
        value = node[name]
        declared = declared_type(cfg, key)
        kind = declared.kind if declared.kind in NUMBER_TYPES else allowed.fallback_kind()
        if not value_problem(value, kind, allowed):
            continue
        source = f" ({declared.source})" if declared.source else ""
        numeric = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        # what verl does with a value outside the range (not with a wrong type inside it: 1.5 epochs)
        verl_does = f"; {allowed.verl_does}" if allowed.verl_does and numeric and not allowed.holds(value) else ""
        if isinstance(value, str) and reads_as_number(value):  # '8' from ${oc.env:N,8}, or a quoted "'15'"
            verl_does += (
                f"; it is the string {value!r}: ${{oc.env:...}} gives strings (write "
                f"{key}=\"'${{oc.decode:${{oc.env:...}}}}'\" for the number), and a quoted value stays one"
            )
        raise UserError(f"{key}={shown(value, kind)}: must be {allowed.describe(kind)}{source}{verl_does}")
    check_betas(cfg, critic)
    check_expected_lengths(cfg)


# Adam's two decay rates: torch's AdamW refuses another shape, or a rate outside [0, 1), as verl builds the optimizer
# (only an Adam-like one gets them)
BETAS = ("actor_rollout_ref.actor.optim.betas", "critic.optim.betas", f"{SFT_PREFIX}optim.betas")


def check_betas(cfg: DictConfig, critic: bool) -> None:
    for key in BETAS:
        value = OmegaConf.select(cfg, key, default=None)
        if value is None or (key.startswith("critic.") and not critic):
            continue
        optimizer = str(OmegaConf.select(cfg, key.replace(".betas", ".optimizer"), default="adamw")).lower()
        if "adam" not in optimizer and "ademamix" not in optimizer:
            continue  # verl passes betas to an Adam-like optimizer only (workers/config/optimizer.py)
        rates = list(value) if isinstance(value, ListConfig | list | tuple) else [value]
        numbers = [rate for rate in rates if isinstance(rate, int | float) and not isinstance(rate, bool)]
        if len(rates) != 2 or len(numbers) != 2 or not all(0 <= rate < 1 for rate in numbers):
            written = "[" + ",".join(map(str, rates)) + "]" if len(rates) != 1 else str(rates[0])
            raise UserError(
                f"{key}={written}: must be two decay rates in [0, 1) (e.g. {key}=[0.9,0.999]); verl 0.9.1 would fail "
                "as the worker builds its optimizer (torch's AdamW)"
            )


# what verl does at each side's limit: rollout.prompt_length / response_length (data.max_*_length unless set)
ENGINE_CUTS = {
    "prompt": "keeps a prompt's last {limit} tokens (agent_loop.py _cap_text_prompt_length)",
    "response": "cuts a response at {limit} tokens (agent_loop.py response_ids[:response_length])",
}


def check_expected_lengths(cfg: DictConfig) -> None:
    """launch.expect.prompt_tokens / .response_tokens (typical lengths: launch/lengths.py typical_lengths) no longer
    than the engine's limit, which no sequence of verl's passes (ENGINE_CUTS). A mean above it is a typo or a stale
    number, which the forecast would quietly have replaced by the limit."""
    for side, cut in ENGINE_CUTS.items():
        key = f"launch.expect.{side}_tokens"
        stated = OmegaConf.select(cfg, key, default=None)
        data_key, engine_key = f"data.max_{side}_length", f"actor_rollout_ref.rollout.{side}_length"
        data_limit = OmegaConf.select(cfg, data_key, default=None)
        limit = OmegaConf.select(cfg, engine_key, default=data_limit)
        if stated is None or limit is None or stated <= limit:
            continue
        named = data_key if limit == data_limit else engine_key  # the key that sets the limit, to raise it
        raise UserError(
            f"{key}={stated}: above the {side} length limit {named}={limit}, past which verl's agent loop "
            f"{cut.format(limit=limit)}: set {key} to at most {limit} (a mean length), or raise {named}"
        )
