"""gpu=auto: card -> profile, table-driven; and the real detection on this (GPU-less) machine."""

from __future__ import annotations

import pytest

from launch.auto import resolve_auto_choices
from launch.facts import parse_gres, parse_time_limit
from launch.gpu import DEFAULT_PROFILE, DetectedGpus, choose_profile, detect_gpus, load_profiles, profile_for_gres_type

PROFILES = load_profiles()


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
    ],
)
def test_known_cards_map_to_their_profile(name, total_gib, profile):
    choice = choose_profile(DetectedGpus(name, total_gib, 8, "nvml"), PROFILES)
    assert choice.profile == profile
    assert choice.usable_gib is None
    assert name in choice.reason and "nvml" in choice.reason


def test_unknown_card_gets_largest_profile_not_bigger_with_its_own_memory():
    choice = choose_profile(DetectedGpus("NVIDIA L40S", 44.5, 4, "nvml"), PROFILES)
    assert choice.profile == "a40"  # 44.4 <= 44.5 < 79.x
    assert choice.usable_gib == 44.5
    assert "WARNING" in choice.reason and "no profile describes" in choice.reason


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
    without = resolve_auto_choices(["cluster=slurm", "cluster.gpu_type=ampere-small", "launch.sweep_id=x"])
    assert "gpu=a100_40" not in without
