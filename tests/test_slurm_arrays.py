"""Large sweeps: a resource shape with more jobs than the cluster's MaxArraySize becomes several arrays, each
throttled by cluster.array_parallelism, every job queued exactly once (a real SLURM cluster on loopback with a small
MaxArraySize, started by scripts/dev_cluster.sh under its own prefix and ports)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import compose_config, cpu_facts, dev_cluster, run_cli, slurm_slot

from launch.plan import make_plan
from launch.slurm import arrays_of, parse_max_array_size, render_all

MAX_ARRAY_SIZE = 3


def test_max_array_size_is_read_from_scontrol_show_config():
    text = "Configuration data as of 2026-01-01T00:00:00\nMailProg = /bin/true\nMaxArraySize            = 1001\n"
    assert parse_max_array_size(text) == 1001
    assert parse_max_array_size("MaxJobCount = 10000\n") is None


def test_a_shape_larger_than_the_limit_splits_and_the_scripts_say_so(tmp_path: Path):
    cfg = compose_config("cluster=slurm", "gpu=a40", "cluster.array_parallelism=2", "launch.dry_run=true")
    plans = [
        make_plan(cfg, cpu_facts(), [f"trainer.seed={seed}"], working_dir=tmp_path, python="/venv/bin/python")
        for seed in range(7)
    ]
    assert [len(group.plans) for group in arrays_of(plans, MAX_ARRAY_SIZE)] == [3, 3, 1]
    assert [len(group.plans) for group in arrays_of(plans, None)] == [7]
    scripts = [script for _, script in render_all(plans, MAX_ARRAY_SIZE)]
    assert [re.search(r"#SBATCH --array=(\S+)", s).group(1) for s in scripts[:2]] == ["0-2%2", "0-2%2"]
    assert "--array" not in scripts[2]  # one task: a plain job
    unthrottled = compose_config("cluster=slurm", "gpu=a40")
    plans = [make_plan(unthrottled, cpu_facts(), [f"trainer.seed={s}"], tmp_path, "/venv/bin/python") for s in (1, 2)]
    assert "#SBATCH --array=0-1%2" in render_all(plans, None)[0][1]  # no hidden %256 from submitit


@pytest.fixture(scope="module")
def small_array_cluster():
    """One DGX-sized node with 8 fake GPUs and MaxArraySize=3; its own prefix and ports beside the session's
    cluster. No slurmdbd: submission and squeue need none."""
    shape = ["-n", "1", "-g", "8", "--big", "--no-dbd", "--max-array-size", str(MAX_ARRAY_SIZE)]
    prefix, port_base = slurm_slot()
    yield from dev_cluster(f"{prefix}-arr", str(int(port_base) + 50), *shape)


def slurm(command: list[str], env: dict[str, str]) -> str:
    return subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=60).stdout


def test_sweep_beyond_max_array_size_is_several_arrays_and_every_job_queued_once(small_array_cluster, tmp_path):
    env = small_array_cluster
    lrs = ",".join(f"{i}e-6" for i in range(1, 8))
    # submission is explicit (cluster=slurm); no GURU files or model cache on this box: those checks off
    args = ["cluster=slurm", "launch.skip_checks=[data,hub_cache]", "gpu=a40", "llm=qwen2_5_0_5b", "mode=quick_test"]
    args.append(f"actor_rollout_ref.actor.optim.lr={lrs}")
    result = run_cli(
        *args, "cluster.array_parallelism=2", f"cluster.shared_dir={tmp_path}", "-m", cwd=tmp_path, env=env
    )
    try:
        assert result.returncode == 0, result.stderr[-3000:]
        assert "queued 7 job(s) as 3 array(s)" in result.stdout, result.stdout
        sweep_dir = Path(re.search(r"sweep\.py status (\S+)", result.stdout).group(1))
        manifest = json.loads((sweep_dir / "manifest.json").read_text())
        assert [array["tasks"] for array in manifest["arrays"]] == [3, 3, 1]
        assert len({run["run_id"] for run in manifest["runs"]}) == len(manifest["runs"]) == 7
        assert len({run["job_id"] for run in manifest["runs"]}) == 7
        assert {run["job_name"] for run in manifest["runs"]} == {f"a40,lr={i}e-06" for i in range(1, 8)}
        array_ids = [array["job_id"] for array in manifest["arrays"]]
        queued = slurm(["squeue", "-h", "-r", "-j", ",".join(array_ids), "-o", "%i"], env).split()
        assert sorted(queued) == sorted(run["job_id"] for run in manifest["runs"]), queued
        for array_id in array_ids[:2]:
            assert "ArrayTaskThrottle=2" in slurm(["scontrol", "show", "job", array_id], env)
    finally:
        subprocess.run(["scancel", "--full", "-u", "root"], env={**os.environ, **env}, check=False, timeout=30)
