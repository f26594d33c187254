"""verl's checkpoints as the plan sees them: a mode's checkpoint cadence in minutes, what the checkpoints take on disk
against the free space (the `disk` readiness check, a sweep's runs together), measured against verl's own checkpoint
manager, and the job's removal of earlier attempts' checkpoints that verl's retention forgets."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import compose_config
from test_readiness import dry_run, on_partition, submission, tiny_run
from tiny_assets import make_tiny_model

from launch import readiness
from launch.errors import UserError
from launch.facts import DiskSpace, architecture_of
from launch.job import prune_earlier_attempts
from launch.memory import Architecture
from launch.report import failures
from launch.report.failures.fixes import FixContext, with_plan_fix
from launch.run import plan_job
from launch.rundir import gib_text
from launch.steptime import STARTUP_MIN, STEP_TIME_MARGIN

GIB = 1024**3


def change_of(plan, key: str):
    return next(change for change in plan.changed_from_verl if change.key == key)


# --- the mode's cadence in minutes ----------------------------------------------------------------------------------


def test_a_modes_checkpoint_cadence_in_minutes_becomes_the_save_freq_at_the_plans_step_time(tmp_path: Path):
    base = [*tiny_run(tmp_path), "trainer.total_training_steps=null"]
    standard = dry_run(tmp_path, *[o for o in base if o != "mode=quick_test"], "mode=standard")
    assert standard.time is not None
    every_min = min(120, (1440 - STARTUP_MIN) / (1 + STEP_TIME_MARGIN))
    assert standard.verl["trainer"]["save_freq"] == max(1, int(every_min * 60 // standard.time.step_s))
    change = change_of(standard, "trainer.save_freq")
    assert change.by == (
        "mode=standard: a checkpoint every 120 min (mode.checkpoint_every_min=120) "
        f"at {standard.time.step_s:.0f} s/step"
    )

    # a budget shorter than the cadence: the checkpoint still comes within an attempt, with the step model's margin
    short = dry_run(tmp_path, *[o for o in base if o != "mode=quick_test"], "mode=standard", "mode.time_budget_min=60")
    assert short.verl["trainer"]["save_freq"] == max(1, int((60 - STARTUP_MIN) / 1.35 * 60 // short.time.step_s))
    assert change_of(short, "trainer.save_freq").by.startswith("mode=standard: a checkpoint every 37 min")

    # the user's own save_freq wins; a mode without a cadence keeps its steps
    own = dry_run(tmp_path, *[o for o in base if o != "mode=quick_test"], "mode=standard", "trainer.save_freq=7")
    assert own.verl["trainer"]["save_freq"] == 7  # verl's own composition of the user's keys: no change listed
    assert not [change for change in own.changed_from_verl if change.key == "trainer.save_freq"]
    quick = dry_run(tmp_path, *base)
    assert quick.verl["trainer"]["save_freq"] == 5 and change_of(quick, "trainer.save_freq").by == "mode=quick_test"


def test_a_step_longer_than_the_cadence_saves_every_step(tmp_path: Path):
    """The case the cadence is for: a 3B model with 8k-token responses on one A40 takes minutes a step, and the
    mode's 20 steps would have put the first checkpoint hours into the attempt."""
    overrides = [o for o in tiny_run(tmp_path, per_source=400) if not o.startswith("actor_rollout_ref.model.path")]
    overrides = [o for o in overrides if o != "mode=quick_test"]
    overrides += ["llm=qwen2_5_3b", "data.max_response_length=8192", "mode=standard", "launch.preflight=warn"]
    overrides += ["trainer.total_training_steps=null", "mode.checkpoint_every_min=5", "launch.skip_checks=[hub_cache]"]
    plan = dry_run(tmp_path, *overrides)
    assert plan.time is not None and plan.time.step_s > 300
    assert plan.verl["trainer"]["save_freq"] == 1
    assert plan.predicted_time is not None and plan.predicted_time.first_checkpoint_step == 1


# --- what the checkpoints take on disk ------------------------------------------------------------------------------


def test_checkpoints_on_disk_at_once_follow_verls_retention_across_requeues():
    assert readiness.checkpoint_saves(30, 20) == 2 and readiness.checkpoint_saves(40, 20) == 2
    assert readiness.checkpoint_saves(30, -1) == 0
    assert readiness.checkpoints_kept(10, None, 3) == 10  # verl's default keeps every save
    assert readiness.checkpoints_kept(10, 1, 1) == 2  # the old one goes only once the new one is written
    assert readiness.checkpoints_kept(10, 3, 1) == 3  # room is made before saving
    # a requeued attempt's verl forgets the previous attempt's: the job removes older ones before it starts, so at
    # most what one attempt left and what this one keeps
    assert readiness.checkpoints_kept(10, 3, 4) == 6 and readiness.checkpoints_kept(10, 1, 4) == 3
    assert readiness.checkpoints_kept(4, 3, 4) == 4


VERL_SAVE = """
import json, os, sys, torch, torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

dist.init_process_group("gloo")
model_dir, out, contents, action = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
fsdp = FSDP(model, device_id=torch.device("cpu"), use_orig_params=True)
optimizer = torch.optim.AdamW(fsdp.parameters(), lr=1e-3)
fsdp(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
optimizer.step()  # AdamW's moments exist only after a step, as in any checkpoint verl writes
manager = FSDPCheckpointManager(
    model=fsdp, optimizer=optimizer, lr_scheduler=None, processing_class=AutoTokenizer.from_pretrained(model_dir),
    checkpoint_config={"save_contents": contents, "load_contents": contents},
)
actor = os.path.join(out, "global_step_1", "actor")
if action == "load":  # as a resumed run's worker does
    manager.load_checkpoint(actor)
else:
    manager.save_checkpoint(actor, global_step=1)
dist.destroy_process_group()
"""


def test_the_predicted_checkpoint_is_what_verls_checkpoint_manager_writes(tmp_path: Path):
    """verl 0.9.1's own FSDPCheckpointManager on two gloo ranks, with its default save_contents: each writes its
    shard of the fp32 weights and of AdamW's two moments: their sum is what the disk check counts for one save.
    (Its hf_model, a bf16 copy rank 0 writes, takes a path that needs a GPU: counted at 2 bytes a parameter, the
    dtype verl's code gives it.)"""
    contents = ["model", "optimizer", "extra"]
    model = make_tiny_model(tmp_path / "model", weights=True, hidden=256, layers=4)
    (tmp_path / "save.py").write_text(VERL_SAVE)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    command += [str(tmp_path / "save.py"), str(model), str(tmp_path / "out"), json.dumps(contents), "save"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    actor = tmp_path / "out" / "global_step_1" / "actor"
    shards = sorted(path.name for path in actor.glob("*_world_size_2_rank_*.pt"))
    assert len(shards) == 6, shards  # model, optim and extra state of both ranks
    written = sum(path.stat().st_size for path in actor.rglob("*") if path.is_file())
    arch = Architecture.from_llm(architecture_of(json.loads((model / "config.json").read_text())))
    predicted = readiness.role_checkpoint_bytes(arch, {"checkpoint": {"save_contents": contents}}, 0, 4)
    # a tiny model's pickles, tokenizer and RNG state add a few per cent; at billions of parameters, nothing
    assert predicted <= written <= 1.1 * predicted, (written, predicted)
    # resuming it: verl loads model_world_size_<its own world size>_rank_<r>.pt, so only a 2-GPU run can
    resume = ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={actor.parent}"]
    on_eight = dry_run(tmp_path / "eight", *tiny_run(tmp_path / "eight"), *resume, "trainer.n_gpus_per_node=8")
    refusal = "was saved by 2 ranks (actor/model_world_size_2_rank_*.pt) and this run has 8 GPUs"
    assert any(refusal in warning for warning in on_eight.warnings), on_eight.warnings
    assert f"--local_dir {actor} --target_dir <dir>" in " ".join(on_eight.warnings)
    on_two = dry_run(tmp_path / "two", *tiny_run(tmp_path / "two"), *resume, "trainer.n_gpus_per_node=2")
    assert not any("trainer.resume_from_path" in warning for warning in on_two.warnings), on_two.warnings
    # and what verl says when it is loaded on another world size anyway (one rank here), and what rlaunch makes of it
    command[command.index("--nproc-per-node=2")] = "--nproc-per-node=1"
    command[-1] = "load"
    loaded = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert loaded.returncode != 0 and "model_world_size_1_rank_0.pt" in loaded.stderr
    failure = failures.classify(loaded.stderr)
    assert failure.kind == "config_error" and f"--local_dir {actor} --target_dir <dir>" in failure.fix


def with_free_space(free_gib: float, filesystem: int = 1):
    def gather(*args: object, **kwargs: object) -> object:
        return replace(on_partition(*args, **kwargs), checkpoint_disk=DiskSpace("/scratch", free_gib, filesystem))

    return gather


def test_checkpoints_that_would_fill_the_disk_are_refused_naming_the_retention_that_fits(tmp_path: Path):
    overrides = [o for o in tiny_run(tmp_path, per_source=400) if not o.startswith("actor_rollout_ref.model.path")]
    overrides += ["llm=qwen2_5_3b", "launch.preflight=warn", "launch.skip_checks=[hub_cache]"]
    overrides += ["trainer.total_training_steps=40", "trainer.save_freq=5", "cluster.max_requeues=60"]
    planned = submission(tmp_path, *overrides, gather=with_free_space(1e6))
    disk, time = planned.readiness.disk, planned.predicted_time
    assert disk is not None and time is not None and disk.saves == 8 and disk.kept == 8
    assert disk.attempts == time.attempts  # SLURM requeues; a local run has one attempt, whatever its length
    local = dry_run(tmp_path, *overrides).readiness
    assert local is not None and local.disk is not None and local.disk.attempts == 1
    one = disk.one_gib
    assert one == pytest.approx(3.09e9 * 12 / GIB, rel=0.05)  # Qwen2.5-3B: fp32 weights + AdamW's moments
    kept_with_2 = readiness.checkpoints_kept(8, 2, time.attempts)
    free = one * kept_with_2 + 0.5 * one  # two kept fit, three do not
    with pytest.raises(UserError) as refused:
        submission(tmp_path, *overrides, gather=with_free_space(free))
    message = str(refused.value)
    assert message.startswith("verl's checkpoints would fill /scratch: at most 8 on disk at once")
    # what verl itself would do: two fit, the third save (step 15 at save_freq 5) runs out of space
    assert "(verl's save number 3, at step 15, would fail with the disk full)" in message
    assert "set trainer.max_actor_ckpt_to_keep=2 " in message and "launch.skip_checks=[disk]" in message
    assert submission(tmp_path, *overrides, "trainer.max_actor_ckpt_to_keep=2", gather=with_free_space(free))
    assert submission(tmp_path, *overrides, "launch.skip_checks=[hub_cache,disk]", gather=with_free_space(free))
    with pytest.raises(UserError, match=r"even trainer.max_actor_ckpt_to_keep=1 keeps up to"):
        submission(tmp_path, *overrides, gather=with_free_space(one / 2))
    # a dry run shows it, and what the plan says
    shown = plan_job(
        compose_config("cluster=slurm", f"cluster.shared_dir={tmp_path}", "launch.dry_run=true", *overrides),
        overrides,
        gather=with_free_space(free),
    )
    assert any(w.startswith("not ready: verl's checkpoints would fill /scratch") for w in shown.warnings)
    from launch.render import render

    assert f"  disk          checkpoints {gib_text(one)} each, 8 save(s), at most 8 on disk" in render(shown)


def test_a_sweeps_runs_share_their_filesystems_free_space(tmp_path: Path):
    overrides = [o for o in tiny_run(tmp_path, per_source=400) if not o.startswith("actor_rollout_ref.model.path")]
    overrides += ["llm=qwen2_5_3b", "launch.preflight=warn", "launch.skip_checks=[hub_cache]"]
    overrides += ["trainer.total_training_steps=40", "trainer.save_freq=5", "cluster.max_requeues=60"]
    alone = submission(tmp_path, *overrides, gather=with_free_space(1e6)).readiness.disk
    free = alone.needed_gib * 1.5  # each fits alone
    first = submission(tmp_path, *overrides, gather=with_free_space(free))
    second = submission(tmp_path, *overrides, "actor_rollout_ref.actor.optim.lr=2e-6", gather=with_free_space(free))
    with pytest.raises(UserError, match=r"the sweep's 2 runs' checkpoints would fill /scratch: .* set trainer.max"):
        readiness.refuse([first, second])
    elsewhere = submission(
        tmp_path, *overrides, "actor_rollout_ref.actor.optim.lr=2e-6", gather=with_free_space(free, 2)
    )
    readiness.refuse([first, elsewhere])  # another filesystem: nothing shared


# --- the job keeps what verl's retention would have kept ------------------------------------------------------------


def test_a_requeued_attempt_removes_the_checkpoints_verls_retention_forgot(tmp_path: Path):
    checkpoints = tmp_path / "checkpoints"
    for step in (10, 20, 30, 40):
        for role in ("actor", "critic"):
            (checkpoints / f"global_step_{step}" / role).mkdir(parents=True)
            (checkpoints / f"global_step_{step}" / role / "model.pt").write_text("x")
    # step 40's save was cut short by the preemption: verl resumes from 30, and writes 40 again
    (checkpoints / "latest_checkpointed_iteration.txt").write_text("30")
    trainer = {"default_local_dir": str(checkpoints), "max_actor_ckpt_to_keep": 2, "max_critic_ckpt_to_keep": None}
    plan = SimpleNamespace(verl={"trainer": trainer})
    assert prune_earlier_attempts(plan) == ["global_step_10/actor"]  # type: ignore[arg-type]
    assert sorted(p.parent.name for p in checkpoints.glob("global_step_*/actor")) == [
        "global_step_20",
        "global_step_30",
        "global_step_40",
    ]
    assert len(list(checkpoints.glob("global_step_*/critic"))) == 4  # null: verl keeps every one
    trainer["max_actor_ckpt_to_keep"] = 1
    assert prune_earlier_attempts(plan) == ["global_step_20/actor"]  # type: ignore[arg-type]
    assert (checkpoints / "global_step_30" / "actor" / "model.pt").is_file()
    # a first attempt (nothing to resume from) removes nothing
    (checkpoints / "latest_checkpointed_iteration.txt").unlink()
    assert prune_earlier_attempts(plan) == []  # type: ignore[arg-type]


# --- a run that filled its disk anyway ------------------------------------------------------------------------------

FULL_TMPFS = Path(__file__).parent / "data" / "failures" / "disk_full" / "devcluster-verl-checkpoint-full-tmpfs.log"


def test_a_checkpoint_save_that_filled_the_disk_is_named_with_the_retention_that_fits(tmp_path: Path):
    """torch 2.13's save into a full filesystem names no errno (the corpus' dev run): the doctor names the disk, what
    the run's checkpoints take, and, from the plan's disk record, the retention that fits what planning saw."""
    log = "\n".join(line for line in FULL_TMPFS.read_text().splitlines() if not line.startswith("# "))
    failure = failures.classify(log)
    assert failure.kind == "disk_full" and "basic_ios::clear: iostream error" in failure.evidence[0]
    assert failure.fix.startswith("a checkpoint save ran out of disk under /tmp/smallfs/checkpoints")

    overrides = [o for o in tiny_run(tmp_path, per_source=400) if not o.startswith("actor_rollout_ref.model.path")]
    overrides += ["llm=qwen2_5_3b", "launch.preflight=warn", "launch.skip_checks=[hub_cache]"]
    overrides += ["trainer.total_training_steps=40", "trainer.save_freq=5", "cluster.max_requeues=60"]
    plan = submission(tmp_path, *overrides, gather=with_free_space(1e6))
    disk = plan.readiness.disk
    assert disk is not None and (disk.saves, disk.kept) == (8, 8)
    # planning saw room for 3 of them (a user who skipped the check): the 4th save filled the filesystem
    plan = replace(plan, readiness=replace(plan.readiness, disk=replace(disk, free_gib=3.5 * disk.one_gib)))
    fixed = with_plan_fix(failure, FixContext(plan), log)
    assert f"verl's checkpoints take {gib_text(disk.one_gib)} each and this run keeps up to 8 of its 8" in fixed.fix
    assert "trainer.max_actor_ckpt_to_keep=3 fits what planning saw" in fixed.fix, fixed.fix
    assert fixed.details["checkpoints_kept"] == 8 and fixed.details["filled"] == "checkpoints"
    # they fitted what planning saw: other writes took the space, and the fix says so
    roomy = replace(plan, readiness=replace(plan.readiness, disk=replace(disk, free_gib=100 * disk.one_gib)))
    assert "other writes took the space since" in with_plan_fix(failure, FixContext(roomy), log).fix
