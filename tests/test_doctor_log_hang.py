"""`doctor.py --log` on rlaunch's own hang lines (the watchdog's stop, the job's end on it) and the outcome that ends
its text: the lines are those of a dev-cluster job stopped with launch.hang.factor=2 launch.hang.floor_s=5."""

from __future__ import annotations

import json
from pathlib import Path

from launch.report import doctor, failures

START = (
    "submitit INFO (2026-11-29 15:30:31,772) - Starting with JobEnvironment(job_id=2, hostname=vm, local_rank=0(1), "
    "node=0(1), global_rank=0(1))\n"
    "rlaunch: Ray up on 1 node(s) 12.6 s after the job started (127.130.0.11:20320); code from /work/main\n"
    "rlaunch: hang watchdog on: no step within max(2 x 14 s, 5 s) = 29 s is a hang (step time from the plan; "
    "measured steps replace it)\n"
)
STOPPED = (
    "rlaunch: hang watchdog: no step for 5 s (window 5 s, last step 3): recording every process's stack into "
    "hang/attempt-1\n"
)
HUNG_ERR = (
    "submitit ERROR (2026-11-29 15:31:14,581) - Submitted job triggered an exception\n"
    "Traceback (most recent call last):\n"
    '  File "/work/main/launch/job.py", line 175, in end_hung_attempt\n'
    '    raise RuntimeError(f"hang: {watchdog.summary(record)}; not requeued: {why} (run {plan.run_id})")\n'
    "RuntimeError: hang: no step for 5 s (window 5 s) in an unknown phase: c1:pid2904 in <module> (driver.py:26) "
    "[code] (stacks in hang/attempt-1); not requeued: attempt 1 hung and its stacks show no transient cause (a "
    "collective or network wait): a requeue would hang the same way; see hang/attempt-1 (run 9e0815aa3ace)\n"
    "srun: error: c1: task 0: Exited with exit code 1\n"
)


def test_rlaunchs_own_hang_line_is_a_hang_and_the_text_ends_with_the_outcome(tmp_path: Path):
    (tmp_path / "2_0_log.out").write_text(START + STOPPED)
    (tmp_path / "2_0_log.err").write_text(HUNG_ERR)
    record = json.loads(doctor.classify_log(tmp_path / "2_0_log.err", as_json=True))
    assert (record["outcome"], record["failure"]["kind"]) == ("failed", "hang")
    assert record["failure"]["details"] == {
        "waited_s": 5.0,
        "window_s": 5.0,
        "last_step": 3,
        "phase": "?",
        "stacks_dir": "hang/attempt-1",
    }
    fix = record["failure"]["fix"]
    assert "after step 3: c1:pid2904 in <module> (driver.py:26) [code]" in fix
    assert "not requeued: attempt 1 hung and its stacks show no transient cause" in fix
    text = doctor.classify_log(tmp_path / "2_0_log.err", as_json=False).splitlines()
    assert text[0] == "[hang] (node c1)" and text[-1] == "outcome: failed on hang"


def test_a_hang_requeued_once_is_the_attempts_cause_not_the_preemption_signal_that_requeued_it(tmp_path: Path):
    requeued = (
        "rlaunch: hang: no step for 912 s (window 900 s) in gen: c1-rank0 in all_reduce (distributed_c10d.py:2501) "
        "[collective] (stacks in hang/attempt-1); requeued once (the stacks point to a transient cause)\n"
        "submitit WARNING (2026-11-29 15:46:25,960) - Caught signal SIGUSR2 on vm: this job is preempted.\n"
        "submitit INFO (2026-11-29 15:46:26,007) - Requeued job 2 (3 remaining timeouts)\n"
    )
    again = START.replace("15:30:31,772", "15:47:02,310")  # the requeued attempt's start
    (tmp_path / "2_0_log.out").write_text(START + STOPPED.replace("5 s", "912 s", 1) + requeued + again)
    attempts = failures.attempts_in([tmp_path / "2_0_log.out"])
    assert len(attempts) == 2
    found = failures.classify(attempts[0].text, 1, attempts[0].host)
    assert (found.kind, found.details["phase"], found.details["window_s"]) == ("hang", "gen", 900.0)
    assert found.fix.endswith(
        "requeued once (the stacks point to a transient cause); python launch/report/doctor.py "
        "<run dir> reads its hang.json"
    )
    # the watchdog's other lines name no hang
    said = "rlaunch: hang watchdog: the window (26386 s: 5 x 5277 s, floor 1800 s) is longer than the 900 s left"
    assert failures.classify(START + said + "\n").kind != "hang"


def test_every_outcome_of_the_text_is_its_last_line(tmp_path: Path):
    interrupted = tmp_path / "3_0_log.out"
    interrupted.write_text(
        START + "submitit WARNING (2026-11-29 15:46:25,960) - Caught signal SIGUSR2 on vm: this job is preempted.\n"
    )
    assert json.loads(doctor.classify_log(interrupted, as_json=True))["outcome"] == "interrupted"
    last = doctor.classify_log(interrupted, as_json=False).splitlines()[-1]
    assert last == "outcome: interrupted on preempted: SLURM requeues the job, and its next attempt logs here"
