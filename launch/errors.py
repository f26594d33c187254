"""Errors a user can cause, as one line that names the problem and the fix.

Runs on: the login node. Hydra and OmegaConf report composition problems as multi-line messages with stack traces;
`explain` turns the ones a user can cause into a single line. Anything it does not recognise is a bug in rlaunch and
keeps its traceback.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence

# Keys (and values) of verl forks that scripts written for them carry, and what verl 0.9.1 has instead. A pasted
# Reasoning360 DAPO script sets them; verl 0.9.1 would refuse the key or, worse, ignore it.
FORK_KEYS = {
    "reward_model.overlong_buffer": (
        "Reasoning360's DAPO recipe (a verl fork)",
        "verl 0.9.1's DAPO reward manager reads +reward.reward_kwargs.overlong_buffer_cfg.{enable,len,penalty_factor} "
        "with reward.reward_manager.name=dapo",
    ),
}
FORK_VALUES = {
    ("reward_model.reward_manager", "async_dapo"): (
        "Reasoning360's verl fork",
        "use reward.reward_manager.name=dapo, or drop it for rlaunch's own reward",
    ),
    ("reward.reward_manager.name", "async_dapo"): (
        "Reasoning360's verl fork",
        "use reward.reward_manager.name=dapo, or drop it for rlaunch's own reward",
    ),
}


def fork_value_message(key: str, value: object) -> str | None:
    """'<key>=<value> is <fork>'s, not verl 0.9.1's: <what to do>' for a known fork's value of a key, else None."""
    known = FORK_VALUES.get((key, str(value)))
    return None if known is None else f"{key}={value} is {known[0]}'s, not verl 0.9.1's: {known[1]}"


def fork_key_message(key: str) -> str | None:
    """'<key> is a key of <fork>, not of verl 0.9.1: <what to do>' for a known fork's key, else None."""
    for prefix, (fork, instead) in FORK_KEYS.items():
        if key == prefix or key.startswith(prefix + "."):
            return f"{key} is a key of {fork}, not of verl 0.9.1: {instead}"
    return None


class UserError(Exception):
    """Bad input: the message's first line names the problem and the fix. Nothing has been submitted."""


def nearest(word: str, options: Iterable[str]) -> list[str]:
    """The options `word` most likely meant: those it begins (gpu=a100: a100_40 and a100_80), else the one closest in
    spelling; none where nothing is close."""
    options = list(options)
    begun = [option for option in options if option.startswith(word) and option != word][:3]
    return begun or difflib.get_close_matches(word, options, n=1, cutoff=0.6)


def closest(word: str, options: Iterable[str]) -> str:
    """' (did you mean X?)' for the nearest option(s), or ''."""
    meant = nearest(word, options)
    return f" (did you mean {' or '.join(repr(option) for option in meant)}?)" if meant else ""


KeyExplainer = Callable[[str], str | None]  # an unknown dotted key -> its one-line message, or None


def unparsable_override_message(override: str) -> str:
    """Hydra's override grammar takes only some characters unquoted (not ~, spaces, quotes or brackets in a plain
    value): the value quoted for it, as one shell word."""
    key, equals, value = override.partition("=")
    if len(value) > 2 and value.startswith("<") and value.endswith(">"):  # a script's <path_to_...>: not a quoting slip
        return f"{key} is a placeholder (value {value!r}): give it a value on the command line ({key}=...)"
    said = f"cannot parse the override '{override}'"
    if not equals or not value or value[0] in "'\"[{" or "'" in value:
        return f"{said}: write key=value (quote values with spaces or commas)"
    quoted = f"{key}=\"'{value}'\""
    if value.startswith("~"):
        return f"{said}: Hydra takes no unquoted ~; write {key}=$HOME{value[1:]} (the shell expands it; verl does not)"
    return f"{said}: quote the value for Hydra, as one shell word: {quoted}"


def deleted_key_message(full_key: str, overrides: Sequence[str]) -> str | None:
    """A key the user's own ~key removed, then read by the plan (verl reads it too as the run starts)."""
    for override in overrides:
        deleted = override[1:].split("=", 1)[0] if override.startswith("~") else None
        if deleted and (full_key == deleted or full_key.startswith(f"{deleted}.")):
            return f"{override} deletes '{full_key}', which the run reads: set a value instead ({deleted}=...)"
    return None


def _unmade_directory(cause: BaseException) -> str | None:
    """A directory that could not be made (Hydra's output directory, a run directory: both under launch.runs_dir):
    the runs dir is not somewhere this user can write."""
    if not isinstance(cause, OSError) or not cause.filename:
        return None
    frames = traceback.extract_tb(cause.__traceback__)
    if not frames or frames[-1].name not in ("mkdir", "makedirs"):
        return None
    return (
        f"cannot create {cause.filename} ({cause.strerror}): launch.runs_dir (by default <cluster.shared_dir>/rlaunch) "
        "must be a directory this user can write"
    )


def explain(exc: BaseException, key_explainers: Sequence[KeyExplainer] = ()) -> str | None:
    """The one-line message for an error the user caused, or None for a bug. `key_explainers`: what the caller knows
    of an unknown key beyond its spelling (launch/run.py: the backend whose base has it, launch/verl_diff.py)."""
    from hydra.errors import MissingConfigException, OverrideParseException
    from omegaconf.errors import (
        ConfigAttributeError,
        ConfigKeyError,
        InterpolationResolutionError,
        MissingMandatoryValue,
        ValidationError,
    )

    if isinstance(exc, UserError):
        return str(exc)
    if isinstance(exc, MissingConfigException) and exc.options is not None and exc.missing_cfg_file:
        group, _, name = exc.missing_cfg_file.rpartition("/")
        options = sorted(option for option in exc.options if not option.startswith("_"))
        example = (nearest(name, options) or options)[0]  # the one it suggests, where it suggests one
        return (
            f"unknown {group} '{name}'{closest(name, options)}: choose one of {', '.join(options)} "
            f"(e.g. {group}={example})"
        )
    if isinstance(exc, OverrideParseException):
        return unparsable_override_message(exc.override)

    causes = list(_causes(exc))
    for cause in causes:
        made = _unmade_directory(cause)
        if made:
            return made
        if isinstance(cause, ConfigKeyError | ConfigAttributeError):
            return _explain_unknown_key(exc, cause, key_explainers)
        if isinstance(cause, MissingMandatoryValue):
            key = getattr(cause, "full_key", "?")
            return f"{key} has no value: set it on the command line ({key}=...)"
        if isinstance(cause, InterpolationResolutionError):
            unresolved = _unresolved_interpolation(cause)
            if unresolved:
                return unresolved
        if isinstance(cause, ValidationError):
            key = getattr(cause, "full_key", "?")
            merging = re.search(r"Error merging override ([^=\s]+)=(\S*)", str(exc))
            if merging and merging.group(1).startswith(f"{key}."):  # a key under one that holds a single value
                written, value = merging.groups()
                return f"{written}: {key} holds a single value, not keys of its own: write {key}={value}"
            return _wrong_type_message(key, _first_line(cause), merging.group(2) if merging else None)
    appended = re.search(r"Could not append to config\. An item is already at '([^']+)'", str(exc))
    if appended:
        key = appended.group(1)
        return f"+{key} adds a new key, but verl's config already has {key}: drop the + ({key}=...)"
    ambiguous = re.match(r"Ambiguous value for argument '([^=']+)=([^']*)'", str(exc))
    if ambiguous:
        key, value = ambiguous.groups()
        return (
            f"{key}={value} is ambiguous: write a list in brackets ({key}=[{value}]), quote one string "
            f"({key}=\"'{value}'\"), or add -m to sweep over {value.replace(',', ', ')}"
        )
    if type(exc).__name__ == "ConfigCompositionException" and re.match(r"Could not override 'model'", str(exc)):
        # verl's own `model` groups sit under actor_rollout_ref and critic; the model is chosen with rlaunch's llm
        value = re.search(r"use \+model=(\S+)", str(exc))
        return (
            f"model={value.group(1) if value else '...'}: the model group is llm (llm=<option>, python launch/run.py "
            "--help lists them), or set actor_rollout_ref.model.path=<hub id or directory>"
        )
    if type(exc).__name__ == "ConfigCompositionException":
        # Hydra's own lines after the first are its hint: kept, on the one line
        return f"{'; '.join(_lines(exc))}: check the command-line overrides"
    return None


# OmegaConf's names of the types it converts to, as a user would write a value of one
TYPE_WORDS = {"Integer": "a whole number", "Float": "a number", "Boolean": "true or false", "String": "a string"}
# the unit a key of rlaunch's names at its end (mode.time_budget_min, cluster.mem_gb, cluster.signal_delay_s)
KEY_UNITS = {"_min": "minutes", "_gb": "GB", "_s": "seconds"}


def _wrong_type_message(key: str, said: str, written: str | None) -> str:
    """A value of the wrong type for a typed key of rlaunch's (OmegaConf's ValidationError, `said`): the key, the value
    as written and what it takes, with the form to write: a list in brackets, a number in the key's own unit."""
    converted = re.search(r"Value '(.*)' of type '\w+' could not be converted to (\w+)", said)
    not_bool = re.search(r"Value '(.*)' is not a valid bool", said)
    if converted and converted.group(2) in TYPE_WORDS:
        value, wanted = converted.group(1), TYPE_WORDS[converted.group(2)]
        unit = next((words for suffix, words in KEY_UNITS.items() if key.endswith(suffix)), None)
        unit_written = unit and re.match(r"-?\d", value)  # 1h, 64G: a number with a unit of its own
        return (
            f"{key}={value}: must be {wanted}"
            + (f" of {unit}" if unit else "")
            + (", without a unit" if unit_written else "")
        )
    if not_bool:
        return f"{key}={not_bool.group(1)}: must be true or false"
    if "is not a ListConfig, list or tuple" in said:
        value = written if written is not None else "..."
        return f"{key}={value}: must be a list, in brackets: write {key}=[{value}]"
    return f"bad value for {key}: {said}; give a value of the key's type"


def _unresolved_interpolation(cause: BaseException) -> str | None:
    """A ${...} the user wrote that cannot resolve: an environment variable not set here (oc.env), or a key the
    config does not have. Other resolution errors are left to the caller (a bug of ours keeps its traceback)."""
    key = getattr(cause, "full_key", "?")
    environment = re.search(r"Environment variable '([^']+)' not found", str(cause))
    if environment:  # only ${oc.env:NAME} without a default fails
        return (
            f"{key}=${{oc.env:{environment.group(1)}}}: its value reads the environment variable "
            f"{environment.group(1)}, which is not set here: export it before running rlaunch, or give the value"
        )
    missing = re.search(r"Interpolation key '([^']+)' not found", str(cause))
    if missing:
        return (
            f"{key}=${{{missing.group(1)}}}: its value refers to {missing.group(1)}, which the config does not have: "
            "name a key it has"
        )
    return None


# verl 0.9.1 keeps the legacy reward_model.* only as a layer its fully-async entry migrates onto reward.* (the keys of
# its trainer/config/legacy_reward_impl.yaml; main_ppo never reads them: choices.check_legacy_reward_keys refuses a
# value there with its new home). Other keys older scripts set there (model.use_remove_padding,
# model.fsdp_config.*, micro_batch_size_per_gpu) were the FSDP reward worker's, which 0.9.1 replaced by a rollout
# engine: a same-named key of another role (critic.model.use_remove_padding) is no home for them.
LEGACY_REWARD_ROOT = "reward_model"
REWARD_HOMES = ("reward", "reward.reward_model")
_ABSENT = object()


def legacy_reward_key_message(key: str, written: str, hint: str) -> str | None:
    """An unknown key under the legacy reward_model.* (`written`: key=value as Hydra quotes it): drop it (or fix its
    spelling), never move it to another role."""
    root, _, rest = key.partition(".")
    if root != LEGACY_REWARD_ROOT or not rest:
        return None
    from launch.schema import select, verl_defaults

    if any(select(verl_defaults(), f"{home}.{rest}", _ABSENT) is not _ABSENT for home in REWARD_HOMES):
        return None  # a key that did move (reward_model.sandbox_fusion.url): the moved-key explainer names its place
    fix = f"fix the spelling{hint}" if hint else "drop it"
    return (
        f"{written}: unknown key; verl 0.9.1 has no such reward-model setting and would refuse it too; its reward "
        "model is served by a rollout engine (reward.reward_model.*, the engine's settings under "
        f"reward.reward_model.rollout.*), and {LEGACY_REWARD_ROOT}.* takes only the legacy keys verl maps there: {fix}"
    )


def _explain_unknown_key(exc: BaseException, cause: BaseException, key_explainers: Sequence[KeyExplainer]) -> str:
    text = str(exc) + " " + str(cause)
    override = re.search(r"Could not override '([^']+)'", text)
    missing = getattr(cause, "key", None)
    full_key = override.group(1) if override else getattr(cause, "full_key", str(missing))
    parent = getattr(cause, "parent_node", None)
    siblings = [str(key) for key in parent.keys()] if parent is not None and hasattr(parent, "keys") else []
    hint = closest(str(missing), siblings) if missing is not None else ""
    appended = re.search(r"To append to your config use \+(\S+)", text)  # Hydra's hint holds the value as written
    written = appended.group(1) if appended and appended.group(1).startswith(f"{full_key}=") else full_key
    # under reward_model.* a retired switch (0.8's use_reward_loop) is nearer a sibling than loose matching allows for a
    # misspelling: only a near miss is offered there, else "drop it"
    near_miss = difflib.get_close_matches(str(missing), siblings, n=1, cutoff=0.8) if missing is not None else []
    legacy_hint = f" (did you mean {near_miss[0]!r}?)" if near_miss else ""
    legacy_reward = lambda key: legacy_reward_key_message(key, written, legacy_hint)  # noqa: E731
    for explainer in (fork_key_message, legacy_reward, *key_explainers):
        message = explainer(full_key)
        if message is not None:
            return message
    from launch.schema import RLAUNCH_ROOTS, open_table

    entries = _new_entries_message(written, full_key, parent) if override else None
    if entries is not None:
        return entries
    # rlaunch's own settings are typed: a new one would do nothing; its open tables (cluster.env, rft.sft) take one
    if full_key.split(".", 1)[0] in RLAUNCH_ROOTS and not open_table(parent):
        match = difflib.get_close_matches(str(missing), siblings, n=1, cutoff=0.6)
        meant = f" (did you mean '{full_key.rpartition('.')[0]}.{match[0]}'?)" if match else ""
        return f"unknown key '{full_key}'{meant}: rlaunch has no such setting (python launch/run.py --help lists them)"
    if "." not in full_key and parent is not None:  # a bare leaf name (lr=1e-6): the full keys that end in it
        from omegaconf import OmegaConf

        from launch.schema import mappings

        tree = OmegaConf.to_container(parent, resolve=False) if OmegaConf.is_config(parent) else {}
        found = [path for path, node in mappings(tree) if path and full_key in node]  # type: ignore[arg-type]
        paths = sorted(found, key=lambda path: (common_root_rank(path), path.count("."), path))
        if paths:
            shown = ", ".join(f"{path}.{full_key}" for path in paths[:3])
            return f"unknown key '{full_key}': a verl key is written in full, e.g. {shown}"
    return f"unknown key '{full_key}'{hint}: fix the spelling{new_key_advice(full_key, parent)}"


# where the keys a pasted script sets most often live, first: a bare leaf name is offered under these before the rest
COMMON_ROOTS = ("trainer", "data", "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "algorithm", "critic")


def common_root_rank(path: str) -> int:
    return next(
        (rank for rank, root in enumerate(COMMON_ROOTS) if path == root or path.startswith(root + ".")),
        len(COMMON_ROOTS),
    )


def new_key_advice(key: str, parent: object, parent_key: str | None = None) -> str:
    """How to add `key` on purpose: `+key=...`, except under a node (`parent`, at `parent_key`: key's parent unless
    said) verl builds into one of its dataclasses (the node's `_target_`), which takes its own fields only: verl would
    refuse a new key there as it checks the config."""
    target = parent.get("_target_") if hasattr(parent, "get") else None
    if isinstance(target, str):
        node = parent_key if parent_key is not None else key.rpartition(".")[0]
        return f"; verl builds {node} into its {target.rpartition('.')[2]}, which takes no other key"
    return f", or add a new key on purpose with +{key}=..."


def _new_entries_message(written: str, key: str, table: object) -> str | None:
    """`key={A:1}` on an open table of ours (cluster.env, cluster.sbatch_extra, algo.pcgrad.task_map): Hydra merges the
    mapping into the table, which takes no new key that way; each entry takes a `+`."""
    from launch.overrides import as_override, parse
    from launch.schema import open_table

    if not open_table(table) or not written.startswith(f"{key}="):
        return None
    try:
        value = parse([written])[0].value()
    except Exception:  # noqa: BLE001 - not a mapping Hydra reads: the caller's message stands
        return None
    if not isinstance(value, dict) or not value:
        return None
    adds = " ".join(f"+{as_override(f'{key}.{name}', entry)}" for name, entry in value.items())
    return f"{written}: {key} is a table whose new entries each take a +: write {adds}"


def _causes(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _lines(exc: BaseException) -> list[str]:
    return [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]


def _first_line(exc: BaseException) -> str:
    return _lines(exc)[0]


def exit_with_message(
    error: Exception, cleanup: Callable[[], None] | None = None, key_explainers: Sequence[KeyExplainer] = ()
) -> None:
    """Bad input ends here: one line on stderr, exit 2, nothing submitted. A bug keeps its traceback (so does every
    error under RLAUNCH_DEBUG=1). `cleanup` runs first either way (the launcher removes the sweep directory it
    opened)."""
    message = explain(error, key_explainers)
    if cleanup is not None:
        cleanup()
    if message is None or os.environ.get("RLAUNCH_DEBUG"):
        raise error
    print(f"rlaunch: error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)
