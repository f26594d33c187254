"""gpu_unavailable where the attempt's record shows SLURM granted GPUs that the process did not see (a_gpu on the dev
cluster: SLURM_GPUS_ON_NODE 1, CUDA_VISIBLE_DEVICES 0, NVML 0): the fix leads with that, not with a partition."""

from __future__ import annotations

import json
from pathlib import Path

from metric_fixtures import make_plan_dir

from launch.report.doctor import run_failures
from launch.report.metrics import read_run

OUT = (
    "submitit INFO (2026-11-29 12:11:27,725) - Starting with JobEnvironment(job_id=1, hostname=vm, local_rank=0(1), "
    "node=0(1), global_rank=0(1))\n"
    "submitit ERROR (2026-11-29 12:12:10,001) - Submitted job triggered an exception\n"
)
ERR = """\
Traceback (most recent call last):
ValueError: Total available GPUs 0 is less than total desired GPUs 1
submitit ERROR (2026-11-29 12:12:10,001) - Submitted job triggered an exception
srun: error: c1: task 0: Exited with exit code 1
"""


def job(tmp_path: Path, record: dict[str, object]) -> Path:
    sweep = tmp_path / "a_gpu"
    run_dir = make_plan_dir(sweep, "guru_baseline", "a40")
    logs = sweep / "submitit" / "1"
    logs.mkdir(parents=True)
    (logs / "1_0_log.out").write_text(OUT)
    (logs / "1_0_log.err").write_text(ERR)
    run = {"run_id": run_dir.name, "run_dir": str(run_dir), "job_name": "a40", "job_id": "1", "array_job_id": "1"}
    run |= {"stdout": str(logs / "1_0_log.out"), "stderr": str(logs / "1_0_log.err")}
    manifest = {"sweep_id": sweep.name, "sweep_dir": str(sweep), "runs": [run], "arrays": [{"job_id": "1", "tasks": 1}]}
    (sweep / "manifest.json").write_text(json.dumps(manifest))
    (run_dir / "attempts.jsonl").write_text(json.dumps({"time": "2026-11-29T12:11:27+0000", **record}) + "\n")
    return run_dir


def test_gpus_slurm_granted_but_the_process_did_not_see_lead_the_fix(tmp_path: Path):
    record = {"host": "vm", "gpus": 0, "checkpointed_step": 0, "SLURM_JOB_NODELIST": "c1", "SLURM_NNODES": "1"}
    run_dir = job(tmp_path, record | {"SLURM_GPUS_ON_NODE": "1", "CUDA_VISIBLE_DEVICES": "0"})
    [failure] = run_failures(read_run(run_dir))
    assert failure.kind == "gpu_unavailable"
    assert failure.fix.startswith("SLURM granted 1 GPU(s) (CUDA_VISIBLE_DEVICES=0) on c1 but the process saw none"), (
        failure.fix
    )
    assert "cluster.partition" not in failure.fix and "driver" in failure.fix


def test_no_gpus_granted_keeps_the_partition_fix(tmp_path: Path):
    record = {"host": "vm", "gpus": 0, "checkpointed_step": 0, "SLURM_JOB_NODELIST": "c1", "SLURM_NNODES": "1"}
    [failure] = run_failures(read_run(job(tmp_path, record)))
    assert "SLURM gave the job none (set cluster.partition to a GPU partition" in failure.fix, failure.fix
    assert "SLURM granted" not in failure.fix
