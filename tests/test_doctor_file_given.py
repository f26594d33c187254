"""The doctor given a file where it takes a directory: a run's plan.json names its run directory; any other file
says the doctor also reads a job's log with --log. One line, exit 2 (it had said 'no such directory' of a file
that exists)."""

from __future__ import annotations

from pathlib import Path

import pytest
from metric_fixtures import make_run

from launch.report import doctor


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("plan.json", "plan.json is a file: give its run directory, {run_dir}"),
        ("job.out", "--log {path} for a job's log"),
    ],
)
def test_a_file_is_named_as_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, said: str):
    run_dir = make_run(tmp_path / "sweep", "guru_baseline", "a40")
    path = run_dir / name
    path.touch()
    with pytest.raises(SystemExit) as exited:
        doctor.main([str(path)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1, err
    assert said.format(run_dir=run_dir, path=path) in err and "no such directory" not in err
