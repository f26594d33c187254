"""Inside the allocation, on the real dev cluster: Ray across virtual nodes with tasks pinned to each, a worker that
cannot join, requeue + resume on a real preemption, and the real verl driver reaching its GPU check."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
from conftest import PROJECT, compose_config, run_cli
from tiny_assets import make_tiny_dataset, make_tiny_model

from launch import ray_cluster, slurm
from launch.facts import gather_facts
from launch.plan import make_plan
from launch.run import write_run_dir
from launch.rundir import Plan

JOBS = Path(__file__).parent / "jobs"


def sh(command: list[str], env: dict[str, str]) -> str:
    return subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=60).stdout


def submit(env: dict[str, str], tmp_path: Path, driver: list[str], *overrides: str) -> tuple[Plan, str]:
    """A real plan whose driver is replaced by a stand-in, submitted through launch/slurm.py."""
    base = [
        "cluster=slurm",
        f"cluster.shared_dir={tmp_path}",
        "gpu=a40",
        "mode=quick_test",
        f"launch.sweep_id=job-{tmp_path.name[-12:]}",
        *overrides,
    ]
    cfg = compose_config(*base)
    with mock.patch.dict(os.environ, {"SLURM_CONF": env["SLURM_CONF"]}):  # restored as it was, whatever happens
        plan = make_plan(cfg, gather_facts("x", "slurm", None), base, tmp_path, sys.executable)
        plan = dataclasses.replace(plan, driver_command=[sys.executable, *driver])
        write_run_dir(plan, cfg)
        manifest = slurm.submit([plan], int(cfg.cluster.max_requeues))
    return plan, manifest.runs[0].job_id


def wait_for_state(job_id: str, env: dict[str, str], states: set[str], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    state = ""
    while time.monotonic() < deadline:
        # one line per attempt; a cancel's state is several words: 'CANCELLED by 0'
        lines = sh(["sacct", "-X", "-n", "-P", "-o", "State", "-j", job_id], env).splitlines()
        state = lines[-1].strip() if lines else ""
        if state.split()[0:1] and state.split()[0] in states:
            return state
        time.sleep(2)
    raise AssertionError(f"job {job_id} still {state or 'unknown'} after {timeout_s} s")


def node_address(node: str, env: dict[str, str]) -> str:
    fields = dict(
        part.split("=", 1) for part in sh(["scontrol", "show", "node", node, "-o"], env).split() if "=" in part
    )
    return fields["NodeAddr"]


def ray_processes_of(job_id: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if f"/tmp/rl{job_id}-" in line]


def test_two_node_job_brings_ray_up_pins_a_task_to_each_node_and_leaves_nothing(slurm_env, tmp_path: Path):
    plan, job_id = submit(slurm_env, tmp_path, [str(JOBS / "ray_probe.py")], "trainer.nnodes=2")
    assert wait_for_state(job_id, slurm_env, {"COMPLETED", "FAILED", "CANCELLED"}, 240) == "COMPLETED"
    run_dir = Path(plan.run_dir)
    probe = json.loads((run_dir / "probe.json").read_text())
    # each virtual node's own address (as SLURM's NodeAddr gives it)
    assert sorted(probe["nodes"]) == [node_address("c1", slurm_env), node_address("c2", slurm_env)]
    assert len({task["node_id"] for task in probe["tasks"]}) == 2
    assert probe["gpus"] == 0  # fake GRES: NVML sees none, and Ray is told so (never CUDA_VISIBLE_DEVICES)
    assert sorted(p.name for p in (run_dir / "ray_logs").iterdir()) == ["c1-0", "c2-1"]
    assert not ray_processes_of(job_id), "no Ray process of the job survives it"
    sessions = [f"/tmp/rl{job_id}-{rank}-{node_address(node, slurm_env)}" for rank, node in enumerate(["c1", "c2"])]
    assert not [path for path in sessions if os.path.exists(path)], "nor its Ray session on the nodes' /tmp"


def worker_task_pids(job_id: str) -> list[int]:
    """The processes of the job's node-1 task (its environment names the job and node 1)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SLURM_JOB_ID={job_id}".encode() in environ and b"SLURM_NODEID=1" in environ:
            pids.append(int(pid))
    return pids


def kill_worker_task(job_id: str, deadline: float) -> bool:
    """Failure injection from outside: kill the job's node-1 task (and what it started) as soon as it appears;
    done once it was killed and no process of it is left (a child can appear while its parent dies)."""
    killed = False
    while time.monotonic() < deadline:
        pids = worker_task_pids(job_id)
        if killed and not pids:
            return True
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed = True
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    return killed


def test_worker_that_cannot_join_fails_the_job_naming_the_node(slurm_env, tmp_path: Path):
    plan, job_id = submit(
        slurm_env, tmp_path, [str(JOBS / "ray_probe.py")], "trainer.nnodes=2", "cluster.ray_timeout_s=25"
    )
    assert kill_worker_task(job_id, time.monotonic() + 45)
    assert wait_for_state(job_id, slurm_env, {"COMPLETED", "FAILED", "CANCELLED"}, 180) == "FAILED"
    log = next(Path(tmp_path).rglob(f"{job_id}_0_log.err")).read_text()
    assert "Ray node(s) c2 did not register within 25 s" in log
    assert not (Path(plan.run_dir) / "probe.json").exists()
    assert not ray_processes_of(job_id)


@pytest.mark.flaky(reruns=1)  # SLURM's signal timing under load: one retry, never more
def test_preempted_job_checkpoints_requeues_and_resumes(slurm_env, tmp_path: Path):
    plan, job_id = submit(
        slurm_env,
        tmp_path,
        [str(JOBS / "progress_driver.py"), "40"],
        "trainer.n_gpus_per_node=1",
        "cluster.partition=debug",
        "+cluster.sbatch_extra.nodelist=c1",
        "cluster.signal_delay_s=60",
    )
    run_dir = Path(plan.run_dir)
    deadline = time.monotonic() + 120
    while not (run_dir / "progress.txt").exists() or int((run_dir / "progress.txt").read_text() or 0) < 5:
        assert time.monotonic() < deadline, "the job never made progress"
        time.sleep(1)
    # a high-priority job claims the node: SLURM signals (USR2), waits GraceTime, then requeues ours
    sh(
        ["sbatch", "-p", "urgent", "-w", "c1", "--exclusive", "--mem=1G", "-o", "/dev/null", "--wrap", "sleep 5"],
        slurm_env,
    )
    assert wait_for_state(job_id, slurm_env, {"COMPLETED", "FAILED", "CANCELLED"}, 420) == "COMPLETED"
    resumes = [int(line) for line in (run_dir / "resumes.txt").read_text().split()]
    assert resumes[0] == 0 and len(resumes) >= 2 and resumes[-1] >= 5, resumes  # the second attempt resumed
    assert int((run_dir / "progress.txt").read_text()) == 40
    history = sh(["sacct", "-D", "-X", "-n", "-P", "-o", "State", "-j", job_id], slurm_env).split()
    # submitit's own `scontrol requeue` during the grace time usually beats SLURM's: REQUEUED or PREEMPTED
    assert len(history) >= 2 and {"PREEMPTED", "REQUEUED"} & set(history[:-1]) and history[-1] == "COMPLETED", history
    submitit_log = next(Path(tmp_path).rglob(f"{job_id}_0_log.err")).read_text()
    assert "Caught signal SIGUSR2" in submitit_log and "this job is preempted" in submitit_log
    assert (run_dir / "checkpoint_calls.txt").exists(), "our checkpoint() ran on USR2"
    assert len((run_dir / "attempts.jsonl").read_text().splitlines()) == len(resumes)


@pytest.mark.flaky(reruns=1)  # SLURM's signal timing under load: one retry, never more
def test_job_at_its_time_limit_checkpoints_requeues_and_resumes(slurm_env, tmp_path: Path):
    # --time=2 with USR2 60 s before it: attempt 1 (1 step/s towards 300) cannot finish; the resumed one can
    plan, job_id = submit(
        slurm_env,
        tmp_path,
        [str(JOBS / "progress_driver.py"), "300", "0.02"],
        "trainer.n_gpus_per_node=1",
        "mode.time_budget_min=1",
        "cluster.time_margin_min=1",
        "cluster.signal_delay_s=60",
    )
    assert plan.resources.time_min == 2
    assert wait_for_state(job_id, slurm_env, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 420) == "COMPLETED"
    run_dir = Path(plan.run_dir)
    resumes = [int(line) for line in (run_dir / "resumes.txt").read_text().split()]
    assert resumes[0] == 0 and len(resumes) >= 2 and resumes[1] > 0, resumes  # attempt 2 resumed from saved steps
    assert int((run_dir / "progress.txt").read_text()) == 300
    history = sh(["sacct", "-D", "-X", "-n", "-P", "-o", "State", "-j", job_id], slurm_env).split()
    assert len(history) >= 2 and "REQUEUED" in history[:-1] and history[-1] == "COMPLETED", history
    assert "TIMEOUT" not in history  # requeued before SLURM's kill
    submitit_log = next(Path(tmp_path).rglob(f"{job_id}_0_log.err")).read_text()
    assert "Caught signal SIGUSR2" in submitit_log and "this job is timed-out" in submitit_log
    assert (run_dir / "checkpoint_calls.txt").exists(), "our checkpoint() ran on USR2"


# made at run time: the job's code snapshot holds this file, and a literal here would be found there
FAKE_KEYS = {"WANDB_API_KEY": "fakewandb" + os.urandom(16).hex(), "HF_TOKEN": "hf_fakeToken" + os.urandom(8).hex()}


def assert_token_only_in_its_file(run_dir: Path, root: Path) -> None:
    """The run's Ray token: made at submission, 0600, and in no other file the run or its sweep leaves."""
    token_file = run_dir / ray_cluster.AUTH_TOKEN_FILE
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    assert len(token) == 64
    assert files_containing(root, [token]) == [f"{token_file}: {token[:8]}..."]


def files_containing(root: Path, secrets: list[str]) -> list[str]:
    """Every file under root (text or binary: submitit's pickles too) holding one of the secrets."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path}: {secret[:8]}..." for secret in secrets if secret.encode() in data]
    return found


def test_real_verl_driver_in_a_slurm_job_stops_at_the_gpu_check_and_leaves_no_secret(slurm_env, tmp_path: Path):
    model = make_tiny_model(tmp_path / "model")
    train, val = make_tiny_dataset(tmp_path / "data", ["math", "logic"])
    result = run_cli(
        "cluster=slurm",
        f"cluster.shared_dir={tmp_path}",
        "gpu=a40",
        "mode=quick_test",
        "algo=guru_baseline",
        f"actor_rollout_ref.model.path={model}",
        f"data.train_files={train}",
        f"data.val_files={val}",
        "data.max_prompt_length=256",
        "data.max_response_length=256",
        "data.train_batch_size=8",  # 16 rows: a 512-prompt batch would be refused (0 steps)
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "trainer.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        cwd=tmp_path,
        env={**slurm_env, **FAKE_KEYS},  # planted: they reach the job only through SLURM's environment
    )
    assert result.returncode == 0, result.stderr[-3000:]
    job_id = result.stdout.split("queued")[1].split(":")[1].split()[0]
    assert wait_for_state(job_id, slurm_env, {"COMPLETED", "FAILED", "CANCELLED"}, 420) == "FAILED"
    log = next(Path(tmp_path).rglob(f"{job_id}_0_log.err")).read_text()
    # verl took the dumped config with rlaunch's provenance key and this attempt's overrides, and got this far:
    assert "Total available GPUs 0 is less than total desired GPUs 1" in log, log[-3000:]
    assert not ray_processes_of(job_id)
    run_dir = next(Path(tmp_path).rglob("provenance.json")).parent
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert provenance["slurm"]["job_id"] == job_id and provenance["attempt"] == 1
    assert (run_dir / "ray_logs").is_dir() and any((run_dir / "ray_logs").rglob("*.log"))
    sweep_dir = run_dir.parent
    assert {"submitit", ".hydra"} <= {path.name for path in sweep_dir.iterdir()}
    # run and sweep dirs, submitit's folder (pickles, sbatch script, SLURM output), .hydra/, copied Ray logs
    assert files_containing(tmp_path, list(FAKE_KEYS.values())) == []
    assert_cause_everywhere(sweep_dir, run_dir, "gpu_unavailable", slurm_env)
    assert_token_only_in_its_file(run_dir, tmp_path)  # after status, doctor and compare wrote theirs


def assert_cause_everywhere(sweep_dir: Path, run_dir: Path, kind: str, env: dict[str, str]) -> None:
    """What a user sees of a failed run: sweep status, the doctor and compare all name its cause."""

    def cli(script: str, *args: str) -> str:
        command = [sys.executable, str(PROJECT / "launch" / script), *args]
        result = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout

    assert f"cause {kind}: " in cli("sweep.py", "status", str(sweep_dir))
    assert f"[{kind}]" in cli("report/doctor.py", str(run_dir))
    diagnosis = (run_dir / "diagnosis.md").read_text()
    assert f"failed: {kind}" in diagnosis and "Nothing holds this run back" not in diagnosis
    cli("report/compare.py", str(sweep_dir))
    assert f"FAILED ({kind}: " in (sweep_dir / "report" / "report.md").read_text()


def test_cluster_local_runs_the_same_head_path_on_this_machine(tmp_path: Path):
    """cluster=local: Ray at the address Ray itself picks for this host, the driver against it, logs, teardown."""
    overrides = ["cluster=local", f"cluster.shared_dir={tmp_path}", "gpu=a40", "launch.sweep_id=local"]
    cfg = compose_config(*overrides)
    plan = make_plan(cfg, gather_facts("x", "local", None), overrides, tmp_path, sys.executable)
    plan = dataclasses.replace(plan, driver_command=[sys.executable, str(JOBS / "ray_probe.py")])
    write_run_dir(plan, cfg)
    run_dir = Path(plan.run_dir)
    # in a process of its own, as launch/run.py runs it (Ray reads its auth mode when first imported)
    code = (
        "import sys; from launch.job import run_local; from launch.rundir import load_plan; "
        "sys.exit(run_local(load_plan(sys.argv[1])))"
    )
    result = subprocess.run([sys.executable, "-c", code, str(run_dir)], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    probe = json.loads((run_dir / "probe.json").read_text())
    assert len(probe["nodes"]) == 1 and probe["gpus"] == 0
    assert json.loads((run_dir / "provenance.json").read_text())["attempt"] == 1
    assert any((run_dir / "ray_logs").iterdir())
    assert not ray_processes_of(str(os.getpid()))
    assert_token_only_in_its_file(run_dir, tmp_path)


def test_nodes_whose_ports_are_taken_move_to_a_free_block_and_the_job_runs(slurm_env, tmp_path: Path):
    """Something else (another job on the node, a stale Ray) holds the head's GCS port and one of node c2's ports of
    the job id's block: each node takes the next free block, the head tells the workers its port, and the job runs,
    instead of waiting out cluster.ray_timeout_s or failing."""
    plan, job_id = submit(
        slurm_env, tmp_path, [str(JOBS / "ray_probe.py")], "trainer.nnodes=2", "+cluster.sbatch_extra.begin=now+10"
    )
    addresses = (node_address("c1", slurm_env), node_address("c2", slurm_env))
    topology = ray_cluster.Topology(job_id=int(job_id), nodes=("c1", "c2"), addresses=addresses, rank=1, cpus=1, gpus=0)
    squatted = [(addresses[0], topology.base_port), (addresses[1], topology.node_ports(1)["node-manager-port"])]
    squatters = [socket.socket() for _ in squatted]
    try:  # held from before the job starts until after it ended
        for squatter, address in zip(squatters, squatted, strict=True):
            squatter.bind(address)
            squatter.listen()
        assert wait_for_state(job_id, slurm_env, {"COMPLETED", "FAILED", "CANCELLED"}, 240) == "COMPLETED"
    finally:
        for squatter in squatters:
            squatter.close()
    log = "".join(path.read_text() for path in sorted(Path(tmp_path).rglob(f"{job_id}_*_log.out")))  # both nodes'
    # the block after the job id's, wrapping round past the last (a job id of 106, 213, ... has the last block)
    next_block = ray_cluster.PORT_BLOCK_STARTS[(topology.first_block + 1) % len(ray_cluster.PORT_BLOCK_STARTS)]
    for node, address in zip(("c1", "c2"), addresses, strict=True):
        assert (
            f"rlaunch: a port of block {topology.base_port} is in use on {node} ({address}): "
            f"its Ray uses the block at {next_block}"
        ) in log, log[-3000:]
    assert f"({addresses[0]}:{next_block})" in log  # the head's address as the driver got it
    assert len(json.loads((Path(plan.run_dir) / "probe.json").read_text())["nodes"]) == 2
    assert not ray_processes_of(job_id)


def test_a_node_finds_the_first_free_block_from_its_job_ids_and_fails_at_once_when_none_is():
    topology = ray_cluster.Topology(
        job_id=len(ray_cluster.PORT_BLOCK_STARTS) - 1,
        nodes=("c1", "c2"),
        addresses=("a1", "a2"),
        rank=1,
        cpus=1,
        gpus=0,
    )
    last = ray_cluster.PORT_BLOCK_STARTS[-1]
    moved = ray_cluster.with_free_ports(topology, 0, lambda _, ports: [p for p in ports if p >= last])
    assert (moved.block, moved.head_port, moved.head_address) == (0, 20000, "a1:20000")  # wrapped around
    assert ray_cluster.with_free_ports(topology, 1, lambda *_: []).block == topology.first_block
    assert ray_cluster.moved_note(ray_cluster.with_free_ports(topology, 1, lambda *_: []), 1) is None
    with pytest.raises(RuntimeError, match=r"^ray start failed on node c2 \(worker\): every port block .* on a2"):
        ray_cluster.with_free_ports(topology, 1, lambda _, ports: ports[:1])


def test_a_ray_start_that_exits_fails_the_head_at_once_quoting_its_log(tmp_path: Path, monkeypatch):
    """`ray start` itself dies (here: the token file is missing, the fresh-machine failure): the wait ends within
    seconds with the node and the last error line of its log, not after the timeout."""
    topology = ray_cluster.Topology(
        job_id=os.getpid(), nodes=("n1",), addresses=("127.0.0.33",), rank=0, cpus=2, gpus=0
    )
    topology = ray_cluster.with_free_ports(topology, 0)
    missing_token = tmp_path / "no-such-token"
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH"):  # whatever the code under test sets, undone afterwards
        monkeypatch.setenv(name, os.environ.get(name, ""))
    head = ray_cluster.start_node(topology, 0, tmp_path / "ray_start.log", missing_token)
    started = time.monotonic()
    try:
        with pytest.raises(RuntimeError) as error:
            ray_cluster.wait_for_nodes(topology, head, tmp_path, missing_token, timeout_s=120)
    finally:
        ray_cluster.stop_node(head.process)
    assert time.monotonic() - started < 30
    message = str(error.value)
    assert message.startswith("ray start failed on node n1 (head): ")
    assert "ray.exceptions.AuthenticationError: RAY_AUTH_TOKEN_PATH is set but file cannot be" in message


def test_ray_comes_down_without_ray_2_60s_thirty_second_drain(tmp_path: Path, monkeypatch):
    """Ray 2.60 drains a node for up to 30 s on SIGTERM; with its own GCS stopped by the same signal the drain waits
    all of it, and every job's Ray down took 34 s. The job's Ray gets no drain (nothing runs once verl has ended)."""
    token = ray_cluster.ensure_auth_token(tmp_path, None)
    topology = ray_cluster.Topology(
        job_id=os.getpid(), nodes=("n1",), addresses=("127.0.0.34",), rank=0, cpus=2, gpus=0
    )
    topology = ray_cluster.with_free_ports(topology, 0)
    monkeypatch.delenv("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", raising=False)
    log = tmp_path / "ray_start.log"
    head = ray_cluster.start_node(topology, 0, log, token)
    # up when `ray start` says so (its GCS and raylet running); no driver here: this process imported Ray long ago
    # without the run's auth settings, and Ray fixes its auth mode at import (ray_cluster.import_ray)
    deadline = time.monotonic() + 120
    try:
        while "Ray runtime started" not in log.read_text(errors="replace"):
            assert head.failure() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
    finally:
        ray_cluster.stop_node(head.process)
    assert head.process.returncode is not None
    assert "Draining for up to" not in log.read_text(errors="replace")


IDLE_WORKERS_PROBE = """
import os
import ray
# the raylet starts the workers it starts ahead while it registers this driver, before ray.init returns
ray.init(address="local", num_cpus=4, include_dashboard=False, runtime_env={"env_vars": {"RLAUNCH_PROBE": "1"}})
children = {}
for entry in filter(str.isdigit, os.listdir("/proc")):
    try:
        stat = open(f"/proc/{entry}/stat").read()
        argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\\0")
    except OSError:
        continue
    parent = int(stat[stat.rindex(")") + 2 :].split()[1])
    children.setdefault(parent, []).append((int(entry), [arg.decode(errors="replace") for arg in argv]))
workers, below = 0, [os.getpid()]
while below:
    for pid, argv in children.get(below.pop(), []):
        below.append(pid)
        # a worker before and after it names itself (the raylet's own command line names the worker's script too)
        workers += argv[0].startswith("ray::IDLE") or (len(argv) > 1 and argv[1].endswith("default_worker.py"))
print(workers)
ray.shutdown()
"""


@pytest.mark.parametrize(("inherited", "idle"), [(None, 0), ("1", 1)], ids=["job", "ray-default"])
def test_a_jobs_ray_starts_no_idle_workers_its_runtime_env_driver_cannot_use(
    tmp_path: Path, monkeypatch, inherited: str | None, idle: int
):
    """Ray starts idle workers ahead of the first driver, which a driver with a runtime env (verl's always has one)
    never uses: a job's Ray starts none. Ray's default, set explicitly, shows the probe sees them."""
    monkeypatch.delenv("RAY_prestart_worker_first_driver", raising=False)
    if inherited is not None:
        monkeypatch.setenv("RAY_prestart_worker_first_driver", inherited)
    token = ray_cluster.ensure_auth_token(tmp_path, None)
    env = {k: v for k, v in ray_cluster.ray_environment(token).items() if k != "RAY_ADDRESS"}
    probe = subprocess.run(
        [sys.executable, "-c", IDLE_WORKERS_PROBE], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = int(probe.stdout.split()[-1])
    assert found == 0 if idle == 0 else found >= idle, probe.stdout


def test_a_process_that_imported_ray_before_the_auth_settings_is_told_so_at_once(tmp_path: Path):
    """Ray fixes its auth mode when first imported: a driver that imported it earlier (verl does) would be refused by
    the run's Ray with InvalidAuthToken until the wait timed out; import_ray says why instead."""
    token = ray_cluster.ensure_auth_token(tmp_path, None)
    env = {name: value for name, value in os.environ.items() if not name.startswith("RAY_")}
    script = (
        "import ray, sys, pathlib; from launch import ray_cluster; ray_cluster.import_ray(pathlib.Path(sys.argv[1]))"
    )
    early = subprocess.run(
        [sys.executable, "-c", script, str(token)], capture_output=True, text=True, env=env, cwd=PROJECT
    )
    assert early.returncode == 1
    assert "RuntimeError: ray was imported in this process before rlaunch set RAY_AUTH_MODE=token" in early.stderr
    script = script.replace("import ray, sys", "import sys")  # ray imported by import_ray itself
    late = subprocess.run(
        [sys.executable, "-c", script, str(token)], capture_output=True, text=True, env=env, cwd=PROJECT
    )
    assert late.returncode == 0, late.stderr[-2000:]


FAKE_RAY_START = """
import os, subprocess, sys, time
from pathlib import Path
starts = Path(sys.argv[1])
starts.write_text(starts.read_text() + "x" if starts.exists() else "x")
failing = int(sys.argv[2])
if len(starts.read_text()) <= failing:
    # what a failed start leaves in its session: a daemon that outlives `ray start` (its GCS), pid noted for the test
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path(str(starts) + ".left").write_text(str(left.pid))
    print(sys.argv[3], flush=True)
    sys.exit(1)
print("Ray runtime started.", flush=True)
time.sleep(600)
"""


def fake_ray_start(tmp_path: Path, monkeypatch, failing: int, error: str) -> Path:
    """`ray start` replaced by a script that fails `failing` times with `error`, then starts (and blocks)."""
    script = tmp_path / "fake_ray_start.py"
    script.write_text(FAKE_RAY_START)
    starts = tmp_path / "starts"
    command = [sys.executable, str(script), str(starts), str(failing), error]
    monkeypatch.setattr(ray_cluster, "ray_start_command", lambda topology, rank: command)
    return starts


RAYLET_TIMEOUT = (
    "Exception: The current node timed out during startup. This could happen because some of the raylet failed to "
    "startup or the GCS has become overloaded."
)


def test_a_head_that_missed_rays_raylet_registration_starts_again_and_leaves_nothing_of_the_first(
    tmp_path: Path, monkeypatch, capsys
):
    starts = fake_ray_start(tmp_path, monkeypatch, failing=1, error=RAYLET_TIMEOUT)
    topology = ray_cluster.Topology(
        job_id=os.getpid(), nodes=("n1",), addresses=("127.0.0.35",), rank=0, cpus=2, gpus=0
    )
    log = tmp_path / "ray_start.log"
    head = ray_cluster.start_head(topology, log, tmp_path / "token", timeout_s=120)
    try:
        assert head.process.poll() is None and starts.read_text() == "xx"
        assert "missed Ray's 30 s raylet registration" in capsys.readouterr().out
        left = int(Path(f"{starts}.left").read_text())
        assert not Path(f"/proc/{left}").exists() or "Z" in Path(f"/proc/{left}/stat").read_text().split()[2]
        assert log.read_text().count("timed out during startup") == 1 and "Ray runtime started." in log.read_text()
    finally:
        ray_cluster.stop_node(head.process)


def test_a_head_that_fails_otherwise_or_twice_is_returned_as_it_failed(tmp_path: Path, monkeypatch):
    (tmp_path / "other").mkdir()
    other = fake_ray_start(tmp_path / "other", monkeypatch, failing=5, error="ValueError: some other start failure")
    topology = ray_cluster.Topology(
        job_id=os.getpid(), nodes=("n1",), addresses=("127.0.0.36",), rank=0, cpus=2, gpus=0
    )
    head = ray_cluster.start_head(topology, tmp_path / "other.log", tmp_path / "token", timeout_s=120)
    assert other.read_text() == "x" and "some other start failure" in str(head.failure())
    twice = fake_ray_start(tmp_path, monkeypatch, failing=5, error=RAYLET_TIMEOUT)
    head = ray_cluster.start_head(topology, tmp_path / "twice.log", tmp_path / "token", timeout_s=120)
    assert twice.read_text() == "xx" and "timed out during startup" in str(head.failure())


def test_the_sbatch_script_a_dry_run_shows_is_the_one_submitit_submits(slurm_env, tmp_path: Path):
    """A submission renders no script of its own: submitit writes the one it submits, and a dry run shows the text
    the same function makes from the same parameters (launch/slurm.py render_all)."""
    plan, job_id = submit(slurm_env, tmp_path, ["-c", "import time; time.sleep(300)"], "trainer.n_gpus_per_node=1")
    try:
        submitted = next(tmp_path.rglob(f"{job_id}_submission.sh")).read_text()
    finally:
        sh(["scancel", job_id], slurm_env)
    [(_, shown)] = slurm.render_all([plan])
    assert shown == submitted
    assert "#SBATCH --gpus-per-node=1" in submitted or "gpu:1" in submitted
