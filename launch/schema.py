"""Typed schemas of rlaunch's own config roots (gpu, llm, mode, algo, dataset, cluster, launch).

Runs on: the login node (compose time). Registered in Hydra's ConfigStore as `rlaunch_schema`, which config.yaml lists
before our groups: the YAML files then hold only values, a misspelled key under one of our roots fails at compose
with "Key 'x' not in 'GpuProfile'", and a wrong type fails with the field's name. Everything outside these roots is
verl's own tree, which verl's yaml files and dataclasses own.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from algos.rft.settings import RftSettings

# Our roots in the composed config; they are stripped before verl sees it.
RLAUNCH_ROOTS = ("gpu", "llm", "mode", "algo", "dataset", "cluster", "launch", "rft")

# The values a key of ours may take, where it takes one of a few: the one list that validation and its messages read
# (`choices_of`). OmegaConf cannot hold a Literal field, so such a field is typed str and names its Literal in the
# field's metadata (`choice`).
DryRun = Literal["false", "true", "json"]
PreflightPolicy = Literal["fail", "fix", "tune", "warn", "off"]
WandbMode = Literal["auto", "online", "offline", "disabled"]
JobSoftwareSwitch = Literal["auto", "true", "false"]
ContainerRuntime = Literal["pyxis", "apptainer"]
ReadinessCheck = Literal["model", "hub_cache", "data", "data_sources", "files", "time", "disk"]
CalibrationSwitch = Literal["auto", "off"]


def choice(default: Any, choices: Any) -> Any:
    """A field whose value is one of the Literal `choices` (a list field: each of its items)."""
    return field(default=default, metadata={"choices": choices})


def choices_of(schema: type, name: str) -> tuple[str, ...]:
    """The values field `name` of `schema` may take, from the Literal it names."""
    return get_args(next(item for item in fields(schema) if item.name == name).metadata["choices"])


@dataclass(kw_only=True)
class GpuProfile:
    """Hardware facts of one card and of the node it typically sits in. The hardware knobs themselves are verl keys
    that the profile's yaml sets (micro-batches, token budgets, engine memory and concurrency, checkpointing,
    offload, rollout TP)."""

    name: str = MISSING  # profile name: a40, a100_40, a100_80, h100
    card: str = MISSING  # marketing name, for humans
    usable_gib: float = MISSING  # what torch.cuda reports as total memory, in GiB (docs/facts.md#gpus)
    bf16_tflops: float = MISSING  # dense bf16 peak, the same table verl's MFU uses
    mem_bandwidth_gbs: float = MISSING  # HBM/GDDR bandwidth in GB/s (rollout decode is bandwidth-bound)
    fp8: bool = False  # Hopper and newer
    compute_capability: str = MISSING
    interconnect: str = MISSING  # nvlink | pcie: what the all-gathers of FSDP and TP>1 ride on
    # GPU memory one NCCL communicator of several ranks holds on this node (buffers per channel; NVLS on Hopper)
    nccl_gib_per_communicator: float = MISSING
    # the same with NCCL_NVLS_ENABLE=0 (cluster.env) where NCCL opens NVLS channels; null: no NVLS on this card
    nccl_gib_per_communicator_without_nvls: float | None = None
    host_cpus_per_gpu: int = MISSING  # typical node: sets --cpus-per-task
    host_ram_gib_per_gpu: int = MISSING  # typical node: sets --mem
    # GPUs in that typical node (DGX H100: 8); 0: not stated. A plan asking more on one node is warned where no
    # partition says what the site's nodes hold (plan.node_size_warnings); a site with larger nodes sets it
    gpus_per_node: int = 0
    nvml_names: list[str] = field(default_factory=list)  # substrings of NVML's device name that mean this card
    min_total_gib: float = 0.0  # NVML total memory at least this (tells A100 40GB from 80GB)
    gres_type: str = ""  # the usual SLURM GRES type name of this card (mapped per cluster by cluster.gres_types)
    selected_by: str = "chosen on the command line"  # why this profile was used (gpu=auto says what it detected)


@dataclass(kw_only=True)
class LlmFacts:
    """Architecture of the model: what the planner and the preflight need, without downloading anything. A local
    HF directory given as actor_rollout_ref.model.path is read from its config.json instead."""

    name: str = MISSING
    path: str = MISSING  # hub id or local directory; config.yaml points actor_rollout_ref.model.path here
    family: str = MISSING
    layers: int = MISSING
    hidden: int = MISSING
    heads: int = MISSING
    kv_heads: int = MISSING
    head_dim: int = MISSING
    intermediate: int = MISSING
    vocab: int = MISSING
    tied_embeddings: bool = MISSING
    max_position_embeddings: int = MISSING
    # a mixture of experts (0: dense): routed experts per MoE layer, experts per token, one expert's width, the shared
    # experts' total width, the leading layers with a dense MLP (config.json's names: launch/facts.py)
    experts: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    shared_expert_intermediate: int = 0
    dense_layers: int = 0
    # multi-head latent attention (DeepSeek-V3 family; 0 otherwise); head_dim is then qk_nope_head_dim
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0


@dataclass(kw_only=True)
class ModeSettings:
    """Duration and cadence only. The verl keys a mode sets (epochs, test/save frequency, validation size) live in
    its yaml; this holds what verl has no key for."""

    name: str = MISSING
    time_budget_min: int = MISSING  # wall-time budget of one job; SLURM --time = this + cluster.time_margin_min
    # checkpoint cadence in wall minutes: the plan turns it into trainer.save_freq at its step time (launch/plan.py
    # checkpoint_cadence); null keeps trainer.save_freq in steps as the mode's yaml (or the user) sets it
    checkpoint_every_min: int | None = None


@dataclass(kw_only=True)
class PcgradSettings:
    """Read by the PCGrad plugin inside verl's workers (it reaches them as RLAUNCH_PCGRAD_* in Ray's runtime env)."""

    enabled: bool = False
    task_key: str = "data_source"  # non-tensor batch field whose domain prefix (<domain>__<dataset>) names the task
    seed: int = 0  # shared by every rank so all ranks visit tasks in the same order
    # task = task_map[data_source], else task_map[domain], else the domain (e.g. {openai/gsm8k: math})
    task_map: dict[str, str] = field(default_factory=dict)
    stratify: bool = True  # order each batch so every mini-batch (and rank) gets its share of every task


@dataclass(kw_only=True)
class AlgoSettings:
    name: str = MISSING
    pcgrad: PcgradSettings = field(default_factory=PcgradSettings)


@dataclass(kw_only=True)
class DatasetSettings:
    name: str = MISSING
    root: str = MISSING  # directory holding train/ and test/ parquet files (verl's data.train_files point here)
    domains: list[str] = field(default_factory=list)  # GURU domains present (the data_source prefixes)
    obtain: str = ""  # how to get the files under root, said when they are missing


@dataclass(kw_only=True)
class ContainerSettings:
    """The image every node's Ray and verl's driver run in (cluster=slurm; launch/container.py)."""

    # null: no container | pyxis (srun --container-image) | apptainer (apptainer exec --nv)
    runtime: str | None = choice(None, ContainerRuntime)
    image: str | None = None  # pyxis: docker://repo/name:tag or a .sqsh file; apptainer: a .sif file or docker://...
    mounts: list[str] = field(default_factory=list)  # more SRC:DST[:FLAGS]; the runs directory is always mounted
    workdir: str | None = None  # null: the code snapshot (the job imports from it)
    env: dict[str, str] = field(default_factory=dict)  # set inside the container, over the image's own values
    python: str = "python"  # the image's interpreter, with rlaunch's requirements installed


@dataclass(kw_only=True)
class ClusterSettings:
    name: str = MISSING  # local | slurm | ray
    address: str | None = None  # cluster=ray: the head's dashboard, e.g. http://head:8265 (Ray's job API)
    python: str = "python"  # cluster=ray: the interpreter on the Ray cluster's nodes (it needs verl and rlaunch's deps)
    shared_dir: str = MISSING  # a filesystem every node sees; run directories live under it, never node-local /tmp
    partition: str | None = None  # null: the partition SLURM marks as default
    account: str | None = None  # sbatch --account
    qos: str | None = None  # sbatch --qos
    constraint: str | None = None  # sbatch --constraint (node features)
    exclusive: bool = False  # sbatch --exclusive: whole nodes, shared with no other job
    gpu_type: str | None = None  # hint for gpu=auto on a login node when the partition's GRES has no type
    # profile name -> the GRES type this cluster calls that card (e.g. a100_80: a100-80g); empty: untyped GRES
    gres_types: dict[str, str] = field(default_factory=dict)
    time_margin_min: int = 15  # added to the mode's budget: checkpoint save + teardown before SLURM's kill
    cpus_per_task: int | None = None  # null: the profile's host CPUs per GPU x GPUs per node, capped at the node
    mem_gb: int | None = None  # null: the profile's host RAM per GPU x GPUs per node, capped at the node
    signal_delay_s: int = 120  # SLURM sends USR2 this long before the time limit: time to checkpoint and requeue
    max_requeues: int = 3  # preemptions and time limits together; submitit requeues the same run directory
    ray_timeout_s: int = 180  # every node's Ray must register within this, or the job fails naming the missing node
    # a Ray token file the site manages (on the shared filesystem); null: a new token per run, 0600, in its run dir
    ray_auth_token_file: str | None = None
    sbatch_extra: dict[str, str] = field(default_factory=dict)  # any other sbatch option, e.g. {mail-type: END}
    array_parallelism: int | None = None  # at most this many tasks of one job array run at once (%N); null: all
    # copy the code once to <runs_dir>/code/<digest> at submission (shared by sweeps; never by a dry run) and run the
    # job from there (launch/snapshot.py)
    snapshot: bool = False
    # the image every node's Ray and verl's driver run in: .runtime (pyxis|apptainer), .image, .mounts, .workdir, .env
    container: ContainerSettings = field(default_factory=ContainerSettings)
    setup: list[str] = field(default_factory=list)  # shell lines run on the compute node before the job
    env: dict[str, str] = field(default_factory=dict)  # variables for the job and verl's Ray workers
    # the job's software where it changes memory (launch/job_software.py); auto: what the planning venv has
    flash_attn: str = choice("auto", JobSoftwareSwitch)  # auto | true | false: flash-attn in the job's environment
    engine_version: str = "auto"  # auto | the rollout engine's version in the job, e.g. 0.18.1 (how it sleeps)


@dataclass(kw_only=True)
class ExpectedLengths:
    """Typical lengths the user knows (from an earlier run, or the data's own statistics): the step-time forecast and
    the preflight's typical line use them; the memory verdict stays the worst case (every sequence at full length).
    null: measured by the calibration store or the data, else half the maximum."""

    response_tokens: int | None = None  # mean response length in tokens
    prompt_tokens: int | None = None  # mean prompt length in tokens


@dataclass(kw_only=True)
class HangWatchdog:
    """Inside the job: an attempt in which no training step completes within max(factor x the expected step time,
    floor_s) is stopped as a hang, after every process's stack is recorded (launch/watchdog.py)."""

    enabled: bool = True
    factor: float = 5.0  # K: how many expected step times without progress make a hang
    floor_s: float = 1800.0  # never call a hang sooner than this (start-up, first generation, checkpoint saves)


@dataclass(kw_only=True)
class LaunchSettings:
    """How rlaunch itself behaves for this invocation."""

    dry_run: str = choice("false", DryRun)  # false | true (readable plan) | json (one JSON object per job on stdout)
    # the memory preflight's policy on a run that does not fit its GPUs or its node's host RAM: fail refuses it with
    # the cheapest fix; fix applies that fix to keys you did not set; tune fixes, then raises micro-batches and the
    # engine's share while they fit; warn queues it with the verdict as a warning; off judges nothing
    preflight: str = choice("fail", PreflightPolicy)
    runs_dir: str = "${cluster.shared_dir}/rlaunch"  # sweeps and their run directories live under it
    sweep_id: str = "adhoc"  # set by launch/run.py per invocation: time stamp + short hash
    # auto: online when WANDB_API_KEY (or a ~/.netrc entry for W&B) is there at planning time, else offline under
    # the run directory (synced later with the command the plan prints); online | offline | disabled force it
    wandb_mode: str = choice("auto", WandbMode)
    # readiness checks (launch/readiness.py) to turn off where this machine cannot see the truth, e.g. [data] for
    # files only the compute nodes see: model, hub_cache, data, data_sources, files, time, disk
    skip_checks: list[str] = field(default_factory=list, metadata={"choices": ReadinessCheck})
    # configs verl's own checks accepted, by hash (launch/verl_checks.py): a repeated plan skips importing verl;
    # "" asks verl every time
    verl_check_cache: str = "${oc.env:XDG_CACHE_HOME,${oc.env:HOME}/.cache}/rlaunch/verl_checks"
    # typical lengths you know, for the step-time forecast and the typical memory line: .response_tokens, .prompt_tokens
    expect: ExpectedLengths = field(default_factory=ExpectedLengths)
    # auto: plans read the calibration store (<runs_dir>/calibration.jsonl) and jobs append to it; off: neither
    calibration: str = choice("auto", CalibrationSwitch)
    calibrate_after_step: int = 3  # the job writes calibration.json after this step, and again when an attempt ends
    # in the job, no step within max(.factor x the expected step time, .floor_s) is a hang (.enabled to turn it off)
    hang: HangWatchdog = field(default_factory=HangWatchdog)


@dataclass(kw_only=True)
class RlaunchSchema:
    gpu: GpuProfile = field(default_factory=GpuProfile)
    llm: LlmFacts = field(default_factory=LlmFacts)
    mode: ModeSettings = field(default_factory=ModeSettings)
    algo: AlgoSettings = field(default_factory=AlgoSettings)
    dataset: DatasetSettings = field(default_factory=DatasetSettings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    launch: LaunchSettings = field(default_factory=LaunchSettings)
    rft: RftSettings = field(default_factory=RftSettings)


PROJECT_DIR = Path(__file__).resolve().parent.parent


def project_path(relative: str) -> str:
    """`${rlaunch_path:rewards/verl_entry.py}`: an absolute path inside this checkout. verl loads reward files by path
    inside Ray workers that run in another directory, so paths handed to verl are absolute."""
    return str(PROJECT_DIR / relative)


def verl_package_dir() -> Path:
    """Where verl is installed, found without importing it (torch, Ray, transformers: ~4 s)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("verl is not installed in this environment: pip install 'verl[verl-core]==0.9.1'")
    return Path(spec.submodule_search_locations[0])


def mappings(tree: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every mapping of a plain config tree (a container, as OmegaConf.to_container or yaml gives it) with its dotted
    path, parents first."""
    if isinstance(tree, dict):
        yield path, tree
        for key, child in tree.items():
            yield from mappings(child, f"{path}.{key}" if path else str(key))


def open_table(node: object) -> bool:
    """A mapping of ours without a schema (cluster.env, cluster.sbatch_extra, rft.sft.*): any key is the user's; a
    node of a settings dataclass takes only its fields."""
    return isinstance(node, DictConfig) and not is_dataclass(OmegaConf.get_type(node))


# verl's whole default config flattened into one file (verl regenerates it from ppo_trainer.yaml and checks it in CI)
VERL_DEFAULTS_FILE = "trainer/config/_generated_ppo_trainer.yaml"


@cache
def verl_defaults(base: str = "ppo_trainer") -> dict[str, Any]:
    """verl's whole default config for a base (ppo_trainer, ppo_megatron_trainer), flattened by verl into one file."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    generated = VERL_DEFAULTS_FILE.replace("ppo_trainer", base)
    return yaml.load((verl_package_dir() / generated).read_text(), Loader=loader) or {}


def select(node: Any, key: str, default: Any = None) -> Any:
    """OmegaConf.select on a plain dict (the resolved config verl receives, verl's yaml), without building a
    DictConfig of the whole tree (~50 ms a job)."""
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def verl_config_source() -> str:
    """`${rlaunch_verl_config:}`: verl's shipped config directory as a file:// search path. Hydra's
    pkg://verl.trainer.config would import verl (and with it torch, Ray, transformers: ~4 s) only to list yaml files;
    find_spec locates the installed package without running it."""
    return f"file://{verl_package_dir() / 'trainer' / 'config'}"


def model_tag(model_path: str, llm_path: str, llm_name: str) -> str:
    """`${rlaunch_model_tag:<model.path>,<llm.path>,<llm.name>}`: the model a run trains, as its names say it: the llm/
    option's name when model.path is that option's, else the path's last part (a pasted Qwen/Qwen3-1.7B is
    Qwen3-1.7B, not the llm/ default)."""
    model_path = str(model_path)
    return str(llm_name) if model_path == str(llm_path) else model_path.rstrip("/").rsplit("/", 1)[-1]


def register_schemas() -> None:
    """Idempotent; called by every entry point (run.py, tests) before Hydra composes."""
    ConfigStore.instance().store(name="rlaunch_schema", node=RlaunchSchema)
    OmegaConf.register_new_resolver("rlaunch_path", project_path, replace=True)
    OmegaConf.register_new_resolver("rlaunch_verl_config", verl_config_source, replace=True)
    OmegaConf.register_new_resolver("rlaunch_model_tag", model_tag, replace=True)
