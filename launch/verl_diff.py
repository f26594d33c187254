"""What rlaunch changed in a verl run: verl's own composition of the user's keys, and every key of the planned verl
config that differs from it, with the layer that set it (plan.json's `changed_from_verl`).

Runs on: the login node (launch/plan.py, for every plan).

"verl's own composition" is what `python -m verl.trainer.main_ppo <the user's verl keys>` composes: verl's shipped
ppo_trainer.yaml, or ppo_megatron_trainer.yaml under backend=megatron (`--config-name=ppo_megatron_trainer`: the base
the user chose, `base_config`; its Hydra defaults tree found through launch.schema.verl_config_source) with exactly the
overrides
the user typed for verl's keys (our roots, our group choices and Hydra's own keys left out), composed and resolved
by Hydra as verl's `@hydra.main` does. Everything rlaunch's layers add on top (a gpu profile's knobs, a mode's
cadence, an algo's hyper-parameters, the run directory, tracking, the reward wiring) is then a listed difference: a
pasted verl script is verl's run plus this list, and nothing changes silently.

Layers are named the way a user chooses them (`gpu=h100`, `mode=standard`, `algo=guru_baseline`, `llm=...`,
`dataset=...`, `cluster=...`), or `rlaunch (...)` for what the planner itself sets, or `launch.preflight=fix|tune`
for what the preflight's policy changed before the plan was made, or `rlaunch: readiness repair` for a token budget
readiness raised to hold one sequence (launch/plan.py relabels those two).
"""

from __future__ import annotations

import copy
import difflib
import pickle
import re
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any

import yaml
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.utils import create_config_search_path
from hydra.core.override_parser.types import Override, OverrideType
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from launch.compose_once import interpolation_read_paths
from launch.errors import closest, new_key_advice
from launch.overrides import find, holds_interpolation, key_of, parse, value_in
from launch.rundir import Change
from launch.schema import PROJECT_DIR, RLAUNCH_ROOTS, select, verl_config_source, verl_package_dir

CONF_DIR = PROJECT_DIR / "conf"
# The groups of conf/config.yaml's defaults list, in its order: a later layer's value wins over an earlier one's.
LAYER_GROUPS = ("gpu", "mode", "algo", "llm", "dataset", "cluster")
# Keys of verl's config that the planner itself sets (launch/plan.py, launch/readiness.py), and why.
PLANNER_KEYS = {
    "trainer.default_local_dir": "rlaunch: run dir",  # checkpoints where every node sees them
    "trainer.rollout_data_dir": "rlaunch: run dir",  # relative output directories: in the run's, not the snapshot
    "trainer.validation_data_dir": "rlaunch: run dir",
    "global_profiler.save_path": "rlaunch: run dir",
    "ray_kwargs.ray_init.runtime_env": "rlaunch: tracking",  # W&B ids and RLAUNCH_* settings for verl's workers
    "trainer.logger": "rlaunch: tracking",  # the file logger that compare and the doctor read
    "trainer.project_name": "rlaunch: tracking",
    "trainer.experiment_name": "rlaunch: tracking",
    "reward.custom_reward_function.path": "rlaunch: code snapshot",  # the reward file the job imports
    "critic.model.path": "rlaunch: critic from the actor",  # verl's placeholder path replaced (readiness.py)
    # globs and relative paths resolved to the absolute files rlaunch read (readiness.py): the job reads them elsewhere
    "data.train_files": "rlaunch: local paths",
    "data.val_files": "rlaunch: local paths",
    "actor_rollout_ref.model.path": "rlaunch: local paths",
}
CONFIG_YAML = "rlaunch (conf/config.yaml)"
# conf/backend/<option>.yaml -> the verl config it places at the root (the same names verl's --config-name takes)
BACKEND_BASES = {"fsdp": "ppo_trainer", "megatron": "ppo_megatron_trainer"}
DEFAULT_BACKEND = "fsdp"  # conf/config.yaml's default
MISSING_IN_VERL = "<not in verl's config>"
_INTERPOLATED_ROOT = re.compile(r"^\$\{(\w+)\.[\w.]+\}$")
# verl's keys that follow another key: `${actor_rollout_ref.actor.x}` or `${oc.select:actor_rollout_ref.actor.x,...}`
_FOLLOWS = re.compile(r"^\$\{(?:oc\.select:)?([A-Za-z_][\w.]*)[,}]")


@lru_cache(maxsize=1)
def _loader() -> ConfigLoaderImpl:
    return ConfigLoaderImpl(config_search_path=create_config_search_path(verl_config_source()))


def base_config(overrides: Sequence[str]) -> str:
    """The verl config the user's run composes over: the backend group's choice (a sweep over backends is one
    choice per job, so its jobs' overrides name one each)."""
    backend = value_in(list(overrides), "backend") or DEFAULT_BACKEND
    return BACKEND_BASES.get(backend, BACKEND_BASES[DEFAULT_BACKEND])


@lru_cache(maxsize=len(BACKEND_BASES))
def _verl_base(base: str = "ppo_trainer") -> DictConfig:
    """verl's `base` with no override, composed once per process (~0.25 s); each job copies it."""
    cfg = _loader().load_configuration(base, [], run_mode=RunMode.RUN)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


@lru_cache(maxsize=len(BACKEND_BASES))
def _verl_raw(base: str = "ppo_trainer") -> dict[str, Any]:
    return OmegaConf.to_container(_verl_base(base), resolve=False)  # type: ignore[return-value]


def in_verl_base(key: str, base: str) -> bool:
    """verl's own `base` config has this dotted key (launch/errors.py: which backend a key belongs to)."""
    return _has(_verl_raw(base), key)


def leaves(tree: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """(path, value) of every leaf of a config tree; a list, or an empty mapping, is a leaf."""
    found: list[tuple[tuple[str, ...], Any]] = []
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            found += leaves(value, (*path, str(key)))
        else:
            found.append(((*path, str(key)), value))
    return found


@lru_cache(maxsize=len(BACKEND_BASES))
def _verl_leaves(base: str) -> tuple[tuple[str, ...], ...]:
    return tuple(path for path, _ in leaves(_verl_raw(base)))


MOVED_KEY_MAX_PLACES = 3  # a name verl uses in more places of the same root is too common to point at one


def _longest_tail(
    parts: tuple[str, ...], known: Sequence[tuple[str, ...]], shortest: int
) -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
    """The known leaf paths ending in the longest tail of `parts` (at least `shortest` names, never the whole key)
    that any of them ends in, and that tail; ([], ()) when none does."""
    for length in range(len(parts) - 1, shortest - 1, -1):
        tail = parts[-length:]
        places = [leaf for leaf in known if leaf[-length:] == tail]
        if places:
            return places, tail
    return [], ()


def moved_key_message(key: str, base: str) -> str | None:
    """A key verl's `base` lacks but whose name it has at another path: a script written for another verl version.
    verl's older examples set critic.model.fsdp_config.param_offload, which verl 0.9.1 refuses as well: its critic
    has the switch at critic.fsdp.param_offload. Under the key's own root first, the longest tail of it found there
    (its last name alone only when compound, like param_offload, and in at most MOVED_KEY_MAX_PLACES places); else
    two names or more anywhere in the tree; the closest such path first. None when verl has no such name (the
    spelling is then suggested as for any key)."""
    parts = tuple(key.split("."))
    if len(parts) < 2 or parts[0] in RLAUNCH_ROOTS or in_verl_base(key, base):
        return None
    known = _verl_leaves(base)
    same_root = [leaf for leaf in known if leaf[0] == parts[0]]
    places, tail = _longest_tail(parts, same_root, shortest=1)
    if len(tail) == 1 and (len(places) > MOVED_KEY_MAX_PLACES or "_" not in tail[0]):
        places = []  # a plain word (path, enable, name) is no sign of where the key went
    if not places:
        places, tail = _longest_tail(parts, known, shortest=2)
    if not places:
        return None
    dotted = sorted((".".join(place) for place in places), key=lambda p: -difflib.SequenceMatcher(None, key, p).ratio())
    also = f" (also {', '.join(dotted[1:])})" if len(dotted) > 1 else ""
    return (
        f"unknown key '{key}': verl 0.9.1's {base} has no such key and would refuse it too, but has "
        f"{'.'.join(tail)} at {dotted[0]}{also}: a script for another verl version? write {dotted[0]}=..., or add "
        f"a new key on purpose with +{key}=..."
    )


# what each of verl's dtype keys sets (an FSDP role's fsdp_config, the rollout engine)
DTYPE_MEANINGS = {"model_dtype": "the parameters FSDP keeps", "dtype": "the compute dtype"}
DTYPE_NAMES = ("torch_dtype", "dtype", "model_dtype", "param_dtype", "precision")


def dtype_key_message(key: str, base: str) -> str | None:
    """A dtype set where verl has none: verl's own CISPO example sets actor_rollout_ref.model.torch_dtype, which
    verl 0.9.1 refuses (its model config has no dtype; from_pretrained's torch_dtype is verl's to pass). verl's
    dtypes are per role; the line lists those under the key's root with verl's defaults."""
    parts = key.split(".")
    if parts[-1] not in DTYPE_NAMES or parts[0] in RLAUNCH_ROOTS or in_verl_base(key, base):
        return None
    raw = _verl_raw(base)
    places = [
        ".".join(leaf)
        for leaf in _verl_leaves(base)
        if leaf[0] == parts[0] and leaf[-1] in DTYPE_MEANINGS and select(raw, ".".join(leaf)) is not None
    ]
    if not places:
        return None
    listed = "; ".join(f"{place}={select(raw, place)} ({DTYPE_MEANINGS[place.rsplit('.', 1)[-1]]})" for place in places)
    return (
        f"unknown key '{key}': verl 0.9.1 sets no dtype there and would refuse it too; its dtypes are per role: "
        f"{listed}: write the one you meant (the engine's is the rollout's dtype)"
        f"{new_key_advice(key, select(raw, key.rpartition('.')[0]))}"
    )


def retired_key_message(key: str, base: str) -> str | None:
    """A key whose last name no verl 0.9.1 config has and verl's code never reads: a switch another verl version had
    (verl's older Megatron examples set actor.megatron.grad_offload, which 0.9.1's param_offload took over;
    trainer.use_legacy_worker_impl, reward_model.use_reward_loop), or a misspelling. Either way verl refuses it too,
    and the line says so, with the nearest name its parent has. None for a name verl knows somewhere (moved_key_message
    or the spelling hint says more) and for rlaunch's own keys."""
    name = key.rsplit(".", 1)[-1]
    if key.split(".")[0] in RLAUNCH_ROOTS or in_verl_base(key, base):
        return None
    if any(leaf[-1] == name for known in BACKEND_BASES.values() for leaf in _verl_leaves(known)):
        return None
    if name in _verl_code_words():
        return None
    parent = select(_verl_raw(base), key.rsplit(".", 1)[0]) if "." in key else _verl_raw(base)
    hint = closest(name, [str(sibling) for sibling in parent]) if isinstance(parent, dict) else ""
    return (
        f"unknown key '{key}'{hint}: no verl 0.9.1 config has {name} and verl's code never reads it (a key of "
        f"another verl version, or a misspelling): fix or drop it, as verl would refuse it too"
        f"{new_key_advice(key, parent)}"
    )


def missing_node_message(key: str, base: str) -> str | None:
    """A key under a node verl's `base` lacks altogether: the fallback's "fix the spelling" would point at the leaf,
    not at the node another verl version had (verl's curriculum example sets data.sampler.class_name; 0.9.1 has its
    sampler at trainer.v1.sampler, custom_sampler.{path,name}). Says which node is missing, that verl refuses it too,
    and where verl 0.9.1 has a node of that name, with its keys. None when only the leaf is missing."""
    parts = key.split(".")
    if parts[0] in RLAUNCH_ROOTS or in_verl_base(key, base):
        return None
    raw = _verl_raw(base)
    depth = next((i for i in range(1, len(parts) + 1) if not _has(raw, ".".join(parts[:i]))), len(parts))
    if depth >= len(parts):
        return None  # the node is there: the leaf's spelling is the question
    node = parts[depth - 1]
    places = sorted({leaf[: leaf.index(node) + 1] for leaf in _verl_leaves(base) if node in leaf[:-1]})
    where = ""
    if places and len(places) <= MOVED_KEY_MAX_PLACES:
        first = ".".join(places[0])
        children = select(raw, first)
        listed = f" ({', '.join(str(child) for child in children)})" if isinstance(children, dict) else ""
        also = f" (also {', '.join('.'.join(place) for place in places[1:])})" if len(places) > 1 else ""
        where = f"; it has a {node} at {first}{listed}{also}"
    parent = select(raw, ".".join(parts[: depth - 1])) if depth > 1 else raw
    hint = closest(node, [str(sibling) for sibling in parent]) if isinstance(parent, dict) else ""
    return (
        f"unknown key '{key}'{hint}: verl 0.9.1's {base} has no {'.'.join(parts[:depth])} and would refuse it "
        f"too{where}: "
        f"a key of another verl version? fix or drop it{new_key_advice(key, parent, '.'.join(parts[: depth - 1]))}"
    )


@lru_cache(maxsize=1)
def _verl_code_words() -> frozenset[str]:
    """Every identifier-like word of verl's installed Python source (~0.1 s; asked only when a key is refused)."""
    words: set[str] = set()
    for path in verl_package_dir().rglob("*.py"):
        words.update(re.findall(r"\w+", path.read_text(errors="ignore")))
    return frozenset(words)


def _followed(key: str, base: str) -> str | None:
    """The key whose value verl's own config makes `key` follow (critic.use_dynamic_bsz follows the actor's)."""
    value = select(_verl_raw(base), key)
    match = _FOLLOWS.match(value) if isinstance(value, str) else None
    return match.group(1) if match else None


def user_verl_overrides(overrides: Sequence[str]) -> list[Override]:
    """The overrides that address verl's own tree: not our roots, not our group choices, not Hydra's."""
    ours = {*RLAUNCH_ROOTS, "hydra", "backend"}  # backend: our group, which chooses verl's base (base_config)
    return [
        override
        for override in parse(overrides)
        if not override.is_hydra_override() and key_of(override).split(".", 1)[0].split("/", 1)[0] not in ours
    ]


def verl_composition(overrides: Sequence[str]) -> dict[str, Any]:
    """What verl's own main_ppo would compose from the user's verl keys, resolved. Plain values that no interpolation
    of verl's tree reads are put into verl's resolved base (what resolving would give: ~1 ms, not ~60 ms a job of a
    sweep); anything else is applied to a copy of the base the way Hydra's loader applies it and resolved, and a key
    that chooses one of verl's own config groups (`actor_rollout_ref/actor=...`, `actor@...`) composes it all again."""
    base = base_config(overrides)
    # a plain key=value on a key verl's tree lacks is one our layers added (verl itself would ask for `+`), and so is
    # a deletion of one (the gpu profile's FSDP knobs under backend=megatron, launch/auto.py): not verl's; unless an
    # earlier override added the key (the body of a config of the user's own, launch/auto.py own_verl_config, is `++`)
    mine: list[Override] = []
    for override in user_verl_overrides(overrides):
        key = key_of(override)
        added = any(o.type in (OverrideType.ADD, OverrideType.FORCE_ADD) and overlap(key, key_of(o)) for o in mine)
        if override.type in (OverrideType.CHANGE, OverrideType.DEL) and not added and not _has(_verl_raw(base), key):
            continue
        mine.append(override)
    if all(_put_in_directly(override, base) for override in mine):
        resolved = pickle.loads(_verl_resolved(base))
        for override in mine:
            *parents, last = key_of(override).split(".")
            node = resolved
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = override.value()
        return resolved
    if any("/" in key_of(o) or "@" in key_of(o) for o in mine):
        lines = [o.input_line or "" for o in mine]
        cfg = _loader().load_configuration(base, lines, run_mode=RunMode.RUN)
        with open_dict(cfg):
            del cfg["hydra"]
    else:
        cfg = copy.deepcopy(_verl_base(base))
        ConfigLoaderImpl._apply_overrides_to_config(mine, cfg)
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


@lru_cache(maxsize=len(BACKEND_BASES))
def _verl_resolved(base: str) -> bytes:
    """verl's base, resolved, pickled: unpickling is the quickest deep copy."""
    return pickle.dumps(OmegaConf.to_container(_verl_base(base), resolve=True), protocol=pickle.HIGHEST_PROTOCOL)


@lru_cache(maxsize=len(BACKEND_BASES))
def _verl_read_paths(base: str) -> list[tuple[str | int, ...]]:
    return interpolation_read_paths(_verl_raw(base))


def _put_in_directly(override: Override, base: str) -> bool:
    """Setting the value in the resolved base gives what Hydra + OmegaConf would: a plain `key=value` (or `+`/`++`)
    whose value is no dict (Hydra merges those) and holds no interpolation, at a path no interpolation reads."""
    if override.type not in (OverrideType.CHANGE, OverrideType.ADD, OverrideType.FORCE_ADD):
        return False
    value = override.value()
    if isinstance(value, dict) or holds_interpolation(value) or not isinstance(value, (str, int, float, bool, list)):
        return False
    path = tuple(key_of(override).split("."))
    if "/" in path[0] or "@" in path[-1]:
        return False
    return not any(read[: len(path)] == path or path[: len(read)] == read for read in _verl_read_paths(base))


def differences(verl: Any, ours: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(key, verl's value, ours) for every leaf that differs; a key only one side has is one entry (it covers its
    sub-keys)."""
    if isinstance(verl, dict) and isinstance(ours, dict):
        for key in ours.keys() | verl.keys():
            sub = f"{path}.{key}" if path else str(key)
            if key not in verl:
                yield sub, MISSING_IN_VERL, ours[key]
            elif key not in ours:
                yield sub, verl[key], MISSING_IN_VERL
            else:
                yield from differences(verl[key], ours[key], sub)
    elif verl != ours or (type(verl) is not type(ours) and not _same_number(verl, ours)):
        yield path, verl, ours


def _same_number(a: Any, b: Any) -> bool:
    """1 and 1.0 are the same value to verl (a yaml `1e-6` and a typed `0.000001` too); True is not 1."""
    numbers = (int, float)
    return isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool)


@lru_cache(maxsize=64)
def option_tree(group: str, option: str) -> dict[str, Any]:
    """A group option's own keys at their place in the composed tree, with the options its defaults list includes
    merged under it (its own keys win, as Hydra's `_self_` last). Read-only: shared by every lookup."""
    path = CONF_DIR / group / f"{option}.yaml"
    if not path.is_file():
        return {}
    text = path.read_text()
    content = yaml.safe_load(text) or {}
    merged: dict[str, Any] = {}
    for entry in content.pop("defaults", None) or []:
        if isinstance(entry, str) and entry != "_self_":
            _merge(merged, option_tree(group, entry.removeprefix(f"/{group}/")))
    placed = content if "@package _global_" in text.split("\n", 3)[0] else {group: content}
    _merge(merged, placed)
    return merged


def option_keys_outside(group: str, option: str, base: str) -> list[str]:
    """The top-most keys of verl's tree that a group option sets and verl's `base` has no place for (a gpu profile's
    fsdp_config knobs under ppo_megatron_trainer), our own roots left out."""
    outside: list[str] = []

    def walk(node: Any, path: str) -> None:
        if path and not _has(_verl_raw(base), path):
            outside.append(path)
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}.{key}" if path else str(key))

    tree = option_tree(group, option)
    walk({key: value for key, value in tree.items() if key not in RLAUNCH_ROOTS}, "")
    return outside


def _merge(into: dict[str, Any], new: dict[str, Any]) -> None:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


_ABSENT = object()


def _has(tree: dict[str, Any], key: str) -> bool:
    return select(tree, key, _ABSENT) is not _ABSENT


@lru_cache(maxsize=1)
def _config_file() -> dict[str, Any]:
    return yaml.safe_load((CONF_DIR / "config.yaml").read_text()) or {}


def _config_yaml() -> dict[str, Any]:
    """conf/config.yaml's own keys of verl's tree."""
    return {key: value for key, value in _config_file().items() if key not in ("defaults", "hydra", *RLAUNCH_ROOTS)}


def config_default(group: str) -> str | None:
    """conf/config.yaml's default option of a group (algo: guru_baseline)."""
    defaults = _config_file().get("defaults") or []
    return next((str(entry[group]) for entry in defaults if isinstance(entry, dict) and group in entry), None)


def _layer_of(
    key: str, cfg: DictConfig, user_keys: set[str], base: str, depth: int = 0, typed: dict[str, str] | None = None
) -> str:
    """The layer that set `key`: conf/config.yaml's own keys last, then the groups in reverse defaults order; a key
    verl makes follow another, or the user made follow another (`key=${other}`), is credited to the layer that set
    that one."""
    if any(overlap(key, user) for user in user_keys):
        follows = _FOLLOWS.match((typed or {}).get(key, ""))
        if follows is not None and depth < 4:  # the user's own interpolation: what moved is what it reads
            return _layer_of(follows.group(1), cfg, user_keys - {key}, base, depth + 1, typed)
        # the user set it and a later stage changed it: one of the planner's own keys
        return _planner_reason(key) or "rlaunch"
    layers = [(CONFIG_YAML, _config_yaml())]
    layers += [(f"{group}={cfg[group].name}", option_tree(group, str(cfg[group].name))) for group in LAYER_GROUPS[::-1]]
    for name, tree in layers:
        value = select(tree, key)
        if value is None:
            continue
        interpolated = _INTERPOLATED_ROOT.match(value) if isinstance(value, str) else None
        if interpolated and interpolated.group(1) in LAYER_GROUPS:
            root = interpolated.group(1)
            return f"{root}={cfg[root].name}"
        if name == CONFIG_YAML:
            return _planner_reason(key) or name
        return name
    followed = _followed(key, base)
    if followed is not None and depth < 4:
        return _layer_of(followed, cfg, user_keys, base, depth + 1, typed)
    return _planner_reason(key) or "rlaunch"


def overlap(key: str, other: str) -> bool:
    """One dotted key is the other or lies under it."""
    return key == other or key.startswith(other + ".") or other.startswith(key + ".")


def _planner_reason(key: str) -> str | None:
    return next((reason for planner_key, reason in PLANNER_KEYS.items() if overlap(key, planner_key)), None)


def changed_from_verl(cfg: DictConfig, overrides: Sequence[str], verl: dict[str, Any]) -> list[Change]:
    """Every key of `verl` (the planned config, exactly as verl will read it) that differs from verl's own
    composition of the user's verl keys, with the layer that set it; sorted by layer, then key."""
    theirs = verl_composition(overrides)
    typed = {key_of(o): str(o.value()) for o in user_verl_overrides(overrides) if not o.is_delete()}
    user_keys = {key_of(o) for o in user_verl_overrides(overrides)}
    base = base_config(overrides)
    return by_layer(
        Change(key=key, verl=old, value=new, by=_layer_of(key, cfg, user_keys, base, typed=typed))
        for key, old, new in differences(theirs, verl)
    )


def apply_changes(verl: dict[str, Any], changes: Sequence[Change]) -> dict[str, Any]:
    """verl's composition with `changes` put in: what the planned config must equal (tests/test_verl_diff.py)."""
    result = copy.deepcopy(verl)
    for change in changes:
        *parents, last = change.key.split(".")
        node = result
        for part in parents:
            node = node.setdefault(part, {})
        if change.value == MISSING_IN_VERL:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(change.value)
    return result


def relabel(changes: Sequence[Change], keys: Sequence[str], by: str) -> list[Change]:
    """The same changes, with those at (or under) `keys` credited to `by`: a stage that changed them after the layers
    did (readiness's repairs, the preflight's policy, the checkpoint cadence), which the layers' trees cannot show."""
    return by_layer(
        Change(change.key, change.verl, change.value, by)
        if any(
            change.key == key or change.key.startswith(key + ".") or key.startswith(change.key + ".") for key in keys
        )
        else change
        for change in changes
    )


def by_layer(changes: Iterable[Change]) -> list[Change]:
    return sorted(changes, key=lambda change: (change.by, change.key))


def algo_suggestion(cfg: DictConfig, overrides: Sequence[str], changes: Sequence[Change]) -> list[str]:
    """A pasted verl script under the default algo: its own algorithm keys are kept, and the algo's others change
    silently unless the plan says so and names the way out (algo=verl)."""
    if find(overrides, "algo") is not None:
        return []
    layer = f"algo={cfg.algo.name}"
    tree = option_tree("algo", str(cfg.algo.name))
    typed = sorted({key for key in map(key_of, user_verl_overrides(overrides)) if select(tree, key) is not None})
    changed = [change.key for change in changes if change.by == layer]
    if not typed or not changed:
        return []
    shown = ", ".join(typed[:3]) + (f" (and {len(typed) - 3} more)" if len(typed) > 3 else "")
    return [
        f"you set verl's algorithm keys ({shown}) under the default {layer}, which also changes {len(changed)} "
        f"key(s) you did not set (listed under 'by {layer}'): add algo=verl to keep verl's own algorithm"
    ]


def backend_key_message(key: str) -> str | None:
    """A key the chosen backend's base lacks but verl's other base has: 'X is a Megatron key: add backend=megatron'
    (unknown keys are judged against the base the run chose, base_config; launch/run.py hands this to errors.explain).
    Composition failed, so which base it was is not known here: a key in exactly one of verl's bases names that
    one."""
    having = [backend for backend, base in BACKEND_BASES.items() if in_verl_base(key, base)]
    if len(having) != 1:
        return None
    backend = having[0]
    kind = {"fsdp": "an FSDP", "megatron": "a Megatron"}.get(backend, f"a {backend}")
    return f"{key} is {kind} key (verl's {BACKEND_BASES[backend]}): add backend={backend}"
