"""One s/step across the reports (launch/report/metrics.py step_s_over): the doctor's, compare's overview and
step-time table, and the status forecast take verl's timing_s/step less its checkpoint saves, median over the steady
steps; the forecast adds the saves back where verl makes them and says so. A run that saves every step had shown a
save-laden s/step in the doctor and the forecast and a save-free one in compare's step-time table."""

from __future__ import annotations

from pathlib import Path

import pytest
from metric_fixtures import StepProfile, make_plan_dir, run_records, write_attempt

from launch.report import doctor
from launch.report.compare import markdown_report, print_tables, summarize
from launch.report.forecast import forecast
from launch.report.metrics import read_run
from launch.rundir import load_plan, read_history, warmup_steps

PROFILE = StepProfile()  # 100 s a step without saving
SAVE_S = 60.0  # verl's timing_s/save_checkpoint, inside timing_s/step


@pytest.fixture(scope="module")
def saving_every_step(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 of 20 steps, each saving a checkpoint (trainer.save_freq=1): timing_s/step is 160 s on every one."""
    run_dir = make_plan_dir(
        tmp_path_factory.mktemp("saves") / "sweep",
        "guru_baseline",
        "a100_80",
        "trainer.save_freq=1",
        "trainer.total_training_steps=20",
    )
    records = run_records(range(0, 13), PROFILE, bonus=0.0)
    records = [
        (step, data | {"timing_s/step": data["timing_s/step"] + SAVE_S, "timing_s/save_checkpoint": SAVE_S})
        if "timing_s/step" in data
        else (step, data)
        for step, data in records
    ]
    write_attempt(run_dir, 1, records)
    return run_dir


def test_the_doctor_compare_and_the_forecast_say_one_step(saving_every_step: Path):
    run = read_run(saving_every_step)
    times = doctor.step_times(run, doctor.load_thresholds())
    summary = summarize(run)
    ahead = forecast(
        load_plan(str(saving_every_step)), read_history(saving_every_step), warmup_steps(saving_every_step)
    )
    assert times is not None and ahead is not None and summary.step_time is not None
    assert times.step_s == summary.step_s == ahead.measured_step_s == PROFILE.step_s
    assert summary.step_time["measured_s"]["step"] == PROFILE.step_s  # the step-time table's measured step
    assert times.share(times.gen_s) == pytest.approx(PROFILE.gen_s / PROFILE.step_s)  # not diluted by the saves


def test_the_forecast_adds_the_saves_back_and_says_so(saving_every_step: Path):
    plan = load_plan(str(saving_every_step))
    history = read_history(saving_every_step)
    ahead = forecast(plan, history, warmup_steps(saving_every_step))
    assert ahead is not None and ahead.save_s == SAVE_S
    assert f"at {PROFILE.step_s:.0f} s/step" in ahead.lines()[0]
    assert f"checkpoint saves apart: {SAVE_S:.0f} s each" in ahead.lines()[0]
    # 8 steps left, each saving (no validation measured or predicted)
    assert ahead.total_steps == 20 and ahead.eta_h == pytest.approx(8 * (PROFILE.step_s + SAVE_S) / 3600)


def test_compare_says_what_its_s_step_covers(saving_every_step: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    summary = summarize(read_run(saving_every_step))
    assert "s/step is verl's timing_s/step less its checkpoint saves" in markdown_report("t", [summary], [], tmp_path)
    print_tables([summary])
    assert "less its checkpoint saves" in " ".join(capsys.readouterr().out.split())
