"""A sweep's jobs composed quickly, with Hydra's own code: each distinct combination of group choices is composed once
(`ComposeOnce`, the yaml files read once per sweep), each job's value overrides are applied to a working copy with
the very function Hydra applies them with (so `+`, `++`, `~` and interpolations mean what they mean in Hydra), and a
job whose changes no interpolation reads is resolved from its composition's resolution (`ResolvedBase`).
tests/test_overrides.py compares every job of a mixed sweep with full composition.

Runs on: the login node (the sweep launcher, hydra_plugins/rlaunch_slurm_launcher).

State is explicit: a `ComposeOnce` holds its compositions and their resolutions, and lends planning its `resolve`
(launch/run.py plan_job resolves each job once, for the preflight and the plan); nothing is module-global. Two seams
reaches inside Hydra (pinned in pyproject.toml), guarded by tests/test_compose_once.py, which fails when a new version
moves it: `ConfigLoaderImpl._apply_overrides_to_config`, `_parse_overrides_and_create_caching_repo`,
`load_sweep_config`, the `CachingConfigRepository` a loader holds and `Hydra.get_mode` (hydra-core 1.3). OmegaConf's
own parsing of `${...}` and YAML is done once per distinct text in every process (launch/parse_once.py).
"""

from __future__ import annotations

import copy
import pickle
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.config_repository import CachingConfigRepository
from hydra._internal.hydra import Hydra
from hydra.core.override_parser.types import Override
from hydra.plugins.config_source import ConfigResult
from hydra.types import RunMode
from omegaconf import Container, DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from launch.overrides import holds_interpolation, key_of, parse

# How a job's config becomes the plain data verl receives: OmegaConf.to_container(cfg, resolve=True), or a
# ComposeOnce's quicker equivalent for the configs it lent (`ComposeOnce.resolve`).
Resolve = Callable[[DictConfig], dict[str, Any]]


def full_resolution(cfg: DictConfig) -> dict[str, Any]:
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


class SharedConfigCache(CachingConfigRepository):
    """Hydra's per-composition cache of loaded yaml files, shared by every composition of one sweep: the files are
    read and parsed once, not once per combination of group choices. Each caller gets its own deep copy, because
    Hydra merges a loaded config into the result without copying its nodes."""

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedConfigCache:
        # Hydra deep-copies the repository it wraps for each composition: the copy keeps this cache
        clone = copy.copy(self)
        clone.delegate = copy.deepcopy(self.delegate, memo)
        return clone

    def load_config(self, config_path: str) -> ConfigResult | None:
        shared = super().load_config(config_path)
        return None if shared is None else CopiedOnRead(shared)


class CopiedOnRead(ConfigResult):
    """A shared ConfigResult whose config is deep-copied when first read: Hydra loads every file again for its
    package header while it builds the defaults tree (~400 times a composition), and only the merge reads (and
    changes) the config itself."""

    def __init__(self, shared: ConfigResult) -> None:  # not the dataclass's: config is a property here
        for name in ("provider", "path", "header", "defaults_list", "is_schema_source"):
            setattr(self, name, copy.deepcopy(getattr(shared, name)))
        self._shared = shared.config
        self._own: Container | None = None

    @property  # type: ignore[override]
    def config(self) -> Container:
        if self._own is None:
            self._own = copy.deepcopy(self._shared)
        return self._own

    @config.setter
    def config(self, value: Container) -> None:
        self._own = value


class ComposeOnce:
    """Composes a sweep's jobs: each distinct combination of group choices (and Hydra's own overrides) once through
    Hydra's config loader, then each job's value overrides on that composition, as Hydra's loader applies them."""

    def __init__(self, config_loader: ConfigLoaderImpl, master_config: DictConfig) -> None:
        self.loader = config_loader
        self.master = master_config
        self._groups: dict[str, bool] = {}
        self._repository: CachingConfigRepository | None = None
        self._shared = SharedConfigCache(config_loader.repository)
        # composing overrides -> (the composition, lent to one job at a time; its raw content between jobs)
        self._working: dict[tuple[str, ...], tuple[DictConfig, dict[str, Any]]] = {}
        self.compositions = 0  # how many times the tree was composed (the benchmark and tests read it)
        self._resolved: dict[int, ResolvedBase] = {}  # by id() of a lent working copy

    def is_group(self, override: Override) -> bool:
        """Hydra's own test (defaults_list.Overrides): a key that names a config group in the search path, with a
        value that is not a dict, chooses configs."""
        if isinstance(override.value(), dict):
            return False
        key = override.key_or_group
        if key not in self._groups:
            if self._repository is None:
                hydra_overrides = list(self.master.hydra.overrides.hydra)
                _, self._repository = self.loader._parse_overrides_and_create_caching_repo(
                    self.master.hydra.job.config_name, hydra_overrides
                )
            self._groups[key] = self._repository.group_exists(key)
        return self._groups[key]

    def split(self, parsed: list[Override]) -> tuple[list[Override], list[Override]]:
        """(overrides that change what is composed, value overrides), each in command-line order."""
        composing, values = [], []
        for override in parsed:
            if override.is_hydra_override() or self.is_group(override):
                composing.append(override)
            else:
                values.append(override)
        return composing, values

    def groups(self, overrides: Sequence[str]) -> frozenset[str]:
        """The keys among `overrides` that choose configs (gpu, algo, ...), for job names."""
        composing, _ = self.split(parse(overrides))
        return frozenset(key_of(o) for o in composing if not o.is_hydra_override())

    def _compose_base(self, overrides: list[str], shared: bool) -> DictConfig:
        """Hydra's load_sweep_config; with the sweep's shared file cache unless the job changes Hydra's own config
        (its search path, say), which the cache's contents depend on."""
        if not shared:
            return self.loader.load_sweep_config(self.master, overrides)
        own = self.loader.repository
        self.loader.repository = self._shared
        try:
            return self.loader.load_sweep_config(self.master, overrides)
        finally:
            self.loader.repository = own

    def pristine(self, cfg: DictConfig) -> ResolvedBase | None:
        """The pristine resolution of the working copy `cfg` is, if this composer lent it."""
        base = self._resolved.get(id(cfg))
        return base if base is not None and base.cfg is cfg else None

    def resolve(self, cfg: DictConfig) -> dict[str, Any]:
        """OmegaConf.to_container(cfg, resolve=True): from its working copy's pristine resolution when cfg is one this
        composer lent and the job's changes allow it (ResolvedBase), else resolved in full. The same result either
        way (tests/test_overrides.py)."""
        base = self.pristine(cfg)
        if base is not None:
            resolved = base.resolve(OmegaConf.to_container(cfg, resolve=False))  # type: ignore[arg-type]
            if resolved is not None:
                return resolved
        return full_resolution(cfg)

    @contextmanager
    def job_config(self, overrides: Sequence[str]) -> Iterator[DictConfig]:
        """The job's config without Hydra's own node (what planning reads), equal to load_sweep_config(master,
        overrides) minus `hydra`, lent for the `with` block: one working copy per combination of group choices gets
        the value overrides, and is put back afterwards (whatever planning changed in it, preflight fixes
        included); a job that removed a key or changed a subtree's shape leaves it to be composed afresh (rare:
        cheaper than a pristine deep copy of every composition). Saves a deep copy of the whole tree per job."""
        composing, values = self.split(parse(overrides))
        base_key = tuple(o.input_line or "" for o in composing)
        working = self._working.get(base_key)
        if working is None:
            cfg = self._compose_base(list(base_key), shared=not any(o.is_hydra_override() for o in composing))
            self.compositions += 1
            with open_dict(cfg):
                del cfg["hydra"]
            working = (cfg, OmegaConf.to_container(cfg, resolve=False))  # type: ignore[assignment]
            self._working[base_key] = working
            self._resolved[id(cfg)] = ResolvedBase(cfg, working[1])
        cfg, before = working
        try:
            apply_value_overrides(values, cfg)
            yield cfg
        finally:
            try:
                restored = _put_back(cfg, before, OmegaConf.to_container(cfg, resolve=False))
            except OmegaConfBaseException:  # e.g. a key a schema does not let go
                restored = False
            if not restored:
                del self._working[base_key]
                del self._resolved[id(cfg)]


def apply_value_overrides(overrides: Sequence[Override], cfg: DictConfig) -> None:
    """Value overrides (`key=v`, `+`, `++`, `~key`) applied to a composed config, in order, by the very function
    Hydra's loader applies the command line's with: the same results, and the same errors."""
    ConfigLoaderImpl._apply_overrides_to_config(list(overrides), cfg)


class ResolvedBase:
    """A working copy's content as it is before any job changes it, raw and resolved, and every config path an
    interpolation in it may read. A job whose changes (its value overrides, planning's repairs) touch no such path
    and bring no interpolation resolves to the pristine resolution with the changed values put in: interpolations
    resolve exactly as before, and every other node is a literal. Resolving the whole tree is ~130 interpolations
    (~30 ms a job); this is a raw read and a compare (~10 ms)."""

    def __init__(self, cfg: DictConfig, raw: dict[str, Any]) -> None:
        self.cfg = cfg
        self.raw = raw
        try:
            self.resolved: dict[str, Any] | None = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
        except OmegaConfBaseException:  # e.g. an interpolation that only a job's override makes resolvable
            self.resolved = None
        self.read: list[tuple[str | int, ...]] = interpolation_read_paths(raw)

    def resolve(self, raw_now: dict[str, Any]) -> dict[str, Any] | None:
        """OmegaConf.to_container(resolve=True) of the working copy whose raw content is now `raw_now`, or None where
        a change could alter what an interpolation gives (then the caller resolves it all)."""
        if self.resolved is None:
            return None
        changes: list[tuple[tuple[str | int, ...], bool, Any]] = []
        if not _diff(self.raw, raw_now, (), changes):
            return None
        for path, present, value in changes:
            if (present and holds_interpolation(value)) or any(
                read[: len(path)] == path or path[: len(read)] == read for read in self.read
            ):
                return None
        result = pickle.loads(pickle.dumps(self.resolved, protocol=pickle.HIGHEST_PROTOCOL))  # the fastest deep copy
        for path, present, value in changes:
            parent = result
            for key in path[:-1]:
                parent = parent[key]
            if present:
                parent[path[-1]] = value  # raw_now is a fresh container: the value is the caller's own
            else:
                del parent[path[-1]]
        return result


# A config path as an interpolation names it: absolute (a.b.c) or relative (.x, ..x).
_PATH = re.compile(r"(\.*)([A-Za-z_][\w-]*(?:\.[\w-]+)*)")


def _interpolation_paths(node: Any, path: tuple[str | int, ...]) -> Iterator[tuple[str | int, ...]]:
    """Every config path that interpolations in `node` (at `path`) may read. Over-matching (a resolver's plain
    argument such as null, an environment variable's name) costs only a full resolution; missing one would not."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _interpolation_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _interpolation_paths(value, (*path, index))
    elif isinstance(node, str) and "${" in node:
        for dots, dotted in _named_keys(node):
            keys = tuple(dotted.split("."))
            if not dots:
                yield keys
            else:  # OmegaConf: one dot is the node's own container, each further dot one level up
                container = path[:-1]
                yield container[: max(0, len(container) - (len(dots) - 1))] + keys


def _named_keys(text: str) -> Iterator[tuple[str, str]]:
    """(dots, dotted key) for each key that an interpolation in `text` names: the body of ${key}, and each
    argument of ${resolver:arg,...} that could be a key (oc.select's first). A quoted argument that is not a key
    ('${oc.env:HOME}/data') is a string; the interpolations nested in it are read on their own."""
    for body in _interpolation_bodies(text):
        flat = re.sub(r"\$\{[^{}]*\}", "", body) if "${" in body else body  # nested ones are bodies of their own
        resolver = re.match(r"\s*[\w.]+:", flat)
        arguments = _split_arguments(flat[resolver.end() :]) if resolver else [flat]
        for argument in arguments:
            argument = argument.strip()
            quoted = argument[:1] in ("'", '"')
            inner = argument[1:-1] if quoted else argument
            whole = _PATH.fullmatch(inner)
            if whole:
                yield whole.group(1), whole.group(2)
            elif not quoted:  # a key with brackets, a list of keys: every name in it, to be safe
                yield from _PATH.findall(inner)


def _interpolation_bodies(text: str) -> Iterator[str]:
    """The text between ${ and its matching }, for every interpolation in `text`, nested ones included."""
    starts: list[int] = []
    index = 0
    while index < len(text):
        if text.startswith("${", index):
            starts.append(index + 2)
            index += 2
            continue
        if text[index] == "}" and starts:
            yield text[starts.pop() : index]
        index += 1


def _split_arguments(text: str) -> list[str]:
    """A resolver's arguments: split at the commas outside quotes and brackets."""
    parts, depth, quote, current = [], 0, "", []
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def interpolation_read_paths(raw: dict[str, Any]) -> list[tuple[str | int, ...]]:
    """Every config path an interpolation in the raw (unresolved) tree `raw` may read, shortest first."""
    return sorted(set(_interpolation_paths(raw, ())), key=len)


def _diff(old: Any, new: Any, path: tuple[str | int, ...], changes: list) -> bool:
    """Collect into `changes` (path, present in new, new value) for each changed dict entry, comparing types too
    (1, 1.0 and True are equal to Python, not in a config). False where the key order changed otherwise than by
    appending or removing keys (the patched result would list them in another order)."""
    if isinstance(old, dict) and isinstance(new, dict):
        if [key for key in new if key in old] != [key for key in old if key in new]:
            return False
        for key, value in new.items():
            if key not in old:
                changes.append(((*path, key), True, value))
            elif not _same(old[key], value):
                if isinstance(old[key], dict) and isinstance(value, dict):
                    if not _diff(old[key], value, (*path, key), changes):
                        return False
                else:
                    changes.append(((*path, key), True, value))
        changes.extend(((*path, key), False, None) for key in old if key not in new)
        return True
    return False


def _same(old: Any, new: Any) -> bool:
    if type(old) is not type(new):
        return False
    if isinstance(old, dict):
        return old.keys() == new.keys() and list(old) == list(new) and all(_same(old[k], new[k]) for k in old)
    if isinstance(old, list):
        return len(old) == len(new) and all(_same(a, b) for a, b in zip(old, new, strict=True))
    return old == new


def detached_roots(cfg: DictConfig) -> DictConfig:
    """rlaunch's own roots of a job's config, resolved, as a config of their own: what dispatch reads once the job
    is planned (launch.*, cluster.*, rlaunch_config.yaml), after its working copy has gone back (job_config)."""
    from launch.schema import RLAUNCH_ROOTS

    return OmegaConf.create({root: OmegaConf.to_container(cfg[root], resolve=True) for root in RLAUNCH_ROOTS})


def _put_back(node: DictConfig, before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Restore `node` (whose raw content went from `before` to `after`) to `before`: added keys removed, changed
    values and lists set back (interpolations as the strings they were). False where that cannot restore it
    exactly (a key removed, a value turned into a subtree or back): the caller then discards the copy."""
    if before.keys() - after.keys():
        return False
    with open_dict(node):
        for key in after.keys() - before.keys():
            del node[key]
    for key, old in before.items():
        new = after[key]
        if _same(old, new):  # 1 and 1.0 are equal to Python, not in a config
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            child = node._get_node(key)
            if not isinstance(child, DictConfig) or not _put_back(child, old, new):
                return False
        elif isinstance(old, dict) or isinstance(new, dict):
            return False
        else:
            node[key] = old
    return True


def mode_from_overrides(_hydra: Hydra, config_name: str | None, overrides: list[str]) -> RunMode | None:
    """Hydra.get_mode without its composition: the command line's hydra.mode, or None (Hydra then runs what
    --multirun says). Hydra's own composes the whole config, verl's tree included, only to read hydra.mode, and then
    composes it again to run: a third of a single run's planning time. rlaunch's conf never sets hydra.mode
    (tests/test_compose_once.py holds the two equal), so the command line is the only place it can come from."""
    for override in reversed(overrides):
        key, equals, value = override.lstrip("+").partition("=")
        if key == "hydra.mode" and equals:
            return RunMode.__members__.get(value.strip("'\""))  # not a mode: the composition to run says so
    return None


@contextmanager
def mode_read_from_overrides() -> Iterator[None]:
    """Hydra's entry (hydra.main) reads the run mode through mode_from_overrides while this is active."""
    original = Hydra.get_mode
    Hydra.get_mode = mode_from_overrides  # type: ignore[method-assign]
    try:
        yield
    finally:
        Hydra.get_mode = original  # type: ignore[method-assign]
