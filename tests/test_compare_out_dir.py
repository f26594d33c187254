"""compare.py with a report directory it cannot make: one line naming --out, exit 2, and nothing written, not even
the runs' diagnosis.md (the doctor's, which compare writes before the report)."""

from __future__ import annotations

from pathlib import Path

import pytest
from metric_fixtures import SWEEP_ID, make_run

from launch.report import compare


def test_an_out_dir_that_cannot_be_made_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    sweep_dir = tmp_path / SWEEP_ID
    run_dir = make_run(sweep_dir, "guru_baseline", "a40")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(SystemExit) as exited:
        compare.main([str(sweep_dir), "--out", str(blocker / "report")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {blocker / 'report'}: cannot create it" in err, err
    assert "give --out a directory you can write" in err and "launch.runs_dir" not in err
    assert not (run_dir / "diagnosis.md").exists() and not (sweep_dir / "report").exists()
