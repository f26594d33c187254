"""The plan learns from what verl really logs (launch/calibration.py, launch/calibrate.py): the timers verl runs inside
its step that no phase counts (a checkpoint save), metric names another verl wrote, runs that disagree, lengths
measured under another limit, a SLURM plan whose cluster name is not readable here, and the calibrating runs named."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_calibration import SHAPE, data, planned, record, run_dir_of, write_metrics
from test_calibration_robust import calibrate, write_lines

from launch import calibration
from launch.calibration import StoreRecord, read_store, store_path
from launch.render import render
from launch.rundir import CALIBRATION_FILE, Plan, attempt_log_path

CHECKPOINT_S = 90.0  # one save, as verl's timing_s/save_checkpoint times it


def scaled_record(run_id: str, ratio: float, **changes: object) -> StoreRecord:
    """A store record whose every phase measured `ratio` x the model."""
    base = record(run_id)
    return replace(base, measured_s={phase: ratio * seconds for phase, seconds in base.model_s.items()}, **changes)


def with_checkpoints(plan: Plan, every: int) -> None:
    """verl 0.9.1 saves inside the step (ray_trainer.py: the save_checkpoint timer within the step timer): every
    `every` steps and the last, timing_s/step grows by the save."""
    log = attempt_log_path(Path(plan.run_dir), 1)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    for index, line in enumerate(lines):
        if line["step"] % every == 0 or index == len(lines) - 1:
            line["data"]["timing_s/save_checkpoint"] = CHECKPOINT_S
            line["data"]["timing_s/step"] += CHECKPOINT_S
    write_lines(log, lines)


def test_a_checkpoint_saved_inside_the_step_is_not_other_and_other_calibrates(tmp_path: Path):
    """save_freq 2 (the 72B plan saves every step): the save had landed in `other`, x10 the model, left out of every
    plan as beyond the bounds; the step measured with it was compared with a plan that never counts it."""
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=saves")
    write_metrics(plan, response_mean=800.0, factor=2.0, steps=6)
    with_checkpoints(plan, every=2)
    result = calibrate(plan.run_dir, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "other " in result.stdout and "checkpoint save 90 s (timed apart from the step)" in result.stdout
    (stored,) = read_store(store_path(Path(plan.run_dir).parent.parent))[0]
    assert stored.measured_s["other"] / stored.model_s["other"] == pytest.approx(2.0, rel=0.02)
    assert stored.checkpoint_s == CHECKPOINT_S  # kept for whatever plans a save's cost
    on_disk = json.loads((Path(plan.run_dir) / CALIBRATION_FILE).read_text())["time"]
    assert on_disk["checkpoint_s"] == CHECKPOINT_S
    assert on_disk["measured_s"]["step"] == pytest.approx(sum(stored.measured_s.values()), abs=0.05)
    after = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=next").time
    assert after.sources["other"].startswith("model x 2.00 from 1 run(s)"), after.sources


def test_a_log_without_verls_step_timer_says_so_and_names_the_timers_it_holds(tmp_path: Path):
    """Five steps logged under another verl's names (timing/*): calibrate had said "nothing to ingest yet (no step
    after the first logged ...)", a wait for steps that were there and a reason that was not the one."""
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=oldnames")
    write_metrics(plan, response_mean=800.0, factor=2.0, steps=5)
    log = attempt_log_path(Path(plan.run_dir), 1)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    for line in lines:
        line["data"] = {name.replace("timing_s/", "timing/"): value for name, value in line["data"].items()}
    write_lines(log, [{"step": 0, "data": {"val-core/math/reward/mean@1": 0.3}}, *lines])
    result = calibrate(plan.run_dir, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    said = result.stdout.strip()
    assert said.startswith(f"{Path(plan.run_dir).name}: nothing to ingest: timing_s/step (verl 0.9.1's step timer)")
    assert "is in none of the 5 step(s) logged" in said and "yet" not in said
    assert "timing keys seen: timing/gen, timing/old_log_prob, timing/step, timing/update_actor;" in said
    assert not store_path(Path(plan.run_dir).parent.parent).exists()


def test_runs_that_disagree_are_shown_with_their_range_and_said(tmp_path: Path):
    """One run at x1.44, one at x3.36: the plan said "model x 2.40 from 2 run(s)", a figure neither run measured."""
    two = calibration.phase_ratios([scaled_record("low", 1.44), scaled_record("high", 3.36)])["generate"].said()
    assert two.startswith("model x 2.40 from 2 run(s) of this shape on this cluster, x1.44-x3.36: the runs disagree")
    assert "x2.33 apart (more than x1.5)" in two
    close = calibration.phase_ratios([scaled_record("a", 1.9), scaled_record("b", 2.1)])["generate"].said()
    assert close == "model x 2.00 from 2 run(s) of this shape on this cluster, x1.90-x2.10"  # within x1.5: no warning
    alike = calibration.phase_ratios([scaled_record("c", 2.0), scaled_record("d", 2.0)])["generate"].said()
    assert alike == "model x 2.00 from 2 run(s) of this shape on this cluster"

    runs = []
    for index, factor in enumerate((1.44, 3.36)):
        plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), f"launch.sweep_id=d{index}")
        write_metrics(plan, response_mean=800.0, factor=factor)
        runs.append(plan.run_dir)
    assert calibrate(*runs, cwd=tmp_path).returncode == 0
    after = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=next")
    assert ", x1.44-x3.36: the runs disagree" in after.time.sources["generate"]
    assert after.time.sources["generate"] in render(after)


def test_a_measured_prompt_survives_another_response_limit_and_a_measured_response_does_not(tmp_path: Path):
    """The same model and data measured 300-token prompts under data.max_response_length=2048: a plan at 4096 had
    reverted the prompt to half of data.max_prompt_length. Its responses were cut at 2048: not 4096's."""
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=limit")
    write_metrics(plan, response_mean=800.0, factor=2.0)
    log = attempt_log_path(Path(plan.run_dir), 1)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    write_lines(log, [line | {"data": line["data"] | {"prompt_length/mean": 300.0}} for line in lines])
    assert calibration.ingest(Path(plan.run_dir)) is not None

    same = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=same").time.lengths
    assert (same.prompt_tokens, same.response_tokens) == (300.0, 800.0)
    longer = planned(tmp_path, *SHAPE, *data(tmp_path), "data.max_response_length=4096", "launch.sweep_id=longer")
    lengths = longer.time.lengths
    assert (lengths.prompt_tokens, lengths.response_tokens) == (300.0, 2048.0)
    assert lengths.source == (
        "prompt: measured (1 run(s) of this model and data); response: half of data.max_response_length"
    )


def test_a_slurm_plan_whose_cluster_name_is_unreadable_is_never_calibrated_by_a_workstation_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A configless SLURM login node has no slurm.conf: its plans had no cluster identity, so a local workstation's
    run of the same shape calibrated them ("from 1 run(s) of this shape on cluster local ..."). The kind is known."""
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "nonexistent.conf"))
    monkeypatch.delenv("SLURM_CLUSTER_NAME", raising=False)
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=workstation")
    write_metrics(plan, response_mean=800.0, factor=2.0)
    stored = calibration.ingest(Path(plan.run_dir))
    assert stored is not None and stored.cluster.startswith("local ")

    on_slurm = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=login", cluster="slurm")
    assert on_slurm.cluster_identity == "slurm"  # the kind, its name unknown here
    assert on_slurm.time.source == f"model (runs of this shape on {stored.cluster} not used: another cluster)"
    assert "not used: another cluster" in render(on_slurm)

    # runs planned on that login node calibrate its next plans, without calling it "this cluster"
    store = store_path(tmp_path / "rlaunch")
    write_lines(store, [json.loads(line) | {"cluster": "slurm"} for line in store.read_text().splitlines()])
    again = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=again", cluster="slurm").time
    assert again.sources["generate"] == (
        "model x 2.00 from 1 run(s) of this shape on a slurm cluster whose name was not readable"
    )
    named = calibration.shape_of(on_slurm.verl, on_slurm.llm, on_slurm.gpu_profile, 1e5, "slurm alpha")
    assert not calibration.another_cluster(named, replace(stored, cluster="slurm"))
    assert calibration.another_cluster(named, replace(stored, cluster="slurm beta"))
    assert calibration.another_cluster(named, replace(stored, cluster="ray 10.0.0.1:6379"))


def test_a_plan_right_to_the_tenth_writes_zero_not_minus_zero_and_lengths_have_their_unit(tmp_path: Path):
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=exact")
    write_metrics(plan, response_mean=plan.time.lengths.response_tokens, factor=1.0)
    log = attempt_log_path(Path(plan.run_dir), 1)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    for line in lines:  # the plan's own seconds, a hair over: (predicted - measured) / measured rounds to -0.0
        line["data"]["timing_s/gen"] = plan.time.phases_s["generate"] * 1.0001 + (30.0 if line["step"] == 1 else 0.0)
    write_lines(log, lines)
    result = calibrate(plan.run_dir, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    text = (Path(plan.run_dir) / CALIBRATION_FILE).read_text()
    assert json.loads(text)["time"]["error_pct"]["generate"] == 0.0 and "-0.0" not in text
    assert f"mean response {plan.time.lengths.response_tokens:.0f} tokens;" in result.stdout


def test_a_plan_calibrated_by_a_run_of_another_size_names_that_model(tmp_path: Path):
    """The shape takes a family's sizes within 2x: a 14B plan timed by a 7B run had said "from 1 run(s) of this
    shape", as if it were the 14B's own."""
    seven = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=seven")
    write_metrics(seven, response_mean=800.0, factor=2.0)
    stored = calibration.ingest(Path(seven.run_dir))
    assert stored is not None
    fourteen = planned(tmp_path, *SHAPE, *data(tmp_path), "llm=qwen2_5_14b", "launch.sweep_id=fourteen").time
    assert fourteen.source == (
        "calibrated: from 1 run(s) of this shape on this cluster (1 of them of another size than this 14.8B model: "
        f"{stored.model_path} ({stored.params / 1e9:.1f}B))"
    )
    again = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=again").time
    assert again.source == "calibrated: from 1 run(s) of this shape on this cluster"  # its own size: nothing more
