"""codegen: run the model's program against the problem's tests, each test in its own sandbox (rewards/sandbox.py).

Runs in: `prepare` in the scorer (verl's reward worker); `grade` in a pool worker's main thread, which starts the
sandboxes (up to `code_parallel` at a time for one sample) and compares outputs outside them.

Ground truth follows GURU: a JSON string with either `functional` (assert-style test code, appended to the
program) or `inputs`/`outputs` (stdin/stdout cases). Functional tests pass only when they ran to their end, which
neither an exit code (`sys.exit(0)` or `os._exit(0)` before the asserts) nor any text the program can print says:
the sandbox runs a fixed HARNESS, which forks, runs program and tests in the child (/program/solution.py), and only
then, in the parent, prints a random marker of this call. The marker is in no file and never in the child's memory
(the parent reads it from a pipe after the fork, and the child closes that pipe first), so the program can neither
read nor print it. What the harness cannot stop, as the program and its tests share one process: code written
against this harness itself (writing its completion byte to the inherited pipe, or objects that equal anything).
The program is the last ```python (or untagged) block after the thinking. Score 1 only if every test passes;
`passed` is the passed fraction. A failing, crashing or too slow program is judged (it fails its tests); a sandbox
that cannot run is an error, and the code is then never run unconfined.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Any

from rewards import extract, sandbox
from rewards.result import judged, unjudged
from rewards.settings import RewardSettings
from rewards.task import Task, text_of

FLOAT_TOLERANCE = 1e-6
# a pool worker needs time beyond the tests' own budget to start the last sandboxes and compare
POOL_MARGIN_S = 30.0


# the program under /program/main.py for functional tests; argv[1] names the pipe that holds this call's marker
HARNESS = """\
import os, sys, traceback, types

marker_fd = int(sys.argv[1])
done_r, done_w = os.pipe()
child = os.fork()
if child == 0:
    os.close(marker_fd)
    os.close(done_r)
    sys.argv = ["/program/solution.py"]
    main = types.ModuleType("__main__")  # the program's own __main__, as if run as a script (pickle, dataclasses)
    main.__file__ = "/program/solution.py"
    sys.modules["__main__"] = main
    with open("/program/solution.py", encoding="utf-8") as file:
        source = file.read()
    code = 1
    try:
        exec(compile(source, "/program/solution.py", "exec"), main.__dict__)
        code = 0
    except SystemExit as stop:  # an exit before the tests' end is no pass, whatever its code
        code = 1 if stop.code in (None, 0) else stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    if code == 0:
        os.write(done_w, b"1")
    os._exit(code)
os.close(done_w)
finished = os.read(done_r, 1) == b"1"
_, status = os.waitpid(child, 0)
marker = os.read(marker_fd, 256).decode()
if finished and os.waitstatus_to_exitcode(status) == 0:
    print(marker, flush=True)
    sys.exit(0)
sys.exit(1)
"""


def prepare(data_source: str, solution: str, ground_truth: Any, extra_info: dict, settings: RewardSettings) -> Task:
    code = extract.last_code_block(solution)
    if code is None:
        return Task.done(judged(0.0))
    limits = settings.sandbox_limits()
    args = (code, text_of(ground_truth), limits, settings.code_parallel, settings.code_budget_s)
    return Task.pool("rewards.domains.codegen:grade", args, settings.code_budget_s + limits.wall_s + POOL_MARGIN_S)


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _token_equal(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return abs(x - y) <= FLOAT_TOLERANCE * max(1.0, abs(y))


def outputs_match(actual: str, expected: str) -> bool:
    """Line by line, trailing spaces and blank edge lines ignored; tokens equal, numbers within 1e-6."""
    got, want = _lines(actual), _lines(expected)
    if got == want:
        return True
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        gt, wt = g.split(), w.split()
        if len(gt) != len(wt) or not all(_token_equal(x, y) for x, y in zip(gt, wt, strict=True)):
            return False
    return True


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)


def grade(code: str, tests_text: str, limits: sandbox.Limits, parallel: int, budget_s: float) -> dict[str, Any]:
    try:
        tests = json.loads(tests_text)
    except ValueError:
        return unjudged("codegen ground truth is not JSON")
    if not isinstance(tests, dict):
        return unjudged("codegen ground truth is not a JSON object")
    # exit code 0 alone would reward `sys.exit(0)` before the asserts: functional tests must also run to their end,
    # said by the harness with a marker the program never sees (HARNESS)
    done, files = f"rlaunch-tests-done-{secrets.token_hex(16)}", None
    if "functional" in tests:
        jobs = [(HARNESS, "")]
        files = {"solution.py": f"{code}\n\n{tests['functional']}\n"}
        expected: list[str | None] = [None]
    elif "inputs" in tests and "outputs" in tests:
        inputs, outputs = tests["inputs"], tests["outputs"]
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs) or not inputs:
            return unjudged("codegen ground truth: inputs and outputs must be lists of the same, non-zero length")
        jobs = [(code, _text(stdin)) for stdin in inputs]
        expected = [_text(stdout) for stdout in outputs]
    else:
        return unjudged(f"codegen ground truth has neither 'functional' nor 'inputs'/'outputs': {sorted(tests)}")
    refused = sandbox.unavailable_reason(limits)
    if refused:
        return unjudged(refused)
    outcomes = asyncio.run(sandbox.run_all(jobs, limits, parallel, budget_s, files, done if files else ""))
    broken = next((o for o in outcomes if o.status == "sandbox_error"), None)
    if broken is not None:
        return unjudged(f"sandbox error: {broken.stderr.strip()[-300:]}")
    passed = sum(
        1
        for outcome, want in zip(outcomes, expected, strict=True)
        if outcome.status == "exited"
        and outcome.exit_code == 0
        and (outcome.stdout.rstrip().endswith(done) if want is None else outputs_match(outcome.stdout, want))
    )
    return judged(1.0 if passed == len(jobs) else 0.0, passed=passed / len(jobs))
