"""gpu=auto: card -> profile, table-driven; and the real detection on this (GPU-less) machine. The profiles of
today's other cards (h200, h20, b200, l40s, rtx6000ada, a6000) compose, pass verl's checks and fit the default 7B run;
they stay out of conftest.GPUS, the slow gpu x mode x algo matrix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import compose_config, cpu_facts, run_cli
from omegaconf import OmegaConf
from test_compose import HARDWARE_KNOBS, NAME_KEYS, diff_keys, flatten

from launch import preflight
from launch.auto import resolve_auto_choices
from launch.errors import UserError
from launch.facts import parse_gres, parse_time_limit
from launch.gpu import (
    DEFAULT_PROFILE,
    DetectedGpus,
    bandwidth_from_nvml,
    bf16_tflops_from_nvml,
    choose_profile,
    detect_gpus,
    load_profiles,
    profile_for_gres_type,
)
from launch.plan import make_plan
from launch.validate import validate

PROFILES = load_profiles()
NEW_PROFILES = ("h200", "h20", "b200", "l40s", "rtx6000ada", "a6000")


@pytest.mark.parametrize(
    ("name", "total_gib", "profile"),
    [
        ("NVIDIA A40", 44.4, "a40"),
        ("NVIDIA A100-SXM4-40GB", 39.4, "a100_40"),
        ("NVIDIA A100-PCIE-40GB", 39.4, "a100_40"),
        ("NVIDIA A100-SXM4-80GB", 79.2, "a100_80"),
        ("NVIDIA A100 80GB PCIe", 79.1, "a100_80"),
        ("NVIDIA H100 80GB HBM3", 79.1, "h100"),
        ("NVIDIA H800 80GB HBM3", 79.1, "h800"),  # not h100: its NCCL has no NVLS
        # today's other cards, with the totals NVML reports (a little above torch's)
        ("NVIDIA H200", 140.4, "h200"),
        ("NVIDIA H200 NVL", 140.4, "h200"),
        ("NVIDIA H20", 95.6, "h20"),  # "H20" is inside "H200": matched as a whole word only
        ("NVIDIA L40S", 45.0, "l40s"),
        ("NVIDIA RTX 6000 Ada Generation", 48.0, "rtx6000ada"),
        ("NVIDIA RTX A6000", 48.0, "a6000"),  # "RTX 6000" vs "RTX A6000": different profiles
        ("NVIDIA B200", 179.1, "b200"),
        ("NVIDIA H100 80GB HBM3", 79.6, "h100"),
        ("NVIDIA A100-SXM4-40GB", 40.0, "a100_40"),
    ],
)
def test_known_cards_map_to_their_profile(name, total_gib, profile):
    choice = choose_profile(DetectedGpus(name, total_gib, 8, "nvml"), PROFILES)
    assert choice.profile == profile
    assert choice.usable_gib is None
    assert name in choice.reason and "nvml" in choice.reason


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA L40",  # not an L40S: half its bf16 rate
        "Quadro RTX 6000",  # Turing, 24 GB: not the RTX 6000 Ada
        "NVIDIA GH200 480GB",  # Grace Hopper: not an H200
        "NVIDIA GB200",  # Grace Blackwell: not a B200 node
    ],
)
def test_names_that_contain_a_known_card_are_not_that_card(name):
    choice = choose_profile(DetectedGpus(name, 44.5, 4, "nvml"), PROFILES)
    assert "no profile describes" in choice.reason


def test_unknown_card_gets_largest_profile_not_bigger_with_its_own_memory():
    choice = choose_profile(DetectedGpus("NVIDIA L40", 44.5, 4, "nvml"), PROFILES)
    assert choice.profile in ("a40", "l40s")  # 44.4 <= 44.5 < 47.4; l40s inherits a40's knobs, so they are the same
    assert choice.usable_gib == 44.5
    assert "WARNING" in choice.reason and "no profile describes" in choice.reason
    # without NVML's clocks (nvidia-smi), the fallback profile's FLOPs and bandwidth stay, and the plan says so
    assert choice.bf16_tflops is None and choice.mem_bandwidth_gbs is None
    assert choice.overrides() == ["gpu.usable_gib=44.5"]
    assert f"{choice.profile}'s; NVML gave no" in choice.reason


def test_unknown_card_takes_bandwidth_and_flops_from_nvml():
    # An L40 as NVML describes it: 384-bit GDDR6 at 9001 MHz, 18176 cores (142 SMs) up to 2490 MHz, Ada (8.9).
    l40 = DetectedGpus("NVIDIA L40", 44.5, 8, "nvml", 384, 9001, 18176, 2490, "8.9")
    choice = choose_profile(l40, PROFILES)
    assert choice.mem_bandwidth_gbs == 864.1  # 9001e6 x 2 x 384 / 8 B/s; the L40 datasheet says 864 GB/s
    assert choice.bf16_tflops == 181.0  # 142 x 2490e6 x 1024 at the L40's half rate; its datasheet says 181.05
    assert choice.overrides() == ["gpu.usable_gib=44.5", "gpu.bf16_tflops=181.0", "gpu.mem_bandwidth_gbs=864.1"]
    assert "384-bit bus x 9001 MHz x 2" in choice.reason and "18176 cores x 2490 MHz" in choice.reason


@pytest.mark.parametrize(
    ("bus_bits", "clock_mhz", "gbs"),
    [(384, 7251, 696.1), (5120, 2619, 3352.3), (5120, 1593, 2039.0), (5120, 1215, 1555.2)],  # A40, H100, A100 80/40
)
def test_bandwidth_from_nvml_matches_the_datasheets(bus_bits, clock_mhz, gbs):
    assert bandwidth_from_nvml(bus_bits, clock_mhz) == gbs


@pytest.mark.parametrize(
    ("name", "cores", "clock_mhz", "capability", "tflops"),
    [
        ("NVIDIA A100-SXM4-80GB", 6912, 1410, "8.0", 311.9),  # datasheet 312
        ("NVIDIA A40", 10752, 1740, "8.6", 149.7),  # datasheet 149.7
        ("NVIDIA RTX 6000 Ada Generation", 18176, 2505, "8.9", 364.2),  # whitepaper 364.2
        ("NVIDIA H100 80GB HBM3", 16896, 1980, "9.0", 1070.5),  # datasheet 989 at ~1830 MHz: ~8 % high
        ("NVIDIA GeForce RTX 4090", 16384, 2520, "8.9", 165.2),  # half rate with fp32 accumulate: 165.2
        ("NVIDIA L40S", 18176, 2520, "8.9", 366.4),  # full rate (datasheet 362.05); the L40 on the same die: half
        ("Tesla V100-SXM2-32GB", 5120, 1530, "7.0", None),  # no bf16 tensor cores: no estimate
    ],
)
def test_bf16_estimate_from_nvml(name, cores, clock_mhz, capability, tflops):
    assert bf16_tflops_from_nvml(name, cores, clock_mhz, capability) == tflops


def test_known_card_with_ecc_on_takes_its_measured_memory():
    # A workstation card ships with ECC off (49140 MiB); with ECC on NVML reports 46068 MiB = 45.0 GiB.
    choice = choose_profile(DetectedGpus("NVIDIA RTX 6000 Ada Generation", 45.0, 8, "nvml"), PROFILES)
    assert choice.profile == "rtx6000ada" and choice.usable_gib == 45.0
    assert "measured usable_gib=45.0" in choice.reason


def test_card_smaller_than_every_profile_warns():
    choice = choose_profile(DetectedGpus("NVIDIA GeForce RTX 4090", 23.6, 1, "nvml"), PROFILES)
    assert choice.profile == min(PROFILES, key=lambda p: PROFILES[p]["usable_gib"])
    assert choice.usable_gib == 23.6 and "WARNING" in choice.reason


def test_no_gpu_means_default_profile_said_plainly():
    choice = choose_profile(DetectedGpus("", 0.0, 0, "NVML: not found"), PROFILES)
    assert choice.profile == DEFAULT_PROFILE
    assert "no GPU detected" in choice.reason and "default profile" in choice.reason


def test_this_machine_really_has_no_gpu():
    # The real detection path (NVML, then nvidia-smi) on a CPU machine; CUDA_VISIBLE_DEVICES must not count.
    gpus = detect_gpus()
    assert gpus.count == 0 and not gpus.present


@pytest.mark.parametrize(
    ("gres_type", "site", "profile"),
    [
        ("a40", {}, "a40"),
        ("h100", {}, "h100"),
        ("a100", {}, "a100_40"),  # ambiguous type: the smaller card is the safe reading
        ("a100-80gb", {}, "a100_80"),
        ("a100_80", {}, "a100_80"),
        ("ampere80", {"a100_80": "ampere80"}, "a100_80"),
        ("tesla_v100", {}, None),
        ("h200", {}, "h200"),
        ("nvidia_h200_141gb", {}, "h200"),
        ("h20", {}, "h20"),
        ("nvidia_h100_80gb_hbm3", {}, "h100"),
        ("l40s", {}, "l40s"),
        ("l40", {}, None),
        ("rtx_6000_ada", {}, "rtx6000ada"),
        ("rtx6000", {}, None),  # Ada or Turing: the site must say (cluster.gres_types)
        ("rtx_a6000", {}, "a6000"),
        ("rtxa6000", {}, "a6000"),
        ("b200", {}, "b200"),
        ("gb200", {}, None),
        ("a4000", {}, None),  # not an A40
    ],
)
def test_partition_gres_type_to_profile(gres_type, site, profile):
    assert profile_for_gres_type(gres_type, PROFILES, site) == profile


def test_sinfo_field_parsers():
    assert parse_gres("gpu:a100:8(S:0-1)") == ("a100", 8)
    assert parse_gres("gpu:8") == (None, 8)
    assert parse_gres("(null)") == (None, 0)
    assert parse_time_limit("1-00:00:00") == 1440
    assert parse_time_limit("2:30:00") == 150
    assert parse_time_limit("30:00") == 30
    assert parse_time_limit("infinite") is None


@pytest.mark.parametrize(
    "site_override",
    [
        "cluster.gres_types.a100_40=ampere-small",
        "+cluster.gres_types.a100_40=ampere-small",
        "cluster.gres_types={a100_40: ampere-small}",
    ],
)
def test_gpu_auto_on_a_login_node_reads_the_sites_gres_names(monkeypatch, site_override):
    """A site that calls its A100 40 GB 'ampere-small': with its mapping on the command line, gpu=auto picks
    a100_40 (it used to ignore cluster.gres_types and fall back to the default profile)."""
    monkeypatch.delenv("SLURM_CONF", raising=False)  # when no controller answers, cluster.gpu_type is the card
    argv = ["cluster=slurm", "cluster.gpu_type=ampere-small", site_override, "launch.sweep_id=x"]
    resolved = resolve_auto_choices(argv)
    assert "gpu=a100_40" in resolved
    # the reason names the type (and where it came from: the partition when a dev cluster answers, else the hint)
    assert any("ampere-small" in arg for arg in resolved if arg.startswith("gpu.selected_by="))
    # without the mapping no profile is that card: said, not planned on the default profile's GPU type
    with pytest.raises(UserError, match=r"the GPU type 'ampere-small' of cluster.gpu_type is no profile's"):
        resolve_auto_choices(["cluster=slurm", "cluster.gpu_type=ampere-small", "launch.sweep_id=x"])


@pytest.mark.parametrize("gpu", NEW_PROFILES)
def test_new_profiles_compose_pass_verl_checks_and_fit_the_default_7b_run(gpu, tmp_path: Path):
    cfg = compose_config(f"gpu={gpu}")
    assert cfg.gpu.name == gpu and cfg.llm.name == "qwen2_5_7b"
    plan = make_plan(cfg, cpu_facts(), [f"gpu={gpu}"], working_dir=tmp_path, python="python")
    validate(cfg, plan, cpu_facts())  # ours, then verl's own
    verdict = preflight.check_plan(cfg, plan, {})
    assert verdict.fits, verdict.misfit
    # a profile sets its facts and the hardware knobs, nothing else (the rule test_compose keeps for the others)
    ours = flatten(OmegaConf.to_container(cfg, resolve=False))
    default = flatten(OmegaConf.to_container(compose_config("gpu=a100_80"), resolve=False))
    stray = {key for key in diff_keys(ours, default) if not key.startswith("gpu.")} - HARDWARE_KNOBS - NAME_KEYS
    assert not stray, f"{gpu} changes non-hardware keys: {sorted(stray)}"


def test_every_profile_states_its_hardware_figures():
    for name, facts in PROFILES.items():
        assert facts["interconnect"] in ("nvlink", "pcie"), name
        assert facts["nvml_names"] and facts["gres_type"], name
        assert 0 < facts["nccl_gib_per_communicator"] < 4, name
        assert facts["usable_gib"] < 200 and facts["bf16_tflops"] > 100 and facts["mem_bandwidth_gbs"] > 500, name


def test_dry_run_of_each_new_profile_plans_and_fits(tmp_path: Path):
    """The CLI end to end, one sweep over the new profiles: each plans the 7B default and the preflight passes."""
    result = run_cli(f"gpu={','.join(NEW_PROFILES)}", "launch.dry_run=json", "-m", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    plans = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert sorted(plan["gpu_profile"] for plan in plans) == sorted(NEW_PROFILES)
    for plan in plans:
        assert plan["llm"]["name"] == "qwen2_5_7b" and plan["preflight"]["fits"], plan["gpu_profile"]


def test_gpu_auto_on_a_partition_whose_gpu_type_no_profile_knows_says_so(monkeypatch):
    """It had fallen back to the default profile, which then asked SLURM for a type the partition lacks: the
    refusal blamed gpu=a100_80, a profile the user never chose."""
    from launch import auto
    from launch.facts import PartitionFacts

    monkeypatch.setattr(auto, "query_partition", lambda name: PartitionFacts("gpu", 64, 500.0, 8, "tesla", None, 2))
    with pytest.raises(UserError, match=r"^gpu=auto: the GPU type 'tesla' of partition gpu is no profile's \(a100_40"):
        auto.choose_gpu(["cluster=slurm"], "slurm")
    known = PartitionFacts("gpu", 64, 500.0, 8, "a40", None, 2)
    monkeypatch.setattr(auto, "query_partition", lambda name: known)
    assert auto.choose_gpu(["cluster=slurm"], "slurm").profile == "a40"
