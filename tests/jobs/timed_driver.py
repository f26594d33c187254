"""A stand-in for verl whose steps take a known time: it logs STEPS steps in verl's file-logger format (verl's own
metric names) to the attempt's file (VERL_FILE_LOGGER_PATH, as the job sets it for verl), each reporting
timing_s/step = STEP_S split over verl's phases, then stays running until the test creates `release` in the run
directory (the test reads `status` while the job runs).

usage: timed_driver.py STEP_S STEPS"""

import json
import os
import sys
import time
from pathlib import Path


def main() -> None:
    step_s, steps = float(sys.argv[1]), int(sys.argv[2])
    log = Path(os.environ["VERL_FILE_LOGGER_PATH"])
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        for step in range(1, steps + 1):
            metrics = {
                "timing_s/gen": 0.5 * step_s,
                "timing_s/old_log_prob": 0.1 * step_s,
                "timing_s/update_actor": 0.3 * step_s,
                "timing_s/step": step_s,
                "response_length/mean": 100.0 + step,
                "perf/max_memory_reserved_gb": 10.0,
            }
            out.write(json.dumps({"step": step, "data": metrics}) + "\n")
            out.flush()
    deadline = time.monotonic() + 600
    while not Path("release").exists() and time.monotonic() < deadline:
        time.sleep(0.2)


if __name__ == "__main__":
    main()
