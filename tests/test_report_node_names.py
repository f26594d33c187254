"""A node is named as SLURM names it wherever the run's records tell: its hostname (submitit's, the log's) and its
Ray IP (rlaunch's ray_start-<node>-<rank>.log) had named the dev cluster's c1 'vm', 'c1' and '127.140.0.11' in turn
across one run's attempts in status, logs and the doctor."""

from __future__ import annotations

import json
from pathlib import Path

from metric_fixtures import make_plan_dir

from launch.report import failures

START = (
    "submitit INFO (2026-11-29 12:{minute}:00,000) - Starting with JobEnvironment(job_id=6, hostname=vm, "
    "local_rank=0(1), node=0({nodes}), global_rank=0({nodes}))\n"
)


def job(sweep: Path, out: str, err: str, records: list[dict[str, str]]) -> Path:
    run_dir = make_plan_dir(sweep, "guru_baseline", "a40")
    logs = sweep / "submitit" / "6"
    logs.mkdir(parents=True)
    (logs / "6_0_log.out").write_text(out)
    (logs / "6_0_log.err").write_text(err)
    run = {"run_id": run_dir.name, "run_dir": str(run_dir), "job_name": "a40", "job_id": "6", "array_job_id": "6"}
    run |= {"stdout": str(logs / "6_0_log.out"), "stderr": str(logs / "6_0_log.err")}
    manifest = {"sweep_id": sweep.name, "sweep_dir": str(sweep), "runs": [run], "arrays": [{"job_id": "6", "tasks": 1}]}
    (sweep / "manifest.json").write_text(json.dumps(manifest))
    (run_dir / "attempts.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return run_dir


def test_one_node_attempts_are_named_by_slurms_node_list(tmp_path: Path):
    """e_timelimit: attempt 1's evidence named c1 (an srun line), attempt 2's only the host name vm: both c1."""
    out = START.format(minute="13", nodes=1) + START.format(minute="14", nodes=1)
    err = (
        "submitit WARNING (2026-11-29 12:13:30,000) - Caught signal SIGUSR2 on vm: this job is timed-out.\n"
        "srun: error: c1: task 0: Exited with exit code 1\n"
        "submitit WARNING (2026-11-29 12:14:30,000) - Caught signal SIGUSR2 on vm: this job is timed-out.\n"
    )
    record = {"host": "vm", "SLURM_JOB_NODELIST": "c1", "SLURM_NNODES": "1", "checkpointed_step": 0}
    run_dir = job(tmp_path / "e", out, err, [record, record])
    found = failures.run_failures(run_dir)
    assert [(f.kind, f.attempt, f.node) for f in found] == [("time_limit", 1, "c1"), ("time_limit", 2, "c1")], found


def test_a_ray_ip_is_named_by_the_node_whose_ray_start_log_has_it(tmp_path: Path):
    out = START.format(minute="29", nodes=2)
    err = (
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
        "        ip: 127.140.0.12\n"
        "submitit ERROR (2026-11-29 12:29:57,708) - Submitted job triggered an exception\n"
    )
    record = {"host": "vm", "SLURM_JOB_NODELIST": "c[1-2]", "SLURM_NNODES": "2", "checkpointed_step": 0}
    run_dir = job(tmp_path / "j", out, err, [record])
    for node, ip, rank in (("c1", "127.140.0.11", 0), ("c2", "127.140.0.12", 1)):
        (run_dir / f"ray_start-{node}-{rank}.log").write_text(
            f"2026-11-29 12:29:18,167\tINFO scripts.py:1234 -- \x1b[37mLocal node IP\x1b[39m: \x1b[1m{ip}\x1b[22m\n"
        )
    [failure] = failures.run_failures(run_dir)
    assert failure.node == "c2", failure
