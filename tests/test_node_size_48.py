"""More GPUs on one node than the gpu profile's typical node holds is warned where nothing says what this site's nodes
hold (no partition, no Ray cluster), naming the profile's figure and the keys to set."""

from __future__ import annotations

from pathlib import Path

from conftest import compose_config

from launch.facts import Facts
from launch.plan import make_resources, node_size_warnings


def test_sixteen_h100s_on_one_node_is_warned_with_the_profiles_eight(tmp_path: Path):
    cfg = compose_config("cluster=local", "gpu=h100", "trainer.n_gpus_per_node=16")
    said = node_size_warnings(cfg, Facts(), make_resources(cfg, Facts()))
    assert len(said) == 1 and "a typical h100 node has 8 GPUs (gpu.gpus_per_node)" in said[0], said
    assert "trainer.n_gpus_per_node=8 trainer.nnodes=2" in said[0] and "--mem=4096G" in said[0]
    eight = compose_config("cluster=local", "gpu=h100", "trainer.n_gpus_per_node=8")
    assert not node_size_warnings(eight, Facts(), make_resources(eight, Facts()))
    large = compose_config("cluster=local", "gpu=h100", "trainer.n_gpus_per_node=16", "gpu.gpus_per_node=16")
    assert not node_size_warnings(large, Facts(), make_resources(large, Facts()))
