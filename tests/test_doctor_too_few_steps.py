"""A run with training steps but fewer steady ones than the doctor's min_steps: its speed and MFU were not judged, so
the doctor says so instead of "nothing holds this run back", and compare's doctor column does not call it healthy
(launch/report/doctor.py speed_unjudged)."""

from __future__ import annotations

from pathlib import Path

import pytest
from metric_fixtures import make_run

from launch.report import doctor
from launch.report.compare import diagnose_local, overview_rows, summarize
from launch.report.metrics import read_run


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Steps 1 and 2: step 1 compiles (left out), one steady step against conf/doctor.yaml's min_steps 2."""
    return make_run(tmp_path_factory.mktemp("few") / "sweep", "guru_baseline", "a100_80", last_step=2)


def test_the_doctor_says_the_speed_was_not_judged(two_steps: Path):
    run = read_run(two_steps)
    thresholds = doctor.load_thresholds()
    assert doctor.diagnose(run, thresholds) == []
    text = doctor.render_text(run, [], two_steps / "diagnosis.md", (), thresholds)
    assert "no diagnosis: speed not judged yet: 1 steady step(s) of the min_steps=2" in text
    assert "nothing holds this run back by the doctor's thresholds" not in text
    markdown = doctor.render_markdown(run, [], (), thresholds)
    assert "Speed not judged yet: 1 steady step(s) of the min_steps=2 its speed and MFU need" in markdown
    # a threshold given on the command line is the one said
    assert "min_steps=1" not in doctor.render_text(run, [], two_steps, (), doctor.load_thresholds(["min_steps=1"]))


def test_compare_does_not_call_it_healthy(two_steps: Path):
    summary = summarize(read_run(two_steps))
    diagnose_local(summary, None)
    _, rows = overview_rows([summary])
    assert rows[0][-1] == "too few steps"


def test_the_diagnosis_names_the_run_as_compare_does(two_steps: Path):
    """The header said the job name and then algo and gpu again ('a100_80 · algo guru_baseline · gpu a100_80')."""
    run = read_run(two_steps)
    header = doctor.render_markdown(run, []).splitlines()[2]
    assert header == f"guru_baseline · a100_80 · `{two_steps}`" == f"{summarize(run).label} · `{two_steps}`"
