"""A partition with no GPUs at all is refused naming the partitions that have them: the refusal had said
`set trainer.n_gpus_per_node<=0 and raise trainer.nnodes`, which no run can follow (a probe's job on a dev cluster
without GPUs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import compose_config, cpu_facts

from launch import validate
from launch.errors import UserError
from launch.facts import PartitionFacts
from launch.plan import make_plan

DEBUG = PartitionFacts("debug", 128, 1000.0, 0, None, None, 2)
GPU = PartitionFacts("gpu", 128, 1000.0, 8, None, None, 2)


def refusal(monkeypatch: pytest.MonkeyPatch, listed: dict[str, PartitionFacts]) -> str:
    # sinfo's answer for each partition it lists (query_partition reads it; no SLURM runs in this test)
    monkeypatch.setattr(validate, "query_partition", listed.get)
    overrides = ["cluster=slurm", "gpu=a100_80", "trainer.n_gpus_per_node=1"]
    cfg = compose_config(*overrides)
    facts = cpu_facts(partition=DEBUG, partitions=tuple(listed))
    with pytest.raises(UserError) as refused:
        validate.check_cluster(cfg, make_plan(cfg, facts, overrides, Path("/tmp"), "python").resources, facts)
    return str(refused.value)


def test_a_partition_without_gpus_names_the_ones_with_gpus(monkeypatch: pytest.MonkeyPatch):
    said = refusal(monkeypatch, {"debug": DEBUG, "gpu": GPU})
    assert said.startswith("trainer.n_gpus_per_node=1 but partition debug has no GPUs")
    assert "choose one with GPUs: gpu (8 per node) (cluster.partition=...)" in said
    assert "<=0" not in said and "\n" not in said


def test_where_no_partition_has_gpus_it_says_so(monkeypatch: pytest.MonkeyPatch):
    assert "sinfo lists no partition with GPUs" in refusal(monkeypatch, {"debug": DEBUG})
