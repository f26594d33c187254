"""algo=rft runs no PPO step, and its plans had no time prediction: a generation stage longer than the budget would
requeue until the requeues ran out (verl's main_generation_server writes its output only at the end, so a requeue
starts it over). Readiness now times both long stages from what the plan knows (launch/readiness.py judge_rft_time),
says what the prediction covers, and judges it on SLURM; every fix it names is planned again here and finishes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import compose_config
from test_readiness_attempts import planned, time_problems  # a SLURM submission's plan, its time problems
from tiny_assets import make_tiny_dataset, tiny_run_overrides

from launch.run import plan_job


@pytest.fixture(autouse=True)
def own_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))


@pytest.fixture
def rft_run(tmp_path: Path) -> list[str]:
    """algo=rft of a 0.5B model on one A40, 800 GURU-shaped prompts at GURU's 8k responses, quick_test's 60 min."""
    train, val = make_tiny_dataset(tmp_path / "data", ("math", "logic"), per_source=400)
    overrides = tiny_run_overrides(tmp_path / "model", train, val)
    overrides = [o for o in overrides if not o.startswith("actor_rollout_ref.model.path")]  # llm=qwen2_5_0_5b's
    return [*overrides, "algo=rft", "llm=qwen2_5_0_5b", "launch.skip_checks=[hub_cache,disk]"]


def test_an_rft_generation_longer_than_one_attempt_is_refused_with_fixes_that_fit(tmp_path: Path, rft_run: list[str]):
    plan = planned(tmp_path, *rft_run)
    (said,) = [w for w in plan.warnings if w.startswith("time (algo=rft; predicted, never measured for RFT)")]
    assert "stage 1 generates 800 prompts x rft.oversample=16 = 12800 samples in ~" in said
    assert "stage 3 fine-tunes at most 3200 samples (rft.k=4 per prompt) in 10 step(s) x ~" in said
    (problem,) = time_problems(plan)
    assert problem.startswith("algo=rft's stage 1 (verl's main_generation_server, 800 prompts x rft.oversample=16)")
    assert "beyond one attempt (60 min budget - 10 min start-up = 50 min)" in problem
    fixes = re.search(
        r"; set mode.time_budget_min=(\d+), data.train_max_samples=(\d+)(?: or rft.oversample=(\d+))?$", problem
    )
    assert fixes is not None, problem
    budget, rows, oversample = fixes.groups()
    assert not time_problems(planned(tmp_path, *rft_run, f"mode.time_budget_min={budget}"))
    assert time_problems(planned(tmp_path, *rft_run, f"mode.time_budget_min={int(budget) - 1}"))
    assert not time_problems(planned(tmp_path, *rft_run, f"data.train_max_samples={rows}"))
    assert time_problems(planned(tmp_path, *rft_run, f"data.train_max_samples={int(rows) + 1}"))
    if oversample is not None:  # only where it keeps rft.k=4 of them (fewer is refused)
        assert int(oversample) >= 4
        assert not time_problems(planned(tmp_path, *rft_run, f"rft.oversample={oversample}"))


def test_rft_stages_that_need_more_attempts_than_allowed_are_refused_counting_the_sft_checkpoints(
    tmp_path: Path, rft_run: list[str]
):
    """Stage 3 (verl's SFT trainer) resumes from its checkpoints: its attempts are counted in its save_freq blocks,
    the first after stage 1."""
    long_sft = [
        *rft_run,
        "data.train_max_samples=100",
        "rft.sft.trainer.total_epochs=400",
        "rft.sft.trainer.total_training_steps=null",
    ]
    (problem,) = time_problems(planned(tmp_path, *long_sft))
    counted = re.match(
        r"algo=rft's stages are predicted to need (\d+) attempts of 50 min \(stage 1 \d+ min, then stage 3's "
        r"2400 steps x [\d.]+ s, kept at its checkpoints every rft.sft.trainer.save_freq=100 steps\) but "
        r"cluster.max_requeues=3 allows 1 \+ 3: the job would stop unfinished; set mode.time_budget_min=(\d+), "
        r".* or cluster.max_requeues=(\d+)$",
        problem,
    )
    assert counted is not None, problem
    needed, budget, requeues = (int(value) for value in counted.groups())
    assert requeues == needed - 1 > 3
    assert not time_problems(planned(tmp_path, *long_sft, f"cluster.max_requeues={requeues}"))
    assert time_problems(planned(tmp_path, *long_sft, f"cluster.max_requeues={requeues - 1}"))
    assert not time_problems(planned(tmp_path, *long_sft, f"mode.time_budget_min={budget}"))


def test_a_local_rft_run_gets_the_prediction_and_no_time_refusal(tmp_path: Path, rft_run: list[str]):
    cfg = compose_config("cluster=local", f"cluster.shared_dir={tmp_path}", "launch.dry_run=true", *rft_run)
    plan = plan_job(cfg, list(rft_run))
    assert any(w.startswith("time (algo=rft; predicted, never measured for RFT)") for w in plan.warnings)
    assert not time_problems(plan)


def test_an_rft_budget_fix_beyond_the_partitions_limit_is_not_named(tmp_path: Path, rft_run: list[str]):
    """The partition's MaxTime (30 min, less cluster.time_margin_min=5) takes no budget that fits stage 1: only the
    fewer rows (or samples) that do are named."""
    limited = [*rft_run, "mode.time_budget_min=25", "cluster.time_margin_min=5"]
    (problem,) = time_problems(planned(tmp_path, *limited, max_time_min=30))
    assert problem.startswith("algo=rft's stage 1 ") and "mode.time_budget_min=" not in problem.split("; set ")[1]
    rows = re.search(r"; set data.train_max_samples=(\d+)", problem)
    assert rows is not None, problem
    assert not time_problems(planned(tmp_path, *limited, f"data.train_max_samples={rows.group(1)}", max_time_min=30))
