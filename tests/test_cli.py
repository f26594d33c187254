"""launch/run.py as a user runs it: dry runs (readable and JSON, single and -m), `make run`'s default, Hydra's own
flags, verl's own entry point reading the plan's config, and every bad input as one line with the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli


def test_dry_run_json_prints_exactly_one_plan_object(tmp_path: Path):
    result = run_cli("gpu=a100_80", "algo=mtl_pcgrad", "launch.dry_run=json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, "stdout must hold only the JSON plan"
    plan = json.loads(lines[0])
    assert set(plan["resources"]) >= {"nodes", "gpus_per_node", "cpus_per_task", "mem_gb", "time_min"}
    assert plan["gpu_profile"] == "a100_80" and plan["run_id"] and plan["run_dir"]
    assert plan["verl"]["algorithm"]["adv_estimator"] == "grpo"
    assert plan["verl"]["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]["RLAUNCH_PCGRAD_ENABLED"] == "1"
    run_dir = Path(plan["run_dir"])
    assert run_dir.is_relative_to(tmp_path)
    for name in ("plan.json", "plan.txt", "verl_config.yaml", "rlaunch_config.yaml"):
        assert (run_dir / name).is_file(), name


def test_multirun_dry_run_json_prints_one_line_per_job(tmp_path: Path):
    result = run_cli("gpu=a40,h100", "algo=guru_baseline,mtl_pcgrad", "launch.dry_run=json", "-m", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    plans = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(plans) == 4
    assert {(p["gpu_profile"], p["verl"]["trainer"]["experiment_name"].split("-")[0]) for p in plans} == {
        ("a40", "guru_baseline"),
        ("a40", "mtl_pcgrad"),
        ("h100", "guru_baseline"),
        ("h100", "mtl_pcgrad"),
    }
    assert len({p["run_id"] for p in plans}) == 4 and len({p["sweep_id"] for p in plans}) == 1
    a40 = next(p for p in plans if p["gpu_profile"] == "a40")
    h100 = next(p for p in plans if p["gpu_profile"] == "h100")
    assert a40["resources"]["cpus_per_task"] < h100["resources"]["cpus_per_task"]
    assert a40["verl"]["actor_rollout_ref"]["rollout"]["gpu_memory_utilization"] < 0.5


def test_default_run_without_gpu_plans_and_says_so(tmp_path: Path):
    """What `make run` does on a machine like this one: no SLURM -> local, no GPU -> plan only, exit 0."""
    result = run_cli(cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    said = "Not running: cluster=auto: no SLURM controller answers here (sinfo) -> local and no GPU on this machine"
    assert said in result.stdout
    assert "To run it: the same command on a GPU machine, or from a SLURM login node" in result.stdout
    assert "default profile a100_80" in result.stdout
    assert "verl.trainer.main_ppo" in result.stdout


def test_readable_dry_run_shows_profile_resources_command_and_ids(tmp_path: Path):
    result = run_cli("gpu=a40", "launch.dry_run=true", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for expected in ("gpu profile   a40", "--gres=gpu:8", "--cpus-per-task=64", "verl command", "run dir", "run "):
        assert expected in out, expected
    assert "Not running" not in out


def test_cfg_job_shows_the_resolved_gpu_profile(tmp_path: Path):
    result = run_cli("--cfg", "job", "-p", "gpu", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "name: a100_80" in result.stdout and "no GPU detected" in result.stdout


def test_verl_own_entry_point_reads_the_planned_config(tmp_path: Path):
    """The plan's command hands verl a dumped config; verl's own Hydra app must compose it unchanged."""
    plan = json.loads(run_cli("gpu=a40", "launch.dry_run=json", cwd=tmp_path).stdout)
    command = [sys.executable, *plan["driver_command"][1:], "--cfg", "job"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "gpu_memory_utilization: 0.45" in result.stdout and "adv_estimator: grpo" in result.stdout


BAD_INPUTS = [
    (
        ["gpu=a50"],
        "unknown gpu 'a50' (did you mean 'a40'?): choose one of a100_40, a100_80, a40, a6000, auto, b200, h100, h20, "
        "h200",
    ),
    (["algo=ppo"], "unknown algo 'ppo'"),
    (
        ["actor_rollout_ref.actor.ppo_micro_batch_sise_per_gpu=4"],
        "unknown key 'actor_rollout_ref.actor.ppo_micro_batch_sise_per_gpu' "
        "(did you mean 'ppo_micro_batch_size_per_gpu'?)",
    ),
    (["gpu.usable_gb=40"], "unknown key 'gpu.usable_gb' (did you mean 'gpu.usable_gib'?): rlaunch has no such setting"),
    # our open tables take any key, added with + as verl's own new keys are
    (
        ["cluster.env.NCCL_DEBUG=INFO"],
        "unknown key 'cluster.env.NCCL_DEBUG': fix the spelling, or add a new key on purpose with "
        "+cluster.env.NCCL_DEBUG=...",
    ),
    (
        ["algo=rft", "rft.sft.data.max_length=4096"],
        "rft.sft does not set data.max_length of verl's sft_trainer_engine (stage 3's trainer): add a new key on "
        "purpose with +rft.sft.data.max_length=...",
    ),
    (["gpu.usable_gib=lots"], "gpu.usable_gib=lots: must be a number"),
    (
        ["data.train_batch_size=500", "trainer.use_v1=false"],  # verl's v1 trainer pads the batch instead
        "data.train_batch_size (500) is not a multiple of "
        "actor_rollout_ref.actor.ppo_mini_batch_size (64): 500 % 64 = 52",
    ),
    (
        ["trainer.n_gpus_per_node=6"],
        "a mini-batch of 1024 sequences (ppo_mini_batch_size 64 x rollout.n 16) does not split over 6 GPUs",
    ),
    (
        ["actor_rollout_ref.actor.use_dynamic_bsz=false", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"],
        "is not a multiple of actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (3)",
    ),
    (
        ["actor_rollout_ref.rollout.name=null"],
        "actor_rollout_ref.rollout.name is not set: choose one of vllm, sglang, trtllm",
    ),
    (["actor_rollout_ref.rollout.name=???"], "actor_rollout_ref.rollout.name is not set"),
    (["actor_rollout_ref.rollout.name=hf"], "actor_rollout_ref.rollout.name=hf is not a verl 0.9 rollout engine"),
    (["actor_rollout_ref.model.path=/nonexistent/model"], "model path '/nonexistent/model' does not exist"),
    (
        ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192"],
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu (8192) cannot hold one sequence",
    ),
    (["launch.dry_run=maybe"], "launch.dry_run=maybe is not one of false, true, json"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_INPUTS, ids=[" ".join(o) for o, _ in BAD_INPUTS])
def test_bad_input_is_one_line_naming_the_fix(tmp_path: Path, overrides, message):
    result = run_cli(*overrides, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    first_line = result.stderr.strip().splitlines()[0]
    assert first_line.startswith("rlaunch: error: "), result.stderr[-2000:]
    assert message in first_line
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.rglob("plan.json")), "nothing is planned, written or submitted on bad input"
