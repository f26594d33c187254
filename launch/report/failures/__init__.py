"""Why a run failed: the cause of each failed attempt, read from its logs, with the evidence and the fix.

Runs on: any machine that sees the run directories (login node, laptop with the shared filesystem). The package:
  signatures.py  the failure kinds, the regex signatures that recognise them in real logs, `Failure`
  classify.py    which cause explains an attempt (root causes and interruptions first), one per failed attempt; an
                 attempt the hang watchdog stopped is a `hang` from its record; an interruption whose requeue failed
                 on a stale rendezvous says so
  likeness.py    for a log no signature names: the kind its words read like, from weights trained on the labelled
                 public logs (likeness.json), named only when clear and marked as such
  fixes.py       the fix for each kind, from the run's plan where the kind has numbers (`FixContext`)
  logs.py        where an attempt's logs are (submitit's layout, a Ray job's copied output, the copied Ray logs), their
                 split into attempts, the run's state; what the scheduler says of a sweep's jobs (SLURM, Ray's job
                 API), where it answers: a cancel is named from it
The names below are what the rest of rlaunch reads from here. `failures.classify` is the function (it shadows the
submodule of the same name on the package): reach the module as `from launch.report.failures.classify import ...`.
"""

from launch.report.failures.classify import HangRecord, cancel_failure, classify, read_hang_records, run_failures
from launch.report.failures.fixes import FixContext, save_freq_that_fits, with_plan_fix
from launch.report.failures.logs import (
    DRY_RUN_STATE,
    FAILED_STATE,
    JobRecord,
    JobRecords,
    attempts_in,
    job_records,
    log_with_sibling,
    planned_only,
    records_of,
    run_state,
    why_only_planned,
)
from launch.report.failures.signatures import KINDS, RECORDED_KINDS, Failure, render, summary

__all__ = [
    "DRY_RUN_STATE",
    "FAILED_STATE",
    "KINDS",
    "RECORDED_KINDS",
    "Failure",
    "FixContext",
    "HangRecord",
    "JobRecord",
    "JobRecords",
    "attempts_in",
    "cancel_failure",
    "classify",
    "job_records",
    "log_with_sibling",
    "planned_only",
    "why_only_planned",
    "read_hang_records",
    "records_of",
    "render",
    "run_failures",
    "run_state",
    "save_freq_that_fits",
    "summary",
    "with_plan_fix",
]
