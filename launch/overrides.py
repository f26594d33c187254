"""The one override parser (Hydra's own OverridesParser) and what rlaunch asks of a job's override list: the key an
override sets, its value as written, which keys a sweep varies, which overrides leave the run's identity alone, and
the job's readable name; and the one quoter that writes a value back as Hydra reads it (`hydra_quoted` a string,
`render_value` any value, `as_override(s)` whole key=value lines).

Runs on: the login node (planning, the doctor's suggested overrides) and anywhere a `key=value` is written for Hydra.
How a sweep composes each job quickly lives in launch/compose_once.py.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import OverrideParseException

# Hydra's quoting, defined once where algos/ (which never imports launch/) can use it too; offered here to the launcher
from algos.verl_entry_points import hydra_quoted as hydra_quoted
from algos.verl_entry_points import render_value as render_value

# Overrides that do not change what is trained: out of the run id and the job name.
IDENTITY_EXCLUDED_PREFIXES = ("launch.", "gpu.selected_by", "hydra.", "hydra/")
JOB_NAME_MAX = 100  # characters; the full overrides live in the plan
JOB_NAME_SEPARATOR = ","


def as_override(key: str, value: Any) -> str:
    """key=value as Hydra reads it back: booleans `true`/`false`, None `null`, strings quoted (hydra_quoted)."""
    return f"{key}={render_value(value)}"


def as_overrides(values: Mapping[str, Any]) -> list[str]:
    """Each key=value as_override writes it, in the mapping's order."""
    return [as_override(key, value) for key, value in values.items()]


def parse(overrides: Sequence[str]) -> list[Override]:
    return [_parse(override) for override in overrides]


# One override at a time, as Hydra's parse_overrides does: a sweep's jobs repeat the same few override strings, and a
# sweep asks about each job's list several times (swept keys, composition, name). Overrides are only read.
@lru_cache(maxsize=8192)
def _parse(override: str) -> Override:
    return _parser().parse_overrides([override])[0]


@lru_cache(maxsize=1)
def _parser() -> OverridesParser:
    return OverridesParser.create()


def key_of(override: Override) -> str:
    """The key an override sets, without its +/++/~ prefix (with @package for a group placed elsewhere)."""
    return override.key_or_group + (f"@{override.package}" if override.package is not None else "")


def parse_one(argument: str) -> Override | None:
    """Hydra's reading of one command-line argument; None where Hydra's grammar rejects it (a flag such as -m, a
    typo): whoever needs it then leaves the argument to Hydra, whose own error names it when it composes."""
    try:
        return _parse(argument)
    except OverrideParseException:
        return None


def key_in(argument: str) -> str | None:
    """The key one command-line override sets (`+a.b=1`, `~a.b`, `a.b='x=y'` -> 'a.b'); None for what is not one."""
    parsed = parse_one(argument)
    return None if parsed is None else key_of(parsed)


def keys_of(overrides: Sequence[str]) -> set[str]:
    """The keys a list of overrides sets or deletes, without their +/++/~ prefixes."""
    return {key_of(override) for override in parse(overrides)}


def value_text(override: Override) -> str | None:
    """What an override sets, as text: a string without its quotes, anything else as written (`null`, `true`,
    `[a,b]`, `a,b` for a sweep); None for a deletion (`~key`)."""
    if override.type == OverrideType.DEL:
        return None
    value = override.value()
    return value if isinstance(value, str) else override.get_value_string()


def as_written(overrides: Sequence[str]) -> dict[str, str]:
    """key -> value exactly as written (quotes kept), for overrides that set values: what a printed fix shows."""
    return {key_of(o): o.get_value_string() for o in parse(overrides) if o.type != OverrideType.DEL}


def find(arguments: Sequence[str], key: str) -> Override | None:
    """The override among `arguments` that sets or deletes `key` (with any prefix) and that Hydra applies: the last
    of them (`gpu=h100 ... gpu=a40` composes a40); flags are passed over."""
    found = None
    for argument in arguments:
        parsed = parse_one(argument)
        if parsed is not None and key_of(parsed) == key:
            found = parsed
    return found


def value_in(arguments: Sequence[str], key: str) -> str | None:
    """value_text of the override of `key` Hydra applies (find); None where none sets it."""
    override = find(arguments, key)
    return None if override is None else value_text(override)


def without(arguments: Sequence[str], keys: Collection[str]) -> list[str]:
    """`arguments` less the overrides of `keys`, in order; flags and whatever Hydra cannot read are kept."""
    return [argument for argument in arguments if key_in(argument) not in keys]


def swept_keys(job_overrides: Sequence[Sequence[str]]) -> dict[str, frozenset[str]]:
    """Keys whose value differs between the jobs of one sweep, with their values (gpu=a40,h100 ->
    {'gpu': {'a40', 'h100'}}): a job's name tells its value apart from the others (job_name)."""
    lines: dict[str, set[str]] = {}
    values: dict[str, set[str]] = {}
    for overrides in job_overrides:
        for override in parse(overrides):
            lines.setdefault(key_of(override), set()).add(override.input_line or "")
            values.setdefault(key_of(override), set()).add(override.get_value_element_as_str())
    return {key: frozenset(values[key]) for key, seen in lines.items() if len(seen) > 1}


def path_name(path: str, others: Collection[str]) -> str:
    """A path by its shortest tail of components that no other swept value ends in: data/gsm8k/train.parquet
    beside data/math/train.parquet is gsm8k/train.parquet, alone it is train.parquet."""
    parts = [part for part in PurePosixPath(path).parts if part != "/"] or [path]
    for width in range(1, len(parts) + 1):
        tail = "/".join(parts[-width:])
        if not any(other != path and (other == tail or other.endswith("/" + tail)) for other in others):
            return tail
    return path


def identity_excluded(key: str) -> bool:
    return key.startswith(IDENTITY_EXCLUDED_PREFIXES)


def _short_keys(keys: list[str]) -> dict[str, str]:
    """Each dotted key shortened to its shortest unique tail: actor.optim.lr and critic.optim.lr stay apart."""
    short: dict[str, str] = {}
    for key in keys:
        parts = key.split(".")
        for width in range(1, len(parts) + 1):
            tail = ".".join(parts[-width:])
            if sum(1 for other in keys if other == tail or other.endswith("." + tail)) == 1:
                short[key] = tail
                break
        else:
            short[key] = key
    return short


def job_name(
    profile: str,
    overrides: Sequence[str],
    swept: Mapping[str, Collection[str]] | Collection[str],
    groups: frozenset[str],
) -> str:
    """The GPU profile plus the values this sweep varies, in command-line order: 'h100,mtl_pcgrad,lr=3e-06'. A
    group's choice stands alone; a value keeps the shortest tail of its key that tells it apart; a path is named by
    its last components, as many as tell it apart from the key's other swept values (`swept`: the keys, or the keys
    with their values, swept_keys). Short and stable: the same overrides give the same name; the run id keeps jobs
    apart."""
    parsed = [o for o in parse(overrides) if key_of(o) in swept and not identity_excluded(o.key_or_group)]
    parsed = [o for o in parsed if key_of(o) != "gpu"]  # the profile leads the name already
    short = _short_keys([key_of(o) for o in parsed if key_of(o) not in groups])
    parts = [profile]
    for override in parsed:
        value = override.get_value_element_as_str()
        if "/" in value:
            value = path_name(value, swept.get(key_of(override), ()) if isinstance(swept, Mapping) else ())
        parts.append(value if key_of(override) in groups else f"{short[key_of(override)]}={value}")
    name = parts[0]
    for index, part in enumerate(parts[1:], start=1):
        if len(name) + len(part) + 1 > JOB_NAME_MAX:
            return f"{name}{JOB_NAME_SEPARATOR}+{len(parts) - index}"
        name += JOB_NAME_SEPARATOR + part
    return name


def holds_interpolation(node: Any) -> bool:
    """Whether a raw value (or any value in it) is or contains an interpolation, as OmegaConf would read it."""
    if isinstance(node, dict):
        return any(holds_interpolation(value) for value in node.values())
    if isinstance(node, list):
        return any(holds_interpolation(value) for value in node)
    return isinstance(node, str) and "${" in node
