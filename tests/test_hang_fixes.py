"""What the hang's fix says agrees with the watchdog's own record: the rank that never joined a collective is named
from the stacks' groups, a second hang is said not to be requeued (a hang is requeued once), and a start-up hang
points at launch.hang.floor_s even where some process was blocked in its own code (a model read over a slow
filesystem looks like that). Each came from a probe of real dev-cluster jobs whose fix contradicted the record."""

from __future__ import annotations

import json
from pathlib import Path

from test_failures_directions import run_with_log

from launch.report import failures
from launch.rundir import HANG_FILE

# the watchdog's evidence line of a two-node job whose fourth rank waits on an HTTP judge (tests/jobs/hang_driver.py)
EVIDENCE = (
    "c1:rank0, c1:rank1, c2:rank2 in all_reduce (torch/distributed/distributed_c10d.py:3252) from "
    "TrainerRank.update_actor (hang_driver.py:51) [collective]; c2:rank3 in SocketIO.readinto (socket.py:706) from "
    "ask_judge (hang_driver.py:56) [network]"
)
RECORD = {
    "phase": "update_actor",
    "stuck_ranks": ["c1:rank0", "c1:rank1", "c2:rank2", "c2:rank3"],
    "last_step": 3,
    "waited_s": 31.0,
    "window_s": 30.0,
    "expected_step_s": 7.0,
    "transient": True,
    "evidence": EVIDENCE,
}


def hangs_of(tmp_path: Path, records: list[dict]) -> list[failures.Failure]:
    run_dir = run_with_log(tmp_path, ["rlaunch: hang: no step for 31 s"] * len(records))
    (run_dir / HANG_FILE).write_text(json.dumps(records))
    return [f for f in failures.run_failures(run_dir) if f.kind == "hang"]


def test_the_rank_blocked_outside_the_collective_is_named_as_the_one_that_never_joined(tmp_path: Path):
    (hang,) = hangs_of(tmp_path, [{**RECORD, "attempt": 1, "stacks_dir": "hang/attempt-1"}])
    assert "c1:rank0, c1:rank1, c2:rank2 waited in it, and c2:rank3 in SocketIO.readinto" in hang.fix
    assert "never joined it" in hang.fix and "the one whose stack is elsewhere" not in hang.fix
    assert "so it is requeued once" in hang.fix


def test_a_second_hang_is_said_not_to_be_requeued(tmp_path: Path):
    first, second = hangs_of(
        tmp_path,
        [{**RECORD, "attempt": n, "stacks_dir": f"hang/attempt-{n}"} for n in (1, 2)],
    )
    assert "so it is requeued once" in first.fix
    assert "not requeued: an earlier attempt hung and was requeued" in second.fix
    assert "so it is requeued once" not in second.fix


def test_a_start_up_hang_with_a_blocked_process_still_points_at_the_floor(tmp_path: Path):
    starting = {
        **RECORD,
        "attempt": 1,
        "stacks_dir": "hang/attempt-1",
        "phase": "start-up",
        "last_step": None,
        "stuck_ranks": ["c1:pid19917"],
        "transient": False,
        "evidence": "c1:pid19917 in <module> (<string>:1) [code]",
    }
    (hang,) = hangs_of(tmp_path, [starting])
    assert "stuck in start-up before the first step on c1:pid19917" in hang.fix
    assert "raise launch.hang.floor_s above 30 s" in hang.fix
