"""After planning: the sweep's manifest (dry runs included), finding a sweep by id in every runs directory a plan
could have used, the code snapshot that only a submission writes (once per content, under the runs directory), and
hydra-submitit-launcher's `hydra.launcher.*` keys taken as rlaunch's."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import run_cli
from test_slurm import SUBMIT, slurm, sweep_cli

from launch import manifest as manifests
from launch.auto import LAUNCHER_ALIASES, launcher_aliases
from launch.errors import UserError
from launch.manifest import Manifest, ManifestArray, ManifestRun
from launch.sweep import find_sweep

# a HOME of the test's own moves the slurm cluster's default shared_dir (~/rlaunch); verl's check cache stays where
# it is, so that planning does not import verl again
CACHE = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")


def home_env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": CACHE}


def planned_sweep(stdout: str) -> tuple[str, str]:
    """(sweep id, sweep dir) of a readable dry run's plan."""
    sweep_id = re.search(r"\(sweep (\S+)\)", stdout).group(1)
    run_dir = re.search(r"run dir +(\S+)", stdout).group(1)
    return sweep_id, str(Path(run_dir).parent)


def test_a_slurm_dry_run_sweep_writes_a_dry_manifest_and_no_code_and_status_finds_it(tmp_path: Path):
    env = home_env(tmp_path)
    result = run_cli("cluster=slurm", "gpu=a40,h100", "launch.dry_run=true", "-m", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    sweep_id, sweep_dir = planned_sweep(result.stdout)
    assert sweep_dir == str(tmp_path / "home" / "rlaunch" / "rlaunch" / sweep_id)
    manifest = json.loads((Path(sweep_dir) / "manifest.json").read_text())
    assert manifest["dry_run"] is True and manifest["cluster"] == "slurm"
    assert sorted(run["job_name"] for run in manifest["runs"]) == ["a40", "h100"]
    assert all("job_id" not in run and Path(run["run_dir"]).parent == Path(sweep_dir) for run in manifest["runs"])
    # the plan names the snapshot under the runs directory; a dry run copies nothing
    code_dir = json.loads(next(Path(sweep_dir).glob("*/plan.json")).read_text())["code_dir"]
    assert Path(code_dir).parent == tmp_path / "home" / "rlaunch" / "rlaunch" / "code"
    assert not [path for path in tmp_path.rglob("code") if path.is_dir()]

    for sweep in (sweep_id, sweep_dir, manifest["runs"][0]["run_dir"]):  # by id (slurm's shared_dir), by path
        for command in ("status", "logs"):
            shown = sweep_cli(command, sweep, env)
            assert shown.returncode == 0, shown.stderr
            assert f"sweep {sweep_id}  nothing submitted (2 planned runs)" in shown.stdout
            assert all(run["run_dir"] in shown.stdout for run in manifest["runs"])
    cancelled = sweep_cli("cancel", sweep_id, env)
    assert cancelled.returncode == 0 and "dry run: nothing to cancel" in cancelled.stdout


def test_a_local_json_dry_run_is_found_by_id_in_the_working_directorys_runs(tmp_path: Path):
    result = run_cli("cluster=local", "launch.dry_run=json", cwd=tmp_path, env=home_env(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    plan = json.loads(result.stdout)
    assert Path(plan["run_dir"]).parent.parent == tmp_path / "runs" / "rlaunch"
    shown = sweep_cli("status", plan["sweep_id"], home_env(tmp_path), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "nothing submitted (1 planned run)" in shown.stdout and plan["run_dir"] in shown.stdout


def test_a_sweep_id_in_two_runs_directories_or_in_none_is_one_line_naming_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for runs_dir in (tmp_path / "runs" / "rlaunch", tmp_path / "other"):
        Manifest("s1", str(runs_dir / "s1"), runs=[], dry_run=True).write()
    assert find_sweep("s1", None) == tmp_path / "runs" / "rlaunch" / "s1"
    with pytest.raises(UserError, match=rf"sweep id s1 is ambiguous: it is in {tmp_path}/other/s1, {tmp_path}/runs"):
        find_sweep("s1", tmp_path / "other")
    looked = f"{tmp_path}/other, {tmp_path}/runs/rlaunch, {tmp_path}/home/rlaunch/rlaunch"
    with pytest.raises(UserError, match=f"no sweep s2: looked in {looked} "):
        find_sweep("s2", tmp_path / "other")


def test_an_earlier_manifest_reads_and_submissions_and_dry_runs_merge_as_they_should(tmp_path: Path):
    # as the previous version wrote it: no cluster, no dry_run
    old = {"sweep_id": "s", "sweep_dir": str(tmp_path), "arrays": [{"job_id": "7", "tasks": 1}], "submit_seconds": 0.1}
    old["runs"] = [{"run_id": "r1", "job_id": "7", "array_job_id": "7", "run_dir": str(tmp_path / "r1")}]
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    read = manifests.read(tmp_path)
    assert (read.cluster, read.dry_run, read.array_ids) == ("slurm", False, ["7"])
    assert read.select("7") == [ManifestRun("r1", str(tmp_path / "r1"), job_id="7", array_job_id="7")]
    assert read.arrays == [ManifestArray("7", 1)]
    dry = Manifest("s", str(tmp_path), runs=[ManifestRun("r2", str(tmp_path / "r2"))], dry_run=True)
    assert dry.write() == read  # a dry run never hides what was submitted
    more = Manifest("s", str(tmp_path), runs=[ManifestRun("r3", "", job_id="8", array_job_id="8")])
    assert [run.run_id for run in more.write().runs] == ["r1", "r3"]  # one sweep id submitted in parts
    (tmp_path / "manifest.json").unlink()
    dry.write()
    assert more.write() == more  # a submission replaces the dry run's list
    assert [path.name for path in tmp_path.iterdir()] == ["manifest.json"]  # written whole, then renamed


def test_a_submitted_sweep_is_found_by_id_and_path_and_its_code_is_written_once_under_the_runs_dir(
    slurm_env, tmp_path: Path
):
    args = [*SUBMIT, "llm=qwen2_5_0_5b", "mode=quick_test", f"cluster.shared_dir={tmp_path}"]
    pending = "+cluster.sbatch_extra.begin=now+3600"  # stays queued: status has something to show, cancel to do
    sweeps = []
    for _ in range(2):  # two sweeps of the same code
        result = run_cli(*args, pending, cwd=tmp_path, env=slurm_env)
        assert result.returncode == 0, result.stderr[-3000:]
        sweeps.append(manifests.read(Path(re.search(r"sweep\.py status (\S+)", result.stdout).group(1))))
    manifest = sweeps[0]
    [run] = manifest.runs
    assert not manifest.dry_run and run.job_id
    # both sweeps run the same code: one snapshot beside the sweeps, none in a sweep directory
    code_dirs = {json.loads(p.read_text())["code_dir"] for p in tmp_path.rglob("plan.json")}
    assert len(code_dirs) == 1 and [p for p in (tmp_path / "rlaunch" / "code").iterdir()] == [Path(*code_dirs)]
    assert not (Path(manifest.sweep_dir) / "code").exists()
    try:
        for sweep, extra in ((manifest.sweep_dir, []), (manifest.sweep_id, ["--runs-dir", str(tmp_path / "rlaunch")])):
            status = sweep_cli("status", sweep, slurm_env, *extra)
            assert status.returncode == 0, status.stderr
            assert re.search(rf"{run.job_id} +PENDING .*{run.run_id}", status.stdout), status.stdout
        missing = sweep_cli("status", manifest.sweep_id, slurm_env)  # not under the defaults: says where it looked
        assert missing.returncode == 2 and missing.stderr.startswith(f"sweep: error: no sweep {manifest.sweep_id}")
        # a machine without SLURM's commands: the state the run's own records give, said as such; no traceback
        without = {**slurm_env, "PATH": str(tmp_path / "no-slurm-here")}
        status = sweep_cli("status", manifest.sweep_dir, without)
        assert status.returncode == 0, status.stderr
        assert "SLURM did not answer (squeue is not installed here): states from the runs' own records" in status.stdout
        assert re.search(rf"{run.job_id} +PENDING +attempts 0 .*{run.run_id}", status.stdout), status.stdout
        cancel = sweep_cli("cancel", manifest.sweep_dir, without)
        assert cancel.returncode == 2 and cancel.stderr.count("\n") == 1, cancel.stderr
        assert "could not cancel" in cancel.stderr and "scancel is not installed here" in cancel.stderr
    finally:
        slurm(["scancel", *(run.job_id for sweep in sweeps for run in sweep.runs)], slurm_env)


def test_hydra_launcher_keys_become_rlaunch_keys_with_one_note_each():
    argv = [
        "hydra.launcher.partition=gpu,debug",
        "+hydra.launcher.additional_parameters.mail-type=END",
        "hydra.launcher.additional_parameters.begin=now",
        "hydra.launcher.mem_gb=500",
        "gpu=a40",
        "-m",
    ]
    rewritten, notes = launcher_aliases(argv)
    assert rewritten == [
        "cluster.partition=gpu,debug",
        "+cluster.sbatch_extra.mail-type=END",
        "++cluster.sbatch_extra.begin=now",
        "cluster.mem_gb=500",
        "gpu=a40",
        "-m",
    ]
    assert notes[0] == "rlaunch: note: hydra.launcher.partition=gpu,debug is cluster.partition=gpu,debug"
    assert notes[3].startswith("rlaunch: note: hydra.launcher.mem_gb=500 is cluster.mem_gb=500 (taken as is: it wins")
    assert len(notes) == 4
    for bad in (["hydra.launcher.gres=gpu:4"], ["hydra.launcher.partition.x=1"]):
        with pytest.raises(
            UserError, match=f"has no rlaunch equivalent: hydra.launcher.\\* takes {', '.join(LAUNCHER_ALIASES)}"
        ):
            launcher_aliases(bad)
    with pytest.raises(UserError, match="both set cluster.partition: keep one"):
        launcher_aliases(["hydra.launcher.partition=a", "cluster.partition=b"])


def test_hydra_launcher_keys_reach_the_sbatch_script(tmp_path: Path):
    keys = {
        "partition": "gpu",
        "timeout_min": "120",
        "mem_gb": "500",
        "cpus_per_task": "32",
        "gpus_per_node": "4",
        "nodes": "2",
        "additional_parameters": "{mail-type:END}",
        "array_parallelism": "1",
    }
    overrides = [f"hydra.launcher.{key}={value}" for key, value in keys.items()]
    result = run_cli(
        "cluster=slurm", "gpu=a40", *overrides, "launch.dry_run=true", cwd=tmp_path, env=home_env(tmp_path)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for line in ("--partition=gpu", "--time=135", "--mem=500GB", "--cpus-per-task=32", "--gres=gpu:4", "--nodes=2"):
        assert f"#SBATCH {line}\n" in result.stdout, line
    assert "#SBATCH --mail-type=END" in result.stdout
    notes = [line for line in result.stderr.splitlines() if line.startswith("rlaunch: note: hydra.launcher.")]
    assert len(notes) == len(keys)
    unknown = run_cli("hydra.launcher.comment=x", cwd=tmp_path, env=home_env(tmp_path))
    assert unknown.returncode == 2 and len(unknown.stderr.strip().splitlines()) == 1, unknown.stderr
    assert "hydra.launcher.comment has no rlaunch equivalent" in unknown.stderr
