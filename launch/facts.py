"""Everything the plan needs from the outside world, gathered once into one recorded object.

Runs on: the login node (or the machine of a cluster=local run). Each query is a side effect isolated in one
function; `Facts` itself is plain data, so tests build it by hand and the plan stays a pure function of (cfg, facts).
"""

from __future__ import annotations

import copy
import hashlib
import json
import netrc
import os
import shutil
import socket
import subprocess
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path

import yaml

from launch.errors import UserError
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
# Where a MoE model's config.json states its routed experts (Qwen-MoE / Mixtral / GPT-OSS names, DeepSeek's)
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
# llm.* fields of a mixture of experts and of latent attention (the latter named as in DeepSeek's config.json)
MOE_FIELDS = ("experts", "experts_per_token", "moe_intermediate", "shared_expert_intermediate", "dense_layers")
LATENT_ATTENTION_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim")


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


# What transformers and verl load from a snapshot: any one tokenizer file, and every weight shard (an index names them)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass(frozen=True)
class HubSnapshot:
    """What one HF cache holds of a hub model (its `main` snapshot)."""

    cache_dir: str
    missing: tuple[str, ...]  # "config.json", "a tokenizer", weight file names; empty: complete


@dataclass(frozen=True)
class Facts:
    gpus: DetectedGpus = field(default_factory=lambda: DetectedGpus("", 0.0, 0, "not detected"))
    model_config: dict | None = None  # the model's architecture in llm.* names (see find_model), None: unknown
    model_source: str = ""  # where model_config came from: a config.json, the HF cache, or an llm/ option
    hub_snapshot: HubSnapshot | None = None  # a hub id's files in the cache the nodes read; None for a local path
    partition: PartitionFacts | None = None
    partitions: tuple[str, ...] = ()  # every partition sinfo lists (cluster=slurm), for "choose one of"
    # the venv's package versions (the checkout's commit and changes: checkout_facts, which provenance records)
    packages: dict[str, str] = field(default_factory=dict)
    # where W&B credentials were found when planning ("WANDB_API_KEY", "~/.netrc"), "" for none: never the key
    wandb_credentials: str = ""
    code: CodeSnapshot | None = None  # the checkout's code as read for a snapshot (cluster.snapshot), else None
    checkpoint_disk: DiskSpace | None = None  # where verl's checkpoints go, as this machine sees it; None: not asked


@dataclass(frozen=True)
class DiskSpace:
    """The filesystem of a directory that may not exist yet (its nearest existing parent is asked)."""

    probed: str
    free_gib: float
    filesystem: int  # st_dev: directories on one filesystem share its free space

    @classmethod
    def of(cls, directory: str) -> DiskSpace:
        path = Path(directory).expanduser().absolute()
        while not path.is_dir() and path != path.parent:
            path = path.parent
        return cls(str(path), round(shutil.disk_usage(path).free / 1024**3, 1), path.stat().st_dev)


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
    return architecture_read(config_file, model_path)


def reward_model_config(verl: Mapping) -> dict | None:
    """The architecture (llm.* names) of the reward model verl serves beside the actor: reward.reward_model.model_path
    where it is a local directory with a readable config.json; None for a hub id, no reward model, or a config.json
    this cannot read (verl's own load then says what is wrong with it)."""
    reward_model = (verl.get("reward") or {}).get("reward_model") or {}
    path = reward_model.get("model_path")
    if not reward_model.get("enable") or not path:
        return None
    try:
        found = read_model_config(str(path))
    except UserError:
        return None
    return None if found is None else {"tied_embeddings": False, **found}


# the config.json fields every plan reads (memory, layout checks); the rest have defaults where absent
REQUIRED_ARCHITECTURE = ("layers", "hidden", "heads", "intermediate", "vocab")


def architecture_read(config_file: Path, model_path: str) -> dict:
    """architecture_of a model's config.json, refused in one line where verl's workers (transformers' AutoConfig)
    could not read it either: not JSON, not an object, or without the fields a decoder's config has as integers."""
    where = f"{config_file} (the config.json of actor_rollout_ref.model.path={model_path})"
    try:
        raw = json.loads(config_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserError(
            f"{where} is not valid JSON ({error}): transformers cannot read it; fix or download it again"
        ) from None
    if not isinstance(raw, dict):
        raise UserError(f"{where} holds a JSON {type(raw).__name__}, not an object: fix or download it again")
    language = raw.get("text_config", raw) if "num_hidden_layers" not in raw else raw
    for theirs, ours in HF_ARCHITECTURE_KEYS.items():
        value = language.get(theirs) if isinstance(language, dict) else None
        required = ours in REQUIRED_ARCHITECTURE
        if (required or value is not None) and ours in (*REQUIRED_ARCHITECTURE, "kv_heads", "head_dim"):
            if type(value) is not int or value < 1:
                found = (
                    "is missing (a decoder's config.json states it)"
                    if value is None
                    else f"is {value!r}, not a positive integer"
                )
                raise UserError(f"{where}: {theirs} {found}: the model cannot be planned; fix or download it again")
    return architecture_of(raw)


def architecture_of(raw: dict) -> dict:
    """A HF config.json in llm.* names (multimodal configs keep the language model under text_config). The MoE and
    latent-attention fields are always given (0 for a dense model), so a dense config.json read for a path also
    clears what an MoE llm/ table would have said."""
    outer = raw
    raw = raw.get("text_config", raw) if "num_hidden_layers" not in raw else raw
    architecture = {ours: raw[theirs] for theirs, ours in HF_ARCHITECTURE_KEYS.items() if theirs in raw}
    architecture |= experts_of(raw) | latent_attention_of(raw)
    if vision := vision_params_of(outer):
        architecture["vision_params"] = vision
    if "head_dim" not in architecture and {"hidden", "heads"} <= architecture.keys():
        architecture["head_dim"] = architecture["hidden"] // architecture["heads"]
    architecture.setdefault("kv_heads", architecture.get("heads"))
    return architecture


def _count(raw: dict, key: str) -> int:
    """An integer field of config.json; absent or null (Moonlight's q_lora_rank) is 0."""
    return int(raw.get(key) or 0)


def experts_of(raw: dict) -> dict[str, int]:
    """A config.json's mixture of experts in llm.* names (all 0 for a dense model). Its routed experts under any of
    EXPERT_KEYS; one expert's width moe_intermediate_size, else intermediate_size (Mixtral's and GPT-OSS's experts
    are that wide); the shared experts' width shared_expert_intermediate_size (Qwen2-MoE), else n_shared_experts x
    moe_intermediate_size (DeepSeek); the dense layers first_k_dense_replace (DeepSeek), else mlp_only_layers
    (Qwen-MoE, counted as if leading)."""
    experts = next((_count(raw, key) for key in EXPERT_KEYS if raw.get(key)), 0)
    if not experts:
        return dict.fromkeys(MOE_FIELDS, 0)
    width = _count(raw, "moe_intermediate_size") or _count(raw, "intermediate_size")
    shared = _count(raw, "shared_expert_intermediate_size") or _count(raw, "n_shared_experts") * width
    dense = _count(raw, "first_k_dense_replace") or len(raw.get("mlp_only_layers") or [])
    return dict(zip(MOE_FIELDS, (experts, _count(raw, "num_experts_per_tok"), width, shared, dense), strict=True))


# vision towers whose MLP is a SwiGLU (gate, up, down: Qwen2.5-VL's Qwen2_5_VLMLP); the others' is fc1 -> fc2
GATED_VISION_MLP = ("qwen2_5_vl",)


def vision_params_of(raw: dict) -> int:
    """The parameters of a vision-language model's vision tower from its config.json's vision_config (0 without
    one), as Qwen2-VL / Qwen2.5-VL / Qwen3-VL build it (transformers' modeling_qwen2_vl, modeling_qwen2_5_vl): the
    patch embedding (in_chans x temporal_patch_size x patch_size^2 x width), `depth` blocks of attention (qkv and
    output projections with biases) and MLP, and the merger (each spatial_merge_size^2 patches' features through two
    linears to the language model's width), one more per Qwen3-VL deepstack layer. Qwen2-VL names the tower's width
    embed_dim and its output hidden_size; Qwen2.5-VL hidden_size and out_hidden_size. Counted within 0.1% of
    transformers' own count for Qwen2-VL-7B and Qwen2.5-VL-7B (norms counted as one weight vector each)."""
    vision = raw.get("vision_config")
    if not isinstance(vision, dict):
        return 0
    width = _count(vision, "embed_dim") or _count(vision, "hidden_size")
    depth = _count(vision, "depth") or _count(vision, "num_hidden_layers")
    if not width or not depth:
        return 0
    language = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    out = _count(vision, "out_hidden_size") or (
        _count(vision, "hidden_size") if vision.get("embed_dim") else _count(language, "hidden_size")
    )
    mlp = _count(vision, "intermediate_size") or int(float(vision.get("mlp_ratio") or 4) * width)
    gated = str(vision.get("model_type") or raw.get("model_type")) in GATED_VISION_MLP
    attention = 4 * width * width + 4 * width
    block = attention + (3 if gated else 2) * width * mlp + (2 if gated else 1) * mlp + width + 2 * width
    channels = _count(vision, "in_chans") or _count(vision, "in_channels") or 3
    patch = channels * max(1, _count(vision, "temporal_patch_size")) * _count(vision, "patch_size") ** 2 * width
    merged = width * max(1, _count(vision, "spatial_merge_size")) ** 2
    merger = width + merged * merged + merged + merged * out + out
    mergers = 1 + len(vision.get("deepstack_visual_indexes") or ())
    positions = _count(vision, "num_position_embeddings") * width  # Qwen3-VL's learned position embedding
    return depth * block + patch + mergers * merger + positions


def latent_attention_of(raw: dict) -> dict[str, int]:
    """Multi-head latent attention in llm.* names (all 0 without kv_lora_rank); head_dim then holds the part of a
    query/key head without rotary embedding (qk_nope_head_dim), qk_rope_head_dim the rest."""
    if not _count(raw, "kv_lora_rank"):
        return dict.fromkeys(LATENT_ATTENTION_FIELDS, 0)
    latent = {field: _count(raw, field) for field in LATENT_ATTENTION_FIELDS}
    if "qk_nope_head_dim" in raw:
        latent["head_dim"] = _count(raw, "qk_nope_head_dim")
    return latent


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' warnings held back while the planner reads a model's files with it, and put back after.
    transformers logs to stderr through its own handler (transformers/utils/logging.py), so its warnings would print
    as stray lines beside rlaunch's one-line message or plan: a config.json whose model_type it does not know makes
    every AutoTokenizer / AutoConfig load warn "You are using a model of type ..." (configuration_utils.py
    PreTrainedConfig.from_pretrained). What matters to the run, rlaunch says itself; its errors still print."""
    from transformers.utils import logging as transformers_logging

    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():  # the Python warnings transformers and peft raise while building the model
            warnings.simplefilter("ignore")
            yield
    finally:
        transformers_logging.set_verbosity(verbosity)


def hub_cache_dir(environ: Mapping[str, str]) -> str:
    """The HF hub cache a process with these variables reads, in huggingface_hub's order of precedence."""
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if environ.get(key):
            return str(Path(environ[key]).expanduser())
    home = environ.get("HF_HOME") or str(Path(environ.get("XDG_CACHE_HOME") or "~/.cache") / "huggingface")
    return str(Path(home).expanduser() / "hub")


def cached_file(repo_id: str, filename: str, cache_dir: str) -> Path | None:
    """A file of the hub model's `main` snapshot in this cache, offline (never asks the Hub)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir)
    except ValueError:  # not a valid repo id (huggingface_hub's HFValidationError): nothing cached under it
        return None
    return Path(found) if isinstance(found, str) else None


def hub_snapshot(repo_id: str, cache_dir: str) -> HubSnapshot:
    """Which of config, tokenizer and weights the cache lacks: what an offline transformers would fail to load."""
    missing = [] if cached_file(repo_id, "config.json", cache_dir) else ["config.json"]
    if not any(cached_file(repo_id, name, cache_dir) for name in TOKENIZER_FILES):
        missing.append(f"a tokenizer ({' or '.join(TOKENIZER_FILES)})")
    missing += missing_weights(lambda name: cached_file(repo_id, name, cache_dir))
    return HubSnapshot(cache_dir=cache_dir, missing=tuple(missing))


def missing_weights(find: Callable[[str], Path | None]) -> list[str]:
    """The weight files from_pretrained would fail to find: every shard an index names, else one whole file.
    `find` looks a file of the model up by name (in a directory, or in an HF cache)."""
    index = next((found for name in WEIGHT_INDEXES if (found := find(name))), None)
    if index is None:
        found = any(find(name) for name in WEIGHT_FILES)
        return [] if found else [f"weights ({' or '.join(WEIGHT_FILES + WEIGHT_INDEXES)})"]
    try:
        shards = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
    except (ValueError, AttributeError):  # not JSON, or not an object: from_pretrained fails on it too
        return [f"{index.name} (not a valid weight index)"]
    return [shard for shard in shards if find(shard) is None]


def local_file(directory: str) -> Callable[[str], Path | None]:
    def find(name: str) -> Path | None:
        path = Path(directory).expanduser() / name
        return path if path.is_file() else None

    return find


def llm_option_for(model_path: str) -> dict | None:
    """The conf/llm/ option whose path is this hub id (its table describes that model), or None."""
    for table in _llm_tables():
        if table.get("path") == model_path:
            return copy.deepcopy(table)  # the caller's own: the cached tables serve every job of a sweep
    return None


VARIANT_SUFFIXES = ("-instruct", "-chat", "-base", "-it")  # a base model and its tuned variants share an architecture


def model_family_name(model_path: str) -> str:
    """'Qwen/Qwen2.5-7B-Instruct', '~/models/qwen2.5-7b' -> 'qwen2.5-7b': the name without owner, folder or variant."""
    name = model_path.rstrip("/").rsplit("/", 1)[-1].lower()
    return next((name.removesuffix(suffix) for suffix in VARIANT_SUFFIXES if name.endswith(suffix)), name)


def llm_options_like(model_path: str) -> list[str]:
    """The conf/llm/ options of the same model in another variant (its base, Instruct or chat model), whose
    architecture is likely the path's: offered, never assumed (a base model's context may be longer)."""
    family = model_family_name(model_path)
    return [str(table["name"]) for table in _llm_tables() if model_family_name(str(table.get("path", ""))) == family]


def language_model_options(model_path: str) -> list[str]:
    """For a vision-language model (Qwen2.5-VL-3B), the conf/llm/ options of its language model's family (Qwen2.5-3B):
    the decoder the preflight counts, without the vision encoder."""
    family = model_family_name(model_path)
    if "-vl-" not in family:
        return []
    text = family.replace("-vl-", "-")
    return [str(table["name"]) for table in _llm_tables() if model_family_name(str(table.get("path", ""))) == text]


def variant_hint(model_path: str) -> str:
    """' (llm=qwen2_5_7b describes Qwen/Qwen2.5-7B-Instruct, ...)' for a path llm_options_like knows, else ''."""
    options = {str(table["name"]): str(table["path"]) for table in _llm_tables()}
    like = [f"llm={name} describes {options[name]}" for name in llm_options_like(model_path)]
    if like:
        return f" ({'; '.join(like)}: the same model or a variant of it; name it if that is its architecture)"
    decoder = [f"llm={name} describes {options[name]}" for name in language_model_options(model_path)]
    if decoder:
        return (
            f" ({'; '.join(decoder)}, the language model of this vision-language model: name it to plan the "
            "decoder; its vision encoder and image tokens are then not counted)"
        )
    return ""


def borrowed_positions(llm: Mapping[str, object]) -> str:
    """Where the plan's architecture (launch/plan.py llm_architecture) is the named llm/ option of another path,
    because the path's own config.json is not readable here (a base model planned with its Instruct's option): whose
    max_position_embeddings the plan took, else "". A base model and its Instruct share their shapes, not always their
    positions (where the Instruct reaches a longer context by rope scaling, its config.json states the shorter one),
    and the positions are the longest prompt + response the run may have and the context vLLM must hold one sequence
    of when rollout.max_model_len is null. Where the config.json is readable, the plan reads it instead and warns
    where its positions differ from the option's."""
    name, path = str(llm.get("name")), str(llm.get("path"))
    table = next((table for table in _llm_tables() if table.get("name") == name), None)
    if table is None or table.get("path") == path or not str(llm.get("source", "")).startswith(f"conf/llm/{name}.yaml"):
        return ""
    if is_local_path(path):
        unread, fix = f"{path} has no config.json readable here", "make its config.json readable here"
    else:
        unread = f"{path}'s own config.json is not in the HF cache here"
        fix = f"cache its config.json (hf download {path} config.json)"
    return (
        f"{llm.get('max_position_embeddings')}, {table.get('path')}'s (llm={name}): {unread}, and its positions may "
        "differ; they cap prompt + response and size vLLM's context while actor_rollout_ref.rollout.max_model_len "
        f"is null: {fix} to plan with its own"
    )


@cache  # read once per process: a sweep asks for every job, and conf/ does not change while it plans
def _llm_tables() -> tuple[dict, ...]:
    tables = (yaml.safe_load(option.read_text()) for option in sorted((PROJECT_DIR / "conf" / "llm").glob("*.yaml")))
    return tuple(table for table in tables if isinstance(table, dict))


def cached_config(repo_id: str, hub_caches: Sequence[str]) -> tuple[Path, str] | None:
    """The hub model's config.json in the first of these HF caches that holds it, and that cache."""
    for cache_dir in hub_caches:
        config_file = cached_file(repo_id, "config.json", cache_dir)
        if config_file is not None:
            return config_file, cache_dir
    return None


def model_config_file(model_path: str, hub_caches: Sequence[str]) -> Path | None:
    """The config.json verl's workers build the model from: a local directory's, or a hub id's in an HF cache."""
    if is_local_path(model_path):
        config_file = Path(model_path).expanduser() / "config.json"
        return config_file if config_file.is_file() else None
    found = cached_config(model_path, hub_caches)
    return found[0] if found is not None else None


def find_model(model_path: str, hub_caches: Sequence[str]) -> tuple[dict | None, str]:
    """The architecture of the model actor_rollout_ref.model.path names, and where it was read: a local directory's
    config.json; for a hub id, the config.json in an HF cache (offline), else the llm/ option with that path.
    (None, "") when none of them knows it."""
    if is_local_path(model_path):
        architecture = read_model_config(model_path)
        return architecture, (f"{model_path}/config.json" if architecture is not None else "")
    found = cached_config(model_path, hub_caches)
    if found is not None:
        config_file, cache_dir = found
        return architecture_read(config_file, model_path), f"HF cache {cache_dir}"
    option = llm_option_for(model_path)
    if option is not None:
        return option, f"conf/llm/{option['name']}.yaml"
    return None, ""


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


def _sinfo_rows() -> list[list[str]]:
    """sinfo's partition rows, asked once per process and SLURM cluster (SLURM_CONF names it: a test session, or a
    user, may point at a second cluster in the same process)."""
    return _sinfo_rows_of(os.environ.get("SLURM_CONF"))


@cache  # a sweep plans many jobs against the same partitions
def _sinfo_rows_of(slurm_conf: str | None) -> list[list[str]]:
    del slurm_conf  # the cache key: sinfo itself reads SLURM_CONF from the environment
    if shutil.which("sinfo") is None:
        return []  # no SLURM client here (a laptop): cluster=slurm still plans, its facts unknown
    command = ["sinfo", "-h", "-o", "%P|%c|%m|%G|%l|%D"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return []  # a client whose controller never answers: as good as none
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
    node_hub_cache: str | None = None,
    snapshot: bool = False,
    ray_address: str | None = None,
    ray_token_file: str | None = None,
    checkpoint_dir: str | None = None,
) -> Facts:
    """cluster=slurm asks sinfo about the partition; cluster=ray asks the Ray cluster at ray_address for its nodes.
    `node_hub_cache`: the HF cache the job's processes read (default: this process's), searched first.
    `checkpoint_dir`: where verl's checkpoints will go, when the job writes to a filesystem this machine sees."""
    gpus, _, _, _, _, packages = _machine_facts()
    on_slurm = cluster_name == "slurm"
    if on_slurm:
        partition_facts = query_partition(partition)
    elif cluster_name == "ray":
        partition_facts = ray_cluster_facts(str(ray_address), ray_token_file)
    else:
        partition_facts = None
    here = hub_cache_dir(os.environ)
    nodes = node_hub_cache or here
    model_config, model_source = find_model(model_path, list(dict.fromkeys((nodes, here))))
    return Facts(
        gpus=gpus,
        model_config=model_config,
        model_source=model_source,
        hub_snapshot=None if is_local_path(model_path) else hub_snapshot(model_path, nodes),
        partition=partition_facts,
        partitions=list_partitions() if on_slurm else (),
        packages=dict(packages),
        wandb_credentials=wandb_credentials(os.environ),
        code=read_checkout(PROJECT_DIR) if snapshot else None,
        checkpoint_disk=DiskSpace.of(checkpoint_dir) if checkpoint_dir else None,
    )


def ray_cluster_facts(address: str, token_file: str | None) -> PartitionFacts:
    """A standing Ray cluster's alive nodes as one 'partition' (cluster=ray): the largest node's CPUs, memory and
    GPUs, the count of nodes with GPUs (all nodes when none has any), the GPU type from Ray's accelerator_type."""
    from launch.ray_api import alive_node_totals

    if not address or str(address) == "None":
        raise UserError("cluster=ray needs cluster.address=http://<head>:8265, the head's dashboard (Ray's job API)")
    if not str(address).startswith(("http://", "https://")):
        # Ray's clients would wait ~30-40 s on a GCS or client address before saying anything useful
        raise UserError(
            f"cluster.address={address}: Ray's job API is the head's dashboard URL, http://<head>:8265 (not the GCS "
            "port 6379, nor ray://<head>:10001)"
        )
    totals = alive_node_totals(address, token_file)
    gpu_nodes = [total for total in totals if total.get("GPU", 0) > 0]
    types = sorted(
        {key.split(":", 1)[1].lower() for total in totals for key in total if key.startswith("accelerator_type:")}
    )
    return PartitionFacts(
        name=f"ray cluster {address}",
        cpus_per_node=int(max((total.get("CPU", 0) for total in totals), default=0)),
        mem_gib_per_node=round(max((total.get("memory", 0) for total in totals), default=0) / 2**30, 1),
        gpus_per_node=int(max((total.get("GPU", 0) for total in gpu_nodes), default=0)),
        gres_type=types[0] if types else None,
        max_time_min=None,
        nodes=len(gpu_nodes) or len(totals),
    )
