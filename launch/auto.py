"""Resolve gpu=auto and cluster=auto on the command line BEFORE Hydra composes, so that `--cfg job`, the plan and
the run id all show the profile and cluster actually used.

Runs on: the login node (or the cluster=local machine). Rewrites the override list only; Hydra does the rest.
"""

from __future__ import annotations

import hashlib
import time

from hydra.core.override_parser.overrides_parser import OverridesParser

from launch.facts import query_partition, sinfo_answers
from launch.gpu import ProfileChoice, choose_profile, detect_gpus, load_profiles, profile_for_gres_type
from launch.secret_guard import refuse_secret_overrides

# Flags after which Hydra expects no overrides to resolve (completion, help, info about the app itself).
PASSIVE_FLAGS = ("-sc", "--shell-completion", "-h", "--help", "--hydra-help")


def _value_of(overrides: list[str], key: str) -> str | None:
    for override in overrides:
        name, _, value = override.partition("=")
        if name == key:
            return value
    return None


def _replace(overrides: list[str], key: str, value: str) -> list[str]:
    kept = [override for override in overrides if override.partition("=")[0] != key]
    return [*kept, f"{key}={value}"]


def choose_cluster(overrides: list[str]) -> tuple[str, str]:
    requested = _value_of(overrides, "cluster") or "auto"
    if requested != "auto":
        return requested, "chosen on the command line"
    if sinfo_answers():
        return "slurm", "cluster=auto: sinfo answers here"
    return "local", "cluster=auto: no SLURM controller answers here (sinfo)"


def choose_gpu(overrides: list[str], cluster: str) -> ProfileChoice:
    profiles = load_profiles()
    address = _value_of(overrides, "cluster.address")
    if cluster == "ray" and address:  # the card the standing Ray cluster reports (accelerator_type:<name>)
        from launch.ray_jobs import cluster_facts

        reported = cluster_facts(address, _value_of(overrides, "cluster.ray_auth_token_file"))
        profile = profile_for_gres_type(reported.gres_type, profiles, {}) if reported.gres_type else None
        if profile is not None:
            return ProfileChoice(profile, f"GPU type '{reported.gres_type}' reported by {reported.name}")
    if cluster == "slurm":
        partition_name = _value_of(overrides, "cluster.partition")
        partition = query_partition(None if partition_name in (None, "null") else partition_name)
        hint = _value_of(overrides, "cluster.gpu_type")
        gres_type = partition.gres_type if partition is not None and partition.gres_type else hint
        if gres_type:
            profile = profile_for_gres_type(gres_type, profiles, {})
            if profile is not None:
                where = f"partition {partition.name}" if partition is not None else "cluster.gpu_type"
                return ProfileChoice(profile, f"GPU type '{gres_type}' of {where}")
    return choose_profile(detect_gpus(), profiles)


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def new_sweep_id(overrides: list[str]) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    digest = hashlib.sha1(("\n".join(overrides) + str(time.time_ns())).encode()).hexdigest()[:6]
    return f"{stamp}-{digest}"


def resolve_auto_choices(argv: list[str]) -> list[str]:
    """argv with gpu/cluster 'auto' replaced by what was detected, the reason recorded in gpu.selected_by, and a
    sweep id for this invocation."""
    if any(arg in PASSIVE_FLAGS for arg in argv):
        return argv
    # Overrides are key=value or ~key; everything else is a Hydra flag or a flag's value (--cfg job, -cn name).
    is_override = [not arg.startswith("-") and ("=" in arg or arg.startswith("~")) for arg in argv]
    flags = [arg for arg, override in zip(argv, is_override, strict=True) if not override]
    overrides = [arg for arg, override in zip(argv, is_override, strict=True) if override]
    refuse_secret_overrides(overrides)  # before Hydra writes them to .hydra/overrides.yaml
    parsed = {o.key_or_group: o for o in OverridesParser.create().parse_overrides(overrides)}
    if "launch.sweep_id" not in parsed:
        overrides.append(f"launch.sweep_id={new_sweep_id(overrides)}")

    cluster, _ = choose_cluster(overrides)
    if _value_of(overrides, "cluster") in (None, "auto"):
        overrides = _replace(overrides, "cluster", cluster)

    gpu = parsed.get("gpu")
    gpu_values = [str(v) for v in gpu.sweep_string_iterator()] if gpu is not None and gpu.is_sweep_override() else None
    if gpu is None or gpu.value() == "auto":
        choice = choose_gpu(overrides, cluster)
        overrides = _replace(overrides, "gpu", choice.profile)
        overrides.append(f"gpu.selected_by={_quote(choice.reason)}")
        if choice.usable_gib is not None:
            overrides.append(f"gpu.usable_gib={choice.usable_gib}")
    elif gpu_values is not None and "auto" in gpu_values:
        detected = choose_gpu(overrides, cluster).profile
        overrides = _replace(overrides, "gpu", ",".join(detected if v == "auto" else v for v in gpu_values))
    return [*flags, *overrides]
