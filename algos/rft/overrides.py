"""Values and nested mappings as Hydra command-line overrides (the grammar verl's entry points parse).

Runs on: the login node and the job head. Strings are always quoted, so a path or a value with commas, spaces or
'=' reaches Hydra as the one string it is; numbers, booleans and null keep their type.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def render_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{key}:{render_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(render_value(item) for item in value) + "]"
    raise TypeError(f"cannot write {value!r} ({type(value).__name__}) as a Hydra override")


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted keys of the leaves; an empty mapping is a leaf (it sets the key to {})."""
    for key, value in mapping.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from flatten(value, dotted + ".")
        else:
            yield dotted, value
