"""Failures on the real dev cluster, classified from the logs the jobs really wrote: an attempt that SLURM's time
limit ends before its first checkpoint (time_limit, with the save_freq that fits), a job whose second node loses
Ray mid-run (ray_node_lost, naming the node) and one that SLURM kills past its --mem (host_oom). Each job takes
1-2 min."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import PROJECT
from test_job import JOBS, ray_processes_of, submit, wait_for_state

from launch.plan import env_line
from launch.report import doctor, failures
from launch.report.metrics import read_run
from launch.rundir import attempt_log_path, read_records

DRIVER = str(JOBS / "failing_driver.py")


def sweep_cli(command: str, sweep_dir: Path, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, str(PROJECT / "launch" / "sweep.py"), command, str(sweep_dir)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_time_limit_before_the_first_checkpoint_says_which_save_freq_fits(slurm_env, tmp_path: Path):
    plan, job_id = submit(
        slurm_env,
        tmp_path,
        [DRIVER, "steps"],
        "trainer.n_gpus_per_node=1",
        "mode.time_budget_min=2",
        "cluster.time_margin_min=0",
        # USR2 30 s before the 2 min limit: Ray is up and the driver has logged steps by then, even on a loaded box
        "cluster.signal_delay_s=30",
        "cluster.max_requeues=0",  # not requeued: submitit ends the job at the USR2 (or SLURM at the limit)
        "trainer.save_freq=1000",
    )
    assert wait_for_state(job_id, slurm_env, {"TIMEOUT", "FAILED", "COMPLETED", "CANCELLED"}, 240) in (
        "TIMEOUT",
        "FAILED",
    )
    run_dir = Path(plan.run_dir)
    reached = max(step for step, _ in read_records(attempt_log_path(run_dir, 1)))
    found = doctor.run_failures(read_run(run_dir))
    assert [(f.kind, f.attempt) for f in found] == [("time_limit", 1)], found
    assert f"trainer.save_freq={reached // 2}" in found[0].fix and "before the first checkpoint" in found[0].fix
    assert any("DUE TO TIME LIMIT" in line or "timed-out" in line for line in found[0].evidence)
    assert re.search(rf"{job_id} .* cause time_limit: ", sweep_cli("status", run_dir.parent, slurm_env))
    logs = sweep_cli("logs", run_dir.parent, slurm_env).splitlines()
    # the evidence and the fix come first, above the tails of the job's files
    assert logs[0].endswith("cause:") and logs[1].startswith("[time_limit] (attempt 1") and "stderr:" not in logs[1]
    assert any(line.startswith("  fix: ") and "trainer.save_freq=" in line for line in logs[:6])
    assert failures.run_state(run_dir) == failures.FAILED_STATE  # not requeued (not_requeued.txt)


def test_a_failing_setup_line_stops_the_job_at_once_naming_it(slurm_env, tmp_path: Path):
    """A cluster.setup line that fails on the node (a module or file the site lacks) stops the job there, with its
    index and text; it had gone on and failed later, for a reason nothing pointed back to. A PYTHONPATH in cluster.env
    keeps a code snapshot first."""
    venv = Path(sys.executable).parent.parent
    plan, job_id = submit(
        slurm_env,
        tmp_path,
        [DRIVER, "steps"],
        "trainer.n_gpus_per_node=1",
        f"cluster.setup=[source {venv}/bin/activate,source /nonexistent/site_modules.sh]",
        "+cluster.env.PYTHONPATH=/opt/site/lib",
    )
    assert "export PYTHONPATH=/opt/site/lib" in next(tmp_path.rglob("*_submission.sh")).read_text()  # no snapshot
    assert env_line("PYTHONPATH", "/opt/site/lib", "/runs/code/abc") == "export PYTHONPATH=/runs/code/abc:/opt/site/lib"
    assert wait_for_state(job_id, slurm_env, {"FAILED", "COMPLETED", "CANCELLED", "TIMEOUT"}, 120) == "FAILED"
    run_dir = Path(plan.run_dir)
    found = failures.run_failures(run_dir)
    assert [f.kind for f in found] == ["config_error"], found
    assert "cluster.setup[1] (source /nonexistent/site_modules.sh) failed with exit 1" in found[0].fix
    assert not (run_dir / "ray_ready.jsonl").exists()  # stopped before Ray
    assert re.search(
        rf"{job_id} .* cause config_error: rlaunch: error: cluster.setup\[1\] failed",
        sweep_cli("status", run_dir.parent, slurm_env),
    )


def kill_raylet(job_id: str, rank: int) -> int:
    """Failure injection from outside: SIGKILL the raylet of one Ray node of the job (its temp dir names the job)."""
    killed = 0
    for pid in os.listdir("/proc"):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "raylet" in args.split(" ")[0] and f"/tmp/rl{job_id}-{rank}" in args:
            os.kill(int(pid), signal.SIGKILL)
            killed += 1
    return killed


def test_a_node_that_loses_ray_mid_run_is_named(slurm_env, tmp_path: Path):
    plan, job_id = submit(slurm_env, tmp_path, [DRIVER, "node_lost"], "trainer.nnodes=2", "cluster.ray_timeout_s=60")
    run_dir = Path(plan.run_dir)
    deadline = time.monotonic() + 150
    while not (run_dir / "pinging.txt").exists():
        assert time.monotonic() < deadline, "the driver never reached both nodes"
        time.sleep(1)
    assert kill_raylet(job_id, 1) == 1
    assert wait_for_state(job_id, slurm_env, {"FAILED", "COMPLETED", "CANCELLED"}, 240) == "FAILED"
    found = doctor.run_failures(read_run(run_dir))
    assert [f.kind for f in found] == ["ray_node_lost"], found
    assert found[0].node == "c2", found[0]  # the host name rlaunch gives, before the IP Ray gives
    assert not ray_processes_of(job_id)
    text = doctor.classify_log(next(tmp_path.rglob(f"{job_id}_1_log.err")), as_json=True)
    assert json.loads(text)["failure"]["kind"] == "ray_node_lost"


def test_a_job_past_its_memory_limit_is_host_oom(slurm_env, tmp_path: Path):
    """SLURM's memory enforcement (OverMemoryKill on the dev cluster) kills the driver that outgrows --mem=2G."""
    plan, job_id = submit(slurm_env, tmp_path, [DRIVER, "host_memory"], "trainer.n_gpus_per_node=1", "cluster.mem_gb=2")
    assert wait_for_state(job_id, slurm_env, {"FAILED", "OUT_OF_MEMORY", "COMPLETED", "CANCELLED"}, 300) in (
        "FAILED",
        "OUT_OF_MEMORY",
    )
    found = doctor.run_failures(read_run(Path(plan.run_dir)))
    assert [f.kind for f in found] == ["host_oom"], found
    assert "cluster.mem_gb=4 (now --mem=2G)" in found[0].fix and found[0].node == "c1"
