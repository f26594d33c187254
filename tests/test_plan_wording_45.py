"""The plan as a new user reads it on a machine without SLURM or GPU (helper-45's walkthrough): why cluster=auto chose
local, paths made absolute said as notes rather than warnings, the sbatch options said as what SLURM would get, and
values verl takes but that make no sense (a mini-batch over the batch, a warmup over the whole run) warned with the
numbers, never refused unless verl would fail."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from conftest import run_here
from tiny_assets import guru_rows

from launch.auto import chosen_cluster
from launch.readiness import mini_batches_over_the_batch, warmup_covers_the_run
from launch.render import render
from launch.run import said_with_cluster_choice
from launch.rundir import load_plan

NO_SLURM = "cluster=auto: no SLURM controller answers here (sinfo) -> local"


def without_slurm(tmp_path: Path) -> dict[str, str]:
    """A PATH whose sinfo fails as it does where no controller answers: cluster=auto means local here, whatever
    SLURM the machine running the tests has."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    sinfo = bin_dir / "sinfo"
    sinfo.write_text("#!/bin/sh\necho 'sinfo: fatal: Could not establish a configuration source' >&2\nexit 1\n")
    sinfo.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def guru_copy(tmp_path: Path) -> Path:
    """dataset=guru's layout (train/, test/ of parquet files), as the default run's glob patterns read it: 4 steps
    of the default 512-prompt batch."""
    root = tmp_path / "guru"
    for split, rows in (("train", 512), ("test", 16)):
        (root / split).mkdir(parents=True)
        pd.DataFrame(guru_rows(["math__x"], rows, split)).to_parquet(root / split / "part-0.parquet")
    return root


def planned(tmp_path: Path, result: Any) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(next(tmp_path.rglob("plan.json")).read_text())


def test_make_run_says_why_the_cluster_is_local_notes_resolved_paths_and_what_slurm_would_get(tmp_path: Path):
    root = guru_copy(tmp_path)
    result = run_here(f"dataset.root={root}", cwd=tmp_path, env=without_slurm(tmp_path))
    plan = planned(tmp_path, result)
    out = result.stdout
    assert f"  cluster       local -> plan-only: {NO_SLURM} and no GPU on this machine" in out, out
    assert plan["execution_reason"].startswith(f"{NO_SLURM} and no GPU on this machine")
    assert f"Not running: {NO_SLURM} and no GPU" in out
    # the sbatch options of a run that queues nothing on SLURM are what a SLURM submission would ask for
    assert "= 8 GPUs; on SLURM this would request: --gres=gpu:8 --cpus-per-task=" in out, out
    # the glob patterns resolved to the files verl reads: information, shown as a note and not as a warning
    resolved = f"resolved data.train_files: {root}/train/*.parquet -> 1 file(s)"
    assert f"  note          {resolved}" in out.splitlines(), out
    assert "WARNING       resolved" not in out
    assert resolved in plan["readiness"]["notes"] and resolved not in plan["warnings"]


def test_every_job_of_a_sweep_says_why_the_cluster_is_local_and_the_reason_ends_with_the_invocation(tmp_path: Path):
    """A sweep's jobs are planned by the launcher plugin through launch.run, not the __main__ that resolved auto."""
    result = run_here("gpu=a40,h100", "-m", cwd=tmp_path, env=without_slurm(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    reasons = [json.loads(path.read_text())["execution_reason"] for path in tmp_path.rglob("plan.json")]
    assert len(reasons) == 2 and all(reason.startswith(NO_SLURM) for reason in reasons), reasons
    assert chosen_cluster.reason is None  # a later plan in this process (a test's own plan_job) is told nothing


def test_a_named_cluster_says_nothing_of_auto_and_a_slurm_plan_keeps_its_bare_sbatch_options(tmp_path: Path):
    result = run_here("cluster=local", cwd=tmp_path, env=without_slurm(tmp_path))
    plan = planned(tmp_path, result)
    assert plan["execution_reason"].startswith("cluster=local and no GPU on this machine")
    loaded = load_plan(Path(plan["run_dir"]))
    as_slurm = render(replace(loaded, cluster="slurm"))
    assert "= 8 GPUs; --gres=gpu:8 --cpus-per-task=" in as_slurm and "would request" not in as_slurm


def test_the_cluster_choice_replaces_the_bare_cluster_name_of_every_execution_reason(tmp_path: Path):
    result = run_here("cluster=local", cwd=tmp_path, env=without_slurm(tmp_path))
    plan = load_plan(Path(planned(tmp_path, result)["run_dir"]))
    slurm = replace(plan, cluster="slurm", execution="submit", execution_reason="cluster=slurm: one job array per")
    said = said_with_cluster_choice(slurm, "cluster=auto: sinfo answers here").execution_reason
    assert said == "cluster=auto: sinfo answers here -> slurm: one job array per"
    assert said_with_cluster_choice(plan, None) == plan  # the command line named the cluster


def test_a_mini_batch_over_the_batch_is_warned_under_dynamic_batching_and_refused_by_verl_without(tmp_path: Path):
    over = "actor_rollout_ref.actor.ppo_mini_batch_size=1024"
    result = run_here(over, "actor_rollout_ref.actor.use_dynamic_bsz=true", cwd=tmp_path, env=without_slurm(tmp_path))
    [warning] = [line for line in result.stdout.splitlines() if "is more than data.train_batch_size" in line]
    assert warning.startswith(
        "  WARNING       actor_rollout_ref.actor.ppo_mini_batch_size=1024 is more than data.train_batch_size=512: "
    )
    assert "one update a step" in warning
    assert warning.endswith("set actor_rollout_ref.actor.ppo_mini_batch_size=512 or less")
    refused = run_here(over, "actor_rollout_ref.actor.use_dynamic_bsz=false", cwd=tmp_path, env=without_slurm(tmp_path))
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        "rlaunch: error: verl rejects the config: train_batch_size (512) must be >= actor.ppo_mini_batch_size (1024)"
    ]


def ppo(mini: int, dynamic: bool = True, use_v1: bool = True, estimator: str = "grpo") -> dict[str, Any]:
    """The part of a resolved verl config the mini-batch check reads."""
    role = {"ppo_mini_batch_size": mini, "use_dynamic_bsz": dynamic}
    return {
        "trainer": {"use_v1": use_v1},
        "data": {"train_batch_size": 32},
        "actor_rollout_ref": {"actor": role, "rollout": {"n": 4}},
        "critic": {"enable": None, **role},
        "algorithm": {"adv_estimator": estimator},
    }


def test_the_mini_batch_check_covers_the_critic_and_leaves_the_legacy_trainer_to_its_refusal():
    assert mini_batches_over_the_batch(ppo(32)) == []
    assert mini_batches_over_the_batch(ppo(64, dynamic=False)) == []  # verl's own check refuses it
    assert mini_batches_over_the_batch(ppo(64, use_v1=False)) == []  # launch/layout_checks.py refuses it
    said = mini_batches_over_the_batch(ppo(64, estimator="gae"))
    assert [line.split(" ")[0] for line in said] == [
        "actor_rollout_ref.actor.ppo_mini_batch_size=64",
        "critic.ppo_mini_batch_size=64",
    ]
    assert "pads each step's 32 x 4 sequences with no-op ones up to one mini-batch (64 x 4)" in said[0]


def optim(**values: Any) -> dict[str, Any]:
    return {"actor_rollout_ref": {"actor": {"optim": {"lr": 1e-6, "lr_warmup_steps_ratio": 0.0, **values}}}}


def test_a_warmup_over_most_of_the_run_is_warned_with_the_numbers():
    key = "actor_rollout_ref.actor.optim"
    said = warmup_covers_the_run(optim(lr_warmup_steps=10), 3, at_most=False)
    assert said == (
        f"{key}.lr_warmup_steps=10 warms the learning rate up over 10 step(s) of this run's 3 training steps: "
        "verl 0.9.1 raises it linearly from 0 to optim.lr=1e-06, and no step trains at it: the last runs at 20 % of "
        f"it; set {key}.lr_warmup_steps=-1 (none)"
    )
    capped = warmup_covers_the_run(optim(lr_warmup_steps=10), 10, at_most=True)
    assert capped is not None and "of this run's at most 10 training steps (trainer.total_training_steps)" in capped
    assert capped.endswith(f"{key}.lr_warmup_steps=1 (a tenth of the run) or -1 (none)")
    late = warmup_covers_the_run(optim(lr_warmup_steps=15), 20, at_most=False)
    assert late is not None and "only steps 16-20 train at it" in late
    ratio = warmup_covers_the_run(optim(lr_warmup_steps=-1, lr_warmup_steps_ratio=0.8), 40, at_most=False)
    assert ratio is not None and ratio.startswith(f"{key}.lr_warmup_steps_ratio=0.8 warms the learning rate up over 32")
    assert ratio.endswith(f"{key}.lr_warmup_steps_ratio=0.1 (a tenth of the run) or 0 (none)")
    # a warmup over half of the run or less, none, or a run of one step: nothing to say
    assert warmup_covers_the_run(optim(lr_warmup_steps=10), 20, at_most=False) is None
    assert warmup_covers_the_run(optim(lr_warmup_steps=-1), 3, at_most=False) is None
    assert warmup_covers_the_run(optim(lr_warmup_steps=10), 1, at_most=False) is None


def test_quick_test_under_the_default_algo_warns_that_its_warmup_outlasts_the_run(tmp_path: Path):
    """algo=guru_baseline warms up over 10 steps; mode=quick_test stops after 10 at most."""
    result = run_here("mode=quick_test", cwd=tmp_path, env=without_slurm(tmp_path))
    planned(tmp_path, result)
    [warning] = [line for line in result.stdout.splitlines() if "warms the learning rate" in line]
    assert warning.startswith("  WARNING       actor_rollout_ref.actor.optim.lr_warmup_steps=10 warms the learning")
    assert "at most 10 training steps (trainer.total_training_steps)" in warning and "90 % of it" in warning
