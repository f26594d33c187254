"""launch/report/compare.py on a fixture sweep (2 algos x 2 GPU profiles, 6 domains, one run preempted and resumed)
whose metric files use verl's real names: the report's numbers, the merged history, the PNGs and the doctor's links."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PROJECT
from metric_fixtures import DOMAINS, SWEEP_ID, make_fixture_sweep, make_run, validation_reward
from PIL import Image

from launch.report import failures
from launch.report.compare import against_baseline, compare, diagnose_local, memory_cell, step_time_rows, summarize
from launch.report.metrics import read_run, run_dirs
from launch.steptime import PHASES


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    return make_fixture_sweep(tmp_path_factory.mktemp("compare"))


@pytest.fixture(scope="module")
def report(sweep: Path) -> Path:
    return compare(str(sweep), None, "rlaunch", None)


def summaries_by_label(sweep: Path) -> dict[str, object]:
    return {summary.label: summary for summary in (summarize(read_run(d)) for d in run_dirs(sweep))}


def test_numbers_per_run_and_domain(sweep: Path, report: Path):
    summaries = summaries_by_label(sweep)
    algos, gpus = ("guru_baseline", "mtl_pcgrad"), ("a40", "a100_80")
    assert set(summaries) == {f"{algo} · {gpu}" for algo in algos for gpu in gpus}
    pcgrad_a40 = summaries["mtl_pcgrad · a40"]
    assert pcgrad_a40.throughput == 1000.0 and pcgrad_a40.mfu == pytest.approx(0.2)  # attempt 1's lost steps excluded
    assert pcgrad_a40.step_s == pytest.approx(100.0) and pcgrad_a40.last_step == 10
    assert len(pcgrad_a40.run.attempts) == 2
    assert summaries["guru_baseline · a100_80"].throughput == 2000.0
    assert summaries["guru_baseline · a100_80"].step_s == pytest.approx(52.5)
    for index, domain in enumerate(DOMAINS):
        reward = pcgrad_a40.reward[domain]
        assert reward.final == pytest.approx(validation_reward(index, 10, 0.05))
        best_step = 5 if index % 2 else 10
        assert (reward.best, reward.best_step) == (pytest.approx(validation_reward(index, best_step, 0.05)), best_step)
        assert pcgrad_a40.accuracy[domain].final == pytest.approx(validation_reward(index, 10, 0.05) / 2)
    peak, predicted = pcgrad_a40.peak_gib, pcgrad_a40.predicted_gib
    assert predicted == pcgrad_a40.run.predicted_torch_peak_gib and peak == pytest.approx(0.95 * predicted, abs=0.01)


def test_report_markdown_compares_pcgrad_with_the_baseline_on_the_same_gpu(sweep: Path, report: Path):
    text = report.read_text()
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():  # the runs table comes first; later tables (step time) repeat the labels
        if " · " in line[:30]:
            rows.setdefault(line.split(" | ")[0].lstrip("| "), line.split(" | "))
    baseline_mean = sum(validation_reward(i, 10, 0.0) for i in range(6)) / 6
    assert rows["guru_baseline · a40"][9] == f"{baseline_mean:.3f}"
    assert rows["mtl_pcgrad · a40"][10] == "+0.050" and rows["mtl_pcgrad · a100_80"][10] == "+0.050"
    assert rows["mtl_pcgrad · a40"][2] == "—"  # state: no manifest lists the fixture runs, no job log says
    assert rows["mtl_pcgrad · a40"][4] == "2"  # attempts
    assert rows["mtl_pcgrad · a40"][5] == "1000" and rows["mtl_pcgrad · a40"][6] == "20.0%"
    assert "reward 0.200 / best 0.250 @5; acc 0.100 / best 0.125" in text  # codegen, PCGrad: dipped at step 10
    for run_dir in run_dirs(sweep):  # each run's diagnosis, written and linked
        assert (run_dir / "diagnosis.md").exists()
        assert f"(../{run_dir.name}/diagnosis.md)" in text
    assert "[healthy]" in text  # fixture runs are consistent with their plans


def test_plots_are_valid_pngs_one_per_domain(report: Path):
    plots = sorted(report.parent.glob("reward_*.png"))
    assert [plot.stem for plot in plots] == [f"reward_{domain}" for domain in sorted(DOMAINS)]
    for plot in plots:
        with Image.open(plot) as image:
            image.verify()
        with Image.open(plot) as image:
            assert image.format == "PNG" and image.size == (600, 400)
            colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
            assert colours is not None and len(colours) > 20  # curves drawn, not a blank canvas
        assert f"![{plot.stem}]({plot.name})" in report.read_text()


def test_cli_prints_the_tables_and_rejects_a_missing_sweep(sweep: Path, tmp_path: Path):
    script = str(PROJECT / "launch" / "report" / "compare.py")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, script, str(sweep), "--out", str(out)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "mtl_pcgrad · a40" in result.stdout and (out / "report.md").exists()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no W&B credentials
    missing = subprocess.run(
        [sys.executable, script, "no-such-sweep"], capture_output=True, text=True, timeout=120, env=env
    )
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
    assert missing.stderr.startswith("rlaunch: error: no such sweep directory: no-such-sweep")


def test_step_time_per_phase_planned_against_measured_with_the_error(sweep: Path, report: Path):
    summaries = summaries_by_label(sweep)
    time = summaries["mtl_pcgrad · a40"].step_time
    plan = summaries["mtl_pcgrad · a40"].run.plan
    # the fixture's steps: gen 40 + reward 5 + update 40 + other 15; no old_log_prob logged, so no log_prob measured
    assert time["measured_s"] == {"generate": 40.0, "update": 40.0, "other": 20.0, "step": 100.0}
    assert time["predicted_s"]["generate"] == plan.time.phases_s["generate"]
    assert time["error_pct"]["update"] == pytest.approx(100 * (plan.time.phases_s["update"] - 40) / 40, abs=0.1)
    text = report.read_text()
    assert "## Step time: the plan against the measurement" in text and " / not timed" in text
    generate = plan.time.phases_s["generate"]
    assert f"{generate:g} / 40 (x{40 / generate:.3g})" in text  # the measurement as a multiple of the plan
    with Image.open(report.parent / "step_time.png") as image:
        assert image.format == "PNG"
    assert "![step time](step_time.png)" in text


def test_a_plan_far_short_reads_as_a_multiple_not_a_percentage_capped_at_minus_100(sweep: Path):
    """A phase measured at 17.3x its plan: (plan - measured) / measured showed -94 %, which reads like a near miss;
    the cell shows the multiple."""
    summary = summaries_by_label(sweep)["guru_baseline · a40"]
    planned = {"predicted_s": {phase: 10.0 for phase in (*PHASES, "step")}}
    summary.step_time = planned | {
        "measured_s": {phase: 173.0 for phase in (*PHASES, "step")},
        "predicted_source": "model",
    }
    [row] = step_time_rows([summary])[1]
    assert row[1] == "10 / 173 (x17.3)" and "%" not in " ".join(row)


def test_the_state_cell_shows_the_cause_without_the_logs_timestamp_cut_at_a_word(sweep: Path):
    summary = summaries_by_label(sweep)["guru_baseline · a40"]
    line = "submitit WARNING (2026-11-20 10:41:00,960) - Caught signal SIGUSR2 on gpu-a02: this job is preempted."
    summary.state, summary.failed = "COMPLETED", [failures.Failure("preempted", [line], attempt=1)]
    assert summary.state_cell == "COMPLETED (preempted: Caught signal SIGUSR2 on gpu-a02: this…)"


def test_a_reward_validated_only_before_training_is_not_called_final(tmp_path: Path):
    """A run whose only validation is verl's before training (step 0) shows the base model's reward: the cell says
    so, and it is not set against the baseline."""
    sweep_dir = tmp_path / SWEEP_ID
    make_run(sweep_dir, "guru_baseline", "a40", last_step=10)
    make_run(sweep_dir, "mtl_pcgrad", "a40", last_step=0)
    summaries = {summary.run.algo: summary for summary in (summarize(read_run(d)) for d in run_dirs(sweep_dir))}
    against_baseline(list(summaries.values()))
    untrained = summaries["mtl_pcgrad"]
    assert untrained.final_reward_cell == f"{untrained.mean_final_reward:.3f} (step 0, before training)"
    assert untrained.reward_vs_baseline is None
    assert "before training" not in summaries["guru_baseline"].final_reward_cell


def test_the_memory_peak_against_the_prediction_reads_as_a_multiple_as_the_step_times_do(sweep: Path):
    """'33.0 / 9.2 (359%)' read like a share; the step-time table says x."""
    summary = summaries_by_label(sweep)["guru_baseline · a40"]
    summary.peak_gib, summary.predicted_gib = 33.0, 9.2
    assert memory_cell(summary) == "33.0 / 9.2 (x3.59)"


def test_a_dry_runs_run_gets_no_diagnosis_in_compare_as_in_the_doctor(tmp_path: Path):
    """The doctor says a dry run's run has nothing to diagnose; compare listed memory_calibration for the same run
    where metrics sat in its directory."""
    sweep_dir = tmp_path / SWEEP_ID
    run_dir = make_run(sweep_dir, "guru_baseline", "a40", memory_ratio=3.0)
    run = {"run_id": run_dir.name, "run_dir": str(run_dir), "job_name": "a40"}
    manifest = {"sweep_id": SWEEP_ID, "sweep_dir": str(sweep_dir), "runs": [run], "arrays": [], "dry_run": True}
    (sweep_dir / "manifest.json").write_text(json.dumps(manifest))
    summary = summarize(read_run(run_dir))
    diagnose_local(summary, None)
    assert summary.state == failures.DRY_RUN_STATE
    assert (summary.diagnoses, summary.diagnosis_file) == ([], None) and not (run_dir / "diagnosis.md").exists()
