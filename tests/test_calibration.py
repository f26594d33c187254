"""The closed loop on CPU (launch/steptime.py, launch/calibration.py, launch/calibrate.py): a step time by phase at
the typical lengths, every run measured against its plan in verl's own metric names, and the next plan of the same
shape corrected by the cluster's store."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import PROJECT, compose_config, run_cli
from test_readiness import on_partition
from tiny_assets import make_tiny_dataset

from launch import calibration, readiness
from launch.calibration import StoreRecord, append, read_store, store_path
from launch.render import render
from launch.run import plan_job, write_run_dir
from launch.rundir import CALIBRATION_FILE, Plan, attempt_log_path, load_plan
from launch.steptime import PHASES, Lengths, verl_validations

# a 7B GRPO run on one 8 x A100 80GB node: the shape the store's records share
SHAPE = (
    "gpu=a100_80",
    "llm=qwen2_5_7b",
    "mode=quick_test",
    "data.train_batch_size=64",
    "data.max_response_length=2048",
)


def data(tmp_path: Path, rows_per_source: int = 64) -> list[str]:
    train, val = make_tiny_dataset(tmp_path / "data", ("math", "logic"), per_source=rows_per_source)
    return [f"data.train_files={train}", f"data.val_files={val}", "launch.skip_checks=[model,hub_cache]"]


def planned(tmp_path: Path, *overrides: str, cluster: str = "local") -> Plan:
    cfg = compose_config(f"cluster={cluster}", f"cluster.shared_dir={tmp_path}", "launch.dry_run=true", *overrides)
    return plan_job(cfg, list(overrides), gather=on_partition) if cluster == "slurm" else plan_job(cfg, list(overrides))


# --- the forecast ----------------------------------------------------------------------------------------------------


def test_dry_run_json_holds_the_four_phases_and_where_they_came_from(tmp_path: Path):
    result = run_cli(*SHAPE, "cluster=local", f"cluster.shared_dir={tmp_path}", "launch.dry_run=json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    time = json.loads(result.stdout.splitlines()[-1])["time"]
    assert set(time["phases_s"]) == set(PHASES)
    assert time["step_s"] == pytest.approx(sum(time["phases_s"].values()), abs=0.3)
    assert time["source"] == "model"
    assert (
        time["lengths"]["source"]
        == "prompt: half of data.max_prompt_length; response: half of data.max_response_length"
    )
    assert time["inputs"]["concurrency"] >= 1 and time["inputs"]["card"]["bf16_tflops"] == 312.0


def test_expected_response_length_drives_generation_and_says_so(tmp_path: Path):
    half = planned(tmp_path, *SHAPE).time
    short = planned(tmp_path, *SHAPE, "launch.expect.response_tokens=256").time
    assert half is not None and short is not None
    assert half.lengths.response_tokens == 1024 and short.lengths.response_tokens == 256
    assert short.lengths.source.endswith("response: launch.expect.response_tokens")
    for phase in ("generate", "log_prob", "update"):
        assert short.phases_s[phase] < half.phases_s[phase], phase
    assert short.phases_s["other"] == half.phases_s["other"]  # sync, wake/sleep, rewards: no length in them


def test_default_guru_run_on_a_small_dataset_is_not_refused_for_its_first_checkpoint(tmp_path: Path):
    """The issue's case: a 7.5k-row GURU run, standard mode, on SLURM. The worst-case throughput figure put its first
    checkpoint (the run's end, step 14) beyond one attempt; the phases at typical lengths do not."""
    train, val = make_tiny_dataset(tmp_path / "guru", ("math", "logic"), per_source=3750)
    overrides = [f"data.train_files={train}", f"data.val_files={val}", "launch.skip_checks=[hub_cache]"]
    cfg = compose_config("cluster=slurm", f"cluster.shared_dir={tmp_path}", *overrides)
    plan = plan_job(cfg, overrides, gather=on_partition)
    time = plan.predicted_time
    assert time is not None and (time.rows, time.total_steps) == (7500, 14)
    # standard mode checkpoints about every 120 min: at 88 min a step, every step
    assert time.first_checkpoint_step == 1 and time.attempts == 1, time
    readiness.refuse([plan])  # nothing to refuse
    # the same run with every response at its maximum and a save_freq in steps is still refused: the check stands
    worst = [*overrides, "launch.expect.response_tokens=8192", "launch.expect.prompt_tokens=4096"]
    worst.append("trainer.save_freq=20")
    cfg = compose_config("cluster=slurm", f"cluster.shared_dir={tmp_path}", *worst)
    with pytest.raises(Exception, match="first checkpoint comes after 14 steps x "):
        readiness.refuse([plan_job(cfg, worst, gather=on_partition)])


# --- one run measured against its plan -------------------------------------------------------------------------------


def write_metrics(plan: Plan, response_mean: float, factor: float, steps: int = 4, attempt: int = 1) -> None:
    """verl's file-logger lines for a run whose every phase takes `factor` x the raw model at `response_mean`."""
    prompt = plan.time.lengths.prompt_tokens
    truth = calibration.model_at(plan, Lengths(prompt, response_mean, "truth"))
    assert truth is not None
    seconds = {phase: factor * value for phase, value in truth.phases_s.items()}
    path = attempt_log_path(Path(plan.run_dir), attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for step in range(1, steps + 1):
        warmup = 30.0 if step == 1 else 0.0  # step 1 compiles and captures graphs: left out of the medians
        metrics = {
            "timing_s/gen": seconds["generate"] + warmup,
            "timing_s/old_log_prob": seconds["log_prob"],
            "timing_s/update_actor": seconds["update"],
            "timing_s/step": sum(seconds.values()) + warmup,
            "response_length/mean": response_mean,
            "response_length/max": float(plan.verl["data"]["max_response_length"]),
            "response_length/clip_ratio": 0.02,
            "prompt_length/mean": prompt,
            "perf/max_memory_allocated_gb": 40.0 + step,
            "perf/max_memory_reserved_gb": 44.0 + step,
        }
        lines.append(json.dumps({"step": step, "data": metrics}))
    path.write_text("\n".join(lines) + "\n")


def run_dir_of(tmp_path: Path, *overrides: str) -> Plan:
    cfg = compose_config("cluster=local", f"cluster.shared_dir={tmp_path}", "launch.dry_run=true", *overrides)
    plan = plan_job(cfg, list(overrides))
    write_run_dir(plan, cfg)
    return plan


def test_calibration_json_compares_each_phase_with_the_plan(tmp_path: Path):
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=one")
    write_metrics(plan, response_mean=plan.time.lengths.response_tokens, factor=1.5)
    record = calibration.write_calibration(Path(plan.run_dir), attempt=1)
    on_disk = json.loads((Path(plan.run_dir) / CALIBRATION_FILE).read_text())
    assert record == on_disk and on_disk["steps_measured"] == 4
    for phase in ("generate", "log_prob", "update"):  # measured 1.5 x the plan: the plan was 33 % low
        assert on_disk["time"]["error_pct"][phase] == pytest.approx(-33.3, abs=0.2), phase
    assert on_disk["memory"]["measured_reserved_gib"] == 48.0
    assert on_disk["lengths"]["response_mean"] == plan.time.lengths.response_tokens


def test_three_runs_at_twice_the_model_make_the_next_plan_right_within_ten_percent(tmp_path: Path):
    """The acceptance's convergence test: three ingested runs (through calibrate.py, as a user would) whose true step
    time is 2x the model's; the next plan of the shape is within 10 % of the truth and says it is calibrated."""
    runs = []
    for index, (response, noise) in enumerate([(700.0, 1.9), (800.0, 2.1), (900.0, 2.0)]):
        plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), f"launch.sweep_id=s{index}")
        write_metrics(plan, response_mean=response, factor=noise)
        runs.append(plan.run_dir)
    result = subprocess.run(
        [sys.executable, str(PROJECT / "launch" / "calibrate.py"), *runs], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("x2.") + result.stdout.count("x1.9") >= 9, result.stdout
    records, warnings = read_store(store_path(Path(runs[0]).parent.parent))
    assert len(records) == 3 and not warnings

    fresh = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=next")
    time = fresh.time
    assert time.lengths.response_tokens == pytest.approx(800.0)  # the runs' measured mean, same model and data
    assert time.lengths.source.endswith("response: measured (3 run(s) of this model and data)")
    truth = calibration.model_at(fresh, time.lengths)
    assert time.step_s == pytest.approx(2.0 * truth.step_s, rel=0.10)
    assert time.source == "calibrated: from 3 run(s) of this shape on this cluster"
    assert "generate" in time.sources and time.sources["generate"].startswith("model x 2.00 from 3 run(s)")
    assert "model x 2.00 from 3 run(s) of this shape on this cluster" in render(fresh)

    off = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=off", "launch.calibration=off")
    assert off.time.source == "model" and "response: half of data.max_response_length" in off.time.lengths.source
    other_card = planned(tmp_path, *SHAPE[1:], "gpu=h100", *data(tmp_path), "launch.sweep_id=h100")
    assert other_card.time.source == "model"  # another profile is another shape
    # so is another backend: Megatron's step is another model, its runs never correct an FSDP plan nor the reverse
    fsdp_shape = calibration.shape_of(fresh.verl, fresh.llm, fresh.gpu_profile, records[0].tokens_per_gpu)
    megatron_shape = replace(fsdp_shape, backend="megatron")
    assert calibration.nearest(fsdp_shape, records) and not calibration.nearest(megatron_shape, records)
    assert {record.backend for record in records} == {"fsdp"}


def test_ingesting_a_run_twice_counts_it_once(tmp_path: Path):
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=twice")
    write_metrics(plan, response_mean=800.0, factor=3.0)
    for _ in range(2):
        calibration.ingest(Path(plan.run_dir))
    records, _ = read_store(store_path(Path(plan.run_dir).parent.parent))
    assert len(records) == 2 and len(calibration.latest_per_run(tuple(records))) == 1


# --- the store -------------------------------------------------------------------------------------------------------


def record(run_id: str) -> StoreRecord:
    return StoreRecord(
        run_id=run_id,
        recorded_at="now",
        gpu="a100_80",
        family="qwen2",
        params=7_000_000_000,
        engine="vllm",
        rollout_tp=1,
        n_gpus=8,
        tokens_per_gpu=1e5,
        model_path="m",
        train_files=["t"],
        max_response_tokens=2048,
        prompt_mean=100.0,
        response_mean=800.0,
        model_s=dict.fromkeys(PHASES, 10.0),
        measured_s=dict.fromkeys(PHASES, 20.0),
        memory={"reserved_gib": 40.0},
    )


def append_many(store: str, writer: int, count: int) -> None:
    for index in range(count):
        append(Path(store), record(f"w{writer}-{index}"))


def test_concurrent_appends_never_interleave_and_a_corrupt_line_is_skipped(tmp_path: Path):
    store = tmp_path / "runs" / calibration.STORE_FILE
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=append_many, args=(str(store), writer, 100)) for writer in range(4)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=120)
        assert process.exitcode == 0
    with store.open("a") as handle:
        handle.write('{"run_id": "cut short by a kill", "gpu": \n')
    records, warnings = read_store(store)
    assert len(records) == 400 and len({r.run_id for r in records}) == 400
    assert len(warnings) == 1 and ":401: skipped a calibration record that does not parse" in warnings[0]


def test_a_corrupt_store_warns_once_and_plans_from_the_model(tmp_path: Path):
    runs_dir = tmp_path / "rlaunch"
    runs_dir.mkdir()
    store_path(runs_dir).write_text("not json\n")
    result = run_cli(*SHAPE, "cluster=local", f"cluster.shared_dir={tmp_path}", "launch.dry_run=json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.count("skipped a calibration record that does not parse") == 1
    assert json.loads(result.stdout.splitlines()[-1])["time"]["source"] == "model"


def test_calibrate_refuses_a_directory_without_runs_in_one_line(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, str(PROJECT / "launch" / "calibrate.py"), str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "neither a run directory" in result.stderr


def test_plan_json_reads_back_with_its_time(tmp_path: Path):
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=read")
    assert load_plan(plan.run_dir).time == plan.time


# --- the forecast: status while the run goes ------------------------------------------------------------------------


def slurm_plan(tmp_path: Path, *overrides: str) -> tuple[Plan, object]:
    """A small run planned for SLURM from the dev cluster's login node: 1024 rows, 8 per batch, 128 steps."""
    train, val = make_tiny_dataset(tmp_path / "data", ("math", "logic"), per_source=512)
    base = [
        "cluster=slurm",
        f"cluster.shared_dir={tmp_path}",
        "gpu=a40",
        "llm=qwen2_5_0_5b",
        "mode=quick_test",
        "trainer.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        f"data.train_files={train}",
        f"data.val_files={val}",
        "data.train_batch_size=8",
        "data.max_prompt_length=256",
        "data.max_response_length=512",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "trainer.total_training_steps=null",
        "trainer.total_epochs=1",
        "trainer.save_freq=50",
        "launch.skip_checks=[hub_cache]",
        f"launch.sweep_id=forecast-{tmp_path.name[-10:]}",
        *overrides,
    ]
    cfg = compose_config(*base)
    return plan_job(cfg, base, gather=on_partition), cfg


def test_forecast_warns_when_measured_steps_miss_the_first_checkpoint_and_the_requeues(tmp_path: Path):
    from launch.report.forecast import forecast

    plan, _ = slurm_plan(tmp_path)
    timing = plan.predicted_time
    assert timing is not None and timing.total_steps == 128 and timing.attempts == 1, (
        timing
    )  # the plan holds: it was submitted
    step_s = 120.0  # what the steps really take: 128 x 120 s needs 6 attempts of 50 min, 4 are allowed
    history = {step: {"timing_s/step": step_s, "response_length/mean": 100.0} for step in range(1, 6)}
    test_freq = int(plan.verl["trainer"]["test_freq"])
    assert 1 <= test_freq <= 5, test_freq
    history[test_freq]["timing_s/testing"] = 30.0  # verl times its validations apart from the step
    ahead = forecast(plan, history)
    assert ahead is not None and ahead.measured_step_s == step_s and ahead.step == 5
    validations_left = verl_validations(128, test_freq) - 5 // test_freq
    assert ahead.eta_h == pytest.approx((123 * 120 + validations_left * 30.0) / 3600)
    assert ahead.attempts_needed == 6 and ahead.attempts_allowed == 4
    text = "\n".join(ahead.lines())
    # the validations before step 50's checkpoint count (verl saves inside the step, then validates)
    before = (50 - 1) // test_freq
    first_min = 10 + (50 * 120 + before * 30) / 60
    assert f"first checkpoint (step 50) lands after the time limit ({first_min:.0f} of 60 min)" in text
    fitting = max(n for n in range(1, 26) if n * 120 + (n - 1) // test_freq * 30 <= 50 * 60)
    assert f"cancel and set trainer.save_freq={fitting}" in text
    assert "needs 6 attempts but cluster.max_requeues=3 allows 4" in text
    assert f"{step_s / plan.time.step_s:.1f}x the plan's" in text
    # a run going as planned has a forecast and no warning
    planned = {step: {"timing_s/step": plan.time.step_s} for step in range(1, 6)}
    assert forecast(plan, planned).warnings == []


def test_forecast_warns_when_the_card_fills_while_responses_grow(tmp_path: Path):
    from launch.report.forecast import forecast

    plan, _ = slurm_plan(tmp_path)
    capacity = plan.preflight.capacity_gib
    history = {
        step: {
            "timing_s/step": plan.time.step_s,
            "response_length/mean": 100.0 * (1.1**step),
            "perf/max_memory_reserved_gb": 0.94 * capacity,
        }
        for step in range(1, 11)
    }
    text = "\n".join(forecast(plan, history).lines())
    assert "94 % of the card at mean response 259 of 256 tokens" not in text  # capped lengths are not growth
    assert "94 % of the card at mean response" in text and "%/10 steps" in text
    steady = {step: {**metrics, "response_length/mean": 100.0} for step, metrics in history.items()}
    assert "of the card" not in "\n".join(forecast(plan, steady).lines())


def test_status_on_the_dev_cluster_shows_the_forecast_of_a_run_slower_than_planned(slurm_env, tmp_path: Path):
    """A real job whose stand-in driver logs steps 5x slower than the plan: `sweep.py status` says when its first
    checkpoint lands and warns while it runs."""
    import dataclasses
    import os
    from unittest import mock

    from conftest import wait_until

    from launch import slurm

    with mock.patch.dict(os.environ, {"SLURM_CONF": slurm_env["SLURM_CONF"]}):
        plan, cfg = slurm_plan(tmp_path)
        slow = 5 * plan.time.step_s
        driver = [sys.executable, str(PROJECT / "tests" / "jobs" / "timed_driver.py"), str(slow), "4"]
        plan = dataclasses.replace(plan, driver_command=driver)
        write_run_dir(plan, cfg)
        slurm.submit([plan], int(cfg.cluster.max_requeues))
    sweep_dir = Path(plan.run_dir).parent
    status = [sys.executable, str(PROJECT / "launch" / "sweep.py"), "status", str(sweep_dir)]

    def forecast_shown() -> str | None:
        result = subprocess.run(status, capture_output=True, text=True, env={**os.environ, **slurm_env}, timeout=60)
        return result.stdout if "forecast: step 4/128" in result.stdout else None

    run_dir = Path(plan.run_dir)
    try:
        out = wait_until(forecast_shown, 240, "status to show the running job's forecast")
        # the job measured itself against its plan after step launch.calibrate_after_step (3), while it ran
        wait_until((run_dir / CALIBRATION_FILE).exists, 120, "the job to write calibration.json after step 3")
    finally:
        (run_dir / "release").write_text("")
    assert f"at {slow:.0f} s/step (plan {plan.time.step_s:g} s, 5.0x)" in out, out
    assert "WARNING: at" in out and "the first checkpoint (step 50) lands after the time limit" in out, out
    assert "5.0x the plan's" in out
    measured = json.loads((run_dir / CALIBRATION_FILE).read_text())
    assert measured["time"]["measured_s"]["step"] == pytest.approx(slow, rel=1e-3)
    assert measured["time"]["error_pct"]["step"] == pytest.approx(-80.0, abs=0.5)  # the plan was 5x too quick
    # and once more when the attempt ended: the store holds this run, once for the planner
    store = store_path(run_dir.parent.parent)

    def ingested_at_the_end() -> bool:
        return len(read_store(store)[0]) >= 2

    wait_until(ingested_at_the_end, 180, "the job to append its record when the attempt ended")
    records, warnings = read_store(store)
    assert not warnings and len(calibration.latest_per_run(tuple(records))) == 1
    assert records[-1].measured_s["generate"] == pytest.approx(0.5 * slow, rel=1e-3)


def test_prompt_lengths_are_measured_on_the_data_when_the_tokenizer_is_here(tmp_path: Path):
    """The tiny model directory holds a tokenizer: the prompts of the train file are tokenized with the chat
    template, and the typical prompt (the preflight's typical line and the step time alike) is their median."""
    from test_readiness import tiny_run

    plan = planned(tmp_path, *tiny_run(tmp_path, per_source=40))
    lengths = plan.time.lengths
    assert lengths.source.startswith("prompt: measured (p50 of 80 rows tokenized; p95 ")
    assert 1 <= lengths.prompt_tokens < 256  # data.max_prompt_length of the tiny run
    assert "prompt: measured (p50 of 80 rows" in render(plan).split("typical", 1)[1].split("\n", 1)[0]
    stated = planned(tmp_path, *tiny_run(tmp_path, per_source=40), "launch.expect.prompt_tokens=100")
    assert stated.time.lengths.prompt_tokens == 100 and stated.time.lengths.source.startswith("prompt: launch.expect")
