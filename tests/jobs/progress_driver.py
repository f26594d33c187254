"""A stand-in for verl in requeue tests: joins the job's Ray, then advances a counter one step per second up to a
target, saving it (and verl's checkpoint marker) every step, and resumes from the saved count when requeued -- what
verl does with trainer.resume_mode=auto. Appends the count it started from to resumes.txt.

usage: progress_driver.py TARGET [SECONDS_PER_STEP_WHEN_RESUMED]; the second argument lets a time-limit test's first
attempt run out of time while a resumed attempt finishes well inside its own limit."""

import json
import sys
import time
from pathlib import Path

import ray


def main() -> None:
    target = int(sys.argv[1])
    plan = json.loads(Path("plan.json").read_text())
    checkpoints = Path(plan["verl"]["trainer"]["default_local_dir"])
    checkpoints.mkdir(parents=True, exist_ok=True)
    state = Path("progress.txt")
    step = int(state.read_text()) if state.exists() else 0
    with open("resumes.txt", "a") as log:
        log.write(f"{step}\n")
    ray.init(logging_level="ERROR")
    ray.shutdown()
    interval = float(sys.argv[2]) if step > 0 and len(sys.argv) > 2 else 1.0
    while step < target:
        time.sleep(interval)
        step += 1
        state.write_text(str(step))
        (checkpoints / "latest_checkpointed_iteration.txt").write_text(str(step))


if __name__ == "__main__":
    main()
