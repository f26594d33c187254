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
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from launch.errors import UserError
from launch.overrides import key_of
from launch.ranges import declared_type, shown
from launch.schema import verl_package_dir
from launch.verl_diff import user_verl_overrides

CORE_ALGOS = "trainer/ppo/core_algos.py"


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


def _asserted_in(relative: str, variable: str) -> list[str]:
    """The strings of `assert variable in [...]` (torch_functional's truncation modes)."""
    for node in ast.walk(_tree(relative)):
        if (
            isinstance(node, ast.Assert)
            and isinstance(node.test, ast.Compare)
            and getattr(node.test.left, "id", "") == variable
            and isinstance(node.test.ops[0], ast.In)
        ):
            return [
                item.value for item in getattr(node.test.comparators[0], "elts", []) if isinstance(item, ast.Constant)
            ]
    return []


@dataclass(frozen=True)
class Words:
    """A key's allowed words, where verl reads them, and what verl does with another."""

    read: Callable[[], list[str]]
    where: str
    verl_does: str


CHOICES: dict[str, Words] = {
    "algorithm.adv_estimator": Words(
        lambda: sorted(
            set(_enum_values(_tree(CORE_ALGOS)).values()) | set(_decorated_names(CORE_ALGOS, "register_adv_est"))
        ),
        "verl's advantage estimators (core_algos.py)",
        "verl 0.9.1 would fail at the first step (get_adv_estimator_fn: Unknown advantage estimator)",
    ),
    "actor_rollout_ref.actor.policy_loss.loss_mode": Words(
        lambda: sorted(_decorated_names(CORE_ALGOS, "register_policy_loss")),
        "verl's policy losses (core_algos.py)",
        "verl 0.9.1 would fail at the first actor update (get_policy_loss_fn: Unsupported loss mode)",
    ),
    "trainer.logger": Words(
        lambda: _listed("utils/tracking.py", "supported_backend"),
        "verl's tracking backends (utils/tracking.py)",
        "verl 0.9.1 would fail as the trainer starts (Tracking: not supported)",
    ),
    "data.truncation": Words(
        lambda: _asserted_in("utils/torch_functional.py", "truncation"),
        "verl's truncation modes (utils/torch_functional.py)",
        "verl 0.9.1 would fail at the first prompt longer than data.max_prompt_length",
    ),
}


@cache
def allowed_words(key: str) -> tuple[str, ...]:
    return tuple(CHOICES[key].read())


def check_words(cfg: DictConfig) -> None:
    """Every key of CHOICES the config holds; the first word verl does not know stops the run."""
    for key, words in CHOICES.items():
        value = OmegaConf.select(cfg, key, default=None)
        if value is None:
            continue
        values = list(value) if isinstance(value, ListConfig | list) else [value]
        allowed = allowed_words(key)
        unknown = [item for item in values if str(item) not in allowed]
        if unknown and allowed:  # an empty set: verl's source moved, and no check is better than a wrong one
            listed = isinstance(value, ListConfig | list)
            written = f"{key}={'[' + ','.join(map(str, values)) + ']' if listed else shown(value)}"
            raise UserError(
                f"{written}: {unknown[0]} is not one of {words.where}: {', '.join(allowed)}; {words.verl_does}"
            )


def check_booleans(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """A boolean key of verl's the user set to anything but true, false or null: Hydra keeps `off` or `no` as a string,
    which verl's `if` takes for true."""
    for override in user_verl_overrides(overrides):
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
