"""How a job ended, as the after-the-run reports (sweep.py status and logs, the doctor, compare) tell it: what SLURM
says of the job beside its own log. On the real dev cluster: a job scancel'led while it ran (its Ray logs still copied
into the run directory), one cancelled while it waited, one that hit its time limit in its setup; without a cluster:
a node failure SLURM requeued (from the log of a real one), and a machine where SLURM does not answer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PROJECT, wait_until
from metric_fixtures import make_plan_dir
from test_job import JOBS, submit, wait_for_state

from launch.report import failures

TOOLS = {"status": "sweep.py", "logs": "sweep.py", "doctor": "report/doctor.py", "compare": "report/compare.py"}


def report(tool: str, target: Path, env: dict[str, str]) -> str:
    """A report tool as a user runs it: its stdout (it must succeed)."""
    command = [sys.executable, str(PROJECT / "launch" / TOOLS[tool]), *([tool] if tool in ("status", "logs") else [])]
    result = subprocess.run(
        [*command, str(target)], env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def compare_states(sweep_dir: Path, env: dict[str, str]) -> dict[str, str]:
    """run id -> the state cell of compare's report."""
    report("compare", sweep_dir, env)
    rows = [line.split(" | ") for line in (sweep_dir / "report" / "report.md").read_text().splitlines()]
    return {row[1]: row[2] for row in rows if len(row) > 3 and re.fullmatch(r"[0-9a-f]{12}", row[1])}


def test_cancelled_and_timed_out_jobs_as_slurm_ended_them(slurm_env, tmp_path: Path):
    """Three jobs, their waits overlapping: one scancel'led mid-run, one cancelled while it waited for its start
    time, one whose setup outlived its 1-minute limit. compare showed them FAILED, PENDING and REQUEUED (the run files
    alone), and the cancels' cause was `unknown` with a fix asking the user to run sacct; the running job's head died
    at scancel's SIGTERM (ray.init had put Ray's handler in place) without copying its Ray logs."""
    venv = Path(sys.executable).parent.parent
    one_gpu = "trainer.n_gpus_per_node=1"
    running, running_id = submit(slurm_env, tmp_path, [str(JOBS / "progress_driver.py"), "600"], one_gpu)
    waiting, waiting_id = submit(
        slurm_env, tmp_path, [str(JOBS / "progress_driver.py"), "5"], one_gpu, "+cluster.sbatch_extra.begin=now+600"
    )
    setup_line = f"cluster.setup=[source {venv}/bin/activate,sleep 600]"
    setup, setup_id = submit(
        slurm_env, tmp_path, [str(JOBS / "progress_driver.py"), "5"], one_gpu, setup_line,
        "mode.time_budget_min=1", "cluster.time_margin_min=0",
    )  # fmt: skip
    sweep_dir = Path(running.run_dir).parent
    assert Path(waiting.run_dir).parent == sweep_dir == Path(setup.run_dir).parent
    progress = Path(running.run_dir) / "progress.txt"
    wait_until(lambda: progress.exists() and int(progress.read_text() or 0) >= 2, 180, "the running job's steps")
    subprocess.run(["scancel", running_id, waiting_id], env={**os.environ, **slurm_env}, check=True, timeout=60)
    ray_logs = Path(running.run_dir) / "ray_logs"
    # the head survives scancel's SIGTERM (submitit's handler, not Ray's) and copies the node's Ray logs in KillWait
    wait_until(lambda: any(ray_logs.rglob("raylet.out")), 60, "the cancelled job's Ray logs in its run directory")
    assert "Bypassing signal SIGTERM" in next(tmp_path.rglob(f"{running_id}_0_log.err")).read_text()
    for job_id, expected in ((running_id, "CANCELLED"), (waiting_id, "CANCELLED"), (setup_id, "TIMEOUT")):
        ended = wait_for_state(job_id, slurm_env, {"CANCELLED", "TIMEOUT", "COMPLETED", "FAILED"}, 300)
        assert ended.split(" ")[0] == expected, (job_id, ended)

    status = report("status", sweep_dir, slurm_env)
    for job_id in (running_id, waiting_id):
        assert re.search(rf"{job_id} +CANCELLED by 0 .* cause cancelled: SLURM: job {job_id} CANCELLED by 0", status)
    assert re.search(rf"{setup_id} +TIMEOUT .* cause time_limit: ", status), status
    logs = report("logs", sweep_dir, slurm_env)
    assert "[cancelled] (attempt 1" in logs and "sacct -j" not in logs, logs
    assert "SLURM says CANCELLED by 0: cancelled by user root (uid 0): nothing to fix in the run" in logs
    assert "SLURM says CANCELLED by 0: cancelled by user root (uid 0) before it started" in logs
    doctor = report("doctor", sweep_dir, slurm_env)
    # a cancel is said as one, with the state sweep.py status gives (helper-52): not 'failed'
    assert doctor.count("cancelled [cancelled]") == 2 and "failed [time_limit]" in doctor, doctor
    assert "state: cancelled by user root (uid 0) before it started" in doctor, doctor
    assert "cancelled: cancelled" in (Path(waiting.run_dir) / "diagnosis.md").read_text()
    states = compare_states(sweep_dir, slurm_env)
    assert states[running.run_id].startswith("CANCELLED by 0 (cancelled: "), states
    assert states[waiting.run_id].startswith("CANCELLED by 0 (cancelled: "), states
    assert states[setup.run_id].startswith("TIMEOUT (time_limit: "), states


# a real node failure on the dev cluster (the node's slurmd killed while the job ran; SLURM requeued the job, whose
# second attempt failed at verl's GPU check): the lines of its submitit logs that the reports read
NODE_FAIL_OUT = """\
submitit INFO (2026-11-29 07:32:39,253) - Starting with JobEnvironment(job_id=11, hostname=c1, local_rank=0(1), node=0(1), global_rank=0(1))
rlaunch: Ray up on 1 node(s) 3.7 s after the job started (127.140.0.11:21760); code from /runs/code/3a8dab552049f105
submitit WARNING (2026-11-29 07:32:51,411) - Bypassing signal SIGCONT
submitit INFO (2026-11-29 07:33:02,818) - Starting with JobEnvironment(job_id=11, hostname=c1, local_rank=0(1), node=0(1), global_rank=0(1))
rlaunch: Ray up on 1 node(s) 3.4 s after the job started (127.140.0.11:21760); code from /runs/code/3a8dab552049f105
submitit ERROR (2026-11-29 07:33:38,008) - Submitted job triggered an exception
"""  # noqa: E501
NODE_FAIL_ERR = """\
2026-11-29 07:32:47,224	INFO worker.py:2038 -- Connected to Ray cluster.
srun: error: Node failure on c1
slurmstepd-c1: error: *** JOB 11 ON c1 CANCELLED AT 2026-11-29T07:32:51 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***
srun: Job step aborted: Waiting up to 7 seconds for job step to finish.
slurmstepd-c1: error: *** STEP 11.0 ON c1 CANCELLED AT 2026-11-29T07:32:51 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***
submitit WARNING (2026-11-29 07:32:51,411) - Bypassing signal SIGCONT
2026-11-29 07:33:10,268	INFO worker.py:2038 -- Connected to Ray cluster.
Traceback (most recent call last):
ValueError: Total available GPUs 0 is less than total desired GPUs 1
submitit ERROR (2026-11-29 07:33:38,008) - Submitted job triggered an exception
RuntimeError: verl exited with code 1 (run x; its output is in this job's log)
srun: error: c1: task 0: Exited with exit code 1
"""  # noqa: E501


def slurm_answering(tmp_path: Path, sacct: str, squeue: str = "", silent: bool = False) -> dict[str, str]:
    """PATH with a sacct and squeue that answer as SLURM would for these jobs (or fail as a machine whose controller
    is down does)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, said in (("sacct", sacct), ("squeue", squeue)):
        (bin_dir / f"{name}.txt").write_text(said)
        body = (
            f"echo '{name}: error: Unable to contact slurm controller (connect failure)' >&2; exit 1"
            if silent
            else f"cat {bin_dir / name}.txt"
        )
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def fixture_job(sweep_dir: Path, job_id: str, out: str, err: str) -> Path:
    """A planned run whose job (`job_id`) wrote these submitit logs, in a sweep whose manifest lists it."""
    run_dir = make_plan_dir(sweep_dir, "guru_baseline", "a40")
    logs = sweep_dir / "submitit" / job_id
    logs.mkdir(parents=True)
    (logs / f"{job_id}_0_log.out").write_text(out)
    (logs / f"{job_id}_0_log.err").write_text(err)
    run = {"run_id": run_dir.name, "run_dir": str(run_dir), "job_name": "a40", "job_id": job_id}
    run |= {
        "array_job_id": job_id,
        "stdout": str(logs / f"{job_id}_0_log.out"),
        "stderr": str(logs / f"{job_id}_0_log.err"),
    }
    manifest = {
        "sweep_id": sweep_dir.name,
        "sweep_dir": str(sweep_dir),
        "runs": [run],
        "arrays": [{"job_id": job_id, "tasks": 1}],
    }
    (sweep_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


@pytest.mark.parametrize(
    ("sacct", "squeue", "requeued_as"),
    [
        # attempt 2 ran and failed: the log shows it
        ("11|NODE_FAIL|0:0|00:00:12|c1|x\n11|FAILED|1:0|00:00:36|c1|x\n", "", "2"),
        # SLURM holds the job again (requeued, waiting for a node): only its record shows it
        ("11|NODE_FAIL|0:0|00:00:12|c1|x\n11|PENDING|0:0|00:00:00|None|x\n", "11|PENDING|(BeginTime)\n", "2"),
    ],
    ids=["next-attempt-ran", "held-again"],
)
def test_a_node_failure_slurm_requeued_says_so_instead_of_resubmit(tmp_path: Path, sacct, squeue, requeued_as):
    out, err = NODE_FAIL_OUT, NODE_FAIL_ERR
    if squeue:  # the second attempt has not started yet
        out, err = out.split("submitit INFO (2026-11-29 07:33:02")[0], err.split("2026-11-29 07:33:10")[0]
    run_dir = fixture_job(tmp_path / "nodefail", "11", out, err)
    env = slurm_answering(tmp_path, sacct, squeue)
    logs = report("logs", run_dir.parent, env)
    [fix] = [line for line in logs.splitlines() if line.startswith("  fix: SLURM lost the job's node c1")]
    assert f"SLURM requeued the job (attempt {requeued_as}), which resumes from the last checkpoint" in fix, logs
    assert "resubmit" not in fix.replace("nothing to resubmit", "")
    status = report("status", run_dir.parent, env)
    assert "[NODE_FAIL > " in status and "cause ray_node_lost" in status, status
    assert f"(attempt {requeued_as}), which resumes" in report("doctor", run_dir.parent, env)


def test_the_last_attempts_node_failure_without_a_requeue_still_says_resubmit(tmp_path: Path):
    out = "\n".join(NODE_FAIL_OUT.splitlines()[:3])
    err = "\n".join(NODE_FAIL_ERR.splitlines()[:6])
    run_dir = fixture_job(tmp_path / "nodefail", "11", out, err)
    found = failures.run_failures(run_dir, record=failures.JobRecord("SLURM", "11", "NODE_FAIL", ("NODE_FAIL",)))
    assert [f.kind for f in found] == ["ray_node_lost"] and "resubmit (the run resumes" in found[0].fix, found


def test_where_slurm_does_not_answer_the_runs_own_records_decide(tmp_path: Path):
    """sacct and squeue fail (a laptop with the shared filesystem, a controller down): status and compare say so and
    show what the job's log says, as before; a cancel cannot be named from the log alone (its fix says what decides)."""
    cancelled_err = "slurmstepd-c1: error: *** JOB 5 ON c1 CANCELLED AT 2026-11-29T07:23:48 ***\n"
    cancelled_err += "srun: error: c1: task 0: Terminated\n"
    run_dir = fixture_job(tmp_path / "gone", "5", NODE_FAIL_OUT.split("submitit WARNING")[0], cancelled_err)
    env = slurm_answering(tmp_path, "", silent=True)
    status = report("status", run_dir.parent, env)
    assert "SLURM did not answer (squeue: error: Unable to contact slurm controller" in status, status
    assert re.search(r"\b5  FAILED .* cause unknown: ", status), status
    shown = report("compare", run_dir.parent, env)
    assert "SLURM did not answer" in shown and "the states are the runs' own records" in shown
    assert compare_states(run_dir.parent, env)[run_dir.name].startswith("FAILED (unknown: ")
    # SLURM answering: the same log is a cancel, named
    answering = slurm_answering(tmp_path, "5|CANCELLED by 0|0:15|00:00:13|c1|x\n")
    assert compare_states(run_dir.parent, answering)[run_dir.name].startswith("CANCELLED by 0 (cancelled: SLURM")


def test_a_cancel_while_the_requeued_job_waits_keeps_the_interruption_before_it(tmp_path: Path):
    """Attempt 1 was preempted and requeued; the user cancelled the job while it waited: the preemption stays attempt
    1's cause, the cancel comes after it."""
    out = NODE_FAIL_OUT.splitlines()[0] + "\n"
    err = "submitit WARNING (2026-11-29 07:32:51,411) - Caught signal SIGUSR2 on c1: this job is preempted.\n"
    run_dir = fixture_job(tmp_path / "requeued", "11", out, err)
    record = failures.JobRecord("SLURM", "11", "CANCELLED by 0", ("PREEMPTED", "CANCELLED by 0"))
    found = failures.run_failures(run_dir, record=record)
    assert [(f.kind, f.attempt) for f in found] == [("preempted", 1), ("cancelled", None)], found
    assert "cancelled by user root (uid 0) while it waited to start again: nothing to fix" in found[1].fix
    assert failures.summary(found).startswith("preempted > cancelled: SLURM: job 11 CANCELLED by 0")


# a real two-node job on the dev cluster (j_twonode): verl's GPU check failed on the driver (task 0) two seconds after
# the worker rank (task 1) logged its own clean exit; the lines of its submitit logs that the reports read
TWO_NODE_OUT_0 = """\
submitit INFO (2026-11-29 12:29:09,716) - Starting with JobEnvironment(job_id=16, hostname=vm, local_rank=0(1), node=0(2), global_rank=0(2))
rlaunch: Ray up on 2 node(s) 6.1 s after the job started (127.140.0.12:21760); code from /runs/code/6adb001c69bea737
submitit ERROR (2026-11-29 12:29:57,708) - Submitted job triggered an exception
"""  # noqa: E501
TWO_NODE_ERR_0 = """\
Traceback (most recent call last):
ValueError: Total available GPUs 0 is less than total desired GPUs 2
submitit ERROR (2026-11-29 12:29:57,708) - Submitted job triggered an exception
RuntimeError: verl exited with code 1 (run x; its output is in this job's log)
srun: error: c1: task 0: Exited with exit code 1
"""
TWO_NODE_OUT_1 = """\
submitit INFO (2026-11-29 12:29:09,727) - Starting with JobEnvironment(job_id=16, hostname=vm, local_rank=0(1), node=1(2), global_rank=1(2))
submitit INFO (2026-11-29 12:29:09,727) - Loading pickle: /runs/j_twonode/submitit/16/16_submitted.pkl
submitit INFO (2026-11-29 12:29:55,783) - Job completed successfully
submitit INFO (2026-11-29 12:29:55,783) - Exiting after successful completion
"""  # noqa: E501


def test_a_two_node_attempt_is_its_worst_ranks_and_logs_show_every_rank(tmp_path: Path):
    """Rank 1's 'Job completed successfully' came before rank 0's exception: the attempt failed (it had read as
    completed, so status, doctor and compare named no cause), and `logs` shows rank 1's files after rank 0's."""
    run_dir = fixture_job(tmp_path / "twonode", "16", TWO_NODE_OUT_0, TWO_NODE_ERR_0)
    logs_dir = tmp_path / "twonode" / "submitit" / "16"
    (logs_dir / "16_1_log.out").write_text(TWO_NODE_OUT_1)
    (logs_dir / "16_1_log.err").write_text("")
    assert failures.run_state(run_dir) == "FAILED"
    assert [f.kind for f in failures.run_failures(run_dir)] == ["gpu_unavailable"]
    env = slurm_answering(tmp_path, "", silent=True)
    assert re.search(r"\b16  FAILED .* cause gpu_unavailable: ", report("status", run_dir.parent, env))
    assert "failed [gpu_unavailable] (attempt 1" in report("doctor", run_dir.parent, env)
    assert compare_states(run_dir.parent, env)[run_dir.name].startswith("FAILED (gpu_unavailable: ")
    shown = report("logs", run_dir.parent, env)
    assert "[gpu_unavailable] (attempt 1" in shown
    rank_1 = f"==> 16 {run_dir.name} rank 1 stdout: {logs_dir / '16_1_log.out'}"
    assert rank_1 in shown and shown.index(rank_1) > shown.index(f"stderr: {logs_dir / '16_0_log.err'}"), shown
    assert shown.index("Exiting after successful completion") > shown.index(rank_1), shown


def test_a_worker_rank_without_an_end_line_does_not_hold_a_completed_attempt():
    """The driver (task 0) completed; a worker rank killed with the job step wrote no end line: completed. A worker
    rank that failed while the driver still runs: failed."""
    from launch.report.failures.logs import worst_ending

    assert worst_ending({"0": "completed", "1": "running"}) == "completed"
    assert worst_ending({"0": "running", "1": "failed"}) == "failed"
    assert worst_ending({"0": "running", "1": "completed"}) == "running"
    assert worst_ending({"0": "interrupted", "1": "failed"}) == "interrupted"


def test_cancel_on_a_sweep_whose_jobs_ended_says_nothing_was_running(tmp_path: Path):
    """scancel of a finished job is silent: `cancel` had printed 'cancelled 1 array(s): 16' for a sweep whose job had
    long failed. Now it says nothing was running and in which states the jobs are; a running job is still cancelled."""
    run_dir = fixture_job(tmp_path / "ended", "16", TWO_NODE_OUT_0, TWO_NODE_ERR_0)
    cancelled = tmp_path / "scancel.called"
    for squeue, expected in (("", None), ("16|RUNNING|c[1-2]\n", "RUNNING x1")):
        env = slurm_answering(tmp_path, "16|FAILED|1:0|00:00:48|c[1-2]|x\n", squeue)
        scancel = tmp_path / "bin" / "scancel"
        scancel.write_text(f'#!/bin/sh\necho "$@" > {cancelled}\n')
        scancel.chmod(0o755)
        said = subprocess.run(
            [sys.executable, str(PROJECT / "launch" / "sweep.py"), "cancel", str(run_dir.parent)],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert said.returncode == 0, said.stderr
        if expected is None:
            assert said.stdout.strip() == (
                "sweep ended: nothing was running to cancel: its 1 job(s) have ended (FAILED x1, as SLURM records them)"
            ), said.stdout
            assert not cancelled.exists()
        else:
            assert said.stdout.strip() == f"cancelled 1 array(s): 16 (its jobs were {expected})", said.stdout
            assert cancelled.read_text().split() == ["16"]
