"""compare.py as the probe met it: two sweeps given at once, and runs told apart only by the key their sweep varies."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from metric_fixtures import SWEEP_ID, make_run

from launch.report import compare
from launch.report.metrics import read_run


def test_two_sweeps_are_one_line_saying_compare_takes_one_and_how_to_put_runs_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    with pytest.raises(SystemExit) as exited:
        compare.main([str(tmp_path / "sweepA"), str(tmp_path / "sweepC")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unrecognized arguments" not in err, err
    assert (
        f"compare.py takes one sweep (its directory, a run directory, or a W&B group), got 2: {tmp_path}/sweepA" in err
    )
    assert "run it once per sweep, or to see runs of two sweeps in one table link their run directories" in err
    with pytest.raises(SystemExit) as exited:
        compare.main([str(tmp_path / "sweepA"), "--outt", "x"])
    assert (
        exited.value.code == 2
        and "unknown option --outt: compare.py takes a sweep and --out" in capsys.readouterr().err
    )


def test_the_runs_table_keeps_the_swept_key_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    run = read_run(make_run(tmp_path / SWEEP_ID, "guru_baseline", "a40"))
    summaries = []
    for steps in (20, 40):  # a crowded row: the doctor's column and the state take their room
        summary = compare.summarize(run)
        summary = replace(summary, label=f"grpo · a40 · total_training_steps={steps}", state="CANCELLED by 0")
        summaries.append(replace(summary, diagnoses=["memory_calibration_far_off", "throughput_low"]))
    compare.print_tables(summaries)
    shown = capsys.readouterr().out.split("validation per domain")[0]  # the runs table (the others have room)
    assert "total_training_steps=20" in shown and "total_training_steps=40" in shown, shown
