"""verl's words: the values its string and boolean keys may hold, checked before anything is planned.

Runs on: the login node, first in planning, before the range table (launch/ranges.py), which checks numbers only,
and before readiness's repairs (a pasted trainer.logger is checked as written, before `file` is added).

verl 0.9.1 checks none of these when it starts: a misspelt advantage estimator or policy loss fails at the first step
or update (core_algos.get_adv_estimator_fn / get_policy_loss_fn raise ValueError), an unknown logger when the trainer
starts (Tracking asserts), an unknown truncation at the first over-long prompt (torch_functional asserts); and a
boolean written as a word (`enable_gradient_checkpointing=off`, a string to Hydra) is truthy wherever verl writes
`if config.x:`, so `off` turns the switch on. Each set is read from verl's own source with `ast` (no import of verl,
as in ranges.py): the set verl's code registers or lists, so a verl upgrade brings its new words with it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from launch.errors import UserError, closest, deleted_key_message, fork_key_message, fork_value_message
from launch.lora_targets import ALL_LINEAR
from launch.memory import FSDP_LORA_RANK, MEGATRON_LORA_RANK, lora_rank_key, trains_critic, value_at
from launch.overrides import key_of, parse
from launch.ranges import SFT_PREFIX, declared_type, shown
from launch.schema import select, verl_defaults, verl_package_dir
from launch.verl_diff import base_config, leaves, user_verl_overrides

CORE_ALGOS = "trainer/ppo/core_algos.py"
TRAINER = "trainer/ppo/v1/trainer_base.py"
REWARD_MANAGERS = "experimental/reward_loop/reward_manager"
AGENT_LOOPS = "experimental/agent_loop"
ROLLOUT_CORRECTION = "trainer/ppo/rollout_corr_helper.py"
DTYPES = "utils/torch_dtypes.py"
OPTIMIZER = "workers/config/optimizer.py"


@cache  # core_algos.py holds two of the sets; the trees are only read
def _tree(relative: str) -> ast.Module:
    return ast.parse((verl_package_dir() / relative).read_text())


def _decorated_names(relative: str, decorator: str) -> list[str]:
    """The first argument of every `@decorator(...)`: a string, or an enum member `Enum.NAME` (read as its value)."""
    tree = _tree(relative)
    members = _enum_values(tree)
    names = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for call in node.decorator_list:
            if isinstance(call, ast.Call) and getattr(call.func, "id", "") == decorator and call.args:
                argument = call.args[0]
                if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                    names.append(argument.value)
                elif isinstance(argument, ast.Attribute) and argument.attr in members:
                    names.append(members[argument.attr])
    return names


def _enum_values(tree: ast.Module) -> dict[str, str]:
    """NAME -> "value" of every `NAME = "value"` in a class body (AdvantageEstimator's members)."""
    values = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if (
                    isinstance(item, ast.Assign)
                    and len(item.targets) == 1
                    and isinstance(item.targets[0], ast.Name)
                    and isinstance(item.value, ast.Constant)
                    and isinstance(item.value.value, str)
                ):
                    values[item.targets[0].id] = item.value.value
    return values


def _listed(relative: str, name: str) -> list[str]:
    """The strings of the list assigned to `name` (Tracking.supported_backend)."""
    for node in ast.walk(_tree(relative)):
        if isinstance(node, ast.Assign) and any(getattr(target, "id", "") == name for target in node.targets):
            return [item.value for item in getattr(node.value, "elts", []) if isinstance(item, ast.Constant)]
    return []


def _asserted_in(relative: str, variable: str, within: str = "") -> list[str]:
    """The strings of `assert variable in [...]` (torch_functional's truncation modes), or `assert self.variable in
    [...]` in the class `within` (each optimizer config class asserts its own schedules)."""
    tree = _tree(relative)
    scope = next((node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == within), tree)
    for node in ast.walk(scope):
        if (
            isinstance(node, ast.Assert)
            and isinstance(node.test, ast.Compare)
            and (getattr(node.test.left, "id", None) or getattr(node.test.left, "attr", None)) == variable
            and isinstance(node.test.ops[0], ast.In)
        ):
            return [
                item.value for item in getattr(node.test.comparators[0], "elts", []) if isinstance(item, ast.Constant)
            ]
    return []


def _registered(directory: str, decorator: str) -> list[str]:
    """The first argument of every `@decorator("name")` on a class or function in a package directory of verl's,
    the decorator as each file names it: imported from the package itself or a module of it (`from .registry import
    register`, `from verl.<directory as a module> import register as register_manager`, `from
    verl.experimental.agent_loop.agent_loop import register`), not a same-named one of another."""
    package = directory.replace("/", ".")
    names = []
    for path in sorted((verl_package_dir() / directory).glob("*.py")):
        tree = ast.parse(path.read_text())
        local = {decorator} if path.stem == "registry" else set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or f".{package}." in f".{node.module}."):
                local |= {alias.asname or alias.name for alias in node.names if alias.name == decorator}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef | ast.FunctionDef):
                for call in node.decorator_list:
                    if isinstance(call, ast.Call) and getattr(call.func, "id", "") in local and call.args:
                        names += _strings(call.args[0])
    return names


def _compared(relative: str, attribute: str) -> list[str]:
    """The strings `<...>.attribute` is compared with (==, in) in a file: the modes an if/elif chain handles."""
    words = []
    for node in ast.walk(_tree(relative)):
        if isinstance(node, ast.Compare) and getattr(node.left, "attr", "") == attribute:
            for comparator in node.comparators:
                words += _strings(comparator)
    return words


def _handled(relative: str, function: str, name: str) -> list[str]:
    """The strings `name` (a variable, or `<...>.name`) is compared with in the `if` tests of one function whose
    branch does something: a branch that only raises (kl_penalty_forward's "full") is no word verl runs."""
    words = []
    for node in ast.walk(_tree(relative)):
        if not (isinstance(node, ast.FunctionDef) and node.name == function):
            continue
        for branch in ast.walk(node):
            test = getattr(branch, "test", None)
            if not (isinstance(branch, ast.If) and isinstance(test, ast.Compare)):
                continue
            left = test.left
            if (getattr(left, "id", None) or getattr(left, "attr", None)) != name:
                continue
            if all(isinstance(statement, ast.Raise) for statement in branch.body):
                continue
            for comparator in test.comparators:
                words += _strings(comparator)
    return words


def _kl_estimators() -> list[str]:
    """kl_penalty_forward's estimators, each also with verl's '+' (straight-through gradient: core_algos.kl_penalty)."""
    handled = sorted(set(_handled(CORE_ALGOS, "kl_penalty_forward", "kl_penalty")))
    return handled + [f"{word}+" for word in handled]


def _rollout_modes() -> list[str]:
    """The modes of verl's rollout registry (workers/rollout/base.py _ROLLOUT_REGISTRY's (name, mode) keys)."""
    for node in ast.walk(_tree("workers/rollout/base.py")):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_ROLLOUT_REGISTRY" for t in node.targets):
            keys = getattr(node.value, "keys", [])
            return sorted({key.elts[1].value for key in keys if isinstance(key, ast.Tuple) and len(key.elts) == 2})
    return []


def _precisions() -> list[str]:
    """The precision words utils/torch_dtypes.py's PrecisionType knows (its HALF, FLOAT and BFLOAT lists)."""
    return sorted({str(word) for name in ("HALF_LIST", "FLOAT_LIST", "BFLOAT_LIST") for word in _listed(DTYPES, name)})


def _reward_managers() -> list[str]:
    return sorted(set(_registered(REWARD_MANAGERS, "register")))


def _agent_loops() -> list[str]:
    return sorted(set(_registered(AGENT_LOOPS, "register")))


def _everywhere(cfg: DictConfig) -> bool:
    return True


def _switched_on(key: str) -> Callable[[DictConfig], bool]:
    """Words a key holds matter only where this switch of verl's turns their use on."""
    return lambda cfg: bool(OmegaConf.select(cfg, key))


KL_ESTIMATORS = "verl's KL estimators (core_algos.kl_penalty_forward; '+' for the straight-through gradient)"


FSDP_OPTIMIZER = "FSDPOptimizerConfig"  # the optim class of backend=fsdp's roles; Megatron's has no such keys


def _fsdp_optimizer(optim: str) -> Callable[[DictConfig], bool]:
    """An FSDP role's optimizer keys matter where its optim node builds verl's FSDPOptimizerConfig, and the critic's
    only where verl builds a critic."""
    built = (lambda cfg: trains_critic(cfg)) if optim.startswith("critic.") else _everywhere
    return lambda cfg: built(cfg) and str(OmegaConf.select(cfg, f"{optim}._target_")).endswith(f".{FSDP_OPTIMIZER}")


MEGATRON_LR_DECAY = ("constant", "linear", "cosine", "inverse-square-root", "WSD")
MEGATRON_WSD_DECAY = ("linear", "cosine", "exponential", "minus_sqrt")


def _megatron_optimizer(optim: str, name: str) -> Callable[[DictConfig], bool]:
    """A Megatron role's scheduler keys, where its optim node builds verl's McoreOptimizerConfig (the critic's where
    verl builds a critic); the WSD style only under lr_decay_style=WSD."""
    built = (lambda cfg: trains_critic(cfg)) if optim.startswith("critic.") else _everywhere

    def applies(cfg: DictConfig) -> bool:
        megatron = str(OmegaConf.select(cfg, f"{optim}._target_")).endswith(".McoreOptimizerConfig")
        wsd = name != "lr_wsd_decay_style" or OmegaConf.select(cfg, f"{optim}.lr_decay_style") == "WSD"
        return built(cfg) and megatron and wsd

    return applies


def _set(key: str) -> Callable[[DictConfig], bool]:
    """Words a key holds matter only where this key of verl's is set (not null)."""
    return lambda cfg: OmegaConf.select(cfg, key) is not None


def _registered_reward_manager(cfg: DictConfig) -> bool:
    return OmegaConf.select(cfg, "reward.reward_manager.source", default="register") == "register"


@dataclass(frozen=True)
class Words:
    """A key's allowed words, where verl reads them, and what verl does with another; `applies`: whether verl reads
    the key in this config."""

    read: Callable[[], list[str]]
    where: str
    verl_does: str
    applies: Callable[[DictConfig], bool] = _everywhere
    required: bool = False  # null is no word verl runs either


# the dtype words vLLM's and SGLang's engine arguments both take (verl passes rollout.dtype to them as it is)
ENGINE_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")

CHOICES: dict[str, Words] = {
    "actor_rollout_ref.rollout.dtype": Words(
        lambda: list(ENGINE_DTYPES),
        "the dtypes vLLM's and SGLang's engine arguments take",
        "verl 0.9.1 passes it to the engine as it is, which would refuse it as the rollout server starts",
    ),
    "algorithm.adv_estimator": Words(
        lambda: sorted(
            set(_enum_values(_tree(CORE_ALGOS)).values()) | set(_decorated_names(CORE_ALGOS, "register_adv_est"))
        ),
        "verl's advantage estimators (core_algos.py)",
        "verl 0.9.1 would fail at the first step (get_adv_estimator_fn: Unknown advantage estimator)",
        required=True,
    ),
    "actor_rollout_ref.actor.kl_loss_type": Words(
        _kl_estimators,
        KL_ESTIMATORS,
        "verl 0.9.1 would fail at the first actor update (kl_penalty: NotImplementedError)",
        _switched_on("actor_rollout_ref.actor.use_kl_loss"),
        required=True,
    ),
    "algorithm.kl_penalty": Words(
        _kl_estimators,
        KL_ESTIMATORS,
        "verl 0.9.1 would fail at the first step (apply_kl_penalty: NotImplementedError)",
        _switched_on("algorithm.use_kl_in_reward"),
        required=True,
    ),
    "algorithm.kl_ctrl.type": Words(
        lambda: sorted(set(_handled(CORE_ALGOS, "get_kl_controller", "type"))),
        "verl's KL controllers (core_algos.get_kl_controller)",
        "verl 0.9.1 would fail as the trainer starts (get_kl_controller: NotImplementedError)",
        _switched_on("algorithm.use_kl_in_reward"),
    ),
    # verl's CriticConfig does not check it (ActorConfig does the actor's): a typo fails at the first critic update
    "critic.loss_agg_mode": Words(
        lambda: sorted(set(_handled(CORE_ALGOS, "agg_loss", "loss_agg_mode"))),
        "verl's loss aggregations (core_algos.agg_loss)",
        "verl 0.9.1 would fail at the first critic update (agg_loss: Invalid loss_agg_mode)",
        lambda cfg: trains_critic(cfg),
    ),
    "actor_rollout_ref.rollout.mode": Words(
        _rollout_modes,
        "the rollout modes verl registers (workers/rollout/base.py)",
        "verl 0.9.1 only warns as it reads the config, then fails as the workers start (get_rollout_class asserts)",
        # the removed 'sync' verl's own RolloutConfig refuses, with its own advice (validate.py asks verl)
        lambda cfg: OmegaConf.select(cfg, "actor_rollout_ref.rollout.mode") != "sync",
    ),
    **{
        f"{section}.model_dtype": Words(
            _precisions,
            "verl's precisions (utils/torch_dtypes.py)",
            "verl 0.9.1 would fail as the worker builds the model (PrecisionType.to_dtype: unexpected precision)",
        )
        for section in ("actor_rollout_ref.actor.fsdp_config", "actor_rollout_ref.ref.fsdp_config", "critic.fsdp")
    },
    "actor_rollout_ref.actor.policy_loss.loss_mode": Words(
        lambda: sorted(_decorated_names(CORE_ALGOS, "register_policy_loss")),
        "verl's policy losses (core_algos.py)",
        "verl 0.9.1 would fail at the first actor update (get_policy_loss_fn: Unsupported loss mode)",
    ),
    # FSDPOptimizerConfig.__post_init__ asserts both with no message: verl's own refusal names neither key nor word
    **{
        f"{optim}.{name}": Words(
            lambda name=name: _asserted_in(OPTIMIZER, name, FSDP_OPTIMIZER),
            f"verl's LR schedules ({FSDP_OPTIMIZER}, {OPTIMIZER})",
            f"verl 0.9.1 would refuse the config as the trainer starts, with a bare AssertionError ({FSDP_OPTIMIZER} "
            "asserts it)",
            _fsdp_optimizer(optim),
        )
        for optim in ("actor_rollout_ref.actor.optim", "critic.optim")
        for name in ("lr_scheduler_type", "warmup_style")
    },
    # Megatron-core is not installed where rlaunch plans: its words, from its source (megatron/core/
    # optimizer_param_scheduler.py OptimizerParamScheduler.get_lr/get_wd, transformer/transformer_config.py
    # __post_init__); verl's yaml comments spell inverse_square_root and a constant WSD style, neither of which it takes
    **{
        f"{optim}.{name}": Words(
            lambda words=words: list(words),
            f"Megatron-core's {what} (OptimizerParamScheduler)",
            f"verl 0.9.1's Megatron optimizer scheduler would raise '... is not supported' {when}",
            _megatron_optimizer(optim, name),
        )
        for optim in ("actor_rollout_ref.actor.optim", "critic.optim")
        for name, words, what, when in (
            ("lr_decay_style", MEGATRON_LR_DECAY, "LR decay styles", "once the warm-up ends (or at once without one)"),
            ("weight_decay_incr_style", ("constant", "linear", "cosine"), "weight-decay styles", "at its first step"),
            ("lr_wsd_decay_style", MEGATRON_WSD_DECAY, "WSD decay styles", "in the decay phase (AssertionError)"),
        )
    },
    **{
        f"{role}.megatron.override_transformer_config.{name}": Words(
            lambda words=words: list(words),
            f"Megatron-core's {name.replace('_', ' ')}s (TransformerConfig)",
            "verl 0.9.1 would fail as the Megatron worker builds the model (TransformerConfig: ValueError)",
        )
        for role in ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic")
        for name, words in (
            ("recompute_granularity", ("full", "selective")),
            ("recompute_method", ("uniform", "block")),
        )
    },
    # a loop of the user's own is registered from agent_loop_config_path's yaml as the workers start: not judged here
    "actor_rollout_ref.rollout.agent.default_agent_loop": Words(
        _agent_loops,
        f"the agent loops verl registers ({AGENT_LOOPS})",
        "verl 0.9.1 would fail at the first rollout (AgentLoopWorker asserts: not registered); a loop of your own is "
        "named in actor_rollout_ref.rollout.agent.agent_loop_config_path",
        lambda cfg: not OmegaConf.select(cfg, "actor_rollout_ref.rollout.agent.agent_loop_config_path"),
    ),
    # null turns importance sampling off; verl computes the weights only with a threshold (rollout_corr_helper.py)
    "algorithm.rollout_correction.rollout_is": Words(
        lambda: sorted(set(_handled(ROLLOUT_CORRECTION, "compute_rollout_correction_weights", "rollout_is"))),
        f"verl's importance-sampling levels ({ROLLOUT_CORRECTION}; null for none)",
        "verl 0.9.1 would fail at the first step (compute_rollout_correction_weights: Invalid rollout_is)",
        _set("algorithm.rollout_correction.rollout_is_threshold"),
    ),
    "algorithm.pf_ppo.reweight_method": Words(
        lambda: sorted(set(_handled(CORE_ALGOS, "compute_weights", "reweight_method"))),
        "verl's PF-PPO reweighting methods (core_algos.compute_pf_ppo_reweight_data)",
        "verl 0.9.1 would fail at the first step (compute_weights: Unsupported reweight_method)",
        _switched_on("algorithm.use_pf_ppo"),
    ),
    "trainer.logger": Words(
        lambda: _listed("utils/tracking.py", "supported_backend"),
        "verl's tracking backends (utils/tracking.py)",
        "verl 0.9.1 would fail as the trainer starts (Tracking: not supported)",
    ),
    "data.truncation": Words(
        lambda: _asserted_in("utils/torch_functional.py", "truncation"),
        "verl's truncation modes (utils/torch_functional.py)",
        # verl 0.9.1's RLHFDataset stores the mode and never reads it (rl_dataset.py); a word no verl code takes is a
        # typo still, refused with what verl does instead
        "verl 0.9.1's RL dataset stores it and never reads it: a prompt longer than data.max_prompt_length is dropped "
        "where data.filter_overlong_prompts=true, else the agent loop keeps its last rollout.prompt_length tokens",
    ),
    "trainer.resume_mode": Words(
        lambda: sorted(set(_compared(TRAINER, "resume_mode"))),
        "the resume modes verl's trainer handles (trainer/ppo/v1/trainer_base.py)",
        "verl 0.9.1 would log 'Unknown resume mode' and fail as the trainer starts",
    ),
    # where source is register (the legacy reward_model.reward_manager is refused: check_legacy_reward_keys)
    "reward.reward_manager.name": Words(
        _reward_managers,
        "the reward managers verl registers (experimental/reward_loop/reward_manager)",
        "verl 0.9.1 would fail as its reward workers start (get_reward_manager_cls: Unknown reward manager)",
        _registered_reward_manager,
    ),
}


@cache
def allowed_words(key: str) -> tuple[str, ...]:
    return tuple(CHOICES[key].read())


# verl 0.9.1 keeps the legacy reward settings (trainer/config/legacy_reward_impl.yaml: the root
# custom_reward_function.*, reward_model.*, sandbox_fusion.*) in its config, but only its fully-async entry moves them
# onto reward.* (experimental/reward_loop/reward_loop.py migrate_legacy_reward_impl); main_ppo reads reward.* alone,
# so a pasted older script's value there is silently dropped. Where each one lives now, as that function moves it:
LEGACY_REWARD_MOVES = {
    "custom_reward_function": "reward.custom_reward_function",
    "sandbox_fusion": "reward.sandbox_fusion",
    "reward_model.num_workers": "reward.num_workers",
    "reward_model.reward_manager": "reward.reward_manager.name",
    "reward_model.reward_loop_source": "reward.reward_manager.source",
    "reward_model.reward_loop_module_path": "reward.reward_manager.module.path",
    "reward_model.reward_loop_class_name": "reward.reward_manager.module.name",
    "reward_model.enable": "reward.reward_model.enable",
    "reward_model.enable_resource_pool": "reward.reward_model.enable_resource_pool",
    "reward_model.n_gpus_per_node": "reward.reward_model.n_gpus_per_node",
    "reward_model.nnodes": "reward.reward_model.nnodes",
    "reward_model.model.path": "reward.reward_model.model_path",
    "reward_model.reward_kwargs": "reward.reward_kwargs",
    "reward_model.rollout": "reward.reward_model.rollout",
}
LEGACY_REWARD_ROOTS = ("custom_reward_function", "reward_model", "sandbox_fusion")
_ABSENT = object()


def legacy_reward_home(key: str) -> str | None:
    """Where verl 0.9.1 reads a legacy reward setting's value now (None: nowhere, the key went with the FSDP reward
    worker)."""
    for old, new in LEGACY_REWARD_MOVES.items():
        if key == old or key.startswith(old + "."):
            return new + key.removeprefix(old)
    return None


def check_legacy_reward_keys(cfg: DictConfig) -> None:
    """A legacy reward setting with a value: main_ppo would run without it (LEGACY_REWARD_MOVES), scoring with verl's
    default reward by data_source where it was the reward function, without the reward model where it enabled one."""
    for root in LEGACY_REWARD_ROOTS:
        node = OmegaConf.select(cfg, root, default=None)
        if not isinstance(node, DictConfig):
            continue
        for path, value in leaves(OmegaConf.to_container(node, resolve=False)):
            if value is None or value == {}:
                continue
            key = ".".join((root, *path))
            fork = fork_key_message(key) or fork_value_message(key, value)
            if fork is not None:  # a fork's key or word: its own message names verl 0.9.1's
                raise UserError(fork)
            home = legacy_reward_home(key)
            added = "+" if home is not None and select(verl_defaults(), home, _ABSENT) is _ABSENT else ""
            fix = f"write {added}{home}={shown(value)}" if home else "drop it (verl 0.9.1 has no such setting any more)"
            raise UserError(
                f"{key}={shown(value)}: verl 0.9.1's main_ppo never reads the legacy {root}.* settings (only its "
                "fully-async entry moves them to reward.*), so the run would silently go without it; " + fix
            )


def check_words(cfg: DictConfig) -> None:
    """Every key of CHOICES the config holds; the first word verl does not know stops the run."""
    for key, words in CHOICES.items():
        value = OmegaConf.select(cfg, key, default=None)
        if not words.applies(cfg):
            continue
        if value is None and words.required and allowed_words(key):
            raise UserError(
                f"{key}=null: choose one of {words.where}: {', '.join(allowed_words(key))}; {words.verl_does}"
            )
        if value is None:
            continue
        fork = fork_value_message(key, value)
        if fork is not None:  # a fork's word: say whose it is and what verl 0.9.1 has instead
            raise UserError(fork)
        values = list(value) if isinstance(value, ListConfig | list) else [value]
        allowed = allowed_words(key)
        unknown = [item for item in values if str(item) not in allowed]
        if unknown and allowed:  # an empty set: verl's source moved, and no check is better than a wrong one
            listed = isinstance(value, ListConfig | list)
            written = f"{key}={'[' + ','.join(map(str, values)) + ']' if listed else shown(value)}"
            raise UserError(
                f"{written}: {unknown[0]} is not one of {words.where}: {', '.join(allowed)}; {words.verl_does}"
            )


def check_deletions(overrides: Sequence[str]) -> None:
    """A `~key` of the user's that deletes a key of verl's own config (its generated ppo_trainer or
    ppo_megatron_trainer): verl's code reads its config whole, and a deleted key fails (struct mode) where it is read,
    as the trainer or its workers start, or at the first step."""
    defaults = verl_defaults(base_config(overrides))
    for override in parse(overrides):
        key = key_of(override)
        if override.is_delete() and select(defaults, key, _MISSING) is not _MISSING:
            raise UserError(deleted_key_message(key, overrides) or f"~{key}: set a value instead")


OUR_GROUPS = ("gpu", "llm", "mode", "algo", "dataset", "cluster", "backend")


def check_group_names(overrides: Sequence[str]) -> None:
    """`<group>.name` is the chosen option's own name (cluster.name=slurm under cluster=local would say slurm while
    the local option's settings are loaded): an option is chosen with `<group>=<option>`."""
    for override in parse(overrides):
        key = key_of(override)
        group, _, leaf = key.partition(".")
        if group in OUR_GROUPS and leaf == "name" and not override.is_delete():
            raise UserError(
                f"{key}={override.value()}: {key} is the name of the {group} option chosen, not a setting; choose "
                f"the option with {group}=<option> (python launch/run.py --help lists them)"
            )


RFT_ROOT = "rft"


def sweeps_rft() -> bool:
    """This invocation is a sweep with algo=rft among its choices (algo=guru_baseline,rft): its rft.* keys take
    effect in those jobs, and the others' plans leave them unread, as the user asked for both."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return False
    given = OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)
    return any(
        key_of(override) == "algo" and override.is_sweep_override() and RFT_ROOT in override.sweep_string_iterator()
        for override in parse([str(line) for line in given])  # type: ignore[union-attr]
    )


def check_our_additions(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """Keys of ours the user set where nothing reads them. `+launch.dryrun=true`: Hydra adds a key to rlaunch's typed
    settings (the typo that the plain form refuses); our open tables (cluster.env, cluster.sbatch_extra,
    cluster.gres_types, rft.sft) take new keys. `rft.*` under another algo: only algo=rft's pipeline reads them."""
    import dataclasses

    from launch.schema import RLAUNCH_ROOTS, open_table

    for override in parse(overrides):
        key = key_of(override)
        if key.split(".", 1)[0] == RFT_ROOT and cfg.algo.name != RFT_ROOT and not sweeps_rft():
            written = override.input_line or key
            raise UserError(
                f"{written}: {RFT_ROOT}.* takes effect only with algo={RFT_ROOT} (rejection-sampling fine-tuning), "
                f"and this run is algo={cfg.algo.name}: add algo={RFT_ROOT}, or leave {key} out"
            )
        if not override.is_add() or key.split(".", 1)[0] not in RLAUNCH_ROOTS or "." not in key:
            continue
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent, default=None)
        if not isinstance(node, DictConfig) or open_table(node):
            continue
        names = [item.name for item in dataclasses.fields(OmegaConf.get_type(node))]  # type: ignore[arg-type]
        if leaf not in names:
            raise UserError(
                f"{override.input_line}: {parent} has no setting {leaf}{closest(leaf, names)}, and nothing reads a new "
                f"one (python launch/run.py --help lists {parent}'s)"
            )


_MISSING = object()
OPTIMIZERS = ("actor_rollout_ref.actor.optim", "critic.optim")


def check_optimizers(cfg: DictConfig) -> None:
    """optim.optimizer_impl / optim.optimizer: verl imports the module and takes the class from it as each worker
    builds its optimizer (workers/config/optimizer.py build_optimizer). Read here from the module's source, not
    imported (torch takes seconds): a name the installed module does not bind is refused; a module not installed
    here is left to the job's environment."""
    for key in OPTIMIZERS:
        optim = OmegaConf.select(cfg, key, default=None)
        if not isinstance(optim, DictConfig) or (key.startswith("critic.") and not trains_critic(cfg)):
            continue
        module, name = str(optim.get("optimizer_impl") or ""), str(optim.get("optimizer") or "")
        missing = missing_submodule(module)
        if missing:
            raise UserError(
                f"{key}.optimizer_impl={module}: {missing}; verl 0.9.1 would fail as the worker builds its optimizer "
                "(importlib.import_module)"
            )
        names = module_names_bound(module)
        if names and name not in names:
            public = sorted(bound for bound in names if bound[:1].isupper())
            raise UserError(
                f"{key}.optimizer={name}: {module} has no such class{closest(name, public)}; verl 0.9.1 would fail "
                "as the worker builds its optimizer (getattr on the module)"
            )


def installed_package(top: str) -> Path | None:
    """The directory of a top-level package installed here, found without importing it; None for a plain module or
    one not installed."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def missing_submodule(module: str) -> str | None:
    """Where a dotted module's package is installed here (the job's venv is this one) but the module is not: what is
    missing, with the nearest of the package's modules. A package not installed here is left to the job."""
    top, *rest = module.split(".")
    package = installed_package(top)
    for depth, part in enumerate(rest if package is not None else []):
        if (package / part / "__init__.py").is_file() or (package / f"{part}.py").is_file():
            package = package / part
            continue
        if (package / part).is_dir():  # a namespace package: anything may lie below
            return None
        siblings = [path.stem for path in package.iterdir() if path.suffix == ".py" or (path / "__init__.py").is_file()]
        return f"{'.'.join([top, *rest[:depth]])} has no module {part}{closest(part, siblings)}"
    return None


@cache
def module_names_bound(module: str) -> frozenset[str]:
    """The names a module's own source binds at its top level (readiness.module_names), found by its path without
    importing it; empty where it is not installed here, is no Python source, or binds names only at run time."""
    from launch.readiness import module_names

    top, *rest = module.split(".")
    package = installed_package(top)
    if package is None:
        return frozenset()
    base = Path(package, *rest)
    source = next((path for path in (base / "__init__.py", base.with_suffix(".py")) if path.is_file()), None)
    names = module_names(source.read_text()) if source is not None else None
    return frozenset(names or ())


LORA_MODELS = ("actor_rollout_ref.model", "critic.model")


def check_lora_targets(cfg: DictConfig) -> None:
    """model.target_modules under FSDP LoRA (lora_rank > 0). peft reads a string other than `all-linear` as a regex
    that must match a module's whole dotted name (re.fullmatch: `model.layers.0.self_attn.q_proj`): a bare word such
    as `all_linear` matches none, and peft raises "Target modules ... not found" as the actor is built; a regex that
    does not compile raises re.error there. verl's SGLang server refuses any regex (sglang_lora_target_modules).
    A list is matched by name suffix against the model's modules, which only the job's model holds: not judged."""
    import re

    for key in LORA_MODELS:
        model = OmegaConf.select(cfg, key, default=None)
        if not isinstance(model, DictConfig) or (key.startswith("critic.") and not trains_critic(cfg)):
            continue
        rank, targets = model.get("lora_rank"), model.get("target_modules")
        if not isinstance(rank, int) or rank <= 0 or not isinstance(targets, str) or targets.lower() == ALL_LINEAR:
            continue
        where = f"{key}.target_modules={shown(targets)}"
        lists = f"write {ALL_LINEAR} or a list of module names ({key}.target_modules=[q_proj,v_proj])"
        try:
            re.compile(targets)
        except re.error as error:
            raise UserError(
                f"{where}: peft reads a string as a regular expression, and this one does not compile ({error}); "
                f"{lists}"
            ) from None
        if re.fullmatch(r"[\w-]+", targets) and targets != "lm_head":
            raise UserError(
                f"{where}: peft reads a string as a regular expression over whole module names "
                f"(model.layers.0.self_attn.q_proj), so a bare word matches no layer{closest(targets, [ALL_LINEAR])}; "
                f"verl 0.9.1 would fail as the actor is built (peft: Target modules not found); {lists}"
            )
        if key.startswith("actor_rollout_ref.") and OmegaConf.select(cfg, "actor_rollout_ref.rollout.name") == "sglang":
            raise UserError(
                f"{where}: verl 0.9.1's SGLang server cannot serve LoRA on a regex target_modules and refuses it as "
                f"it starts (sglang_lora_target_modules); {lists}"
            )


LORA_ROLES = {"actor_rollout_ref.model": "actor_rollout_ref.actor", "critic.model": "critic"}


def _positive_rank(model: DictConfig, key: str) -> int:
    rank = value_at(model, key)
    return rank if isinstance(rank, int) and not isinstance(rank, bool) and rank > 0 else 0


def check_lora_rank_key(cfg: DictConfig) -> None:
    """A LoRA rank written under the other engine's key: the engine that runs reads none, so verl 0.9.1 trains every
    weight with no adapter (the memory of full fine-tuning), while the trainer, seeing a rank, drops the reference
    model and asks the actor for reference log-probs with its adapter disabled, which a model without one lacks."""
    for model_key, role in LORA_ROLES.items():
        model = OmegaConf.select(cfg, model_key, default=None)
        if not isinstance(model, DictConfig) or (role == "critic" and not trains_critic(cfg)):
            continue
        strategy = str(OmegaConf.select(cfg, f"{role}.strategy", default="fsdp"))
        read = lora_rank_key(strategy)  # the trainer takes a rank from either key as "the actor is its own reference"
        other = FSDP_LORA_RANK if read == MEGATRON_LORA_RANK else MEGATRON_LORA_RANK
        rank = _positive_rank(model, other)
        if not rank or _positive_rank(model, read):
            continue
        reference = (
            ", while its trainer, seeing a rank, builds no reference model (the actor with its adapter disabled, which "
            "it lacks)"
            if role == "actor_rollout_ref.actor"
            else ""
        )
        raise UserError(
            f"{model_key}.{other}={rank}: the {strategy} engine reads LoRA's rank from {model_key}.{read} (0 here), "
            f"so verl 0.9.1 would train every weight with no adapter{reference}; write {model_key}.{read}={rank} "
            f"(and drop {model_key}.{other})"
        )


# verl 0.9.1's DAPO reward manager asserts these as it is built, when the reward loop starts in the job
# (experimental/reward_loop/reward_manager/dapo.py and workers/reward_manager/dapo.py __init__).
OVERLONG = "reward.reward_kwargs.overlong_buffer_cfg"
MAX_RESP_LEN = "reward.reward_kwargs.max_resp_len"


def check_dapo_overlong_buffer(cfg: DictConfig) -> None:
    """DAPO's overlong penalty: on, it needs max_resp_len, at least the buffer's length, and a positive length."""
    if OmegaConf.select(cfg, "reward.reward_manager.name", default=None) != "dapo":
        return
    buffer = OmegaConf.select(cfg, OVERLONG, default=None)
    if not isinstance(buffer, DictConfig) or not buffer.get("enable"):
        return
    length, max_resp_len = buffer.get("len"), OmegaConf.select(cfg, MAX_RESP_LEN, default=None)
    response = OmegaConf.select(cfg, "data.max_response_length", default=None)
    asserted = "verl 0.9.1's DAPO reward manager asserts it as the reward loop starts, after the job got its nodes"
    if max_resp_len is None:
        raise UserError(
            f"{OVERLONG}.enable=true without {MAX_RESP_LEN}: {asserted}; set +{MAX_RESP_LEN}={shown(response)} "
            f"(data.max_response_length)"
        )
    if not isinstance(length, int | float) or length <= 0:
        raise UserError(
            f"{OVERLONG}.len={shown(length)}: must be a positive number of tokens when the overlong penalty is on "
            f"({asserted}); set it (DAPO's recipe: 4096 of 20480) or {OVERLONG}.enable=false"
        )
    if isinstance(max_resp_len, int | float) and max_resp_len < length:
        raise UserError(
            f"{OVERLONG}.len={shown(length)} is longer than {MAX_RESP_LEN}={shown(max_resp_len)}: {asserted}; "
            f"lower the buffer's len below {shown(max_resp_len)} or raise {MAX_RESP_LEN}"
        )


def check_resume_path(cfg: DictConfig) -> None:
    """resume_mode=resume_path: verl 0.9.1's trainer asserts, as it starts, a resume_from_path string naming a
    global_step_ folder (trainer_base.py _load_checkpoint)."""
    if OmegaConf.select(cfg, "trainer.resume_mode", default=None) != "resume_path":
        return
    path = OmegaConf.select(cfg, "trainer.resume_from_path", default=None)
    if not isinstance(path, str) or "global_step_" not in path:
        raise UserError(
            f"trainer.resume_mode=resume_path with trainer.resume_from_path={shown(path)}: verl 0.9.1 asserts a path "
            f"to a checkpoint's global_step_<N> folder as the trainer starts; set trainer.resume_from_path=<dir>/"
            f"global_step_<N>, or trainer.resume_mode=auto to resume from the latest in trainer.default_local_dir"
        )


def check_booleans(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """A boolean key of verl's the user set to anything but true, false or null, in its PPO tree or in the SFT tree
    rft.sft holds: Hydra keeps `off` or `no` as a string, which verl's `if` takes for true."""
    sft = [override for override in parse(overrides) if key_of(override).startswith(SFT_PREFIX)]
    for override in [*user_verl_overrides(overrides), *sft]:
        key = key_of(override)
        value: Any = OmegaConf.select(cfg, key, default=None)
        if not isinstance(value, str):  # a number is read as Python reads it (0 false, 1 true), null as false
            continue
        declared = declared_type(cfg, key)
        if declared.kind == "bool":
            empty = "" if value else " (empty: a shell variable the script never set?)"
            raise UserError(
                f"{key}={shown(value)}: must be true or false ({declared.source}){empty}; verl 0.9.1 would take "
                f"{shown(value)!r} for {'true' if value else 'false'} (write {key}=true or {key}=false)"
            )


ENGINES = "workers/engine"
# The model type verl's engine worker builds for a role (engine_workers.py: TrainingWorker(model_type=...))
MODEL_TYPES = {
    "actor_rollout_ref.actor": "language_model",
    "actor_rollout_ref.ref": "language_model",
    "critic": "value_model",
}


@cache
def registered_engines(model_type: str) -> tuple[str, ...]:
    """The backends verl registers for a model type on CUDA: every `@EngineRegistry.register(model_type=...,
    backend=..., device=...)` under verl/workers/engine (device defaults to cuda there too)."""
    backends: set[str] = set()
    for path in sorted((verl_package_dir() / ENGINES).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            for call in node.decorator_list:
                if isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "register":
                    words = {keyword.arg: _strings(keyword.value) for keyword in call.keywords}
                    if model_type in words.get("model_type", []) and "cuda" in words.get("device", ["cuda"]):
                        backends.update(words.get("backend", []))
    return tuple(sorted(backends))


def _strings(node: ast.expr) -> list[str]:
    """A string or a list of strings, as written."""
    items = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
    return [item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)]


@dataclass(frozen=True)
class Tree:
    """A verl config tree rlaunch composes and plans, and the engines its settings serve."""

    backend: str  # rlaunch's group choice that composes it
    strategies: tuple[str, ...]
    settings: str  # the node of a role that holds the engine's settings


# By the role's config class (its _target_): FSDPActorConfig/FSDPCriticConfig carry an FSDPEngineConfig (fsdp_config),
# the Mcore ones a McoreEngineConfig (megatron). verl's FSDP engine config also takes fsdp_turbo, an Ascend-made
# engine in a package of its own that rlaunch neither installs nor models.
TREES = {
    "FSDP": Tree("backend=fsdp", ("fsdp", "fsdp2"), "fsdp_config"),
    "Mcore": Tree("backend=megatron", ("megatron",), "megatron"),
}


def check_strategies(cfg: DictConfig) -> None:
    """Each built role's strategy (verl's engine backend): one verl registers for it, and one the composed tree serves
    and rlaunch plans. verl 0.9.1 checks neither before its workers start."""
    from launch.layout_checks import built_roles  # layout_checks imports the plan; choices runs before it is needed

    for role in built_roles(cfg):
        node = OmegaConf.select(cfg, role)
        strategy = str(node.get("strategy"))
        target = str(node.get("_target_", "")).rsplit(".", 1)[-1]
        tree = next((tree for prefix, tree in TREES.items() if target.startswith(prefix)), None)
        if tree is None or strategy in tree.strategies:
            continue
        key = f"{role}.strategy={strategy}"
        engines = registered_engines(MODEL_TYPES[role])
        if engines and strategy not in engines:
            raise UserError(
                f"{key}: not one of the engines verl registers for a {MODEL_TYPES[role]} on CUDA "
                f"({ENGINES}): {', '.join(engines)}; verl 0.9.1 would fail as the worker starts "
                f"(EngineRegistry: Unknown backend). rlaunch plans {_planned()}"
            )
        home = next((tree for tree in TREES.values() if strategy in tree.strategies), None)
        if home is not None:
            raise UserError(
                f"{key}: the {strategy} engine reads its settings from {role}.{home.settings}, which the composed "
                f"tree ({tree.backend}) lacks, so verl 0.9.1 would fail as the worker starts: write {home.backend} "
                f"(verl's model_engine / --config-name) instead of setting the strategy"
            )
        raise UserError(
            f"{key}: rlaunch plans {_planned()}; the {strategy} engine's memory and layout are not modelled here: "
            f"use one of those"
        )


def _planned() -> str:
    return "; ".join(f"{', '.join(tree.strategies)} ({tree.backend})" for tree in TREES.values())
