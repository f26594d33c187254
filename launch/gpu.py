"""Which GPU profile a run uses: detect the card (NVML, then nvidia-smi) or read the SLURM partition's GRES type,
and map it onto conf/gpu/.

Runs on: the login node (and, for cluster=local, the machine that will run the job). Detection is a side effect kept
in `detect_gpus`; `choose_profile` is pure so tests feed it hand-made cards.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from launch.schema import GpuProfile

DEFAULT_PROFILE = "a100_80"
GPU_CONF_DIR = Path(__file__).resolve().parent.parent / "conf" / "gpu"
GIB = 1024**3


@dataclass(frozen=True)
class DetectedGpus:
    """The cards of this machine, as the driver reports them; count 0 means none."""

    name: str
    total_gib: float
    count: int
    source: str  # nvml | nvidia-smi | none, with the reason when none

    @property
    def present(self) -> bool:
        return self.count > 0


@dataclass(frozen=True)
class ProfileChoice:
    profile: str
    reason: str
    usable_gib: float | None = None  # set only for a card no profile describes: its measured memory


def load_profiles() -> dict[str, dict]:
    """Profile name -> its `gpu` facts, read from conf/gpu/*.yaml (the one source of what a profile is)."""
    profiles = {}
    for path in sorted(GPU_CONF_DIR.glob("*.yaml")):
        facts = OmegaConf.load(path).get("gpu")
        if facts is not None and "usable_gib" in facts:
            # through the schema, so fields a yaml leaves out get their documented defaults
            profiles[path.stem] = OmegaConf.to_container(OmegaConf.merge(OmegaConf.structured(GpuProfile), facts))
    return profiles


def detect_gpus() -> DetectedGpus:
    """Count real GPUs with NVML (nvidia-smi as fallback). Never from CUDA_VISIBLE_DEVICES: SLURM sets it on nodes
    whose GRES are fake (docs/facts.md#slurm)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
            if count == 0:
                return DetectedGpus("", 0.0, 0, "NVML found no device")
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            total = pynvml.nvmlDeviceGetMemoryInfo(handle).total / GIB
            return DetectedGpus(name, round(total, 1), count, "nvml")
        finally:
            pynvml.nvmlShutdown()
    except Exception as nvml_error:  # no driver, no library: both mean "no NVIDIA GPU here"
        nvml_reason = f"NVML: {type(nvml_error).__name__}"
    if shutil.which("nvidia-smi") is None:
        return DetectedGpus("", 0.0, 0, f"{nvml_reason}; nvidia-smi not found")
    result = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    rows = [line.split(",") for line in result.stdout.strip().splitlines() if "," in line]
    if result.returncode != 0 or not rows:
        return DetectedGpus("", 0.0, 0, f"{nvml_reason}; nvidia-smi exit {result.returncode}")
    name, total_mib = rows[0][0].strip(), float(rows[0][1])
    return DetectedGpus(name, round(total_mib / 1024, 1), len(rows), "nvidia-smi")


def choose_profile(gpus: DetectedGpus, profiles: dict[str, dict]) -> ProfileChoice:
    """Map a detected card onto a profile. Unknown cards get the largest profile not bigger than the card, with the
    card's own memory as usable_gib; no card gets the default profile. Each choice says why."""
    if not gpus.present:
        return ProfileChoice(
            DEFAULT_PROFILE, f"no GPU detected ({gpus.source}) and no cluster hint: default profile {DEFAULT_PROFILE}"
        )
    card = f"{gpus.count}x {gpus.name} ({gpus.total_gib} GiB) via {gpus.source}"
    named = [
        (facts["min_total_gib"], name)
        for name, facts in profiles.items()
        if any(pattern.lower() in gpus.name.lower() for pattern in facts["nvml_names"])
        and gpus.total_gib >= facts["min_total_gib"]
    ]
    if named:
        profile = max(named)[1]
        return ProfileChoice(profile, f"detected {card}")
    fitting = [(facts["usable_gib"], name) for name, facts in profiles.items() if facts["usable_gib"] <= gpus.total_gib]
    if fitting:
        profile = max(fitting)[1]
        return ProfileChoice(
            profile,
            f"detected {card}, which no profile describes: using {profile}'s knobs, the largest profile not bigger "
            f"than the card, with usable_gib={gpus.total_gib} (WARNING: check the preflight)",
            usable_gib=gpus.total_gib,
        )
    smallest = min(profiles, key=lambda name: profiles[name]["usable_gib"])
    return ProfileChoice(
        smallest,
        f"detected {card}, smaller than every profile: using {smallest}'s knobs with usable_gib={gpus.total_gib} "
        "(WARNING: expect the preflight to refuse; lower the knobs)",
        usable_gib=gpus.total_gib,
    )


def profile_for_gres_type(gres_type: str, profiles: dict[str, dict], site_types: dict[str, str]) -> str | None:
    """The profile behind a SLURM GRES type: the site's own mapping (cluster.gres_types) first, then the profiles'
    usual names, then a name match (a100 -> the larger A100 only if the type says 80)."""
    lowered = gres_type.lower()
    for profile, site_type in site_types.items():
        if site_type.lower() == lowered:
            return profile
    if lowered in profiles:
        return lowered
    candidates = [name for name, facts in profiles.items() if facts["gres_type"] and facts["gres_type"] in lowered]
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    # One type name, several memory sizes (a100 40/80 GB): only a type that says 80 gets the larger card.
    by_memory = sorted(candidates, key=lambda name: profiles[name]["usable_gib"])
    return by_memory[-1] if "80" in lowered else by_memory[0]
