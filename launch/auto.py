"""Rewrite the command line BEFORE Hydra composes: resolve gpu=auto and cluster=auto, so that `--cfg job`, the plan
and the run id all show the profile and cluster actually used, take hydra-submitit-launcher's `hydra.launcher.*` keys
as the rlaunch keys they mean (`launcher_aliases`), and verl's `--config-name=ppo_megatron_trainer` as the backend
it means (`verl_config_name`).

Runs on: the login node (or the cluster=local machine). Rewrites the override list only; Hydra does the rest.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.core.override_parser.types import Override
from omegaconf import OmegaConf

from launch.errors import UserError
from launch.facts import query_partition, ray_cluster_facts, sinfo_answers
from launch.gpu import ProfileChoice, choose_profile, detect_gpus, load_profiles, profile_for_gres_type
from launch.overrides import find, hydra_quoted, key_of, parse, render_value, value_in, without
from launch.schema import verl_package_dir
from launch.secret_guard import refuse_secret_overrides
from launch.verl_diff import BACKEND_BASES, base_config, config_default, leaves, option_keys_outside, overlap

# Flags after which Hydra expects no overrides to resolve (completion, help, info about the app itself).
PASSIVE_FLAGS = ("-sc", "--shell-completion", "-h", "--help", "--hydra-help")
MULTIRUN_FLAGS = ("-m", "--multirun")


# hydra-submitit-launcher's keys (its SlurmQueueConf) -> the rlaunch key that sets the same sbatch option, and what a
# user of that launcher should know about it (said once, on stderr)
LAUNCHER_ALIASES = {
    "partition": ("cluster.partition", ""),
    "timeout_min": (
        "mode.time_budget_min",
        "the job's --time adds cluster.time_margin_min for checkpoint and teardown",
    ),
    "mem_gb": (
        "cluster.mem_gb",
        "taken as is: it wins over the --mem rlaunch derives from the GPU profile, host RAM per GPU x GPUs per node "
        "capped at the node",
    ),
    "cpus_per_task": (
        "cluster.cpus_per_task",
        "taken as is: it wins over the profile's host CPUs per GPU x GPUs per node, capped at the node",
    ),
    "gpus_per_node": ("trainer.n_gpus_per_node", "verl's GPU count: --gres, Ray and the batch checks follow it"),
    "nodes": ("trainer.nnodes", "verl's node count: --nodes and Ray follow it"),
    "additional_parameters": ("cluster.sbatch_extra", ""),
    "setup": ("cluster.setup", "it replaces the venv activation conf/cluster/slurm.yaml puts there"),
    "array_parallelism": ("cluster.array_parallelism", ""),
    "account": ("cluster.account", ""),
    "qos": ("cluster.qos", ""),
    "constraint": ("cluster.constraint", ""),
    "signal_delay_s": ("cluster.signal_delay_s", ""),
    "max_num_timeout": ("cluster.max_requeues", "preemptions and time limits together"),
}
LAUNCHER_KEY = re.compile(r"^(?P<prefix>~|\+\+|\+)?hydra\.launcher\.(?P<key>[^.=]+)(?P<sub>\.[^=]+)?(?P<value>=.*)?$")
MAPS_DICT = ("additional_parameters",)  # dicts: also one key of their own (additional_parameters.mail-type=END)


def launcher_aliases(argv: list[str]) -> tuple[list[str], list[str]]:
    """argv with each `hydra.launcher.<key>` override written as the rlaunch key it means (the value, a sweep
    included, unchanged), and one note per rewrite; UserError for a key rlaunch has no equivalent of, or one that the
    command line also sets under its rlaunch name."""
    rewritten, notes = [], []
    for arg in argv:
        match = None if arg.startswith("-") else LAUNCHER_KEY.match(arg)
        if match is None:
            rewritten.append(arg)
            continue
        key, sub, value = match["key"], match["sub"] or "", match["value"] or ""
        if key not in LAUNCHER_ALIASES or sub and key not in MAPS_DICT:
            accepted = ", ".join(LAUNCHER_ALIASES)
            raise UserError(
                f"hydra.launcher.{key}{sub} has no rlaunch equivalent: hydra.launcher.* takes {accepted} "
                "(hydra-submitit-launcher's names); other settings are cluster.* keys (--help)"
            )
        target, why = LAUNCHER_ALIASES[key]
        # keys in a dict are new to the schema's empty default, which Hydra's struct mode refuses without ++
        prefix = match["prefix"] or ("++" if key in MAPS_DICT else "")
        clash = [other for other in argv if other.lstrip("+~").split("=", 1)[0] == target + sub]
        if clash:
            raise UserError(f"{arg} and {clash[0]} both set {target}{sub}: keep one")
        rewritten.append(f"{prefix}{target}{sub}{value}")
        shown = arg.lstrip("+~")
        notes.append(f"rlaunch: note: {shown} is {target}{sub}{value}" + (f" ({why})" if why else ""))
    return rewritten, notes


# verl's own config names (`python -m verl.trainer.main_ppo --config-name=...`) -> the backend that composes the same
# base under rlaunch (conf/backend/); verl's scripts spell them with or without .yaml, next to a --config-path that
# is relative to verl's package and means nothing here
VERL_CONFIG_NAMES = {base: backend for backend, base in BACKEND_BASES.items()}
CONFIG_NAME_FLAGS = ("--config-name", "-cn")
CONFIG_PATH_FLAGS = ("--config-path", "-cp")


# verl 0.9's own spelling of the trainer backend: the model_engine group of ppo_trainer.yaml (ppo_megatron_trainer.yaml
# is ppo_trainer with `override model_engine: megatron`, kept for older scripts) -> the backend that composes it
VERL_MODEL_ENGINES = {"dp": "fsdp", "megatron": "megatron"}


class OwnConfigKeys:
    """The overrides verl_config_name made of a config file of the user's own (own_verl_config), for every plan of
    this invocation: a key the command line sets again over the file's is Hydra's layering (the file, then the
    command line, as verl's own Hydra composes it), which plan.repeated_keys does not call a repeat. Hydra keeps no
    trace of where an override came from. One per process, like chosen_cluster: verl_config_name sets it for each
    invocation (none where it read no file of the user's)."""

    overrides: frozenset[str] = frozenset()

    def record(self, overrides: Sequence[str]) -> None:
        self.overrides = frozenset(self.normal(override) for override in parse(overrides))

    def made(self, override: Override) -> bool:
        """Whether the file made `override` (read as Hydra's sweeper rewrites each job's overrides)."""
        return self.normal(override) in self.overrides

    @staticmethod
    def normal(override: Override) -> str:
        """The override as Hydra's BasicSweeper hands it to a job (`++key=value`, the value re-rendered)."""
        return f"{override.get_key_element()}={override.get_value_element_as_str()}"


own_config_keys = OwnConfigKeys()


def verl_config_name(argv: list[str]) -> tuple[list[str], list[str]]:
    """argv with verl's `--config-name=ppo_megatron_trainer` (`-cn X`, `'X.yaml'`) or `model_engine=megatron` written
    as `backend=megatron` (ppo_trainer and model_engine=dp as backend=fsdp), verl's --config-path dropped with it, and
    a note per rewrite. A config of the user's own that extends one of verl's (`own_verl_config`) becomes that
    backend and its keys, as overrides before the command line's (recorded in own_config_keys). UserError for another
    config or engine, or one the command line's own backend=... contradicts."""
    own_config_keys.record(())
    rewritten, notes, backend = [], [], None
    config_path: str | None = None
    config_name: tuple[str, str] | None = None
    index = 0
    while index < len(argv):
        flag, equals, value = argv[index].partition("=")
        if flag == "model_engine" and equals:
            engine = value.strip("'\"")
            if engine not in VERL_MODEL_ENGINES:
                known = ", ".join(f"{name} (backend={chosen})" for name, chosen in VERL_MODEL_ENGINES.items())
                raise UserError(
                    f"model_engine={value}: rlaunch plans verl's {known}; the {engine} engine's memory and layout are "
                    "not modelled here: use backend=fsdp or backend=megatron"
                )
            backend = VERL_MODEL_ENGINES[engine]
            notes.append(f"rlaunch: note: model_engine={value} is backend={backend} (verl's model_engine group)")
            index += 1
            continue
        if flag not in CONFIG_NAME_FLAGS + CONFIG_PATH_FLAGS:
            rewritten.append(argv[index])
            index += 1
            continue
        if not equals:  # `-cn NAME`: the value is the next argument
            value = argv[index + 1] if index + 1 < len(argv) else ""
            index += 1
        index += 1
        if flag in CONFIG_PATH_FLAGS:
            config_path = value.strip("'\"")
        else:
            config_name = (flag, value)
    if config_name is not None:
        flag, value = config_name
        name = value.strip("'\"").removesuffix(".yaml")
        if name in VERL_CONFIG_NAMES:
            backend = VERL_CONFIG_NAMES[name]
            notes.append(f"rlaunch: note: {flag}={value} is backend={backend} (verl's {name} at the root)")
        else:
            backend, file_overrides, note = own_verl_config(config_path, name, f"{flag}={value}")
            rewritten = [*file_overrides, *rewritten]  # before the command line's: Hydra lets the later one win
            own_config_keys.record(file_overrides)
            notes.append(note)
    if backend is None:
        return argv, []
    given = value_in(rewritten, "backend")
    if given is not None and given != backend:
        raise UserError(
            f"--config-name or model_engine asks for backend={backend} but the command line sets backend={given}: "
            "keep one"
        )
    return (rewritten if given is not None else [*rewritten, f"backend={backend}"]), notes


def own_verl_config(config_path: str | None, name: str, given: str) -> tuple[str, list[str], str]:
    """(backend, overrides, note) for a config of the user's own, `<config_path>/<name>.yaml`, that extends one of
    verl's: verl's multi-turn examples pass `--config-path=<dir> --config-name=gsm8k_multiturn_grpo`, a file whose
    `defaults` are `ppo_trainer` and `_self_` and whose body sets keys of verl's tree. Hydra composes it as verl's base
    with the body merged over it, then the command line; here the base is the backend and each of the body's leaves an
    override placed before the command line's (`++`: the body may add a key verl's base lacks, as a merge does).
    A relative --config-path is relative to verl/trainer/ (Hydra reads it against the module that holds
    @hydra.main, verl.trainer.main_ppo), an absolute one as it is. Anything else in the file's defaults (another
    group's option, a second base) is refused: it would need Hydra's own composition of the file."""
    choices = ", ".join(f"{base} (backend={backend})" for backend, base in BACKEND_BASES.items())
    if config_path is None:
        raise UserError(
            f"{given}: rlaunch composes one of verl's {choices}; use backend=... instead, or give --config-path with "
            "the directory of a config of your own that extends one of them"
        )
    written = config_path.removeprefix("file://")
    directory = Path(written).expanduser()
    where = ""
    if not directory.is_absolute():
        directory = verl_package_dir() / "trainer" / directory
        where = " (a relative --config-path is read against verl/trainer/, as Hydra does for verl.trainer.main_ppo)"
    file = directory / f"{name}.yaml"
    if not file.is_file():
        raise UserError(
            f"{given}: {file} does not exist{where}: give --config-path as the absolute directory of {name}.yaml, "
            f"or use backend=... for verl's {choices}"
        )
    try:
        body = OmegaConf.to_container(OmegaConf.load(file), resolve=False)
    except Exception as error:  # a YAML error names line and column on its first line
        raise UserError(f"{file}: not a config OmegaConf can read: {str(error).splitlines()[0]}") from None
    if not isinstance(body, dict):
        raise UserError(f"{file}: a config is a mapping of keys, not a {type(body).__name__}")
    defaults = body.pop("defaults", [])
    body.pop("hydra", None)  # its searchpath points Hydra at verl's config directory, which rlaunch composes anyway
    entries = [entry if isinstance(entry, str) else str(entry) for entry in defaults or []]
    named = [entry for entry in entries if entry.removesuffix(".yaml") in VERL_CONFIG_NAMES]
    others = [entry for entry in entries if entry not in named and entry != "_self_"]
    if len(named) != 1 or others or ("_self_" in entries and entries.index("_self_") < entries.index(named[0])):
        raise UserError(
            f"{file}: defaults {entries} -- rlaunch reads a config of your own whose defaults are one of verl's "
            f"{', '.join(BACKEND_BASES.values())} and then _self_; put the other entries on the command line "
            "(group=option, key=value)"
        )
    base = named[0].removesuffix(".yaml")
    backend = VERL_CONFIG_NAMES[base]
    overrides = [f"++{'.'.join(path)}={_file_value(value)}" for path, value in leaves(body)]
    note = (
        f"rlaunch: note: {given} is {file}: verl's {base} (backend={backend}) with the file's {len(overrides)} "
        "key(s) as overrides, the command line's after them"
    )
    return backend, overrides, note


def _file_value(value: Any) -> str:
    """A config file's value as an override: a whole `${...}` unquoted, so that it stays the interpolation of a node
    (its type kept: an int stays an int) that it is in the file; anything else as render_value writes it."""
    if isinstance(value, str) and value.startswith("${") and value.endswith("}") and value.count("${") == 1:
        return value
    return render_value(value)


def without_fsdp_knobs(overrides: list[str], multirun: bool) -> list[str]:
    """Under backend=megatron, the gpu profile's FSDP knobs (its fsdp_config.* offload switches, torch's fused AdamW)
    have no place in verl's Megatron config, which refuses them (McoreActorConfig takes no fsdp_config): a single run
    deletes each after composition (`~key`, fsdp_knob_deletions). A sweep's jobs delete their own profile's as each
    is planned (launch/run.py plan_job): Hydra composes a sweep's master config without the swept values (gpu=auto's
    profile), where a `~key` that only the swept profiles set fails, and its sweeper hands a job `~key=null`, which
    a run planned alone does not have. A value the user typed for a knob of any profile is refused instead of dropped
    silently."""
    base = base_config(overrides)
    gpu = find(overrides, "gpu")
    if base == BACKEND_BASES["fsdp"] or gpu is None:
        return overrides
    profiles = [str(v) for v in gpu.sweep_string_iterator()] if gpu.is_sweep_override() else [str(gpu.value())]
    knobs = {key for profile in profiles for key in option_keys_outside("gpu", profile, base)}
    for override in parse(overrides):
        typed = next((key for key in sorted(knobs) if overlap(key_of(override), key)), None)
        if typed is not None and not override.is_delete():
            raise UserError(
                f"{key_of(override)} is an FSDP key, which verl's {base} has no place for: drop it (Megatron's own "
                "knobs are actor_rollout_ref.actor.megatron.*, e.g. .param_offload, .optimizer_offload)"
            )
    return overrides if multirun else [*overrides, *fsdp_knob_deletions(overrides)]


def whole_values_replace_the_profiles(overrides: list[str]) -> list[str]:
    """A value the user gives a key of verl's whose sub-keys only one of our layers sets (a40's
    `override_optimizer_config: {fused: true}` where verl's default is null; guru_baseline's reward_kwargs where
    verl's is {}) replaces the layer's, as it replaces verl's default in verl's own composition. Hydra would merge a
    dict into the layer's instead, and refuse a key the layer's dict lacks (`{foreach: false}`: "Could not
    override"), or keep the layer's keys beside the user's (`{fused: true, foreach: true}`, which torch's AdamW
    refuses; `reward_kwargs={}` leaving GURU's in place). So the layer's sub-keys are deleted first and the user's
    value merged into what is left, said in a note. FSDP only: under Megatron the profile's knobs are deleted anyway
    (without_fsdp_knobs). A group the command line sweeps is skipped here; each job of the sweep is rewritten with
    its own choice as the launcher plans it."""
    base = base_config(overrides)
    if base != BACKEND_BASES["fsdp"]:
        return overrides
    theirs: list[tuple[str, str]] = []  # (the layer, a key it sets that verl's base has no place for)
    for group in ("gpu", "algo"):
        choice = find(overrides, group)
        if choice is not None and choice.is_sweep_override():
            continue
        option = str(choice.value()) if choice is not None else config_default(group)
        if option and option != "auto":
            theirs += [(f"{group}={option}", key) for key in option_keys_outside(group, option, base)]
    rewritten: list[str] = []
    # a sweep's job is rewritten again with its own choices (hydra_plugins' launcher): what is deleted already was
    deleted = {key_of(parsed) for parsed in parse(overrides) if parsed.is_delete()}
    for override, parsed in zip(overrides, parse(overrides), strict=True):
        key, value = key_of(parsed), override.split("=", 1)[-1]
        # the layer's dict itself, given a dict (Hydra merges the two), or keys the layer set under the user's key
        under = [
            (layer, leaf)
            for layer, leaf in theirs
            if (leaf.startswith(key + ".") or (leaf == key and value.lstrip().startswith("{"))) and leaf not in deleted
        ]
        if not under or parsed.is_delete() or parsed.is_add() or parsed.is_sweep_override():
            rewritten.append(override)
            continue
        layers = sorted({layer for layer, _ in under})
        print(
            f"rlaunch: note: {key}={value} replaces what {' and '.join(layers)} set there "
            f"({', '.join(leaf for _, leaf in under)}), as it replaces verl's default: not merged with it",
            file=sys.stderr,
        )
        rewritten += [*(f"~{leaf}" for _, leaf in under), f"++{key}={value}"]
    return rewritten


def fsdp_knob_deletions(overrides: Sequence[str]) -> list[str]:
    """`~key` for each FSDP knob of the run's gpu profile that `overrides` (one run's: a single gpu and backend) do
    not delete already, under backend=megatron; none under FSDP. Sorted: a run planned alone and the same job of a
    sweep list them alike (their run ids hash the overrides)."""
    base = base_config(overrides)
    gpu = value_in(list(overrides), "gpu")
    if base == BACKEND_BASES["fsdp"] or gpu is None:
        return []
    deleted = {key_of(o) for o in parse(overrides) if o.is_delete()}
    return [f"~{key}" for key in sorted(option_keys_outside("gpu", gpu, base)) if key not in deleted]


def _replace(overrides: list[str], key: str, value: str) -> list[str]:
    return [*without(overrides, {key}), f"{key}={value}"]


def choose_cluster(overrides: list[str]) -> tuple[str, str]:
    requested = value_in(overrides, "cluster") or "auto"
    if requested != "auto":
        return requested, "chosen on the command line"
    if sinfo_answers():
        return "slurm", "cluster=auto: sinfo answers here"
    return "local", "cluster=auto: no SLURM controller answers here (sinfo)"


def site_gres_types(overrides: list[str], cluster: str) -> dict[str, str]:
    """cluster.gres_types as Hydra will compose it: the cluster file's mapping, then the command line's entries
    (`cluster.gres_types.a100_80=a100-80g`, with or without +, or the whole dict)."""
    conf = Path(__file__).resolve().parent.parent / "conf" / "cluster" / f"{cluster}.yaml"
    types = dict(OmegaConf.load(conf).get("cluster", {}).get("gres_types") or {}) if conf.is_file() else {}
    for override in parse(overrides):
        key = override.key_or_group
        if key == "cluster.gres_types" and isinstance(override.value(), dict):
            types.update(override.value())
        elif key.startswith("cluster.gres_types."):
            types[key.removeprefix("cluster.gres_types.")] = str(override.value())
    return {str(profile): str(gres_type) for profile, gres_type in types.items()}


def choose_gpu(overrides: list[str], cluster: str) -> ProfileChoice:
    profiles = load_profiles()
    address = value_in(overrides, "cluster.address")
    if cluster == "ray" and address:  # the card the standing Ray cluster reports (accelerator_type:<name>)
        reported = ray_cluster_facts(address, value_in(overrides, "cluster.ray_auth_token_file"))
        site_types = site_gres_types(overrides, cluster)
        profile = profile_for_gres_type(reported.gres_type, profiles, site_types) if reported.gres_type else None
        if profile is not None:
            return ProfileChoice(profile, f"GPU type '{reported.gres_type}' reported by {reported.name}")
    if cluster == "slurm":
        partition_name = value_in(overrides, "cluster.partition")
        partition = query_partition(None if partition_name in (None, "null") else partition_name)
        hint = value_in(overrides, "cluster.gpu_type")
        gres_type = partition.gres_type if partition is not None and partition.gres_type else hint
        if gres_type:
            profile = profile_for_gres_type(gres_type, profiles, site_gres_types(overrides, cluster))
            where = f"partition {partition.name}" if partition is not None else "cluster.gpu_type"
            if profile is not None:
                return ProfileChoice(profile, f"GPU type '{gres_type}' of {where}")
            # a default profile here would ask SLURM for a GPU type this partition does not have
            raise UserError(
                f"gpu=auto: the GPU type '{gres_type}' of {where} is no profile's ({', '.join(sorted(profiles))}): "
                f"name the card with gpu=<profile> and map the type to it, e.g. gpu=a100_80 "
                f"++cluster.gres_types.a100_80={gres_type}"
            )
    return choose_profile(detect_gpus(), profiles)


def new_sweep_id(overrides: list[str]) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    digest = hashlib.sha1(("\n".join(overrides) + str(time.time_ns())).encode()).hexdigest()[:6]
    return f"{stamp}-{digest}"


def plan_only_on_login_node(overrides: list[str]) -> list[str]:
    """cluster=auto found SLURM: plan, never queue (a shared cluster's queue is not for the defaults of `make run`).
    Submission is explicit: cluster=slurm on the command line (submit_hint says so)."""
    if (value_in(overrides, "launch.dry_run") or "false").lower() in ("true", "json"):
        return overrides
    return _replace(overrides, "launch.dry_run", "true")


def submit_hint(argv: list[str], resolved: list[str]) -> str | None:
    """When cluster=auto turned a would-be submission into a plan: the command that submits it."""
    if value_in(argv, "cluster") not in (None, "auto") or value_in(resolved, "cluster") != "slurm":
        return None
    if (value_in(argv, "launch.dry_run") or "false").lower() in ("true", "json"):
        return None
    given = without(argv, {"cluster", "launch.dry_run"})
    command = shlex.join(["python", "launch/run.py", *given, "cluster=slurm"])
    return f"cluster=auto: SLURM answers here, so this only planned; to submit: {command}"


class ChosenCluster:
    """Why cluster=auto chose the cluster of the invocation being planned (resolve_auto), for every plan it makes:
    Hydra composes the resolved cluster=local|slurm alone. One per process, here, because a sweep's jobs are planned
    by the launcher plugin through launch.run while the invocation runs launch/run.py as __main__."""

    reason: str | None = None

    @contextmanager
    def said(self, reason: str | None) -> Iterator[None]:
        """`reason` for the plans made inside; none after (the next invocation, a test's own plan_job)."""
        self.reason = reason
        try:
            yield
        finally:
            self.reason = None


chosen_cluster = ChosenCluster()


def resolve_auto_choices(argv: list[str]) -> list[str]:
    """argv with gpu/cluster 'auto' replaced by what was detected, the reason recorded in gpu.selected_by, and a
    sweep id for this invocation."""
    return resolve_auto(argv)[0]


def resolve_auto(argv: list[str]) -> tuple[list[str], str | None]:
    """resolve_auto_choices, and why cluster=auto chose its cluster (None where the command line named one): Hydra
    composes the resolved cluster=local|slurm and keeps no trace of the choice, which the plan says."""
    if any(arg in PASSIVE_FLAGS for arg in argv):
        return argv, None
    # Overrides are key=value or ~key; everything else is a Hydra flag or a flag's value (--cfg job, -cn name).
    is_override = [not arg.startswith("-") and ("=" in arg or arg.startswith("~")) for arg in argv]
    flags = [arg for arg, override in zip(argv, is_override, strict=True) if not override]
    overrides = [arg for arg, override in zip(argv, is_override, strict=True) if override]
    refuse_secret_overrides(overrides)  # before Hydra writes them to .hydra/overrides.yaml
    parsed = {o.key_or_group: o for o in parse(overrides)}
    if "launch.sweep_id" not in parsed:
        overrides.append(f"launch.sweep_id={new_sweep_id(overrides)}")

    cluster, reason = choose_cluster(overrides)
    chosen_by = None
    if value_in(overrides, "cluster") in (None, "auto"):
        chosen_by = reason
        overrides = _replace(overrides, "cluster", cluster)
        if cluster == "slurm":
            overrides = plan_only_on_login_node(overrides)

    gpu = parsed.get("gpu")
    gpu_values = [str(v) for v in gpu.sweep_string_iterator()] if gpu is not None and gpu.is_sweep_override() else None
    if gpu is None or gpu.value() == "auto":
        choice = choose_gpu(overrides, cluster)
        overrides = _replace(overrides, "gpu", choice.profile)
        overrides.append(f"gpu.selected_by={hydra_quoted(choice.reason)}")
        overrides.extend(choice.overrides())
    elif gpu_values is not None and "auto" in gpu_values:
        detected = choose_gpu(overrides, cluster).profile
        overrides = _replace(overrides, "gpu", ",".join(detected if v == "auto" else v for v in gpu_values))
    overrides = whole_values_replace_the_profiles(overrides)
    overrides = without_fsdp_knobs(overrides, multirun=any(flag in MULTIRUN_FLAGS for flag in flags))
    # overrides first: a flag with an optional value (--info [all|config|...]) would take the next override as its value
    return [*overrides, *flags], chosen_by
