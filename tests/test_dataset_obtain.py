"""A dataset group's files missing from dataset.root: the not-ready line says how to get them (dataset.obtain), under
the root the plan would read, besides where to point rlaunch at a copy."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_here


@pytest.mark.parametrize(
    "dataset, obtain",
    [
        ("guru", "hf download LLM360/guru-RL-92k --repo-type dataset --include 'train/*' --local-dir {root}"),
        ("gsm8k", "python examples/data_preprocess/gsm8k.py --local_save_dir {root}"),
    ],
)
def test_missing_data_says_how_to_get_it(tmp_path: Path, dataset: str, obtain: str):
    data = tmp_path / "data"
    result = run_here(f"dataset={dataset}", "launch.dry_run=true", cwd=tmp_path, env={"RLAUNCH_DATA_DIR": str(data)})
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if "not ready: data.train_files" in line)
    assert f"(now {data / dataset})" in line
    assert f"; no copy yet: {obtain.format(root=data / dataset)}" in line


def test_a_path_typed_on_the_command_line_is_not_told_to_download(tmp_path: Path):
    result = run_here(f"data.train_files={tmp_path}/none.parquet", "launch.dry_run=true", cwd=tmp_path)
    line = next(line for line in result.stdout.splitlines() if "not ready: data.train_files" in line)
    assert "was set on the command line" in line and "no copy yet" not in line
