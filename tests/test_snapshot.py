"""Code snapshots (launch/snapshot.py): what is copied, content addressing, and on the real dev cluster a queued job
that runs the code as it was submitted although the checkout was edited while it waited."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import PROJECT, compose_config
from test_job import wait_for_state

from launch import slurm, snapshot
from launch.facts import gather_facts
from launch.plan import make_plan
from launch.run import write_run_dir


def git(repo: Path, *args: str) -> None:
    identity = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", *identity, *args], cwd=repo, check=True, capture_output=True)


def make_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-f", *files)
    git(path, "commit", "-q", "-m", "init")
    return path


def test_snapshot_holds_tracked_files_with_their_changes_never_untracked_ones_runs_or_venv(tmp_path: Path):
    repo = make_repo(
        tmp_path / "repo",
        {
            ".gitignore": "ignored.txt\n",
            "pkg/a.py": "A = 1\n",
            "runs/tracked_by_mistake.txt": "x",
            ".venv/bin/tracked.txt": "x",
            "gone.py": "",
        },
    )
    (repo / "pkg/a.py").write_text("A = 2\n")  # uncommitted change: the snapshot has it
    (repo / "new.py").write_text("NEW = 1\n")  # untracked: out (a stray file never reaches the shared filesystem)
    (repo / "added.py").write_text("ADDED = 1\n")
    git(repo, "add", "-N", "added.py")  # intended to add: in
    (repo / "ignored.txt").write_text("secret\n")  # ignored: out
    (repo / "gone.py").unlink()  # deleted in the working tree: out
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    git(repo, "add", "run.sh")
    read = snapshot.read_checkout(repo)
    assert read.files == 4
    target = snapshot.materialize(snapshot.code_dir(tmp_path / "sweep", read.digest))
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()) == [
        ".gitignore",
        "added.py",
        "pkg/a.py",
        "run.sh",
    ]
    assert (target / "pkg/a.py").read_text() == "A = 2\n"
    assert os.access(target / "run.sh", os.X_OK) and not os.access(target / "added.py", os.X_OK)
    # written from what was read at planning time, not from the checkout at the moment of writing
    (repo / "pkg/a.py").write_text("A = 3\n")
    again = snapshot.materialize(snapshot.code_dir(tmp_path / "other", read.digest))
    assert (again / "pkg/a.py").read_text() == "A = 2\n"
    # content-addressed: another content, another directory
    snapshot._READ.clear()
    assert snapshot.read_checkout(repo).digest != read.digest


def test_paths_into_the_checkout_are_relocated_into_the_snapshot():
    tree = {"reward": {"path": "/src/rewards/verl_entry.py"}, "files": ["/src/x", "/srcother/y", 3], "n": "/src"}
    assert snapshot.relocate(tree, "/src", "/s/code/abc") == {
        "reward": {"path": "/s/code/abc/rewards/verl_entry.py"},
        "files": ["/s/code/abc/x", "/srcother/y", 3],
        "n": "/s/code/abc",
    }


def test_slurm_plan_runs_from_the_snapshot_and_says_so(tmp_path: Path):
    from conftest import cpu_facts

    cfg = compose_config("cluster=slurm", f"cluster.shared_dir={tmp_path}")
    facts = cpu_facts(code=snapshot.read_checkout(PROJECT))
    plan = make_plan(cfg, facts, [], tmp_path, "python")
    code_dir = str(tmp_path / "rlaunch" / "code" / facts.code.digest)  # under the runs dir: shared by sweeps
    assert plan.code_dir == code_dir
    first, second = plan.slurm["setup"][:2]
    assert second == f"export PYTHONPATH={code_dir}${{PYTHONPATH:+:$PYTHONPATH}}"
    # a snapshot removed while the job waited stops it, rather than run the checkout's code
    assert first.startswith(f"cd {code_dir} || {{ echo 'rlaunch: error: the code snapshot {code_dir} is gone")
    reward_file = plan.verl["reward"]["custom_reward_function"]["path"]
    assert reward_file == f"{code_dir}/rewards/verl_entry.py"
    local = make_plan(compose_config("cluster=local"), facts, [], tmp_path, "python")
    assert local.code_dir is None  # cluster.snapshot is false for local runs: they start now


def test_paths_the_snapshot_will_hold_are_checked_at_the_checkout_before_it_is_written(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"rewards/mine.py": "def compute_score(): ...\n"})
    (repo / "rewards" / "untracked.py").write_text("")  # the snapshot will not hold it: the job could not load it
    read = snapshot.read_checkout(repo)
    code_dir = str(snapshot.code_dir(tmp_path / "runs", read.digest))
    tree = {"held": f"{code_dir}/rewards/mine.py", "not_held": [f"{code_dir}/rewards/untracked.py"], "n": 1}
    assert snapshot.at_checkout(tree, code_dir) == {
        "held": f"{repo}/rewards/mine.py",
        "not_held": [f"{code_dir}/rewards/untracked.py"],
        "n": 1,
    }
    snapshot.materialize(Path(code_dir))
    assert snapshot.at_checkout(tree, code_dir) == tree  # written: the checks read the snapshot itself


def test_concurrent_writers_of_one_snapshot_leave_one_whole_copy_and_no_partial_one(tmp_path: Path):
    from concurrent.futures import ThreadPoolExecutor

    repo = make_repo(tmp_path / "repo", {f"pkg/m{i}.py": f"X = {i}\n" for i in range(50)})
    target = snapshot.code_dir(tmp_path / "runs", snapshot.read_checkout(repo).digest)
    with ThreadPoolExecutor(8) as pool:
        written = list(pool.map(lambda _: snapshot.materialize(target), range(8)))
    assert written == [target] * 8
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # every partial copy renamed or removed
    assert len(list(target.rglob("*.py"))) == 50 and (target / "pkg/m7.py").read_text() == "X = 7\n"


# The driver of the queued job: what its own process, and a Ray worker of the job, import.
PROBE = """
import importlib.metadata, json, ray
import launch, launch.snapshot_probe as marker, algos.verl_plugin as plugin

@ray.remote(num_cpus=1)
def in_a_worker():
    import importlib.metadata, launch.snapshot_probe as marker
    entry = next(e for e in importlib.metadata.entry_points(group="verl.plugins") if e.name == "rlaunch_pcgrad")
    loaded = entry.load()
    return {"plugin": loaded.__file__, "plugin_probe": loaded.SNAPSHOT_PROBE, "marker": marker.VALUE}

ray.init(logging_level="ERROR")
record = {"launch": launch.__file__, "marker": marker.VALUE, "plugin_probe": plugin.SNAPSHOT_PROBE}
record["worker"] = ray.get(in_a_worker.remote())
ray.shutdown()
json.dump(record, open("code_probe.json", "w"))
"""


def test_queued_job_runs_the_submitted_code_although_the_checkout_changed(slurm_env, tmp_path: Path):
    # a checkout of the project's code, as a git repository of its own (the test edits it)
    read = snapshot.read_checkout(PROJECT)
    source = snapshot.materialize(snapshot.code_dir(tmp_path / "copy", read.digest))
    (source / "launch" / "snapshot_probe.py").write_text('VALUE = "committed"\n')
    git(source, "init", "-q")
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "checkout")
    # uncommitted changes at submission: part of what was submitted
    (source / "launch" / "snapshot_probe.py").write_text('VALUE = "submitted"\n')
    plugin_file = source / "algos" / "verl_plugin.py"
    original_plugin = plugin_file.read_text()
    plugin_file.write_text(original_plugin + '\nSNAPSHOT_PROBE = "submitted"\n')

    base = [
        "cluster=slurm",
        f"cluster.shared_dir={tmp_path / 'shared'}",
        "gpu=a40",
        "mode=quick_test",
        "trainer.n_gpus_per_node=1",
        "launch.sweep_id=snapshot",
        "+cluster.sbatch_extra.begin=now+10",  # still queued when the checkout changes
    ]
    cfg = compose_config(*base)
    os.environ["SLURM_CONF"] = slurm_env["SLURM_CONF"]
    try:
        facts = dataclasses.replace(gather_facts("x", "slurm", None), code=snapshot.read_checkout(source))
        plan = make_plan(cfg, facts, base, tmp_path, sys.executable)
        plan = dataclasses.replace(plan, driver_command=[sys.executable, "-c", PROBE])
        write_run_dir(plan, cfg)
        job_id = slurm.submit([plan], 0).runs[0].job_id
    finally:
        os.environ.pop("SLURM_CONF", None)
    # the researcher edits the checkout while the job waits: tracked files, committed or not
    (source / "launch" / "snapshot_probe.py").write_text('VALUE = "edited while queued"\n')
    plugin_file.write_text(original_plugin + '\nSNAPSHOT_PROBE = "edited while queued"\n')
    git(source, "commit", "-q", "-am", "edit")

    assert wait_for_state(job_id, slurm_env, {"COMPLETED", "FAILED", "CANCELLED"}, 240) == "COMPLETED"
    run_dir = Path(plan.run_dir)
    code_dir = Path(plan.code_dir)
    assert code_dir.parent == run_dir.parent.parent / "code"  # <runs dir>/code/<digest>
    seen = json.loads((run_dir / "code_probe.json").read_text())
    assert seen["launch"] == str(code_dir / "launch" / "__init__.py")
    assert seen["marker"] == "submitted" and seen["plugin_probe"] == "submitted"
    # verl's plugin entry point, resolved in a Ray worker of the job, loads the snapshot's algos
    assert seen["worker"] == {
        "plugin": str(code_dir / "algos" / "verl_plugin.py"),
        "plugin_probe": "submitted",
        "marker": "submitted",
    }
    log = next((tmp_path / "shared").rglob(f"{job_id}_0_log.out")).read_text()
    assert f"code from {code_dir}" in log  # the job's own process (submitit unpickled launch.job from there)
    assert json.loads((run_dir / "provenance.json").read_text())["code_snapshot"] == str(code_dir)
    assert not (code_dir / "runs").exists() and not (code_dir / ".venv").exists()
