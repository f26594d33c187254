"""Sweeps under backend=megatron: each job deletes its own gpu profile's FSDP knobs, so profiles that set different
ones (a40's fused AdamW, h100's none), profiles that all set one the default profile lacks, and a sweep over the
backend itself plan every job exactly as it plans alone. And a sweep's refusal names the job it refuses."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from conftest import run_cli, run_here
from test_sweep_planning import FORKED, SWEEP_ID, run_files

from launch.auto import fsdp_knob_deletions, without_fsdp_knobs
from launch.errors import UserError
from launch.rundir import PLAN_FILE

SKIP = "launch.skip_checks=[model,data,files]"
FUSED = "actor_rollout_ref.actor.optim.override_optimizer_config.fused"  # set by a40, a100_40, a6000, l40s
FSDP_CONFIGS = ("actor_rollout_ref.actor.fsdp_config", "actor_rollout_ref.ref.fsdp_config")  # set by every profile
TP = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size"


def last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


def test_a_single_run_deletes_its_profiles_fsdp_knobs_on_the_command_line_a_sweep_in_each_job():
    single = ["backend=megatron", "gpu=a40"]
    deleted = without_fsdp_knobs(single, multirun=False)
    assert deleted == [*single, *(f"~{key}" for key in sorted([FUSED, *FSDP_CONFIGS]))]
    assert fsdp_knob_deletions(deleted) == []  # planning the single run deletes nothing more
    swept = ["backend=megatron", "gpu=a40,h100"]
    assert without_fsdp_knobs(swept, multirun=True) == swept
    assert fsdp_knob_deletions(["backend=megatron", "gpu=h100"]) == [f"~{key}" for key in FSDP_CONFIGS]
    assert fsdp_knob_deletions(["backend=fsdp", "gpu=a40"]) == fsdp_knob_deletions(["gpu=a40"]) == []


@pytest.mark.parametrize("gpus", ["a40,a100_40", "a40,h100"])
def test_an_fsdp_key_typed_under_a_megatron_sweep_is_refused_whichever_profile_sets_it(gpus):
    with pytest.raises(UserError, match=f"^{FUSED} is an FSDP key"):
        without_fsdp_knobs(["backend=megatron", f"gpu={gpus}", f"{FUSED}=false"], multirun=True)


@pytest.mark.slow
@pytest.mark.parametrize(
    "swept",
    [
        # both set fused AdamW, which gpu=auto's profile (what Hydra composes a sweep's master config with) lacks
        ("gpu=a40,a100_40",),
        # a40 sets fused AdamW, h100 does not; each model with a TP that divides its heads (as planned alone)
        ("gpu=a40,h100", "llm=qwen2_5_7b,qwen2_5_3b", "algo=verl", f"{TP}=2"),
        ("backend=fsdp,megatron", "gpu=a40"),  # FSDP keeps the knobs, Megatron deletes them
    ],
    ids=["same-knobs", "different-knobs", "backends"],
)
def test_every_job_of_a_megatron_sweep_is_planned_as_it_is_alone(tmp_path: Path, swept: tuple[str, ...]):
    common = (SKIP, SWEEP_ID, "launch.dry_run=json")
    backend = () if swept[0].startswith("backend=") else ("backend=megatron",)
    sweep = run_cli(*backend, *swept, *common, "-m", cwd=tmp_path, env=FORKED)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    lines = [json.loads(line) for line in sweep.stdout.splitlines()]
    assert len(lines) == math.prod(len(arg.split("=", 1)[1].split(",")) for arg in swept)
    in_sweep = {line["run_id"]: (line, run_files(Path(line["run_dir"]))) for line in lines}
    shutil.rmtree(Path(lines[0]["run_dir"]).parent)
    for run_id, (line, files) in in_sweep.items():
        # the user's own choices for this job, as typed (not the job's overrides, which hold the deletions)
        mine = [next(o for o in line["overrides"] if o.startswith(arg.split("=")[0] + "=")) for arg in swept]
        alone = run_here(*backend, *mine, *common, cwd=tmp_path)
        assert alone.returncode == 0, alone.stderr[-3000:]
        plan = json.loads(alone.stdout)
        assert plan["run_id"] == run_id, (mine, plan["overrides"], line["overrides"])
        assert {**plan, "job_name": ""} == {**line, "job_name": ""}, mine
        assert run_files(Path(plan["run_dir"])) == files, mine
        actor = plan["verl"]["actor_rollout_ref"]["actor"]
        if "backend=fsdp" not in mine:
            assert "fsdp_config" not in actor and "fused" not in (actor["optim"].get("override_optimizer_config") or {})
        else:
            assert "fsdp_config" in actor


@pytest.mark.slow
@pytest.mark.parametrize(
    "sweep, job, env",
    [
        (  # qwen2_5_0_5b's 14 heads do not split over TP 4 (nor 3b's 2 KV heads: refused after it)
            ("backend=megatron", "algo=verl", "gpu=h100", "llm=qwen2_5_7b,qwen2_5_0_5b,qwen2_5_3b", f"{TP}=4"),
            ("llm=qwen2_5_0_5b",),
            {},
        ),
        (  # the refused job (third) is planned in a forked process; its line names the gpu too
            ("actor_rollout_ref.actor.optim.lr=1e-6,-1", "gpu=a40,h100"),
            ("actor_rollout_ref.actor.optim.lr=-1", "gpu=a40"),
            FORKED,
        ),
    ],
    ids=["heads", "lr-forked"],
)
def test_a_sweeps_refusal_names_the_job_it_refuses_and_the_message_alone_is_unchanged(
    tmp_path: Path, sweep: tuple[str, ...], job: tuple[str, ...], env: dict[str, str]
):
    swept_keys = {arg.split("=")[0] for arg in job}
    common = (SKIP, "launch.dry_run=json")
    refused = run_cli(*sweep, *common, "-m", cwd=tmp_path, env=env)
    assert refused.returncode == 2 and refused.stdout == "", refused.stderr[-3000:]
    assert not any(tmp_path.iterdir()), [str(p) for p in tmp_path.rglob("*")]  # nothing written, the sweep's dir gone
    alone_args = [arg for arg in sweep if arg.split("=")[0] not in swept_keys]
    alone = run_here(*alone_args, *job, *common, cwd=tmp_path)
    assert alone.returncode == 2
    said = last_line(alone.stderr).removeprefix("rlaunch: error: ")
    assert said != last_line(alone.stderr) and not said.startswith("job ")
    named = " ".join(value for value in job if not said.startswith(value))  # a value the message starts with: once
    assert last_line(refused.stderr) == f"rlaunch: error: job {named}: {said}"
    assert not list(tmp_path.rglob(PLAN_FILE))
