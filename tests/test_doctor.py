"""The run doctor on fixture runs: real plans (composed, planned, preflighted) with verl file-logger metric files
under verl's real names, one run per diagnosis and a healthy run that gets none, built once for the module. Exact
kinds, order, evidence numbers and overrides; the CLI on the sweep, with a threshold override, and on bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import PROJECT, compose_config, cpu_facts
from metric_fixtures import StepProfile, make_plan_dir, run_records, step_metrics, write_attempt

from launch import preflight
from launch.calibration import model_inputs
from launch.memory import with_changes
from launch.plan import make_plan
from launch.report import doctor
from launch.report.compare import summarize
from launch.report.metrics import RunMetrics, predicted_torch_peaks, read_run
from launch.rundir import load_plan
from launch.steptime import Lengths, forecast

SWEEP = "doctor-sweep"
GPU = "a100_80"
ALGO = "guru_baseline"
# What the preflight records for guru_baseline on a100_80 (plan.json), read back by `planned`: predicted MFU 0.368;
# the trainer's torch-visible peak is the training phase's 27.81 GiB less its terms outside torch (1.3 + 0.7 NCCL).
CAPACITY_GIB = 79.2
# what launch.preflight=tune applies to this plan (test_low_mfu_override_is_what_tune_applies)
TUNED_TRAIN_TOKENS = 99328
NOT_REQUEUED = "3 attempts and never a first checkpoint: lower trainer.save_freq (now 20) or give the mode more time"


@dataclass(frozen=True)
class Planned:
    """What a healthy run of this plan reports: from the plan's own predictions."""

    run_dir: Path
    predicted_mfu: float
    torch_peak_gib: float

    def healthy(self, **changes: Any) -> StepProfile:
        """MFU at 80 % of the prediction, memory at 95 % of the predicted torch-visible peak (90 % allocated),
        generation 40 % and reward 5 % of a 100 s step: inside every threshold of conf/doctor.yaml."""
        base = StepProfile(
            mfu=round(0.8 * self.predicted_mfu, 4),
            memory_reserved_gb=round(0.95 * self.torch_peak_gib, 3),
            memory_allocated_gb=round(0.90 * self.torch_peak_gib, 3),
            gen_s=40.0,
            reward_s=5.0,
            update_s=40.0,
            other_s=15.0,
        )
        return replace(base, **changes)


def planned(sweep_dir: Path, *extra: str) -> Planned:
    run_dir = make_plan_dir(sweep_dir, ALGO, GPU, *extra)
    verdict = load_plan(run_dir).preflight
    assert verdict is not None
    torch_peak = max(predicted_torch_peaks(verdict.phases).values())
    return Planned(run_dir, verdict.predicted.mfu, torch_peak)


def with_metric(records: list[tuple[int, dict[str, Any]]], name: str, value: float) -> list[tuple[int, dict]]:
    """Adds a verl metric to every training-step record (those with timing_s/step)."""
    return [(step, data | {name: value} if "timing_s/step" in data else data) for step, data in records]


@pytest.fixture(scope="module")
def fixture_runs(tmp_path_factory) -> dict[str, Path]:
    sweep_dir = tmp_path_factory.mktemp("doctor") / SWEEP
    runs: dict[str, Path] = {}

    # healthy, and preempted once with progress: attempt 1 reached step 7 (its steps 6-7 are thrown away), attempt 2
    # resumed from the checkpoint at step 5
    plan = planned(sweep_dir)
    lost = StepProfile(throughput=1.0, mfu=0.001, memory_allocated_gb=99.0, memory_reserved_gb=99.0)
    first = run_records(range(0, 6), plan.healthy(), 0.0) + [(step, step_metrics(lost)) for step in (6, 7)]
    write_attempt(plan.run_dir, 1, first, cut_last=True)
    write_attempt(plan.run_dir, 2, run_records(range(5, 11), plan.healthy(), 0.0))
    runs["healthy"] = plan.run_dir

    plan = planned(sweep_dir, "trainer.experiment_name=doctor-low-mfu")
    write_attempt(plan.run_dir, 1, run_records(range(0, 11), plan.healthy(mfu=0.1), 0.0))
    runs["low_mfu"] = plan.run_dir

    # verl 0.9 scores inside the agent loop: 20 s of the slowest sample's scoring plus 10 s after generation
    plan = planned(sweep_dir, "reward.custom_reward_function.reward_kwargs.procs=2")
    records = run_records(range(0, 11), plan.healthy(reward_s=10.0), 0.0)
    write_attempt(plan.run_dir, 1, with_metric(records, "agent_loop/slowest/compute_score", 20.0))
    runs["reward_bound"] = plan.run_dir

    plan = planned(sweep_dir, "actor_rollout_ref.rollout.max_num_seqs=64")
    write_attempt(plan.run_dir, 1, run_records(range(0, 11), plan.healthy(gen_s=120.0), 0.0))
    runs["generation_bound"] = plan.run_dir

    plan = planned(sweep_dir, "trainer.experiment_name=doctor-memory")
    profile = plan.healthy(memory_reserved_gb=1.5 * plan.torch_peak_gib, memory_allocated_gb=1.4 * plan.torch_peak_gib)
    write_attempt(plan.run_dir, 1, run_records(range(0, 11), profile, 0.0))
    runs["memory_calibration"] = plan.run_dir

    # three attempts, each preempted at step 6 before the first save (every 20 steps); the job gave up
    plan = planned(sweep_dir, "trainer.experiment_name=doctor-requeue", "trainer.save_freq=20")
    for attempt in (1, 2, 3):
        write_attempt(plan.run_dir, attempt, run_records(range(0, 7), plan.healthy(), 0.0), cut_last=attempt < 3)
    (plan.run_dir / "not_requeued.txt").write_text(NOT_REQUEUED + "\n")
    runs["requeue_without_progress"] = plan.run_dir

    # three at once: low MFU, reward 24 % of a 125 s step, memory at half the prediction
    plan = planned(sweep_dir, "trainer.experiment_name=doctor-several")
    profile = plan.healthy(
        mfu=0.1, reward_s=30.0, memory_reserved_gb=0.5 * plan.torch_peak_gib, memory_allocated_gb=12.0
    )
    write_attempt(plan.run_dir, 1, run_records(range(0, 11), profile, 0.0))
    runs["several"] = plan.run_dir
    return runs


def diagnoses_of(run_dir: Path, *overrides: str) -> list[doctor.Diagnosis]:
    return doctor.diagnose(read_run(run_dir), doctor.load_thresholds(overrides))


def test_the_fixture_plan_is_the_one_the_numbers_below_assume(fixture_runs):
    plan = json.loads((fixture_runs["healthy"] / "plan.json").read_text())
    assert plan["preflight"]["predicted"]["mfu"] == 0.368
    assert plan["preflight"]["phases"]["training"]["peak_gib"] == 27.81
    assert plan["preflight"]["phases"]["training"]["capacity_gib"] == CAPACITY_GIB
    assert plan["resources"]["cpus_per_task"] == 128 and plan["verl"]["reward"]["num_workers"] == 8


def test_the_doctor_reads_the_knobs_the_preflight_saw(fixture_runs):
    """Its tune and fits calls start from the knobs plan.json recorded, so the recorded peaks and MFU come out
    again."""
    run = read_run(fixture_runs["healthy"])
    expected = doctor.expectation(run)
    assert expected is not None
    what_if, recorded = expected.what_if, run.local_plan.preflight
    assert recorded is not None
    summary = preflight.summarize(what_if.arch, what_if.knobs, what_if.capacity_gib, 312.0, recorded.policy)
    assert summary.predicted.mfu == recorded.predicted.mfu
    assert summary.peaks_gib == recorded.peaks_gib
    assert (expected.torch_peak_gib, expected.torch_peak_phase) == (25.81, "training")
    assert what_if.mini_batch_sequences == 64 * 16


def test_the_doctor_takes_the_recorded_knobs_and_never_guesses_them(fixture_runs, tmp_path):
    """flash-attn in the job is what the plan recorded, even where the other choice would give the same peaks; a plan
    that recorded no knobs gets no expectation rather than a rebuilt one."""
    run_dir = tmp_path / "run"
    shutil.copytree(fixture_runs["healthy"], run_dir)
    plan = json.loads((run_dir / "plan.json").read_text())
    for flash in (True, False):
        plan["preflight"]["knobs"]["flash_ce"] = flash
        (run_dir / "plan.json").write_text(json.dumps(plan))
        expected = doctor.expectation(read_run(run_dir))
        assert expected is not None and expected.what_if.knobs.flash_ce is flash
    del plan["preflight"]["knobs"]
    (run_dir / "plan.json").write_text(json.dumps(plan))
    assert doctor.expectation(read_run(run_dir)) is None


def test_a_healthy_run_gets_no_diagnosis(fixture_runs):
    """MFU at 80 % of the prediction, memory at 95 %, generation 40 %, reward 5 %, a preemption with progress; the
    thrown-away steps of the preempted attempt (MFU 0.001, 99 GB) do not count."""
    assert diagnoses_of(fixture_runs["healthy"]) == []


def test_low_mfu_with_memory_to_spare_suggests_the_micro_batch_tune_would_choose(fixture_runs):
    [found] = diagnoses_of(fixture_runs["low_mfu"])
    assert found.kind == "low_mfu"
    assert found.overrides == [f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={TUNED_TRAIN_TOKENS}"]
    assert found.alternatives == ["launch.preflight=tune"]
    assert found.evidence == {
        "mfu": 0.1,
        "predicted_mfu": 0.368,
        "mfu_ratio": 0.272,  # 0.1 / 0.368
        "update_share": 0.4,  # 40 of 100 s
        "memory_gib": 24.52,  # 0.95 x 25.81
        "capacity_gib": CAPACITY_GIB,
        "memory_used": 0.31,
        "train_tokens_per_micro_batch": 16384,
        "tuned_train_tokens_per_micro_batch": TUNED_TRAIN_TOKENS,
        "tuned_predicted_mfu": 0.405,  # 0.55 x 99328 / (99328 + 2048) / 1.33 (checkpointing)
    }
    assert found.importance == 0.291  # 0.4 x (1 - 0.1 / 0.368)
    assert found.headline.startswith("MFU 10.0% is 27% of the predicted 36.8% while the trainer uses 24.5 of 79.2 GiB")


def test_low_mfu_override_is_what_tune_applies(fixture_runs):
    """The same plan with launch.preflight=tune: the launcher's own tune applies exactly the doctor's override."""
    overrides = [f"algo={ALGO}", f"gpu={GPU}", "launch.preflight=tune"]
    cfg = compose_config("cluster=local", *overrides)
    plan = make_plan(cfg, cpu_facts(), overrides, Path("/tmp"), "python")
    _, applied = preflight.judge(cfg, plan.verl, plan.llm, plan.overrides, {})
    assert applied["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"] == TUNED_TRAIN_TOKENS


def test_low_mfu_is_not_flagged_when_the_card_is_full(fixture_runs):
    assert diagnoses_of(fixture_runs["low_mfu"], "memory_used_max=0.25") == []


def test_reward_bound_counts_the_streamed_scoring_and_suggests_workers_and_processes(fixture_runs):
    [found] = diagnoses_of(fixture_runs["reward_bound"])
    assert found.kind == "reward_bound"
    # 16 workers; 128 CPUs x 0.5 / 16 = 4 processes each, above the 2 the run set
    assert found.overrides == ["reward.num_workers=16", "reward.custom_reward_function.reward_kwargs.procs=4"]
    assert found.evidence == {
        "reward_share": 0.286,  # (10 + 20) / 105
        "reward_s": 30.0,
        "streamed_reward_s": 20.0,
        "step_s": 105.0,
        "reward_workers": 8,
        "procs_per_worker": 2,
        "cpus": 128,
    }
    assert found.importance == 0.136  # 0.286 - 0.15
    assert found.headline == (
        "reward scoring takes 29% of the step (30.0 of 105.0 s) while the GPUs wait: score with 16 reward workers "
        "instead of 8"
    )


def test_generation_bound_suggests_engine_concurrency_the_model_says_pays(fixture_runs):
    [found] = diagnoses_of(fixture_runs["generation_bound"])
    assert found.kind == "generation_bound"
    # the KV cache holds 97 typical (half-length) sequences: tune's engine concurrency, which the step-time model
    # times at 2383 -> 2055 s; TP 2 it times at 3236 s (half the engines), so it is not suggested
    assert found.overrides == ["actor_rollout_ref.rollout.max_num_seqs=97"]
    assert "max_num_seqs 64 -> 97 (the KV cache holds them: generate 2383 -> 2055 s by the step-time model)" in (
        found.headline
    )
    assert "rollout TP 1 ->" not in found.headline
    assert found.evidence == {
        "generation_share": 0.667,  # 120 / 180
        "gen_s": 120.0,
        "step_s": 180.0,
        "max_num_seqs": 64,
        "rollout_tp": 1,
        "gpu_memory_utilization": 0.6,
    }
    assert found.importance == 0.067


def generation_bound_run(root: Path, gpu: str, *extra: str, lengths: tuple[float, float] | None = None) -> Path:
    """guru_baseline whose generation takes 2/3 of the step, with verl's mean prompt and response lengths logged."""
    run_dir = make_plan_dir(root / SWEEP, ALGO, gpu, *extra)
    records = run_records(range(0, 11), StepProfile(gen_s=120.0), 0.0)
    if lengths is not None:
        records = with_metric(
            with_metric(records, "prompt_length/mean", lengths[0]), "response_length/mean", lengths[1]
        )
    write_attempt(run_dir, 1, records)
    return run_dir


def model_generate_s(run_dir: Path, lengths: tuple[float, float], rollout_tp: int) -> float:
    """steptime.forecast's generate phase for the run's plan at these lengths and engine TP (what the doctor must
    follow)."""
    plan = load_plan(run_dir)
    arch, knobs, card, critic = model_inputs(plan)
    at = Lengths(lengths[0], lengths[1], "measured")
    return forecast(arch, with_changes(knobs, rollout_tp=rollout_tp), card, plan.verl, at, critic).phases_s["generate"]


def test_rollout_tp_is_not_doubled_where_the_step_time_model_says_it_generates_slower(tmp_path):
    """7B on h100 at the measured 190 + 2600 tokens: at TP 2 the 8 GPUs form 4 engines instead of 8, and the model
    times generate at 825 s against 554 s now; the old rule (a wider engine decodes faster) suggested it anyway."""
    lengths = (190.0, 2600.0)
    run_dir = generation_bound_run(tmp_path, "h100", lengths=lengths)
    assert model_generate_s(run_dir, lengths, 1) == 553.7 and model_generate_s(run_dir, lengths, 2) == 825.0
    [found] = diagnoses_of(run_dir)
    assert found.kind == "generation_bound"
    assert not any("tensor_model_parallel_size" in item for item in found.overrides)
    assert "rollout TP 1 ->" not in found.headline


def test_rollout_tp_is_suggested_where_the_step_time_model_says_it_generates_faster(tmp_path):
    """128 sequences a step: each engine has few to decode and the long tail dominates, where TP 2 decodes faster."""
    run_dir = generation_bound_run(
        tmp_path, GPU, "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=16"
    )
    planned_lengths = (2048.0, 4096.0)  # no lengths logged: the plan's typical ones
    now, wider = model_generate_s(run_dir, planned_lengths, 1), model_generate_s(run_dir, planned_lengths, 2)
    assert wider < now
    [found] = diagnoses_of(run_dir)
    assert found.overrides == ["actor_rollout_ref.rollout.tensor_model_parallel_size=2"]
    assert f"rollout TP 1 -> 2 (the step-time model at the run's lengths: generate {now:.0f} -> {wider:.0f} s)" in (
        found.headline
    )
    assert (found.evidence["model_generate_s"], found.evidence["model_generate_s_at_tp2"]) == (now, wider)


def test_step_times_are_medians_so_one_stalled_step_does_not_move_them(tmp_path):
    """A step that stalled 9 hours among normal ones: the doctor's step (and compare's s/step) is the median over the
    steps after the first, the same statistic as the step-time table's, not a mean the stall drags to hours."""
    run_dir = make_plan_dir(tmp_path / SWEEP, ALGO, GPU)
    records = run_records(range(0, 7), StepProfile(gen_s=120.0), 0.0)
    step, data = records[4]
    records[4] = (step, data | {"timing_s/step": data["timing_s/step"] + 32400.0})
    write_attempt(run_dir, 1, records)
    run = read_run(run_dir)
    times = doctor.step_times(run, doctor.load_thresholds())
    assert times is not None and (times.step_s, times.gen_s) == (180.0, 120.0)
    [found] = doctor.diagnose(run)
    assert found.kind == "generation_bound" and "(120.0 of 180.0 s)" in found.headline
    summary = summarize(run)
    assert summary.step_s == summary.step_time["measured_s"]["step"] == 180.0


def test_memory_far_above_the_prediction_is_a_calibration_signal(fixture_runs):
    [found] = diagnoses_of(fixture_runs["memory_calibration"])
    assert found.kind == "memory_calibration"
    assert found.overrides == [] and found.importance == 0.0
    assert found.evidence == {
        "measured_reserved_gib": 38.71,  # 1.5 x 25.81
        "measured_allocated_gib": 36.13,
        "predicted_gib": 25.81,
        "predicted_phase": "training",
        "ratio": 1.5,
        "capacity_gib": CAPACITY_GIB,
    }
    assert "under-predicts" in found.headline


def test_a_run_that_requeues_without_progress_is_told_to_save_more_often(fixture_runs):
    [found] = diagnoses_of(fixture_runs["requeue_without_progress"])
    assert found.kind == "requeue_without_progress"
    assert found.overrides == ["trainer.save_freq=3"]  # up to 6 steps per attempt, saved twice
    assert found.evidence == {
        "attempts": 3,
        "checkpointed_steps": "0,0,0",
        "steps_reached": "5,5,6",  # the killed attempts' last line (step 6) was cut short
        "requeues_without_progress": 2,
        "last_step": 6,
        "save_freq": 20,
        "not_requeued": NOT_REQUEUED,
    }
    assert found.importance == 1.0
    assert found.headline.startswith("2 requeue(s) in a row restarted from checkpoint step 0 (last logged step 6)")


def test_a_run_that_ran_out_of_requeues_after_progress(fixture_runs, tmp_path):
    plan = load_plan(fixture_runs["healthy"])
    (tmp_path / "not_requeued.txt").write_text("requeued 3 times: cluster.max_requeues=3 reached\n")
    attempts = [{"checkpointed_step": step} for step in (0, 20, 40, 60)]
    run = RunMetrics(tmp_path, plan, dict(run_records(range(60, 71), StepProfile(), 0.0)), attempts)
    [found] = [item for item in doctor.diagnose(run) if item.kind.startswith("requeue")]
    assert found.kind == "requeues_exhausted"
    assert found.overrides == ["cluster.max_requeues=6"]
    assert found.importance == 1.0


HANG_REFUSAL = (
    "attempt {n} hung and its stacks show no transient cause (a collective or network wait): a requeue would hang the "
    "same way; see hang/attempt-{n}"
)


@pytest.mark.parametrize("checkpointed", [(0,), (0, 20, 40, 60)])
def test_a_hang_the_job_refused_to_requeue_is_not_told_to_requeue_more(fixture_runs, tmp_path, checkpointed):
    """not_requeued.txt is written for every stop: a hang stopped on purpose (after 1 of 4 allowed attempts, or as the
    4th of cluster.max_requeues=3 + 1) is not a run that ran out of requeues; its failure says what hung."""
    plan = load_plan(fixture_runs["healthy"])
    attempt = len(checkpointed)
    (tmp_path / "not_requeued.txt").write_text(HANG_REFUSAL.format(n=attempt) + "\n")
    (tmp_path / "hang.json").write_text(json.dumps([{"attempt": attempt, "transient": False, "last_step": 63}]))
    attempts = [{"checkpointed_step": step} for step in checkpointed]
    run = RunMetrics(tmp_path, plan, dict(run_records(range(60, 64), StepProfile(), 0.0)), attempts)
    assert [item.kind for item in doctor.diagnose(run) if item.kind.startswith("requeue")] == []


def test_several_diagnoses_come_most_important_first(fixture_runs):
    found = diagnoses_of(fixture_runs["several"])
    assert [item.kind for item in found] == ["low_mfu", "reward_bound", "memory_calibration"]
    # update 40 of 125 s at 27 % of the predicted MFU; reward 30 of 125 s over the 15 % threshold; no time
    assert [item.importance for item in found] == [0.233, 0.09, 0.0]
    assert found[2].evidence["ratio"] == 0.5 and "over-predicts" in found[2].headline


def test_thresholds_come_from_the_yaml_each_with_its_reason():
    path = PROJECT / "conf" / "doctor.yaml"
    values = yaml.safe_load(path.read_text())
    assert vars(doctor.load_thresholds()) == values
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines):
        if line and not line.startswith("#"):
            assert lines[number - 1].startswith("#"), f"conf/doctor.yaml: {line!r} has no comment giving its reason"


def test_write_diagnosis_holds_the_retry_command(fixture_runs):
    run = read_run(fixture_runs["low_mfu"])
    path = doctor.write_diagnosis(run, doctor.diagnose(run))
    assert path == doctor.diagnosis_path(run.run_dir) == run.run_dir / "diagnosis.md"
    text = path.read_text()
    assert "## 1. low_mfu (importance 0.291)" in text
    assert (
        "python launch/run.py algo=guru_baseline gpu=a100_80 trainer.experiment_name=doctor-low-mfu "
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={TUNED_TRAIN_TOKENS}"
    ) in text
    assert "or `launch.preflight=tune`." in text


def run_doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT / "launch" / "report" / "doctor.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cli_diagnoses_a_sweep_and_writes_each_diagnosis(fixture_runs):
    for run_dir in fixture_runs.values():
        doctor.diagnosis_path(run_dir).unlink(missing_ok=True)
    sweep_dir = fixture_runs["healthy"].parent
    result = run_doctor(str(sweep_dir))
    assert result.returncode == 0, result.stderr
    for name, run_dir in fixture_runs.items():
        text = doctor.diagnosis_path(run_dir).read_text()
        if name == "healthy":
            assert "Nothing holds this run back" in text
        elif name != "several":
            assert f"## 1. {name} " in text
    for kind in ("low_mfu", "reward_bound", "generation_bound", "memory_calibration", "requeue_without_progress"):
        assert f"[{kind}]" in result.stdout
    assert result.stdout.count("no diagnosis") == 1


def test_a_cli_threshold_override_changes_the_verdict(fixture_runs):
    result = run_doctor(str(fixture_runs["low_mfu"]), "mfu_ratio_low=0.2")
    assert result.returncode == 0, result.stderr
    assert "no diagnosis" in result.stdout and "[low_mfu]" not in result.stdout


def bad_inputs(fixture_runs: dict[str, Path], root: Path) -> dict[str, tuple[list[str], str]]:
    no_metrics = root / "queued-run"
    no_metrics.mkdir()
    shutil.copy(fixture_runs["healthy"] / "plan.json", no_metrics / "plan.json")
    healthy = str(fixture_runs["healthy"])
    no_plan = root / "not-a-run"
    (no_plan / "something").mkdir(parents=True)
    return {
        "no such directory": ([str(root / "nope")], "no such directory"),
        "no plan.json": ([str(no_plan)], "holds no plan.json"),
        "no metrics": ([str(no_metrics)], "no metrics under"),
        "unknown threshold": ([healthy, "mfu_ratio=0.3"], "did you mean 'mfu_ratio_low'?"),
        "bad threshold value": ([healthy, "mfu_ratio_low=half"], "bad doctor threshold mfu_ratio_low"),
        "no directory": ([], "give exactly one directory"),
    }


@pytest.mark.parametrize(
    "case",
    ["no such directory", "no plan.json", "no metrics", "unknown threshold", "bad threshold value", "no directory"],
)
def test_bad_input_is_one_line_and_exit_2(fixture_runs, tmp_path, case):
    args, expected = bad_inputs(fixture_runs, tmp_path)[case]
    result = run_doctor(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("rlaunch: error: ") and expected in result.stderr


def test_a_run_without_a_training_step_is_not_called_healthy(tmp_path):
    """An attempt started (attempts.jsonl) and verl truncated its metrics file, but no step ended yet: no diagnosis
    is not "nothing holds this run back", in the terminal or in diagnosis.md; a validation before training is no
    training step either."""
    run_dir = make_plan_dir(tmp_path / SWEEP, ALGO, GPU)
    write_attempt(run_dir, 1, run_records(range(0, 1), StepProfile(), 0.0))  # the validation at step 0 only
    [text] = doctor.doctor(run_dir, doctor.load_thresholds())
    assert "no diagnosis: no training step logged yet" in text and "nothing holds" not in text
    diagnosis = doctor.diagnosis_path(run_dir).read_text()
    assert "No training step logged yet" in diagnosis and "Nothing holds" not in diagnosis
