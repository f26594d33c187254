"""A time-limit job rlaunch declined to requeue (helper-41's probe, case c7time: cluster.max_requeues=0) is told
which of rlaunch's keys decided it, from rlaunch's own line, not submitit's max_num_timeout."""

from __future__ import annotations

from launch.report import failures

# c7time's job log (submitit/<job>/<job>_0_log.out)
DECLINED = "\n".join(
    [
        "submitit INFO (2026-11-22 19:50:57,996) - Job has timed out. Ran 1 minutes out of requested 2 minutes.",
        "submitit WARNING (2026-11-22 19:50:57,997) - Caught signal SIGUSR2 on vm: this job is timed-out.",
        "submitit INFO (2026-11-22 19:50:57,997) - Calling checkpoint method.",
        "rlaunch: not requeued: requeued 0 times: cluster.max_requeues=0 reached",
        "submitit INFO (2026-11-22 19:50:57,998) - Job not requeued because: timed-out too many times.",
    ]
)


def test_rlaunchs_own_refusal_names_cluster_max_requeues_not_submitits_setting():
    failure = failures.classify(DECLINED)
    assert failure.kind == "time_limit"
    assert failure.fix.startswith(
        "the job reached its time limit after 1 attempt(s) and rlaunch did not requeue it: cluster.max_requeues=0 "
        "reached; raise cluster.max_requeues"
    )
    assert "max_num_timeout" not in failure.fix and "once more than" not in failure.fix
    assert failure.details["max_requeues"] == 0


def test_another_reason_rlaunch_gives_is_quoted():
    reason = "attempt 1 hung and its stacks show no transient cause: a requeue would hang the same way"
    failure = failures.classify(DECLINED.replace("requeued 0 times: cluster.max_requeues=0 reached", reason))
    assert failure.fix == f"the job reached its time limit and rlaunch did not requeue it: {reason}"


def test_submitits_own_refusal_without_rlaunchs_line_keeps_submitits_wording():
    failure = failures.classify("\n".join(line for line in DECLINED.splitlines() if "rlaunch" not in line))
    assert "max_num_timeout" in failure.fix
