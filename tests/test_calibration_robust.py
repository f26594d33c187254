"""The closed loop on what real runs leave behind (launch/calibration.py, launch/calibrate.py, launch/rundir.py): values
verl's file logger could not encode, phases verl did not time, each attempt's compiling first step, a store with a
cut or hand-edited line, a run measured far from its shape, a run directory copied from another cluster. One bad
value or record is left out, and said; it never stops a plan nor poisons the next one."""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from conftest import Result, compose_config
from test_calibration import SHAPE, data, planned, record, run_dir_of, write_metrics

from launch import calibration
from launch.calibrate import main as calibrate_main
from launch.calibration import append, read_store, store_path
from launch.errors import UserError
from launch.render import render
from launch.rundir import PLAN_FILE, attempt_log_path, load_plan, parse_records, read_history, warmup_steps


def write_lines(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in records))


def calibrate(*run_dirs: str | Path, cwd: Path) -> Result:
    """launch/calibrate.py's main in this process (test_calibration runs the script itself as a user would)."""
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            calibrate_main([str(run_dir) for run_dir in run_dirs])
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return Result(code, out.getvalue(), err.getvalue())


def test_values_verl_could_not_encode_are_dropped_as_the_metrics_are_read():
    """verl's file logger writes with orjson: NaN and inf become null. Python's json writes NaN. Neither is a time."""
    lines = [
        '{"step": 1, "data": {"timing_s/gen": null, "timing_s/step": 10.0, "note": "n/a"}}',
        '{"step": 2, "data": {"timing_s/gen": NaN, "timing_s/step": Infinity, "flag": true, "n": 3}}',
        '{"step": "3", "data": {"timing_s/step": 1.0}}',
    ]
    assert parse_records(lines) == [(1, {"timing_s/step": 10.0}), (2, {"n": 3})]


def test_a_run_with_unencodable_values_still_calibrates_and_the_next_plan_stays_finite(tmp_path: Path):
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=nan")
    write_metrics(plan, response_mean=800.0, factor=2.0, steps=5)
    log = attempt_log_path(Path(plan.run_dir), 1)
    lines = log.read_text().splitlines()
    # step 3's generation timer came back as orjson's null, step 4's as Python's NaN
    lines[2] = lines[2].replace(json.dumps(json.loads(lines[2])["data"]["timing_s/gen"]), "null", 1)
    lines[3] = lines[3].replace(json.dumps(json.loads(lines[3])["data"]["timing_s/gen"]), "NaN", 1)
    log.write_text("\n".join(lines) + "\n")
    result = calibrate(plan.run_dir, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    stored = calibration.latest_per_run(tuple(read_store(store_path(Path(plan.run_dir).parent.parent))[0]))
    assert len(stored) == 1 and all(math.isfinite(seconds) for seconds in stored[0].measured_s.values())
    assert stored[0].measured_s["generate"] / stored[0].model_s["generate"] == pytest.approx(2.0, rel=0.02)
    assert (
        planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=next")
        .time.sources["generate"]
        .startswith("model x 2.00 from 1 run(s)")
    )


def test_a_phase_verl_did_not_time_is_left_out_not_measured_as_zero(tmp_path: Path):
    """No timing_s/old_log_prob (verl takes the rollout's log-probs): the phase has no measurement, so no ratio; it
    had been stored as 0 s, a ratio of 0, clamped to x0.25 in every later plan."""
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=nologprob")
    write_metrics(plan, response_mean=800.0, factor=2.0)
    log = attempt_log_path(Path(plan.run_dir), 1)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    for line in records:
        line["data"]["timing_s/step"] -= line["data"].pop("timing_s/old_log_prob")
    write_lines(log, records)
    stored = calibration.ingest(Path(plan.run_dir))
    assert stored is not None and "log_prob" not in stored.measured_s
    assert "log_prob" not in calibration.phase_ratios([stored])
    after = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=next").time
    assert after.sources["log_prob"] == "model" and after.sources["generate"].startswith("model x 2.00")
    assert "log_prob not timed" in calibrate(plan.run_dir, cwd=tmp_path).stdout


def test_each_attempts_first_step_is_left_out_and_a_run_of_one_step_is_not_a_calibration(tmp_path: Path):
    """A requeued attempt resumes from its checkpoint and compiles again: its first step is as slow as the run's
    first. A run killed after its first step measured nothing steady."""
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=resumed")
    write_metrics(plan, response_mean=800.0, factor=2.0, steps=4)
    first = [json.loads(line) for line in attempt_log_path(Path(plan.run_dir), 1).read_text().splitlines()]
    steady = first[-1]["data"]
    # attempt 2 resumes from the checkpoint of step 2: validation-only record, a compiling step 3, then steps 4-6
    resumed = [{"step": 2, "data": {"val-core/math/reward/mean@1": 0.5}}]
    resumed.append({"step": 3, "data": steady | {"timing_s/gen": steady["timing_s/gen"] + 600.0}})
    resumed += [{"step": step, "data": steady} for step in (4, 5, 6)]
    write_lines(attempt_log_path(Path(plan.run_dir), 2), resumed)
    assert warmup_steps(Path(plan.run_dir)) == {1, 3}
    measured = calibration.measure(read_history(Path(plan.run_dir)), warmup_steps(Path(plan.run_dir)))
    assert measured is not None and measured.phases_s["generate"] == pytest.approx(steady["timing_s/gen"], abs=0.01)

    killed = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=killed")
    write_metrics(killed, response_mean=800.0, factor=2.0, steps=1)
    result = calibrate(killed.run_dir, cwd=tmp_path)
    assert result.returncode == 0 and "nothing to ingest yet (no step after the first logged" in result.stdout
    assert not store_path(Path(killed.run_dir).parent.parent).exists()


def test_a_run_measured_far_from_its_shape_is_left_out_and_said(tmp_path: Path):
    """A record 45x the model (a stalled run, a setting the shape does not see) was clamped to x4 and pulled the
    median there: it is left out, and the plan says so with its ratio."""
    runs = []
    for index, factor in enumerate([2.0, 2.0, 45.0]):
        plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), f"launch.sweep_id=o{index}")
        write_metrics(plan, response_mean=800.0, factor=factor)
        runs.append(plan.run_dir)
    assert calibrate(*runs, cwd=tmp_path).returncode == 0
    after = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=next")
    generate = after.time.sources["generate"]
    assert generate.startswith("model x 2.00 from 2 run(s) of this shape on this cluster (1 run(s) of this shape left")
    assert "measured x45.00 the model, beyond x0.25-4" in generate and generate in render(after)
    lone = calibration.phase_ratios([replace(record("far"), measured_s=dict.fromkeys(calibration.PHASES, 450.0))])
    assert lone["generate"].ratio == 1.0 and lone["generate"].said().startswith("model (1 run(s) of this shape left")


def test_a_bad_store_line_is_skipped_with_a_warning_and_an_append_after_a_cut_line_keeps_its_own(tmp_path: Path):
    store = tmp_path / calibration.STORE_FILE
    good = json.dumps(asdict(record("good")))
    bad = [
        "null",
        json.dumps(asdict(record("nulls")) | {"measured_s": None}),
        json.dumps(asdict(record("nan")) | {"model_s": {"generate": None}}),
        json.dumps(asdict(record("text")) | {"params": "7B"}),
    ]
    store.write_text("\n".join([good, *bad]) + "\n" + '{"run_id": "cut short by a kill", "gpu"')
    append(store, record("after the cut"))
    records, warnings = read_store(store)
    assert [r.run_id for r in records] == ["good", "after the cut"]
    assert len(warnings) == 5 and all("skipped a calibration record that does not parse" in w for w in warnings)
    assert "a JSON NoneType, not a record" in warnings[0] and "measured_s is not a table of finite" in warnings[1]
    shape = calibration.shape_of(
        planned(tmp_path, *SHAPE).verl, planned(tmp_path, *SHAPE).llm, "a100_80", records[0].tokens_per_gpu
    )
    calibration.phase_ratios(calibration.nearest(shape, tuple(records)))  # plans from what is left, never raises


def test_pcgrad_and_plain_runs_never_calibrate_each_other(tmp_path: Path):
    """mtl_pcgrad's update is one forward/backward per domain plus a reduce: another step than the plain trainer's."""
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=plain")
    write_metrics(plan, response_mean=800.0, factor=2.0)
    stored = calibration.ingest(Path(plan.run_dir))
    assert stored is not None and stored.trainer_mode == "sync"
    pcgrad = planned(tmp_path, *SHAPE, *data(tmp_path), "algo=mtl_pcgrad", "launch.sweep_id=pcgrad")
    assert pcgrad.time.source == "model"
    plain = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=again")
    assert plain.time.source.startswith("calibrated: from 1 run(s)")
    older = replace(stored, trainer_mode="")  # a store written before the mode was recorded still calibrates
    shape = calibration.shape_of(pcgrad.verl, pcgrad.llm, pcgrad.gpu_profile, stored.tokens_per_gpu)
    assert calibration.nearest(shape, (older,)) and not calibration.nearest(shape, (stored,))


def test_a_copied_run_directory_writes_the_store_where_it_lives_and_says_where(tmp_path: Path):
    plan = run_dir_of(tmp_path / "cluster_a", *SHAPE, *data(tmp_path), "launch.sweep_id=copied")
    write_metrics(plan, response_mean=800.0, factor=2.0)
    copy = tmp_path / "here" / "rlaunch" / "copied" / Path(plan.run_dir).name
    shutil.copytree(plan.run_dir, copy)
    shutil.rmtree(tmp_path / "cluster_a")  # plan.json still names the other cluster's path
    result = calibrate(copy, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"appended to {copy.parent.parent / calibration.STORE_FILE}" in result.stdout
    assert store_path(copy.parent.parent).exists() and not (tmp_path / "cluster_a").exists()


def test_a_plan_json_cut_short_is_one_line(tmp_path: Path):
    plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=cut")
    path = Path(plan.run_dir) / PLAN_FILE
    path.write_text(path.read_text()[:200])
    with pytest.raises(UserError, match=r"plan.json is not valid JSON \(.*\): plan the run again, or restore the file"):
        load_plan(plan.run_dir)
    result = calibrate(plan.run_dir, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "is not valid JSON" in result.stderr


def test_a_store_from_another_cluster_never_times_this_one_and_the_plan_says_whose_runs_it_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The store is per runs dir: one copied from another cluster, or a runs dir two clusters share, had been quoted
    as "this cluster". Each record names its cluster (SLURM's ClusterName, read from slurm.conf, never asked of a
    controller), and another cluster's runs are left out, and said."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("SlurmctldHost=head\n  clustername = Alpha  # the site's name\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    monkeypatch.delenv("SLURM_CLUSTER_NAME", raising=False)
    runs = []
    for index in range(3):
        plan = run_dir_of(tmp_path, *SHAPE, *data(tmp_path), f"launch.sweep_id=c{index}")
        write_metrics(plan, response_mean=800.0, factor=2.0)
        runs.append(plan.run_dir)
    assert calibrate(*runs, cwd=tmp_path).returncode == 0
    store = store_path(tmp_path / "rlaunch")
    recorded = {json.loads(line)["cluster"] for line in store.read_text().splitlines()}
    assert len(recorded) == 1 and recorded.pop().startswith("local ")

    on_alpha = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=next", cluster="slurm")
    assert on_alpha.cluster_identity == "slurm alpha"
    assert on_alpha.time.source.startswith("model") and "not used: another cluster" in on_alpha.time.source
    assert "not used: another cluster" in render(on_alpha)

    def recorded_on(cluster: str) -> None:
        lines = [json.loads(line) | {"cluster": cluster} for line in store.read_text().splitlines()]
        write_lines(store, lines)

    recorded_on("slurm alpha")
    same = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=same", cluster="slurm")
    assert same.time.sources["generate"] == "model x 2.00 from 3 run(s) of this shape on this cluster"
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "alpha")  # inside an allocation SLURM says it: the same identity
    assert calibration.cluster_identity(compose_config("cluster=slurm")) == "slurm alpha"

    recorded_on("")  # a store written before records named their cluster
    unnamed = planned(tmp_path, *SHAPE, *data(tmp_path), "launch.sweep_id=old", cluster="slurm")
    assert unnamed.time.sources["generate"].endswith("on a cluster its records do not name")
