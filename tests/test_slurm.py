"""SLURM submission against a REAL cluster on loopback (scripts/dev_cluster.sh): arrays grouped by resource shape,
a command that returns while jobs run, dry runs that submit nothing, status/logs/cancel, and bad cluster settings."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PROJECT, compose_config, cpu_facts, run_cli

from launch.errors import UserError
from launch.facts import PartitionFacts
from launch.plan import make_plan
from launch.validate import check_cluster

SWEEP = ["gpu=a40,a100_80", "algo=guru_baseline,mtl_pcgrad", "llm=qwen2_5_0_5b", "mode=quick_test"]
# Submission is explicit (cluster=auto only plans). These jobs test queueing, not training: this box holds neither
# GURU's files nor the model in an HF cache, so those readiness checks are off (tests/test_readiness.py has them).
SUBMIT = ["cluster=slurm", "launch.skip_checks=[data,hub_cache]"]


def slurm(command: list[str], env: dict[str, str]) -> str:
    return subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=60).stdout


def sweep_cli(
    command: str, sweep: str, env: dict[str, str], *extra: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT / "launch" / "sweep.py"), command, sweep, *extra],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_sweep_becomes_one_array_per_shape_and_returns_while_jobs_run(slurm_env, tmp_path: Path):
    started = time.monotonic()
    result = run_cli(*SWEEP, *SUBMIT, f"cluster.shared_dir={tmp_path}", "-m", cwd=tmp_path, env=slurm_env)
    returned_after = time.monotonic() - started
    assert result.returncode == 0, result.stderr[-3000:]
    assert "queued 4 job(s) as 2 array(s)" in result.stdout
    queued = slurm(["squeue", "-h", "-r", "-o", "%i %T"], slurm_env)
    assert queued.strip(), "the command must return while its jobs are still queued or running"

    sweep_dir = re.search(r"sweep\.py status (\S+)", result.stdout).group(1)
    manifest = json.loads((Path(sweep_dir) / "manifest.json").read_text())
    assert [array["tasks"] for array in manifest["arrays"]] == [2, 2]
    assert len({run["run_id"] for run in manifest["runs"]}) == 4
    shapes = {}
    for array in manifest["arrays"]:
        shown = slurm(["scontrol", "show", "job", array["job_id"]], slurm_env)
        cpus = int(re.search(r"CPUs/Task=(\d+)", shown).group(1))
        shapes[cpus] = shown
        assert "TresPerNode=gres:gpu:8" in shown and "NumNodes=1" in shown
        assert "TimeLimit=01:15:00" in shown  # quick_test's 60 min + 15 min margin
    # a40: 8 CPUs + 64 GiB per GPU; a100_80: 16 CPUs + 128 GiB per GPU, capped at the node (~1006 GiB)
    assert set(shapes) == {64, 128}
    assert "MinMemoryNode=512G" in shapes[64] and "MinMemoryNode=1006G" in shapes[128]
    assert returned_after < 120

    status = sweep_cli("status", sweep_dir, slurm_env)
    assert status.returncode == 0 and len(re.findall(r"attempts \d  no step yet", status.stdout)) == 4, status.stdout
    for _ in range(60):  # a job's log appears once SLURM started it
        logs = sweep_cli("logs", sweep_dir, slurm_env, "-n", "5")
        if "submitit INFO" in logs.stdout:
            break
        time.sleep(1)
    assert "submitit INFO" in logs.stdout, logs.stdout[-2000:]

    cancelled = sweep_cli("cancel", sweep_dir, slurm_env)
    assert cancelled.returncode == 0 and "cancelled 2 array(s)" in cancelled.stdout
    for _ in range(30):
        array_ids = ",".join(a["job_id"] for a in manifest["arrays"])
        if not slurm(["squeue", "-h", "-j", array_ids], slurm_env).strip():
            break
        time.sleep(1)
    assert not slurm(["squeue", "-h", "-j", array_ids], slurm_env).strip(), "cancel leaves nothing queued"
    # slurmdbd records the cancellation a moment after squeue forgot the jobs (seen lagging under load)
    for _ in range(30):
        status = sweep_cli("status", sweep_dir, slurm_env).stdout
        if "CANCELLED" in status:
            break
        time.sleep(1)
    assert "CANCELLED" in status, status


def test_dry_run_prints_every_sbatch_script_and_submits_nothing(slurm_env, tmp_path: Path):
    before = slurm(["squeue", "-h", "-o", "%i"], slurm_env)
    result = run_cli(*SWEEP, f"cluster.shared_dir={tmp_path}", "launch.dry_run=true", "-m", cwd=tmp_path, env=slurm_env)
    assert result.returncode == 0, result.stderr[-3000:]
    scripts = result.stdout.count("#!/bin/bash")
    assert scripts == 2, "one sbatch script per array"
    assert "#SBATCH --array=0-1%2" in result.stdout and "#SBATCH --gres=gpu:8" in result.stdout
    assert "#SBATCH --cpus-per-task=64" in result.stdout and "#SBATCH --cpus-per-task=128" in result.stdout
    assert set(slurm(["squeue", "-h", "-o", "%i"], slurm_env).split()) <= set(before.split()), (
        "a dry run submits nothing"
    )
    [manifest] = [json.loads(path.read_text()) for path in tmp_path.rglob("manifest.json")]
    assert manifest["dry_run"] is True and not any("job_id" in run for run in manifest["runs"])


def test_single_run_is_one_job(slurm_env, tmp_path: Path):
    result = run_cli(
        "llm=qwen2_5_0_5b", "mode=quick_test", *SUBMIT, f"cluster.shared_dir={tmp_path}", cwd=tmp_path, env=slurm_env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "queued 1 job(s) as 1 array(s)" in result.stdout
    manifest = json.loads(next(tmp_path.rglob("manifest.json")).read_text())
    job_id = manifest["runs"][0]["job_id"]
    assert "_" not in job_id
    slurm(["scancel", job_id], slurm_env)


BAD_SETTINGS = [
    (["cluster.partition=nope"], "SLURM partition nope does not exist: choose one of debug, urgent"),
    (["trainer.n_gpus_per_node=16"], "trainer.n_gpus_per_node=16 but partition debug has 8 GPUs per node"),
    (["cluster.cpus_per_task=256"], "--cpus-per-task=256 but partition debug's nodes have 128 CPUs"),
    (["cluster.mem_gb=4000"], "--mem=4000GB but partition debug's nodes have"),
    (
        ["+cluster.gres_types.a100_80=a100"],
        "asks for GPU type 'a100' (cluster.gres_types) but partition debug's GPUs have no type",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_SETTINGS, ids=[" ".join(o) for o, _ in BAD_SETTINGS])
def test_bad_cluster_setting_is_refused_before_submission(slurm_env, tmp_path: Path, overrides, message):
    before = slurm(["squeue", "-h", "-o", "%i"], slurm_env)
    result = run_cli("gpu=a100_80", f"cluster.shared_dir={tmp_path}", *overrides, cwd=tmp_path, env=slurm_env)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    first_line = result.stderr.strip().splitlines()[0]
    assert first_line.startswith("rlaunch: error: ") and message in first_line, result.stderr[-2000:]
    assert set(slurm(["squeue", "-h", "-o", "%i"], slurm_env).split()) <= set(before.split()), "nothing submitted"


def test_sbatch_refusing_the_job_is_one_line_and_writes_no_manifest(slurm_env, tmp_path: Path):
    """What sbatch itself refuses after every check passed (an account SLURM's accounting does not know, a QOS):
    submitit's FailedJobError with sbatch's stderr becomes one line naming it, and no manifest is written. This dev
    cluster keeps no accounting, so an sbatch that answers as an enforcing one does stands first on PATH; sinfo and
    the rest are the cluster's."""
    refusing = tmp_path / "bin"
    refusing.mkdir()
    sbatch = refusing / "sbatch"
    sbatch.write_text(
        "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Invalid account or account/partition "
        "combination specified' >&2\nexit 1\n"
    )
    sbatch.chmod(0o755)
    env = {**slurm_env, "PATH": f"{refusing}{os.pathsep}{slurm_env.get('PATH', os.environ['PATH'])}"}
    runs = tmp_path / "runs"
    result = run_cli(
        "llm=qwen2_5_0_5b",
        "mode=quick_test",
        *SUBMIT,
        "cluster.account=nope",
        f"cluster.shared_dir={tmp_path}",
        f"launch.runs_dir={runs}",
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        "rlaunch: error: sbatch refused the job, nothing was queued: sbatch: error: Batch job submission failed: "
        "Invalid account or account/partition combination specified; check cluster.partition=debug, "
        "cluster.account=nope"
    ), result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    # the plans stay (a run directory may be an earlier run's, resubmitted): no manifest, so no sweep to follow
    assert not list(runs.rglob("manifest.json"))


def partition(**changes) -> PartitionFacts:
    values = dict(
        name="gpu",
        cpus_per_node=64,
        mem_gib_per_node=500.0,
        gpus_per_node=8,
        gres_type="a100",
        max_time_min=600,
        nodes=4,
    )
    return PartitionFacts(**{**values, **changes})


def check(facts_partition: PartitionFacts, *overrides: str) -> None:
    cfg = compose_config("cluster=slurm", *overrides)
    facts = cpu_facts(partition=facts_partition, partitions=("gpu",))
    check_cluster(cfg, make_plan(cfg, facts, list(overrides), Path("/tmp"), "python").resources, facts)


def test_partition_limits_from_facts():
    check(partition(), "gpu=a100_80", "mode=quick_test")  # fits: typed a100 GRES, 75 min <= 600
    with pytest.raises(
        UserError,
        match=r"--time=1455 min \(mode standard's budget \+ margin\) exceeds partition gpu's limit of 600 min",
    ):
        check(partition(), "gpu=a100_80", "mode=standard")
    with pytest.raises(UserError, match=r"gpu=h100 needs GPU type 'h100' but partition gpu has 'a100'") as refused:
        check(partition(), "gpu=h100", "mode=quick_test")
    mapping = str(refused.value).rsplit(" ", 1)[-1]
    assert mapping == "++cluster.gres_types.h100=a100"
    check(partition(), "gpu=h100", "mode=quick_test", mapping)  # the mapping as printed is taken
    with pytest.raises(UserError, match=r"trainer.nnodes=8 but partition gpu has 4 nodes"):
        check(partition(), "gpu=a100_80", "mode=quick_test", "trainer.nnodes=8")


def test_status_shows_how_far_each_run_trained(slurm_env, tmp_path: Path):
    """The step comes from verl's own metric files (merged over attempts), the state from SLURM; a job SLURM no
    longer knows (squeue: "Invalid job id specified", an answer) shows the attempts the run recorded (resumed once)."""
    from metric_fixtures import make_run

    run_dir = make_run(tmp_path / "sweep", "guru_baseline", "a40", last_step=7, resumed_from=3)
    manifest = {
        "sweep_id": "fixture-sweep",
        "sweep_dir": str(run_dir.parent),
        "arrays": [{"job_id": "999990", "tasks": 1}],
        "runs": [
            {
                "job_id": "999990_0",
                "array_job_id": "999990",
                "run_id": run_dir.name,
                "job_name": "x",
                "run_dir": str(run_dir),
            }
        ],
    }
    (run_dir.parent / "manifest.json").write_text(json.dumps(manifest))
    status = sweep_cli("status", str(run_dir.parent), slurm_env)
    assert status.returncode == 0 and re.search(rf"attempts 2  step 7 +{run_dir.name}", status.stdout), status.stdout
    assert "SLURM did not answer" not in status.stdout
