"""The hang watchdog (launch/watchdog.py): its window, its reading of progress (a slow but progressing run is never a
hang), what real stacks dumped with py-spy say, the requeue rule, and on the real dev cluster a two-node job whose
ranks block in a gloo collective that one rank never joins."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import compose_config, cpu_facts, wait_until
from test_job import JOBS, ray_processes_of, sh, submit, wait_for_state

from launch import watchdog
from launch.plan import make_plan
from launch.render import render
from launch.rundir import HANG_DIR, HANG_FILE, NOT_REQUEUED_FILE, Plan, PredictedTime, Readiness, attempt_log_path

# --- the window ------------------------------------------------------------------------------------------------------


def test_the_window_is_k_expected_step_times_never_below_the_floor():
    assert watchdog.hang_window_s(None, 5, 1800) == 1800  # nothing predicts a step: the floor
    assert watchdog.hang_window_s(100.0, 5, 1800) == 1800  # 5 x 100 = 500 < the floor
    assert watchdog.hang_window_s(600.0, 5, 1800) == 3000  # 5 x 600
    assert watchdog.hang_window_s(600.0, 2.5, 60) == 1500


def test_measured_steps_replace_the_prediction_and_the_slowest_counts():
    assert watchdog.expected_step_s(None, []) is None
    assert watchdog.expected_step_s(120.0, []) == 120.0
    # a checkpoint step (250 s) recurs: the window must hold it, so the slowest step, not the median
    assert watchdog.expected_step_s(120.0, [60.0, 62.0, 250.0, 61.0]) == 250.0
    assert watchdog.expected_step_s(None, [60.0]) == 60.0


def test_the_predicted_step_time_comes_from_the_plans_time_forecast_and_the_settings_from_launch_hang(tmp_path):
    overrides = ["cluster=local", f"cluster.shared_dir={tmp_path}", "gpu=a40", "launch.sweep_id=hang"]
    plan = make_plan(compose_config(*overrides), cpu_facts(), overrides, tmp_path, "python")
    assert plan.time is not None and watchdog.predicted_step_s(plan) == plan.time.step_s
    bare = dataclasses.replace(plan, readiness=None, time=None)
    assert watchdog.predicted_step_s(bare) is None  # no forecast at all
    assert watchdog.predicted_step_s(dataclasses.replace(bare, readiness=Readiness())) is None
    # a plan.json written before the plan had its own forecast: the readiness record's
    earlier = {"rows": 100, "steps_per_epoch": 10, "total_steps": 10, "step_s": 42.5, "wall_min": 7.1}
    earlier |= {
        "time_limit_min": 60,
        "attempts": 1,
        "first_checkpoint_step": 10,
        "checkpoints": True,
        "attempt_min": 50,
    }
    older = Plan.from_dict({**bare.to_dict(), "readiness": {"time": earlier}})  # read back from such a plan.json
    assert watchdog.predicted_step_s(older) == 42.5
    settings = plan.cluster_settings
    assert (settings.hang_enabled, settings.hang_factor, settings.hang_floor_s) == (True, 5.0, 1800.0)
    window = watchdog.hang_window_s(plan.time.step_s, 5.0, 1800.0)
    shown = f"  hang watch    no step within max(5 x {plan.time.step_s:.0f} s, 1800 s) = {window:.0f} s: every rank's"
    assert shown in render(plan)  # the plan says the window the job will start with
    assert "  hang watch    no step within max(5 x ? (no step time), 1800 s) = 1800 s" in render(bare)
    overrides += ["launch.hang.floor_s=30", "launch.hang.factor=2", "launch.hang.enabled=false"]
    unwatched = make_plan(compose_config(*overrides), cpu_facts(), overrides, tmp_path, "python")
    assert "  hang watch    off (launch.hang.enabled=false)" in render(unwatched)
    settings = unwatched.cluster_settings
    assert (settings.hang_enabled, settings.hang_factor, settings.hang_floor_s) == (False, 2.0, 30.0)


def test_the_plan_warns_of_a_window_shorter_than_a_start_up_or_longer_than_the_time_limit(tmp_path):
    base = ["cluster=local", f"cluster.shared_dir={tmp_path}", "gpu=a40", "launch.sweep_id=hang"]

    def hang_warnings(*extra: str) -> list[str]:
        overrides = [*base, *extra]
        plan = make_plan(compose_config(*overrides), cpu_facts(), overrides, tmp_path, "python")
        return [warning for warning in plan.warnings if warning.startswith("launch.hang.")]

    assert hang_warnings() == []  # the defaults: a 1800 s floor, 5 x the step
    tiny = ["llm=qwen2_5_0_5b", "data.max_prompt_length=256", "data.max_response_length=512"]
    [short] = hang_warnings(*tiny, "launch.hang.floor_s=60")
    assert short.startswith("launch.hang.floor_s=60: the hang window before the first step is ")
    assert "a normal start-up would be stopped as a hang; give launch.hang.floor_s=" in short
    assert hang_warnings(*tiny, "launch.hang.floor_s=60", "launch.hang.enabled=false") == []  # no watch, no window
    [long] = hang_warnings("launch.hang.factor=1000")
    assert long.startswith("launch.hang.factor=1000: the hang window (max(1000 x ")
    assert "longer than the job's time limit" in long and "launch.hang.factor up to " in long
    [long] = hang_warnings("launch.hang.floor_s=100000")
    assert "launch.hang.floor_s below " in long
    # a floor given as a float (1e12 is one to Hydra) is a number of seconds, not a type error
    [long] = hang_warnings("launch.hang.floor_s=1e12")
    assert long.startswith("launch.hang.floor_s=1000000000000: the hang window (max(")


# --- progress --------------------------------------------------------------------------------------------------------


def test_the_metrics_tail_reads_whole_lines_once_and_starts_over_on_a_new_file(tmp_path: Path):
    path = tmp_path / "attempt-1.jsonl"
    tail = watchdog.MetricsTail(path)
    assert tail.new_records() == []  # not written yet
    path.write_text('{"step": 1, "data": {"timing_s/step": 3.0}}\n{"step": 2, "da')
    assert tail.new_records() == [(1, {"timing_s/step": 3.0})]  # the half-written line waits
    with path.open("a") as metrics:
        metrics.write('ta": {}}\nnot json\n')
    assert tail.new_records() == [(2, {})]
    assert tail.new_records() == []
    path.write_text('{"step": 1, "data": {}}\n')  # verl's logger truncates its file when it starts
    assert tail.new_records() == [(1, {})]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ScriptedDriver:
    """A driver on a fake clock: each step takes its given seconds and is logged when it ends; after the last step it
    runs on forever (hangs) or exits."""

    def __init__(self, clock: FakeClock, path: Path, step_seconds: list[float], exits: bool) -> None:
        self.clock, self.path, self.exits = clock, path, exits
        self.pid = os.getpid()
        self.ends = []
        at = clock.now
        for seconds in step_seconds:
            at += seconds
            self.ends.append((at, seconds))
        self.logged = 0
        path.parent.mkdir(parents=True, exist_ok=True)

    def wait(self, timeout: float) -> int:
        self.clock.now += timeout
        with self.path.open("a") as log:
            while self.logged < len(self.ends) and self.ends[self.logged][0] <= self.clock.now:
                record = {"step": self.logged + 1, "data": {"timing_s/step": self.ends[self.logged][1]}}
                log.write(json.dumps(record) + "\n")
                self.logged += 1
        if self.logged == len(self.ends) and self.exits:
            return 0
        raise subprocess.TimeoutExpired("driver", timeout)


def scripted_watch(tmp_path: Path, clock: FakeClock, predicted: float | None, factor: float, floor_s: float):
    return watchdog.HangWatch(
        run_dir=tmp_path,
        attempt=1,
        nodes=("n1",),
        attempt_tag="1-0",
        ray_root=os.getpid(),
        ray_status_command=[sys.executable, "-c", "print('ray status stand-in')"],
        ray_env=dict(os.environ),
        predicted_s=predicted,
        factor=factor,
        floor_s=floor_s,
        clock=clock,
    )


# steps slower than K x the plan's prediction, and slower and slower, each within K x the slowest before it
SLOW_BUT_PROGRESSING = [40.0, 45.0, 100.0, 180.0, 400.0, 900.0, 1500.0, 1400.0, 3000.0]


def test_a_slow_but_progressing_run_is_never_a_hang(tmp_path: Path):
    clock = FakeClock()
    watch = scripted_watch(tmp_path, clock, predicted=10.0, factor=5, floor_s=60)
    driver = ScriptedDriver(clock, attempt_log_path(tmp_path, 1), SLOW_BUT_PROGRESSING, exits=True)
    assert watch.wait(driver) == 0  # type: ignore[arg-type]
    assert watch.hang is None and not (tmp_path / HANG_FILE).exists()


def test_no_step_within_the_window_is_a_hang_with_the_window_it_used(tmp_path: Path):
    clock = FakeClock()
    watch = scripted_watch(tmp_path, clock, predicted=10.0, factor=5, floor_s=60)
    driver = ScriptedDriver(clock, attempt_log_path(tmp_path, 1), SLOW_BUT_PROGRESSING[:4], exits=False)
    assert watch.wait(driver) == watchdog.HUNG  # type: ignore[arg-type]
    record = watch.hang
    assert record is not None and json.loads((tmp_path / HANG_FILE).read_text()) == [record]
    # 4 steps measured, the slowest 180 s: 5 x 180 = 900 s; found at the first look past it (polls of 3 s)
    assert (record["last_step"], record["expected_step_s"], record["window_s"]) == (4, 180.0, 900.0)
    assert 900.0 <= record["waited_s"] < 900.0 + watchdog.poll_interval_s(60) + 0.01
    assert record["stacks_dir"] == f"{HANG_DIR}/attempt-1"
    assert (tmp_path / HANG_DIR / "attempt-1" / watchdog.RAY_STATUS_FILE).read_text() == "ray status stand-in\n"


def test_before_the_first_step_the_plans_prediction_or_the_floor_sets_the_window(tmp_path: Path):
    for predicted, window in ((None, 60.0), (10.0, 60.0), (40.0, 200.0)):
        clock = FakeClock()
        run_dir = tmp_path / str(predicted)
        run_dir.mkdir()
        watch = scripted_watch(run_dir, clock, predicted=predicted, factor=5, floor_s=60)
        assert watch.wait(ScriptedDriver(clock, attempt_log_path(run_dir, 1), [], exits=False)) == watchdog.HUNG  # type: ignore[arg-type]
        assert watch.hang is not None
        assert (watch.hang["last_step"], watch.hang["window_s"]) == (None, window)


# the probe's run: the first step compiles (~6000 s more), step 4 stalls for 20000 s and goes on, steps are ~1300 s
ONE_STALL = [7229.0, 1319.0, 1229.0, 21319.0, 1229.0, 1319.0]


def test_one_step_that_stalled_for_hours_does_not_hold_the_window_open_for_the_rest_of_the_run(tmp_path: Path):
    """K x the slowest step made one stalled step a window of 29.6 h, longer than the job's 24 h limit: a hang after
    it was never caught. The slowest counts only up to SLOWEST_OVER_TYPICAL x the median steady step."""
    cap = watchdog.SLOWEST_OVER_TYPICAL * 1319.0
    assert watchdog.expected_step_s(None, ONE_STALL, watchdog.steady_times([ONE_STALL])) == cap
    # a checkpoint step within the cap still widens it, as it recurs
    assert watchdog.expected_step_s(None, [60.0, 62.0, 200.0, 61.0], [62.0, 200.0, 61.0]) == 200.0
    clock = FakeClock()
    watch = scripted_watch(tmp_path, clock, predicted=2000.0, factor=5, floor_s=60)
    assert watch.wait(ScriptedDriver(clock, attempt_log_path(tmp_path, 1), ONE_STALL, exits=False)) == watchdog.HUNG  # type: ignore[arg-type]
    assert watch.hang is not None and (watch.hang["last_step"], watch.hang["window_s"]) == (6, 5 * cap)
    # an earlier attempt's stall counts the same way: its first step is no steady step either
    (tmp_path / "resumed").mkdir()
    clock = FakeClock()
    watch = scripted_watch(tmp_path / "resumed", clock, predicted=2000.0, factor=5, floor_s=60)
    watch.earlier_step_times, watch.earlier_steady_times = ONE_STALL, watchdog.steady_times([ONE_STALL])
    driver = ScriptedDriver(clock, attempt_log_path(tmp_path / "resumed", 1), [], exits=False)
    assert watch.wait(driver) == watchdog.HUNG  # type: ignore[arg-type]
    assert watch.hang is not None and watch.hang["window_s"] == 5 * cap


def test_a_window_longer_than_the_time_left_is_said_in_the_log(tmp_path: Path, capsys):
    clock = FakeClock()
    watch = scripted_watch(tmp_path, clock, predicted=100.0, factor=5, floor_s=60)
    watch.time_limit_at = clock.now + 3000.0  # the window grows to 5 x 400 s with 2100 s left, then past what is left
    driver = ScriptedDriver(clock, attempt_log_path(tmp_path, 1), [100.0, 400.0, 400.0, 400.0], exits=True)
    assert watch.wait(driver) == 0  # type: ignore[arg-type]
    said = [line for line in capsys.readouterr().out.splitlines() if "left before the job's time limit" in line]
    assert len(said) == 1 and said[0].startswith("rlaunch: hang watchdog: the window (2000 s: 5 x 400 s, floor 60 s)")
    assert "a hang from here is ended by the time limit" in said[0]


class ScriptedRecords(ScriptedDriver):
    """A driver that logs the given records, each (seconds after the one before, step, data), then hangs."""

    def __init__(self, clock: FakeClock, path: Path, records: list[tuple[float, int, dict]]) -> None:
        super().__init__(clock, path, [seconds for seconds, _, _ in records], exits=False)
        self.records = [{"step": step, "data": data} for _, step, data in records]

    def wait(self, timeout: float) -> int:
        self.clock.now += timeout
        with self.path.open("a") as log:
            while self.logged < len(self.ends) and self.ends[self.logged][0] <= self.clock.now:
                log.write(json.dumps(self.records[self.logged]) + "\n")
                self.logged += 1
        raise subprocess.TimeoutExpired("driver", timeout)


def test_a_long_validation_is_not_a_hang_and_a_validation_that_never_ends_is(tmp_path: Path):
    """verl 0.9.1 times a validation apart from its step (timing_s/testing) and logs the step after it: the record of
    a step that validates, and the attempt's first (verl validates before training), may come K x the validation
    later. Steps of 40 s, validations every 5 steps planned at 200 s; they take 500-600 s."""
    validations = watchdog.Validations(predicted_s=200.0, test_freq=5, total_steps=20, before_training=True)
    assert [validations.before_next_record(last) for last in (None, 0, 3, 4, 5, 18, 19)] == [1, 0, 0, 1, 0, 0, 1]
    assert watchdog.Validations(test_freq=5, before_training=False).before_next_record(None) == 0
    step = {"timing_s/step": 40.0}
    records = [(500.0, 0, {"val-core/x": 0.1})]  # the validation before training: 500 s after the driver started
    records += [(40.0, n, step) for n in (1, 2, 3, 4)]
    records += [(640.0, 5, {**step, "timing_s/testing": 600.0})]  # 600 s of validation, 3 x the plan's
    records += [(40.0, n, step) for n in (6, 7, 8, 9)]
    records += [(3000.0, 10, {**step, "timing_s/testing": 2960.0})]  # within 5 x (40 + 600) = 3200 s
    clock = FakeClock()
    watch = scripted_watch(tmp_path, clock, predicted=40.0, factor=5, floor_s=60)
    watch.validations = validations
    assert watch.wait(ScriptedRecords(clock, attempt_log_path(tmp_path, 1), records)) == watchdog.HUNG  # type: ignore[arg-type]
    record = watch.hang
    # it ran through every validation; the hang is the step after step 10 (no validation), the window 5 x 40 s
    assert record is not None and (record["last_step"], record["window_s"], record["expected_validation_s"]) == (
        10,
        200.0,
        0.0,
    )
    # the same run whose validation at step 5 never ends: caught once 5 x (40 + 200 planned) s have passed
    clock = FakeClock()
    (tmp_path / "never").mkdir()
    watch = scripted_watch(tmp_path / "never", clock, predicted=40.0, factor=5, floor_s=60)
    watch.validations = validations
    driver = ScriptedRecords(clock, attempt_log_path(tmp_path / "never", 1), records[:5])
    assert watch.wait(driver) == watchdog.HUNG  # type: ignore[arg-type]
    assert watch.hang is not None and (watch.hang["last_step"], watch.hang["window_s"]) == (4, 1200.0)
    assert watch.hang["expected_validation_s"] == 200.0


def test_the_plan_says_the_longer_window_where_verl_validates_first(tmp_path: Path):
    overrides = ["cluster=local", f"cluster.shared_dir={tmp_path}", "gpu=a40", "mode=quick_test"]
    plan = make_plan(compose_config(*overrides), cpu_facts(), overrides, tmp_path, "python")
    assert plan.time is not None
    step = plan.time.step_s
    checked = PredictedTime(
        rows=100,
        steps_per_epoch=10,
        total_steps=10,
        step_s=step,
        wall_min=30.0,
        time_limit_min=60,
        attempts=1,
        first_checkpoint_step=5,
        checkpoints=True,
        attempt_min=50,
        validation_s=300.0,  # readiness's, from the validation files it read
    )
    plan = dataclasses.replace(plan, readiness=Readiness(time=checked))
    longer = watchdog.hang_window_s(step, 5.0, 1800.0, 300.0)
    assert longer == max(5 * (step + 300.0), 1800.0)
    said = f"; where verl validates first (every 5 steps and the last): max(5 x ({step:.0f} + 300) s, 1800 s) = "
    assert said + f"{longer:.0f} s: every rank's stack" in render(plan)


# --- what stacks say -------------------------------------------------------------------------------------------------


def frame(name: str, filename: str, line: int = 1) -> dict:
    return {"name": name, "filename": filename, "short_filename": filename.split("site-packages/")[-1], "line": line}


SITE = "/venv/lib/python3.11/site-packages/"
STDLIB = "/usr/lib/python3.11/"
RAY_TASK = [
    frame(
        "FunctionActorManager._make_actor_method_executor.<locals>.actor_method_executor", SITE + "ray/_private/f.py"
    ),
    frame("Worker.main_loop", SITE + "ray/_private/worker.py"),
]


def test_a_collective_and_a_network_read_are_transient_code_is_not():
    collective = [
        frame("all_reduce", SITE + "torch/distributed/distributed_c10d.py", 2806),
        frame("wrapper", SITE + "torch/distributed/c10d_logger.py", 81),
        frame("FSDPEngine.optimizer_step", SITE + "verl/workers/engine/fsdp/transformer_impl.py", 410),
        frame("ActorRolloutRefWorker.update_actor", SITE + "verl/workers/engine_workers.py", 713),
        *RAY_TASK,
    ]
    state, blocked, caller = watchdog.classify_frames(collective)
    assert state == watchdog.COLLECTIVE
    assert blocked == "all_reduce (torch/distributed/distributed_c10d.py:2806)"
    assert caller == "FSDPEngine.optimizer_step (verl/workers/engine/fsdp/transformer_impl.py:410)"
    assert watchdog.phase_of(collective) == "update_actor"
    network = [frame("SocketIO.readinto", STDLIB + "socket.py"), frame("judge", "/srv/rewards/stem.py"), *RAY_TASK]
    assert watchdog.classify_frames(network)[0] == watchdog.NETWORK
    # a server's loop waiting for its next request is idle: TransferQueue's controller, whichever phase is stalled
    serving = [
        frame("Socket.recv_multipart", SITE + "zmq/sugar/socket.py", 813),
        frame("TransferQueueController._process_request_loop", SITE + "transfer_queue/controller.py", 1872),
        frame("Thread.run", STDLIB + "threading.py", 982),
    ]
    assert watchdog.classify_frames(serving)[0] == watchdog.IDLE
    asking = [serving[0], frame("TransferQueueClient.get_meta", SITE + "transfer_queue/client.py", 200), *RAY_TASK]
    assert watchdog.classify_frames(asking)[0] == watchdog.NETWORK  # a client waiting for its answer is not
    importing = [  # caught while `import socket` runs socket.py's top level: busy, not waiting on the network
        frame("_call_with_frames_removed", "<frozen importlib._bootstrap>", 241),
        frame("<module>", STDLIB + "socket.py", 52),
        frame("_call_with_frames_removed", "<frozen importlib._bootstrap>", 241),
        frame("<module>", "/srv/blocked.py", 2),
    ]
    assert watchdog.classify_frames(importing)[0] == watchdog.CODE
    spinning = [frame("match", STDLIB + "re/__init__.py"), frame("compute_score", "/srv/rewards/math.py"), *RAY_TASK]
    assert watchdog.classify_frames(spinning)[0] == watchdog.CODE
    assert watchdog.phase_of(spinning) == "reward"
    waiting = [frame("get", SITE + "ray/_private/worker.py"), frame("PPOTrainer._update_actor", SITE + "verl/x.py")]
    assert watchdog.classify_frames(waiting)[0] == watchdog.RAY_WAIT
    idle = {"thread_name": "MainThread", "frames": RAY_TASK[1:], "pid": 1, "os_thread_id": 1}
    assert watchdog.task_frames(idle) is None

    def stack(rank: str, state: str, call: str) -> watchdog.ProcessStack:
        return watchdog.ProcessStack("c1", int(rank) + 100, "ray", "ray::W", rank, state, call, "", None, False, "f")

    trainer = watchdog.ProcessStack(
        "c1", 9, "ray", "ray::TaskRunner.run", None, "ray_wait", "get", "", "ref", True, "t"
    )
    verdict = watchdog.judge([trainer, stack("0", "collective", "all_reduce"), stack("1", "network", "read")], [], None)
    assert (verdict.phase, verdict.stuck, verdict.transient) == ("ref", ["c1:rank0", "c1:rank1"], True)
    verdict = watchdog.judge([trainer, stack("0", "collective", "all_reduce"), stack("1", "code", "match")], [], None)
    assert not verdict.transient and "c1:rank1 in match [code]" in verdict.evidence
    assert not watchdog.judge([trainer], [], None).transient  # nothing blocked that a stack shows: unknown


def test_before_the_first_step_with_no_stack_in_verls_training_loop_the_phase_is_start_up():
    def stack(title: str, state: str, trainer: bool) -> watchdog.ProcessStack:
        return watchdog.ProcessStack("c1", 7, "ray", title, None, state, "get", "", None, trainer, "f")

    starting = [stack("ray::TaskRunnerV1.run", "ray_wait", False), stack("ray::TransferQueueController", "idle", False)]
    verdict = watchdog.judge(starting, [], None)
    assert watchdog.hang_phase(verdict, None, starting) == "start-up" and not verdict.transient
    assert watchdog.hang_phase(verdict, 3, starting) is None  # after a step: not start-up
    fitting = [stack("ray::TaskRunnerV1.run", "ray_wait", True)]  # fit() on its stack: the first step is running
    assert watchdog.hang_phase(watchdog.judge(fitting, [], None), None, fitting) is None
    assert watchdog.hang_phase(watchdog.judge([], [], "py-spy could read none"), None, []) is None  # nothing read


GPU_DUMPS = Path(__file__).parent / "data" / "gpu_hang_h200"
VIEWS = {False: "python", True: "native"}


@pytest.mark.parametrize(
    "child, state, call",
    [
        ("item", watchdog.GPU_WAIT, "cudaLaunchKernel (libcudart.so.13) in <module> (/tmp/h/work/item.py:8)"),
        ("synchronize", watchdog.GPU_WAIT, "cudaDeviceSynchronize (libcudart.so.13) in synchronize ("),
        ("to_host", watchdog.GPU_WAIT, "cudaMemcpyAsync (libcudart.so.13) in <module> (/tmp/h/work/to_host.py:8)"),
        ("python_loop", watchdog.CODE, "<module> (/tmp/h/work/python_loop.py:9)"),
    ],
)
def test_a_rank_waiting_on_its_gpu_is_told_from_one_busy_in_code_by_its_native_frames(
    tmp_path: Path, monkeypatch, child: str, state: str, call: str
):
    """Replays py-spy's dumps of processes on an H200 (bench/gpu_hang.py): a kernel that never ends, then `.item()`,
    torch.cuda.synchronize() or a copy to the host, which a rank behind a collective that never completes makes; the
    Python frames alone show plain code, as for the control that spins in a Python loop."""
    dumps = {native: json.loads((GPU_DUMPS / f"{child}.{kind}.json").read_text()) for native, kind in VIEWS.items()}
    asked = []

    def replay(pid: int, native: bool = False):
        asked.append(native)
        return dumps[native], ""

    monkeypatch.setattr(watchdog, "py_spy_dump", replay)
    stack = watchdog.dump_process(dumps[False][0]["pid"], "gpu1", "ray", tmp_path)
    assert (stack.state, asked) == (state, [False, True])
    assert stack.blocked_call.startswith(call)
    assert "With native frames (py-spy dump --native):" in (tmp_path / stack.file).read_text()
    assert watchdog.judge([stack], [], None).transient == (state == watchdog.GPU_WAIT)


def test_native_frames_in_nccl_are_a_collective_and_elsewhere_change_nothing():
    nccl = [
        frame("0x7f00", "/usr/lib/libnccl.so.2", 0),
        frame("ncclGroupEnd", "/usr/lib/libnccl.so.2", 0),
        frame("c10d::ProcessGroupNCCL::allreduce", "/venv/torch/lib/libtorch_cuda.so", 0),
        frame("all_reduce", SITE + "torch/distributed/distributed_c10d.py", 2806),
    ]
    assert watchdog.native_wait(nccl) == (watchdog.COLLECTIVE, "c10d::ProcessGroupNCCL::allreduce (libtorch_cuda.so)")
    lock = [
        frame("0x7f69462a3e96", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0),
        frame("PyThread_acquire_lock_timed", "/usr/lib/libpython3.11.so.1.0", 0),
        frame("compute_score", "/srv/rewards/math.py", 3),
        frame("cudaDeviceSynchronize", "/venv/nvidia/lib/libcudart.so.13", 0),  # outside the innermost Python frame
    ]
    assert watchdog.native_wait(lock) is None
    assert watchdog.native_wait([frame("0x7f00", "/usr/lib/libcuda.so.1", 0)]) is None  # no symbol to name


BLOCKED_PROCESSES = """
import os, socket, subprocess, sys, threading, time, urllib.request
if sys.argv[1:] == ["network"]:
    server = socket.create_server(("127.0.0.1", 0))
    def update_actor():
        urllib.request.urlopen(f"http://127.0.0.1:{server.getsockname()[1]}/score")
    update_actor()
elif sys.argv[1:] == ["deadlock"]:
    lock = threading.Lock()
    def compute_score():
        lock.acquire()
        lock.acquire()
    compute_score()
else:
    children = [
        subprocess.Popen([sys.executable, __file__, kind], env={**os.environ, "RANK": str(rank)})
        for rank, kind in enumerate(("network", "deadlock"))
    ]
    print("started", flush=True)
    children[0].wait()
"""


@pytest.fixture
def blocked_tree(tmp_path: Path):
    """A process whose two children block: rank 0 in an HTTP read no server answers, rank 1 on a lock it holds."""
    script = tmp_path / "blocked.py"
    script.write_text(BLOCKED_PROCESSES)
    root = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert root.stdout is not None and root.stdout.readline() == "started\n"
        yield root
    finally:
        for pid in reversed(watchdog.process_tree(root.pid)):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        root.wait()


def test_py_spy_dumps_every_python_process_of_a_tree_and_names_the_blocked_call(tmp_path: Path, blocked_tree):
    stacks_dir = tmp_path / "stacks"

    def both_blocked() -> list[watchdog.ProcessStack] | None:  # the children need a moment to reach their calls
        found = watchdog.dump_node("n1", {"ray": blocked_tree.pid}, stacks_dir)
        by_rank = {stack.rank: stack for stack in found}
        # rank 1 runs Python code while it still imports (CI once dumped it in ipaddress.py): wait for its own call
        reached = "1" in by_rank and by_rank["1"].blocked_call.startswith("compute_score (")
        return found if reached and by_rank.get("0") and by_rank["0"].state == watchdog.NETWORK else None

    stacks = wait_until(both_blocked, 60, "both children blocked in their calls", poll_s=0.5)
    by_rank = {stack.rank: stack for stack in stacks}  # type: ignore[union-attr]
    script = tmp_path / "blocked.py"  # the user's own file: by its full path
    assert "readinto (socket.py:" in by_rank["0"].blocked_call and f"update_actor ({script}:" in by_rank["0"].caller
    assert by_rank["1"].blocked_call.startswith(f"compute_score ({script}:") and by_rank["1"].state == watchdog.CODE
    names = sorted(path.name for path in stacks_dir.iterdir())
    assert f"n1-rank0-pid{by_rank['0'].pid}.txt" in names and f"n1-rank1-pid{by_rank['1'].pid}.txt" in names
    assert f"n1-pid{blocked_tree.pid}-blocked.txt" in names and "n1.json" in names
    dump = (stacks_dir / f"n1-rank0-pid{by_rank['0'].pid}.txt").read_text()
    assert dump.startswith(f"Process {by_rank['0'].pid}: ") and "rank: 0" in dump and "HTTPResponse.begin" in dump
    # the rank that looks busy in code is looked at again with its native frames: a lock, not a GPU, so still code
    native = (stacks_dir / f"n1-rank1-pid{by_rank['1'].pid}.txt").read_text().split("With native frames")[1]
    assert "PyThread_acquire_lock" in native and f"compute_score ({script}:" in native
    verdict = watchdog.judge(stacks, [], watchdog.stacks_missing(stacks))  # type: ignore[arg-type]
    assert verdict.stuck == ["n1:rank0", "n1:rank1"] and not verdict.transient  # a deadlock comes back
    assert verdict.phase == "update_actor" or verdict.phase == "reward"


def test_where_py_spy_cannot_attach_the_attempt_still_stops_and_says_why(tmp_path: Path, blocked_tree, monkeypatch):
    refusing = tmp_path / "py-spy"
    refusing.write_text("#!/bin/sh\necho 'Error: Permission Denied (os error 13)' >&2\nexit 1\n")
    refusing.chmod(0o755)
    monkeypatch.setattr(watchdog, "py_spy", lambda: str(refusing))
    clock = FakeClock()
    watch = scripted_watch(tmp_path, clock, predicted=None, factor=5, floor_s=10)
    watch.ray_root = blocked_tree.pid
    assert watch.wait(ScriptedDriver(clock, attempt_log_path(tmp_path, 1), [], exits=False)) == watchdog.HUNG  # type: ignore[arg-type]
    record = watch.hang
    assert record is not None and not record["transient"] and record["phase"] is None
    assert record["stacks_missing"].startswith("py-spy could read none of ")
    assert "Permission Denied" in record["stacks_missing"] and "CAP_SYS_PTRACE" in record["stacks_missing"]
    assert "stacks missing: py-spy could read none" in record["evidence"]


def test_a_hang_is_requeued_once_and_only_on_a_transient_cause(tmp_path: Path):
    def write(*records: dict) -> None:
        (tmp_path / HANG_FILE).write_text(json.dumps(list(records)))

    base = {"stacks_dir": "hang/attempt-1"}
    assert watchdog.requeue_refusal(tmp_path, 1) is None  # no hang at all
    write({"attempt": 1, "transient": True, **base})
    assert watchdog.requeue_refusal(tmp_path, 1) is None
    assert watchdog.requeue_refusal(tmp_path, 2) is None  # attempt 2 was preempted, not hung
    write({"attempt": 1, "transient": True, **base}, {"attempt": 2, "transient": True, **base})
    assert "a hang is requeued once" in str(watchdog.requeue_refusal(tmp_path, 2))
    write({"attempt": 1, "transient": False, **base})
    assert "no transient cause" in str(watchdog.requeue_refusal(tmp_path, 1))


# --- on the dev cluster ----------------------------------------------------------------------------------------------

FLOOR_S, FACTOR = 30, 2


def test_two_node_job_hung_in_a_gloo_collective_ends_as_hang_with_every_ranks_stack(slurm_env, tmp_path: Path):
    plan, job_id = submit(
        slurm_env,
        tmp_path,
        [str(JOBS / "hang_driver.py"), "4"],
        "trainer.nnodes=2",
        f"launch.hang.floor_s={FLOOR_S}",
        f"launch.hang.factor={FACTOR}",
    )
    run_dir = Path(plan.run_dir)
    # two attempts of Ray up + 3 steps + the window + the dumps, and a requeue between them
    state = wait_for_state(job_id, slurm_env, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 540)
    assert state == "FAILED", state
    records = json.loads((run_dir / HANG_FILE).read_text())
    assert [record["attempt"] for record in records] == [1, 2], records
    assert records[0]["transient"] and "requeued once" in (run_dir / NOT_REQUEUED_FILE).read_text()
    history = sh(["sacct", "-D", "-X", "-n", "-P", "-o", "State", "-j", job_id], slurm_env).split()
    assert len(history) == 2 and history[-1] == "FAILED", history  # requeued once, never twice
    measured: list[float] = []
    for record in records:
        attempt = record["attempt"]
        steps = [json.loads(line) for line in attempt_log_path(run_dir, attempt).read_text().splitlines()]
        assert [step["step"] for step in steps] == [1, 2, 3]  # the progressing steps were never called a hang
        measured += [step["data"]["timing_s/step"] for step in steps]
        assert record["last_step"] == 3 and record["phase"] == "update_actor"
        assert record["expected_step_s"] == pytest.approx(max(measured), abs=0.06)  # this and earlier attempts'
        assert record["window_s"] == pytest.approx(max(FACTOR * max(measured), FLOOR_S), abs=0.2)
        # within the window: found at the first look past it (the head looks every poll_interval_s)
        assert record["window_s"] <= record["waited_s"] <= record["window_s"] + watchdog.poll_interval_s(FLOOR_S) + 5
        assert record["stuck_ranks"] == ["c1:rank0", "c1:rank1", "c2:rank2", "c2:rank3"], record
        stacks = run_dir / record["stacks_dir"]
        assert record["stacks_dir"] == f"hang/attempt-{attempt}"
        for rank, node in enumerate(("c1", "c1", "c2", "c2")):
            (dump,) = stacks.glob(f"{node}-rank{rank}-pid*.txt")
            text = dump.read_text()
            assert "TrainerRank.update_actor (/" in text and "/hang_driver.py:" in text, text
            blocked = "SocketIO.readinto (socket.py:" if rank == 3 else "all_reduce (torch/distributed/"
            assert blocked in text, text  # the blocked call, on every rank
        assert "all_reduce (torch/distributed/distributed_c10d.py:" in record["evidence"]
        assert "c2:rank3 in SocketIO.readinto (socket.py:" in record["evidence"]
        assert list(stacks.glob("c1-driver-pid*.txt")) and {"c1.json", "c2.json"} <= {p.name for p in stacks.iterdir()}
        assert "Node status" in (stacks / watchdog.RAY_STATUS_FILE).read_text()
    log = "".join(path.read_text() for path in sorted(tmp_path.rglob(f"{job_id}_0_log.out")))
    assert "rlaunch: hang: no step for " in log and "requeued once (the stacks point to a transient cause)" in log
    assert "not requeued: attempt 2 hung again" in "".join(p.read_text() for p in tmp_path.rglob(f"{job_id}_0_log.err"))
    assert not ray_processes_of(job_id), "no Ray process of the job survives it"
