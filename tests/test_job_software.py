"""The job's software as a cluster fact (cluster.flash_attn, cluster.engine_version), LoRA planned without an engine
installed, and the typical-length figures beside the worst-case verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import compose_config, cpu_facts, run_cli

from launch import preflight
from launch.job_software import JobSoftware
from launch.plan import make_plan
from launch.verdict import Verdict


def verdict_for(*overrides: str, packages: dict | None = None) -> Verdict:
    cfg = compose_config(*overrides)
    plan = make_plan(cfg, cpu_facts(), list(overrides), Path("/tmp"), "python")
    return preflight.check_plan(cfg, plan, packages or {})


def software_for(*overrides: str, packages: dict | None = None) -> JobSoftware:
    notes = verdict_for(*overrides, packages=packages).job_software
    assert notes is not None
    return notes.software


def test_auto_takes_the_planning_venv_and_says_which():
    with_flash = software_for("gpu=h100", packages={"flash-attn": "2.8.3"})
    without = software_for("gpu=h100")
    assert with_flash.flash_attn and not without.flash_attn
    assert "flash-attn 2.8.3 where this was planned" in with_flash.flash_attn_source
    assert "set cluster.flash_attn=true" in without.flash_attn_source


def test_the_job_environment_overrides_the_planning_machine():
    """A CPU login node without flash-attn planning for verl's image: the logits cost half."""
    unfused = ("gpu=h100", "llm=qwen2_5_1_5b", "actor_rollout_ref.model.use_fused_kernels=false")
    told = verdict_for(*unfused, "cluster.flash_attn=true")
    auto = verdict_for(*unfused)
    assert told.job_software is not None and told.job_software.software.flash_attn
    assert told.job_software.software.flash_attn_source == "cluster.flash_attn=true"
    assert told.phases["training"].peak_gib < auto.phases["training"].peak_gib
    refused = software_for("gpu=h100", "cluster.flash_attn=true", "+cluster.env.VERL_DISABLE_FLASH_ATTN_CE='1'")
    assert not refused.flash_attn


def test_engine_version_decides_whether_the_sleeping_engine_holds_host_ram():
    new = verdict_for("gpu=h100", "cluster.engine_version=0.18.1")
    unknown = verdict_for("gpu=h100")
    assert new.job_software is not None and unknown.job_software is not None
    assert not new.job_software.software.engine_weights_in_host_ram
    assert unknown.job_software.software.engine_weights_in_host_ram
    assert new.host_ram_gib_per_node < unknown.host_ram_gib_per_node


def test_a_bad_switch_is_one_line_and_exit_2(tmp_path: Path):
    result = run_cli("cluster.flash_attn=maybe", "launch.dry_run=true", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "rlaunch: error: cluster.flash_attn=maybe is not one of auto, true, false: say whether the job's environment "
        "has it"
    ]


def test_lora_plans_without_vllm_and_the_plan_says_the_check_was_skipped(tmp_path: Path):
    pytest.importorskip("verl")
    result = run_cli("gpu=h100", "actor_rollout_ref.model.lora_rank=32", "launch.dry_run=json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    notes = json.loads(result.stdout)["preflight"]["job_software"]["notes"]
    assert any("LoRA-rank check skipped: vllm is not installed" in note for note in notes)


def test_typical_lengths_lower_a_fixed_micro_batch_but_not_a_full_token_budget():
    fixed = verdict_for(
        "gpu=a100_80",
        "llm=qwen2_5_1_5b",
        "actor_rollout_ref.actor.use_dynamic_bsz=false",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
    )
    assert fixed.typical is not None
    assert fixed.typical.peaks_gib["training"] < fixed.phases["training"].peak_gib
    assert fixed.typical.sequence_tokens == int(0.5 * (4096 + 8192))
    budget = verdict_for("gpu=a100_80", "llm=qwen2_5_1_5b")
    assert budget.typical is not None
    assert budget.typical.peaks_gib["training"] == pytest.approx(budget.phases["training"].peak_gib, abs=0.05)
