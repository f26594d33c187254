"""Everything the plan needs from the outside world, gathered once into one recorded object.

Runs on: the login node (or the machine of a cluster=local run). Each query is a side effect isolated in one
function; `Facts` itself is plain data, so tests build it by hand and the plan stays a pure function of (cfg, facts).
"""

from __future__ import annotations

import hashlib
import json
import netrc
import os
import shutil
import socket
import subprocess
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path

from launch.gpu import DetectedGpus, detect_gpus
from launch.schema import PROJECT_DIR
from launch.snapshot import CodeSnapshot, read_checkout

PACKAGES = (
    "verl",
    "torch",
    "ray",
    "hydra-core",
    "omegaconf",
    "submitit",
    "wandb",
    "transformers",
    "vllm",
    "sglang",
    "flash-attn",  # decides which log-prob kernel verl uses, and so the logits' memory (launch/memory.py)
)

# config.json key -> our llm.* field
HF_ARCHITECTURE_KEYS = {
    "model_type": "family",
    "num_hidden_layers": "layers",
    "hidden_size": "hidden",
    "num_attention_heads": "heads",
    "num_key_value_heads": "kv_heads",
    "head_dim": "head_dim",
    "intermediate_size": "intermediate",
    "vocab_size": "vocab",
    "tie_word_embeddings": "tied_embeddings",
    "max_position_embeddings": "max_position_embeddings",
}


@dataclass(frozen=True)
class PartitionFacts:
    """One SLURM partition as sinfo reports it (the largest node when nodes differ)."""

    name: str
    cpus_per_node: int
    mem_gib_per_node: float
    gpus_per_node: int
    gres_type: str | None  # None: the partition's GRES has no type (gpu:8)
    max_time_min: int | None  # None: unlimited
    nodes: int


@dataclass(frozen=True)
class Facts:
    gpus: DetectedGpus = field(default_factory=lambda: DetectedGpus("", 0.0, 0, "not detected"))
    model_config: dict | None = None  # architecture read from a local model's config.json, in llm.* names
    partition: PartitionFacts | None = None
    partitions: tuple[str, ...] = ()  # every partition sinfo lists (cluster=slurm), for "choose one of"
    hostname: str = ""
    git_sha: str = ""
    git_dirty: bool = False
    git_diff_sha256: str = ""  # of `git diff HEAD` when dirty (the diff itself: git_diff(), written beside the run)
    packages: dict[str, str] = field(default_factory=dict)
    # where W&B credentials were found when planning ("WANDB_API_KEY", "~/.netrc"), "" for none: never the key
    wandb_credentials: str = ""
    code: CodeSnapshot | None = None  # the checkout's code as read for a snapshot (cluster.snapshot), else None

    def to_dict(self) -> dict:
        return asdict(self)


def is_local_path(path: str) -> bool:
    """A hub id looks like org/name; a local model is an absolute, home- or dot-relative path."""
    return path.startswith(("/", "~", "./", "../")) or Path(path).expanduser().is_dir()


def read_model_config(model_path: str) -> dict | None:
    """The architecture of a local HF model directory in llm.* names, or None for a hub id."""
    if not is_local_path(model_path):
        return None
    config_file = Path(model_path).expanduser() / "config.json"
    if not config_file.is_file():
        return None
    raw = json.loads(config_file.read_text())
    raw = raw.get("text_config", raw) if "num_hidden_layers" not in raw else raw
    architecture = {ours: raw[theirs] for theirs, ours in HF_ARCHITECTURE_KEYS.items() if theirs in raw}
    if "head_dim" not in architecture and {"hidden", "heads"} <= architecture.keys():
        architecture["head_dim"] = architecture["hidden"] // architecture["heads"]
    architecture.setdefault("kv_heads", architecture.get("heads"))
    return architecture


def sinfo_answers() -> bool:
    """True when a SLURM controller answers here (cluster=auto picks slurm then)."""
    if shutil.which("sinfo") is None:
        return False
    try:
        return subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, timeout=10, check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def parse_gres(gres: str) -> tuple[str | None, int]:
    """sinfo's %G ('gpu:a100:8(S:0-1)', 'gpu:8', '(null)') -> (type or None, count)."""
    for entry in gres.split(","):
        parts = entry.split("(")[0].split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        count = int(parts[-1]) if parts[-1].isdigit() else 0
        return (parts[1] if len(parts) == 3 else None), count
    return None, 0


def parse_time_limit(limit: str) -> int | None:
    """sinfo's %l ('1-00:00:00', '2:00:00', '30:00', 'infinite') -> minutes."""
    if limit in ("infinite", "UNLIMITED", "n/a", ""):
        return None
    days, _, clock = limit.rpartition("-")
    fields = [int(part) for part in clock.split(":")]
    while len(fields) < 3:
        fields.insert(0, 0)
    hours, minutes, seconds = fields
    return (int(days) if days else 0) * 1440 + hours * 60 + minutes + (1 if seconds else 0)


@cache  # a sweep plans many jobs against the same partitions
def _sinfo_rows() -> list[list[str]]:
    command = ["sinfo", "-h", "-o", "%P|%c|%m|%G|%l|%D"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
    return [line.split("|") for line in result.stdout.splitlines() if line.count("|") == 5]


def list_partitions() -> tuple[str, ...]:
    return tuple(sorted({row[0].rstrip("*") for row in _sinfo_rows()}))


def query_partition(name: str | None) -> PartitionFacts | None:
    """The named partition (or SLURM's default, marked '*'), or None when sinfo has no such partition."""
    rows = _sinfo_rows()
    matching = []
    for partition, cpus, mem_mb, gres, limit, nodes in rows:
        is_default = partition.endswith("*")
        partition = partition.rstrip("*")
        if (name is None and is_default) or partition == name:
            matching.append((partition, cpus, mem_mb, gres, limit, nodes))
    if not matching:
        return None
    gres_parsed = [parse_gres(row[3]) for row in matching]
    return PartitionFacts(
        name=matching[0][0],
        cpus_per_node=max(int(row[1].rstrip("+")) for row in matching),
        mem_gib_per_node=round(max(int(row[2].rstrip("+")) for row in matching) / 1024, 1),
        gpus_per_node=max(count for _, count in gres_parsed),
        gres_type=next((gres_type for gres_type, _ in gres_parsed if gres_type), None),
        max_time_min=parse_time_limit(matching[0][4]),
        nodes=sum(int(row[5]) for row in matching),
    )


def _git(*args: str) -> str:
    result = subprocess.run(["git", *args], cwd=PROJECT_DIR, capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else ""


def package_versions() -> dict[str, str]:
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


@cache
def git_diff() -> str:
    """The checkout's uncommitted changes to tracked files (once per process: every job of a sweep records the
    same diff)."""
    return _git("diff", "HEAD")


def wandb_credentials(environ: dict[str, str] | os._Environ[str]) -> str:
    """Where wandb would find an API key: the variable, or a ~/.netrc entry for the W&B host (`wandb login`)."""
    if environ.get("WANDB_API_KEY"):
        return "WANDB_API_KEY"
    host = environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://")[-1].split("/")[0].split(":")[0]
    try:
        if netrc.netrc(environ.get("NETRC") or None).authenticators(host):
            return "~/.netrc"
    except (OSError, netrc.NetrcParseError):
        pass
    return ""


@cache
def _machine_facts() -> tuple[DetectedGpus, str, str, bool, str, tuple[tuple[str, str], ...]]:
    # Once per process: a multirun plans many jobs on the same machine.
    diff = git_diff()
    return (
        detect_gpus(),
        socket.gethostname(),
        _git("rev-parse", "HEAD"),
        bool(_git("status", "--porcelain")),
        hashlib.sha256(diff.encode()).hexdigest() if diff else "",
        tuple(package_versions().items()),
    )


def checkout_facts() -> dict[str, object]:
    """The code that plans (and so runs) a job: this checkout's commit and changes, and the venv's packages."""
    _, hostname, sha, dirty, diff_sha256, packages = _machine_facts()
    return {
        "git_sha": sha,
        "git_dirty": dirty,
        "git_diff_sha256": diff_sha256,
        "packages": dict(packages),
        "planned_on": hostname,
    }


def gather_facts(
    model_path: str,
    cluster_name: str,
    partition: str | None,
    snapshot: bool = False,
    ray_address: str | None = None,
    ray_token_file: str | None = None,
) -> Facts:
    """cluster=slurm asks sinfo about the partition; cluster=ray asks the Ray cluster at ray_address for its nodes."""
    gpus, hostname, sha, dirty, diff_sha256, packages = _machine_facts()
    on_slurm = cluster_name == "slurm"
    if on_slurm:
        partition_facts = query_partition(partition)
    elif cluster_name == "ray":
        from launch.ray_jobs import cluster_facts

        partition_facts = cluster_facts(str(ray_address), ray_token_file)
    else:
        partition_facts = None
    return Facts(
        gpus=gpus,
        model_config=read_model_config(model_path),
        partition=partition_facts,
        partitions=list_partitions() if on_slurm else (),
        hostname=hostname,
        git_sha=sha,
        git_dirty=dirty,
        git_diff_sha256=diff_sha256,
        packages=dict(packages),
        wandb_credentials=wandb_credentials(os.environ),
        code=read_checkout(PROJECT_DIR) if snapshot else None,
    )
