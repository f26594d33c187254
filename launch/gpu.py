"""Which GPU profile a run uses: detect the card (NVML, then nvidia-smi) or read the SLURM partition's GRES type,
and map it onto conf/gpu/.

Runs on: the login node (and, for cluster=local, the machine that will run the job). Detection is a side effect kept
in `detect_gpus`; `choose_profile` is pure so tests feed it hand-made cards.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from omegaconf import OmegaConf

from launch.schema import GpuProfile

DEFAULT_PROFILE = "a100_80"
GPU_CONF_DIR = Path(__file__).resolve().parent.parent / "conf" / "gpu"
GIB = 1024**3


# A known card whose measured memory is this much below its profile's (ECC turned on for a workstation card, a MIG
# slice) takes the measured figure. NVML's total is ~0.5 GiB above what torch reports, so smaller gaps are noise.
MEASURED_BELOW_PROFILE_GIB = 1.0

# Dense bf16 tensor FLOPs per SM per clock (fp32 accumulate), by compute capability: the datasheet peaks divided by
# SMs x boost clock. 8.0 A100 312 TFLOPS = 108 x 1410 MHz x 2048; 8.6 A40 149.7 = 84 x 1740 x 1024; 8.9 RTX 6000 Ada
# 364.2 = 142 x 2505 x 1024; 9.0 H100 SXM 989 = 132 x 1830 x 4096; 10.0 B200 2250 = 148 x ~1860 x 8192; 12.0 RTX PRO
# 6000 Blackwell 504 = 188 x 2617 x 1024. Below 8.0 (no bf16 tensor cores) and for unlisted parts: no estimate.
BF16_FLOP_PER_SM_CLOCK = {"8.0": 2048, "8.6": 1024, "8.9": 1024, "9.0": 4096, "10.0": 8192, "12.0": 1024}
# CUDA cores per SM (NVML counts cores, not SMs): 64 on GA100, 128 on every other architecture above.
CORES_PER_SM = {"8.0": 64}
# Parts that run bf16 with fp32 accumulate at half rate: GeForce (RTX 4090: 165 TFLOPS = 128 x 2520 x 512) and the
# L40 (NVIDIA L40 datasheet: 181 dense, where the L40S on the same die has 362).
HALF_RATE_NAMES = ("GeForce", "L40")


@dataclass(frozen=True)
class DetectedGpus:
    """The cards of this machine, as the driver reports them; count 0 means none. The optional fields are what NVML
    says about the card beyond its name and memory (None where it could not say), for cards no profile describes."""

    name: str
    total_gib: float
    count: int
    source: str  # nvml | nvidia-smi | none, with the reason when none
    memory_bus_bits: int | None = None
    max_memory_clock_mhz: int | None = None
    cuda_cores: int | None = None
    max_sm_clock_mhz: int | None = None
    compute_capability: str | None = None  # "9.0"

    @property
    def present(self) -> bool:
        return self.count > 0


@dataclass(frozen=True)
class ProfileChoice:
    profile: str
    reason: str
    usable_gib: float | None = None  # set only where the card's measured memory replaces the profile's
    bf16_tflops: float | None = None  # set only for a card no profile describes, when NVML gives its cores and clock
    mem_bandwidth_gbs: float | None = None  # likewise, from NVML's bus width and memory clock

    def overrides(self) -> list[str]:
        """The gpu.* values measured on this card, as Hydra overrides over the chosen profile's."""
        measured = {"usable_gib": self.usable_gib, "bf16_tflops": self.bf16_tflops}
        measured["mem_bandwidth_gbs"] = self.mem_bandwidth_gbs
        return [f"gpu.{key}={value}" for key, value in measured.items() if value is not None]


def bandwidth_from_nvml(memory_bus_bits: int, max_memory_clock_mhz: int) -> float:
    """Peak memory bandwidth in GB/s. NVML's memory clock counts one edge of a double-data-rate bus for HBM and GDDR
    alike: A40 7251 MHz x 2 x 384 bit / 8 = 696 GB/s, H100 SXM 2619 MHz x 2 x 5120 bit / 8 = 3352 GB/s (datasheets:
    696 and 3350)."""
    return round(max_memory_clock_mhz * 2 * memory_bus_bits / 8 / 1000, 1)


def bf16_tflops_from_nvml(name: str, cuda_cores: int, max_sm_clock_mhz: int, compute_capability: str) -> float | None:
    """Dense bf16 peak estimated as SMs x max SM clock x FLOPs per SM per clock of the architecture; None for an
    architecture the table does not know. NVML's max clock is the top boost: Hopper's datasheet peak assumes a lower
    clock, so this reads ~8 % high there."""
    per_sm = BF16_FLOP_PER_SM_CLOCK.get(compute_capability)
    if per_sm is None:
        return None
    sms = cuda_cores / CORES_PER_SM.get(compute_capability, 128)
    factor = 0.5 if any(name_matches(part, name) for part in HALF_RATE_NAMES) else 1.0
    return round(sms * max_sm_clock_mhz * 1e6 * per_sm * factor / 1e12, 1)


def name_matches(pattern: str, device_name: str) -> bool:
    """Whether an nvml_names entry names this device, as whole words: "H20" is not in "NVIDIA H200", "L40" not in
    "NVIDIA L40S", "RTX 6000 Ada" not in "Quadro RTX 6000"."""
    return re.search(rf"(?<![a-z0-9]){re.escape(pattern.lower())}(?![a-z0-9])", device_name.lower()) is not None


def gres_matches(profile_type: str, gres_type: str) -> bool:
    """Whether a profile's usual GRES type is named in a site's GRES type. Sites spell one card many ways
    (h200, nvidia_h200_141gb, rtx_a6000, rtxa6000, rtx_6000_ada): the type must not run on into more digits (h20 is not
    h200) nor start inside another word, "rtx" excepted; separators may be left out (rtx_6000_ada = rtx6000ada)."""
    pattern = rf"(?:^|[^a-z0-9]|rtx){re.escape(profile_type.lower())}(?![0-9])"
    lowered = gres_type.lower()
    return any(re.search(pattern, form) for form in (lowered, re.sub(r"[^a-z0-9]", "", lowered)))


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
            return DetectedGpus(name, round(total, 1), count, "nvml", **_nvml_card_figures(pynvml, handle))
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


def _nvml_card_figures(pynvml: ModuleType, handle: object) -> dict[str, int | str | None]:
    """What NVML says beyond name and memory; each query alone, since older drivers lack some (GetNumGpuCores)."""

    def ask(query: Callable[[], Any]) -> Any:
        try:
            return query()
        except Exception:  # NVMLError_NotSupported, FunctionNotFound: the figure stays unknown
            return None

    capability = ask(lambda: pynvml.nvmlDeviceGetCudaComputeCapability(handle))
    return {
        "memory_bus_bits": ask(lambda: pynvml.nvmlDeviceGetMemoryBusWidth(handle)),
        "max_memory_clock_mhz": ask(lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
        "cuda_cores": ask(lambda: pynvml.nvmlDeviceGetNumGpuCores(handle)),
        "max_sm_clock_mhz": ask(lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)),
        "compute_capability": f"{capability[0]}.{capability[1]}" if capability else None,
    }


def measured_figures(gpus: DetectedGpus, fallback: str, facts: dict) -> tuple[float | None, float | None, str]:
    """(bf16_tflops, mem_bandwidth_gbs, where each came from) for a card no profile describes: from NVML where it
    says enough, else the fallback profile's figure, said so."""
    bandwidth = tflops = None
    if gpus.memory_bus_bits and gpus.max_memory_clock_mhz:
        bandwidth = bandwidth_from_nvml(gpus.memory_bus_bits, gpus.max_memory_clock_mhz)
        clock = gpus.max_memory_clock_mhz
        bandwidth_from = f"mem_bandwidth_gbs={bandwidth} (NVML: {gpus.memory_bus_bits}-bit bus x {clock} MHz x 2)"
    else:
        bandwidth_from = f"mem_bandwidth_gbs={facts['mem_bandwidth_gbs']} ({fallback}'s; NVML gave no bus width/clock)"
    if gpus.cuda_cores and gpus.max_sm_clock_mhz and gpus.compute_capability:
        tflops = bf16_tflops_from_nvml(gpus.name, gpus.cuda_cores, gpus.max_sm_clock_mhz, gpus.compute_capability)
    if tflops is not None:
        tflops_from = (
            f"bf16_tflops={tflops} (estimated from NVML: {gpus.cuda_cores} cores x {gpus.max_sm_clock_mhz} MHz, "
            f"compute capability {gpus.compute_capability})"
        )
    else:
        tflops_from = (
            f"bf16_tflops={facts['bf16_tflops']} ({fallback}'s; NVML gave no cores/clock for a known architecture)"
        )
    return tflops, bandwidth, f"{tflops_from}, {bandwidth_from}"


def choose_profile(gpus: DetectedGpus, profiles: dict[str, dict]) -> ProfileChoice:
    """Map a detected card onto a profile. Unknown cards get the largest profile not bigger than the card, with the
    card's own memory as usable_gib; no card gets the default profile. Each choice says why."""
    if not gpus.present:
        return ProfileChoice(
            DEFAULT_PROFILE, f"no GPU detected ({gpus.source}) and no cluster hint: default profile {DEFAULT_PROFILE}"
        )
    card = f"{gpus.count}x {gpus.name} ({gpus.total_gib} GiB) via {gpus.source}"
    # The most specific name wins (longest matching nvml_names entry), then the memory floor (A100 80GB over 40GB).
    named = [
        (len(pattern), facts["min_total_gib"], name)
        for name, facts in profiles.items()
        for pattern in facts["nvml_names"]
        if name_matches(pattern, gpus.name) and gpus.total_gib >= facts["min_total_gib"]
    ]
    if named:
        profile = max(named)[2]
        if gpus.total_gib < profiles[profile]["usable_gib"] - MEASURED_BELOW_PROFILE_GIB:
            return ProfileChoice(
                profile,
                f"detected {card}: {profile}, with the measured usable_gib={gpus.total_gib} instead of the "
                f"profile's {profiles[profile]['usable_gib']} (ECC on, or a MIG slice?)",
                usable_gib=gpus.total_gib,
            )
        return ProfileChoice(profile, f"detected {card}")
    fitting = [(facts["usable_gib"], name) for name, facts in profiles.items() if facts["usable_gib"] <= gpus.total_gib]
    if fitting:
        profile = max(fitting)[1]
        tflops, bandwidth, sources = measured_figures(gpus, profile, profiles[profile])
        return ProfileChoice(
            profile,
            f"detected {card}, which no profile describes: using {profile}'s knobs, the largest profile not bigger "
            f"than the card, with usable_gib={gpus.total_gib} (measured), {sources} (WARNING: check the preflight)",
            usable_gib=gpus.total_gib,
            bf16_tflops=tflops,
            mem_bandwidth_gbs=bandwidth,
        )
    smallest = min(profiles, key=lambda name: profiles[name]["usable_gib"])
    tflops, bandwidth, sources = measured_figures(gpus, smallest, profiles[smallest])
    return ProfileChoice(
        smallest,
        f"detected {card}, smaller than every profile: using {smallest}'s knobs with usable_gib={gpus.total_gib} "
        f"(measured), {sources} (WARNING: expect the preflight to refuse; lower the knobs)",
        usable_gib=gpus.total_gib,
        bf16_tflops=tflops,
        mem_bandwidth_gbs=bandwidth,
    )


def profile_for_gres_type(gres_type: str, profiles: dict[str, dict], site_types: dict[str, str]) -> str | None:
    """The profile behind a SLURM GRES type: the site's own mapping (cluster.gres_types) first, then the profiles'
    usual names, then a name match, the most specific type winning (h200 over h20), and among profiles of one type
    the larger only if the type says 80 (a100 40/80 GB)."""
    lowered = gres_type.lower()
    for profile, site_type in site_types.items():
        if site_type.lower() == lowered:
            return profile
    if lowered in profiles:
        return lowered
    matching = [
        name for name, facts in profiles.items() if facts["gres_type"] and gres_matches(facts["gres_type"], lowered)
    ]
    longest = max((len(profiles[name]["gres_type"]) for name in matching), default=0)
    candidates = [name for name in matching if len(profiles[name]["gres_type"]) == longest]
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    # One type name, several memory sizes (a100 40/80 GB): only a type that says 80 gets the larger card.
    by_memory = sorted(candidates, key=lambda name: profiles[name]["usable_gib"])
    return by_memory[-1] if "80" in lowered else by_memory[0]
