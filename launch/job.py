"""The job: what runs inside the allocation (SLURM) or on this machine (cluster=local) once the plan is made.

Runs on: every node of a SLURM job (submitit starts one task per node: rank 0 is the head, which brings Ray up,
runs verl's driver and tears down; the others run a Ray worker until the head says it is done), or on the
cluster=local machine (a head alone). Both go through `run_head`, so a local run exercises the same code a SLURM
job runs. On preemption (USR2) or at the time limit submitit calls `RunInAllocation.checkpoint` and requeues the
same callable; the requeued attempt finds the same run directory and verl resumes with trainer.resume_mode=auto
from <run_dir>/checkpoints. A job requeued again and again without ever reaching its first checkpoint stops.
While verl runs, the head's hang watchdog (launch/watchdog.py) watches its steps; an attempt it stops as hung, with
every node's stacks recorded, is requeued at most once, and only when the stacks point to a transient cause.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import submitit

from launch import calibration, provenance, ray_cluster, watchdog
from launch.gpu import detect_gpus
from launch.overrides import hydra_quoted
from launch.rundir import (
    CHECKPOINT_CALLS_FILE,
    NOT_REQUEUED_FILE,
    RAY_READY_FILE,
    Plan,
    append_attempt,
    attempt_log_path,
    attempts,
    load_plan,
    parse_records,
)

# Variables worth a line in the attempt log; everything else (tokens, keys) stays out of files rlaunch writes.
LOGGED_VARIABLES = (*provenance.SLURM_VARIABLES.values(), "SLURM_GPUS_ON_NODE", "CUDA_VISIBLE_DEVICES")
DONE_MARKER = ".ray_done-{tag}"  # the head is done (or gave up): the workers stop
READY_MARKER = ".ray_ready-{tag}"  # every node registered: a worker that dies after this was lost mid-run
JOB_STARTED = time.monotonic()  # this module is imported when the job's callable is unpickled: the job's start
VERL_LATEST = "latest_checkpointed_iteration.txt"  # verl writes it next to global_step_N after each save
CODE_ROOT = Path(__file__).resolve().parent.parent  # the code snapshot the job imports (launch/snapshot.py)


def checkpointed_step(plan: Plan) -> int:
    latest = Path(plan.verl["trainer"]["default_local_dir"]) / VERL_LATEST
    try:
        return int(latest.read_text().strip())
    except (OSError, ValueError):
        return 0


def prune_earlier_attempts(plan: Plan) -> list[str]:
    """verl's retention (trainer.max_actor_ckpt_to_keep, max_critic_ckpt_to_keep) counts only what its own process
    saved (utils/checkpoint/checkpoint_manager.py starts an empty list): every requeued attempt would leave its last
    ones behind for good. Before verl starts, each role's global_step_N older than the latest `keep` up to the one verl
    resumes from go, as verl itself would have removed them. That one always stays, and a step after it (a save the
    preemption cut short, which verl writes again) is left to verl."""
    trainer = plan.verl["trainer"]
    root, resumed = Path(trainer["default_local_dir"]), checkpointed_step(plan)
    numbers = (path.name.removeprefix("global_step_") for path in root.glob("global_step_*"))
    steps = sorted(step for step in (int(number) for number in numbers if number.isdigit()) if step <= resumed)
    removed = []
    for role in ("actor", "critic"):
        keep = int(trainer.get(f"max_{role}_ckpt_to_keep") or 0)
        for step in steps[:-keep] if keep > 0 and resumed > 0 else []:
            path = root / f"global_step_{step}" / role
            if path.is_dir():
                shutil.rmtree(path)
                removed.append(f"global_step_{step}/{role}")
    return removed


def record_attempt(plan: Plan, gpus: int) -> dict[str, Any]:
    """One JSON line per attempt (a requeued job appends another), with the GPUs NVML really sees."""
    attempt = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "gpus": gpus,
        "checkpointed_step": checkpointed_step(plan),
        **{name: os.environ[name] for name in LOGGED_VARIABLES if name in os.environ},
    }
    append_attempt(Path(plan.run_dir), attempt)
    return attempt


def logical_cpus(plan: Plan) -> int:
    """Enough logical CPUs for TransferQueue (~9 actors) plus 3 per GPU bundle (docs/facts.md#verl), or 10 per GPU for
    verl's Ray SFT trainer (its workers ask for {CPU: 10, GPU: 1}: algo=rft's stage 3), at least the allocation's."""
    per_gpu = 10 if plan.driver == "rft" else 3
    return max(plan.resources.cpus_per_task, 9 + per_gpu * plan.resources.gpus_per_node + 4)


def attempt_command(plan: Plan, attempt: int, provenance_overrides: list[str]) -> tuple[list[str], dict[str, str]]:
    """The driver's command and extra environment for this attempt: verl's file logger truncates its file on every start
    (docs/facts.md#verl), so each attempt logs to its own file. verl's logger runs in its TaskRunner actor, which sees
    only Ray's runtime env: the path goes there as a Hydra override of the dumped config, next to where this attempt
    runs (launch/provenance.py)."""
    log_path = str(attempt_log_path(Path(plan.run_dir), attempt))
    command = list(plan.driver_command)
    # verl's Hydra overrides go to verl's driver as planned; tests and benchmarks swap the command for a stand-in
    # (a probe script) that takes none, and keep the plan's driver: hence the command's entry point decides.
    if command[1:3] == ["-m", "verl.trainer.main_ppo"]:
        command.append(f"++ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={hydra_quoted(log_path)}")
        command += provenance_overrides
    return command, {"VERL_FILE_LOGGER_PATH": log_path, "RLAUNCH_ATTEMPT": str(attempt)}


def token_path_of(plan: Plan) -> Path:
    return ray_cluster.auth_token_path(Path(plan.run_dir), plan.cluster_settings.ray_auth_token_file)


def run_driver(
    plan: Plan,
    head_address: str,
    attempt: int,
    provenance_overrides: list[str],
    watch: watchdog.HangWatch | None = None,
) -> int:
    """verl's own entry point on the planned config, connected to the job's Ray, its own process group; with a
    watch, stopped when the watch finds it hung."""
    command, attempt_env = attempt_command(plan, attempt, provenance_overrides)
    environment = ray_cluster.ray_environment(token_path_of(plan))
    env = {**environment, **plan.worker_env, **attempt_env, "RAY_ADDRESS": head_address}
    return run_watched(command, plan.run_dir, env, watch)


def run_watched(command: list[str], cwd: str, env: dict[str, str], watch: watchdog.HangWatch | None) -> int:
    """The driver in its own process group, stopped with everything it started when the watch finds it hung or the
    caller is unwound (a preemption): its exit code, or watchdog.HUNG."""
    driver = subprocess.Popen(command, cwd=cwd, env=env, start_new_session=True)
    try:
        return watch.wait(driver) if watch is not None else driver.wait()
    finally:
        if driver.poll() is None:  # preempted (submitit's handler is unwinding us), or hung (its stacks are recorded)
            os.killpg(driver.pid, signal.SIGTERM)
            try:
                driver.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(driver.pid, signal.SIGKILL)


def announce(line: str | None) -> None:
    if line:
        print(line, flush=True)


def ray_status_command(topology: ray_cluster.Topology) -> list[str]:
    return [ray_cluster.ray_executable(), "status", f"--address={topology.head_address}"]


def end_hung_attempt(plan: Plan, record: dict[str, Any], requeue: Callable[[], None] | None) -> None:
    """A hang is requeued at most once, and only on a transient cause (the rule is watchdog.requeue_refusal's, which
    checkpoint() applies too); otherwise, or where nothing requeues (cluster=local), the attempt fails as a hang."""
    run_dir = Path(plan.run_dir)
    refusal = watchdog.requeue_refusal(run_dir, record["attempt"])
    if requeue is not None and refusal is None:
        print(f"rlaunch: hang: {watchdog.summary(record)}; requeued once (the stacks point to a transient cause)")
        sys.stdout.flush()
        requeue()  # submitit requeues the job and ends this process; it returns only where nothing acted on it
        refusal = "the requeue signal was not acted on"
    if requeue is not None:
        (run_dir / NOT_REQUEUED_FILE).write_text(f"{refusal}\n")
    why = refusal or f"cluster={plan.cluster}: nothing requeues it"
    raise RuntimeError(f"hang: {watchdog.summary(record)}; not requeued: {why} (run {plan.run_id})")


def requeue_through_submitit() -> None:
    """submitit requeues a Checkpointable job on its preemption signal, after asking checkpoint() (which may still
    refuse, with its reason in not_requeued.txt): the same path as a preemption."""
    signal.raise_signal(getattr(signal, f"SIG{submitit.JobEnvironment.USR_SIG}"))


def runs_dir_of(plan: Plan) -> Path:
    """The runs dir the run was planned in (<runs_dir>/<sweep>/<run>): where the cluster's calibration store is."""
    return Path(plan.run_dir).parent.parent


def measure_against_plan(plan: Plan, attempt: int, stop: threading.Event) -> bool:
    """launch.calibration=auto: calibration.json and a store record once the attempt has logged
    launch.calibrate_after_step steps (a thread), and again when the attempt ends (the caller)."""
    after_step = plan.cluster_settings.calibrate_after_step
    if after_step is None or plan.time is None:
        return False
    calibration.follow(Path(plan.run_dir), runs_dir_of(plan), attempt, after_step, stop)
    return True


class BringUp:
    """SIGTERM while Ray comes up on the head: scancel, a preemption without the requeue signal and the time limit
    send it to every process of the job, Ray's own too. submitit's handler only logs it, so the head went on into
    ray.init against the Ray the same signal was stopping and stayed there until SLURM's SIGKILL, its finally blocks
    unrun: its Ray session left on the node's /tmp, no Ray logs copied, the workers never told (a two-node job on the
    dev cluster, tests/test_failures_46_bringup_cancel.py). Here the signal ends the bring-up through the caller's
    finally blocks: at once after `arm`, at `arm` where it came before (while `ray start` starts, whose process the
    caller holds only once start_head returns, to stop it). On leaving, SIGTERM is handled as before whatever ray.init
    did to it: ray.init puts Ray's own handling in place and ray.shutdown leaves it, a failure handler that kills the
    process at once (under it, the head died at scancel's SIGTERM mid-run without copying its Ray logs)."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.signalled = False
        self.armed = False
        self.before: Any = None

    def __enter__(self) -> BringUp:
        if threading.current_thread() is threading.main_thread():
            self.before = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, self.handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.before is not None:
            signal.signal(signal.SIGTERM, self.before)

    def handle(self, signum: int, frame: Any) -> None:
        if callable(self.before):
            self.before(signum, frame)  # submitit logs the signal
        self.signalled = True
        if self.armed:
            self.stop()

    def arm(self) -> None:
        self.armed = True
        if self.signalled:
            self.stop()

    def stop(self) -> NoReturn:
        raise RuntimeError(
            f"SIGTERM on {self.node} while Ray came up (scancel, a preemption without the requeue signal, or the time "
            "limit): the attempt stops here, with its Ray"
        )


def run_head(
    plan: Plan, topology: ray_cluster.Topology, timeout_s: float, requeue: Callable[[], None] | None = None
) -> int:
    """`requeue`: how this job requeues itself after a hang (None: it cannot)."""
    run_dir = Path(plan.run_dir)
    token_path = token_path_of(plan)
    record_attempt(plan, topology.gpus)
    attempt = len(attempts(run_dir))
    pruned = prune_earlier_attempts(plan)
    if pruned:
        announce(
            f"rlaunch: removed earlier attempts' checkpoints beyond trainer.max_*_ckpt_to_keep: {', '.join(pruned)}"
        )
    provenance_overrides = provenance.record_attempt(run_dir, attempt)
    head = None
    watch = None
    stop_measuring = threading.Event()
    calibrating = False
    try:
        topology = ray_cluster.with_free_ports(topology, 0)
        announce(ray_cluster.moved_note(topology, 0))
        head_log = run_dir / f"ray_start-{topology.nodes[0]}-0.log"
        with BringUp(topology.nodes[0]) as bring_up:
            head = ray_cluster.start_head(topology, head_log, token_path, timeout_s)
            bring_up.arm()  # the head's process is held: the finally below stops it
            ray_cluster.publish_head_port(topology, run_dir)  # the workers start once the head has
            ray_cluster.wait_for_nodes(topology, head, run_dir, token_path, timeout_s)
        ready = time.monotonic() - JOB_STARTED
        print(
            f"rlaunch: Ray up on {len(topology.nodes)} node(s) {ready:.1f} s after the job started "
            f"({topology.head_address}); code from {CODE_ROOT}",
            flush=True,
        )
        (run_dir / READY_MARKER.format(tag=topology.attempt_tag)).touch()
        with (run_dir / RAY_READY_FILE).open("a") as log:
            log.write(json.dumps({"nodes": len(topology.nodes), "seconds_after_job_start": round(ready, 2)}) + "\n")
        watch = watchdog.watch_for(
            plan,
            attempt,
            topology.nodes,
            topology.attempt_tag,
            head.process.pid,
            ray_status_command(topology),
            ray_cluster.ray_environment(token_path),
        )
        calibrating = measure_against_plan(plan, attempt, stop_measuring)
        code = run_driver(plan, topology.head_address, attempt, provenance_overrides, watch)
    finally:
        (run_dir / DONE_MARKER.format(tag=topology.attempt_tag)).touch()  # the workers stop waiting, whatever happened
        ray_cluster.copy_logs(topology, 0, run_dir, token_path)
        if head is not None:
            ray_cluster.stop_node(head.process)
        ray_cluster.remove_temp_dir(topology, 0)
        stop_measuring.set()
        if calibrating:  # the attempt's end, however it ended: what it measured goes to the store
            calibration.ingest_quietly(run_dir, runs_dir_of(plan))
    if watch is not None and watch.hang is not None:
        end_hung_attempt(plan, watch.hang, requeue)
    if code != 0:
        raise RuntimeError(f"verl exited with code {code} (run {plan.run_id}; its output is in this job's log)")
    return code


def run_worker(plan: Plan, topology: ray_cluster.Topology, timeout_s: float) -> int:
    """Join the head, then stay until the head marks the job done (or disappears). A worker that cannot start
    reports why to the head (which fails the job with it) and fails its own task."""
    run_dir = Path(plan.run_dir)
    token_path = token_path_of(plan)
    done = run_dir / DONE_MARKER.format(tag=topology.attempt_tag)
    ready = run_dir / READY_MARKER.format(tag=topology.attempt_tag)
    rank = topology.rank

    def head_gave_up() -> str | None:
        return "the head ended the job before Ray came up (its error is in the head's log)" if done.exists() else None

    try:  # its own ports first, while the head boots: no free block then fails the job seconds after it started
        topology = ray_cluster.with_free_ports(topology, rank)
    except RuntimeError as error:
        ray_cluster.report_worker_failure(topology, run_dir, str(error))
        raise
    announce(ray_cluster.moved_note(topology, rank))
    topology = ray_cluster.wait_for_head_port(topology, run_dir, timeout_s, head_gave_up)
    ray_cluster.wait_for_head(topology, timeout_s, head_gave_up)
    worker = ray_cluster.start_node(
        topology, rank, run_dir / f"ray_start-{topology.nodes[rank]}-{rank}.log", token_path
    )
    dumped = False
    try:
        while not done.exists():
            # the head found the attempt hung: this node's stacks, once
            dumped = dumped or watchdog.answer_dump_request(
                run_dir, topology.attempt_tag, topology.nodes[rank], worker.process.pid
            )
            reason = worker.failure()
            if reason and ready.exists():  # the job's Ray was up: this node was lost mid-run, the driver sees it too
                code, why = worker.process.returncode, ray_cluster.last_error_line(worker.log_path)
                ended = ray_cluster.ended_by(code)
                raise RuntimeError(f"the Ray worker on {topology.nodes[rank]} {ended} mid-run: {why}")
            if reason:
                ray_cluster.report_worker_failure(topology, run_dir, reason)
                raise RuntimeError(reason)
            time.sleep(0.5)
    finally:
        ray_cluster.copy_logs(topology, rank, run_dir, token_path)
        ray_cluster.stop_node(worker.process)
        ray_cluster.remove_temp_dir(topology, rank)
    return 0


class RunInAllocation(submitit.helpers.Checkpointable):
    """The submitted callable: checkpointable, so submitit requeues it on preemption and at the time limit."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir

    def __call__(self) -> int:
        plan = load_plan(self.run_dir)
        timeout_s = float(plan.cluster_settings.ray_timeout_s)
        topology = ray_cluster.topology_from_slurm(os.environ, logical_cpus(plan), detect_gpus().count)
        if topology.rank == 0:
            return run_head(plan, topology, timeout_s, requeue_through_submitit)
        return run_worker(plan, topology, timeout_s)

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission | None:
        """Requeue, unless the job keeps being requeued without ever reaching a checkpoint, or ran out of requeues
        (verl saves its own checkpoints: nothing to save here)."""
        plan = load_plan(self.run_dir)
        history = attempts(Path(self.run_dir))
        with (Path(self.run_dir) / CHECKPOINT_CALLS_FILE).open("a") as log:  # evidence for the operator and tests
            log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} attempt {len(history)}\n")
        limit = plan.cluster_settings.max_requeues
        reason = ""
        if len(history) > limit:
            reason = f"requeued {len(history) - 1} times: cluster.max_requeues={limit} reached"
        elif hang_refusal := watchdog.requeue_refusal(Path(self.run_dir), len(history)):
            reason = hang_refusal
        elif len(history) >= 3 and checkpointed_step(plan) == 0:
            reason = never_checkpointed(plan, len(history))
        if reason:
            (Path(self.run_dir) / NOT_REQUEUED_FILE).write_text(reason + "\n")
            print(f"rlaunch: not requeued: {reason}", flush=True)
            return None
        return super().checkpoint(*args, **kwargs)


def never_checkpointed(plan: Plan, attempts_made: int) -> str:
    """Why the requeues stop without a first checkpoint, with what would help: a smaller save_freq only where an
    attempt reached a step; none did, and the attempt ends before verl's first step (its start-up, the validation
    before training, or a requeue signal due at the start)."""
    run_dir = Path(plan.run_dir)
    steps = [
        step
        for attempt in range(1, attempts_made + 1)
        if (path := attempt_log_path(run_dir, attempt)).exists()
        for step, _ in parse_records(path.read_text().splitlines())
    ]
    save_freq = int(plan.verl["trainer"].get("save_freq") or 0)
    if steps and save_freq > 0 and max(steps) >= save_freq:  # a smaller save_freq cannot help: verl saved none
        return (
            f"{attempts_made} attempts and never a first checkpoint: passed step {save_freq} (trainer.save_freq) "
            "without a checkpoint: verl saved none; check trainer.default_local_dir and the save's lines in the "
            "attempt's log"
        )
    if steps:
        return (
            f"{attempts_made} attempts and never a first checkpoint: lower trainer.save_freq "
            f"(now {plan.verl['trainer']['save_freq']}) or give the mode more time"
        )
    time_s, delay_s = plan.resources.time_min * 60, int(plan.slurm.get("signal_delay_s") or 0)
    signal = (
        f" (the requeue signal comes {delay_s} s before --time={plan.resources.time_min} min ends)" if delay_s else ""
    )
    soon = "lower cluster.signal_delay_s, " if delay_s and delay_s >= time_s / 2 else ""
    return (
        f"{attempts_made} attempts and never a first step: each ended before verl's first step{signal}; "
        f"{soon}raise mode.time_budget_min, or shorten the start-up (trainer.val_before_train=false skips the "
        "validation before training)"
    )


def run_local(plan: Plan) -> int:
    """cluster=local: the same head path on this machine, with the run's own Ray token made here."""
    ray_cluster.ensure_auth_token(Path(plan.run_dir), plan.cluster_settings.ray_auth_token_file)
    gpus = detect_gpus().count
    topology = ray_cluster.local_topology(logical_cpus(plan), gpus, token_path_of(plan))
    return run_head(plan, topology, float(plan.cluster_settings.ray_timeout_s))
