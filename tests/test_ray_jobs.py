"""cluster=ray against a REAL local Ray head with its dashboard and token auth: the cluster's resources as facts, one
Ray job per run through the job API, verl in the job reaching its GPU check, and sweep.py status/logs/cancel."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import PROJECT, compose_config, cpu_facts, run_cli
from metric_fixtures import make_plan_dir
from tiny_assets import make_tiny_dataset, make_tiny_model, tiny_run_overrides

from launch import ray_cluster, ray_submit, watchdog
from launch.errors import UserError
from launch.facts import PartitionFacts, gather_facts, ray_cluster_facts
from launch.plan import make_plan
from launch.run import write_run_dir
from launch.rundir import HANG_FILE
from launch.validate import check_cluster


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def standing_head(home: Path, *resources: str, memory_gib: int = 64) -> Iterator[dict[str, str]]:
    """`ray start --head --block` with its dashboard, token auth on (its own token file), 16 logical CPUs (verl's
    TransferQueue needs ~9) and `memory_gib` as Ray advertises them (the plan's caps and the preflight read these), plus
    `resources` (default: no GPU); stopped through its own process group."""
    token = home / "ray_token"
    token.write_text(os.urandom(32).hex())
    token.chmod(0o600)
    gcs, dashboard, client = free_port(), free_port(), free_port()
    temp_dir = f"/tmp/rlrj-{os.getpid()}-{dashboard}"
    env = {**ray_cluster.ray_environment(token), "HOME": str(home)}  # what a job's Ray gets: token, no drain
    ray = str(Path(sys.executable).parent / "ray")
    command = [ray, "start", "--head", "--block", f"--port={gcs}", f"--ray-client-server-port={client}"]
    command += ["--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}"]
    command += ["--num-cpus=16", f"--memory={memory_gib * 2**30}", f"--temp-dir={temp_dir}"]
    # the job agent's ports, free ones: Ray's defaults (52365 for the agent's HTTP server) are taken by any other Ray
    # on this host (a ray.init in a test beside this one), and a head without its agent takes no job
    agent_ports = ("dashboard-agent-listen-port", "dashboard-agent-grpc-port", "metrics-export-port")
    command += [f"--{name}={free_port()}" for name in (*agent_ports, "runtime-env-agent-port")]
    command += list(resources or ["--num-gpus=0"])
    log = (home / "ray_head.log").open("wb")
    head = subprocess.Popen(command, env=env, stdout=log, stderr=log, start_new_session=True, cwd=home)
    address = f"http://127.0.0.1:{dashboard}"
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{address}/api/version", timeout=2):
                    break
            except urllib.error.HTTPError:  # it answers (401 without the token): up
                break
            except OSError:
                assert head.poll() is None, (home / "ray_head.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the Ray head's dashboard did not come up"
                time.sleep(1)
        while ray_cluster_facts(address, str(token)).nodes == 0:  # the dashboard answers before the raylet joined
            assert time.monotonic() < deadline, "the Ray head's node did not register"
            time.sleep(1)
        yield {"address": address, "token": str(token), "home": str(home)}
    finally:
        ray_cluster.stop_node(head)
        log.close()


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory) -> Iterator[dict[str, str]]:
    """A standing cluster without GPUs (verl's GPU check is the end of the CPU path)."""
    with standing_head(tmp_path_factory.mktemp("home")) as head:
        yield head


def sweep_cli(command: str, sweep_dir: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT / "launch" / "sweep.py"), command, sweep_dir, *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_for(sweep_dir: str, pattern: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        shown = sweep_cli("status", sweep_dir)
        assert shown.returncode == 0, shown.stderr[-2000:]
        if re.search(pattern, shown.stdout):
            return shown.stdout
        assert time.monotonic() < deadline, f"status never matched {pattern!r}: {shown.stdout}"
        time.sleep(3)


def test_the_clusters_resources_are_the_facts(ray_head):
    facts = ray_cluster_facts(ray_head["address"], ray_head["token"])
    assert facts.cpus_per_node == 16 and facts.gpus_per_node == 0 and facts.nodes == 1
    assert facts.mem_gib_per_node == 64.0 and facts.max_time_min is None
    with pytest.raises(UserError, match="set cluster.ray_auth_token_file to the cluster's token"):
        ray_cluster_facts(ray_head["address"], None)  # the cluster requires its token
    wrong = Path(ray_head["home"]) / "another-clusters-token"
    wrong.write_text("not-this-clusters-token\n")
    with pytest.raises(UserError, match=f"it rejected the token in cluster.ray_auth_token_file={wrong}: point it at"):
        ray_cluster_facts(ray_head["address"], str(wrong))
    with pytest.raises(UserError, match="cannot use the Ray cluster at http://127.0.0.1:9: "):
        ray_cluster_facts("http://127.0.0.1:9", None)


def test_gpus_and_their_type_come_from_the_cluster_for_gpu_auto_and_the_checks(tmp_path: Path):
    """A cluster whose node advertises 8 GPUs of Ray's type A100-80G (logical resources: no GPU needed here)."""
    gpus = ("--num-gpus=8", '--resources={"accelerator_type:A100-80G": 1}')
    with standing_head(tmp_path, *gpus, memory_gib=1024) as head:
        facts = ray_cluster_facts(head["address"], head["token"])
        assert (facts.gpus_per_node, facts.gres_type, facts.nodes) == (8, "a100-80g", 1)
        common = [f"cluster.address={head['address']}", f"cluster.ray_auth_token_file={head['token']}"]
        common += ["cluster=ray", "gpu=auto", "llm=qwen2_5_0_5b", "launch.dry_run=json"]
        env = {"HOME": head["home"]}
        planned = run_cli(*common, cwd=tmp_path, env=env)
        assert planned.returncode == 0, planned.stderr[-3000:]
        plan = json.loads(planned.stdout)
        assert plan["gpu_profile"] == "a100_80" and "A100-80G".lower() in plan["gpu_selected_by"]
        # capped at the cluster's node (the profile wants 128 CPUs), RAM as the preflight asked for it within the node
        assert plan["resources"]["cpus_per_task"] == 16 and plan["resources"]["mem_gb"] <= 1024
        too_many = run_cli(*common, "trainer.n_gpus_per_node=16", cwd=tmp_path, env=env)
        assert too_many.returncode == 2
        assert "trainer.n_gpus_per_node=16 but the nodes of ray cluster" in too_many.stderr, too_many.stderr[-2000:]


def test_a_run_larger_than_the_clusters_gpu_nodes_is_refused_with_the_fix():
    cluster = PartitionFacts("ray cluster http://h:8265", 64, 500.0, 4, "a100", None, 2)
    for overrides, message in [
        (["trainer.n_gpus_per_node=8"], r"trainer.n_gpus_per_node=8 but the nodes of ray cluster .* have at most 4"),
        (["trainer.n_gpus_per_node=4", "trainer.nnodes=3"], r"trainer.nnodes=3 but ray cluster .* has 2 node"),
    ]:
        cfg = compose_config("cluster=ray", "cluster.address=http://h:8265", "gpu=a100_80", *overrides)
        facts = cpu_facts(partition=cluster)
        with pytest.raises(UserError, match=message):
            check_cluster(cfg, make_plan(cfg, facts, overrides, Path("/tmp"), "python").resources, facts)


def test_verl_runs_as_a_ray_job_to_its_gpu_check_and_sweep_commands_work(ray_head, tmp_path: Path):
    model = make_tiny_model(tmp_path / "model")
    train, val = make_tiny_dataset(tmp_path / "data", ["math", "logic"])
    common = [
        "cluster=ray",
        f"cluster.address={ray_head['address']}",
        f"cluster.ray_auth_token_file={ray_head['token']}",
        f"cluster.shared_dir={tmp_path / 'shared'}",
        f"cluster.python={sys.executable}",
        *tiny_run_overrides(model, train, val),
    ]
    env = {"HOME": ray_head["home"]}
    result = run_cli(*common, "data.max_response_length=256", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "submitted 1 Ray job(s)" in result.stdout
    assert "reports no GPU now: verl will stop at its GPU check" in result.stderr + result.stdout
    sweep_dir = re.search(r"sweep\.py status (\S+)", result.stdout).group(1)
    manifest = json.loads((Path(sweep_dir) / "manifest.json").read_text())
    [run] = manifest["runs"]
    plan = json.loads((Path(run["run_dir"]) / "plan.json").read_text())
    assert Path(plan["code_dir"], "launch", "ray_entry.py").is_file()  # the snapshot is the job's working_dir
    assert plan["verl"]["reward"]["custom_reward_function"]["path"] == f"{plan['code_dir']}/rewards/verl_entry.py"

    shown = wait_for(sweep_dir, r"FAILED|SUCCEEDED|STOPPED", 420)
    # the cause, from the job's output the run directory holds (it was never classified: Ray keeps the job's log)
    cause = "cause gpu_unavailable: ValueError: Total available GPUs 0"
    assert re.search(rf"{run['job_id']}\s+FAILED\s+attempts 1\s+no step yet\s+{run['run_id']}.*{cause}", shown), shown
    logs = sweep_cli("logs", sweep_dir, "-n", "100000")
    assert logs.returncode == 0, logs.stderr[-2000:]
    assert logs.stdout.splitlines()[1].startswith("[gpu_unavailable] (attempt 1)"), logs.stdout[:3000]
    assert "Total available GPUs 0 is less than total desired GPUs 1" in logs.stdout, logs.stdout[-3000:]
    assert re.search(r"rlaunch: Ray job for run \w+, attempt 1; code from \S+_ray_pkg_", logs.stdout), logs.stdout
    assert logs.stdout.rstrip().endswith("rlaunch: the Ray job's entrypoint exited with code 1"), logs.stdout[-2000:]
    provenance = json.loads((Path(run["run_dir"]) / "provenance.json").read_text())
    assert provenance["attempt"] == 1 and provenance["code_snapshot"] == plan["code_dir"]
    assert_cause_everywhere(Path(sweep_dir), Path(run["run_dir"]), "gpu_unavailable", "FAILED")

    # a sweep: one Ray job per run; cancel stops them all
    sweep = run_cli(*common, "data.max_response_length=128,192", "-m", cwd=tmp_path, env=env)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    assert "submitted 2 Ray job(s)" in sweep.stdout
    sweep_dir = re.search(r"sweep\.py status (\S+)", sweep.stdout).group(1)
    cancelled = sweep_cli("cancel", sweep_dir)
    assert cancelled.returncode == 0 and "stopped 2 Ray job(s)" in cancelled.stdout, cancelled.stdout
    shown = wait_for(sweep_dir, r"(STOPPED.*\n.*){2}|STOPPED[^\n]*\n[^\n]*STOPPED", 120)
    assert (
        len(re.findall(r"STOPPED +attempts 1 .* cause cancelled: Ray: job raysubmit_\w+ STOPPED$", shown, re.M)) == 2
    ), shown


def assert_cause_everywhere(sweep_dir: Path, run_dir: Path, kind: str, state: str) -> None:
    """What a user sees of a failed run: sweep status, logs, the doctor and compare all name its cause, and compare
    the state the cluster (or, where it is gone, the run's own records) gives it."""

    def cli(script: str, *args: str) -> str:
        command = [sys.executable, str(PROJECT / "launch" / script), *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout

    assert f"cause {kind}: " in cli("sweep.py", "status", str(sweep_dir))
    assert f"[{kind}]" in cli("sweep.py", "logs", str(sweep_dir))
    assert f"[{kind}]" in cli("report/doctor.py", str(run_dir))
    assert f"failed: {kind}" in (run_dir / "diagnosis.md").read_text()
    cli("report/compare.py", str(sweep_dir))
    assert f"| {state} ({kind}: " in (sweep_dir / "report" / "report.md").read_text()


def ray_fixture_run(sweep_dir: Path, job_id: str, output: str, *overrides: str) -> Path:
    """A planned run of a Ray sweep whose job wrote this output (launch/ray_submit.py's copy in the run directory);
    `{run}` in it is the run's id."""
    run_dir = make_plan_dir(sweep_dir, "guru_baseline", "a40", *overrides)
    (run_dir / ray_submit.RAY_JOB_LOG).write_text(output.format(run=run_dir.name))
    manifest_path = sweep_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"runs": []}
    manifest |= {"cluster": "ray", "address": "http://127.0.0.1:9", "token_file": None, "sweep_id": sweep_dir.name}
    manifest |= {"sweep_dir": str(sweep_dir), "arrays": []}
    manifest["runs"].append({"run_id": run_dir.name, "run_dir": str(run_dir), "job_name": "a40", "job_id": job_id})
    manifest_path.write_text(json.dumps(manifest))
    return run_dir


def test_a_ray_sweep_whose_cluster_is_gone_shows_the_runs_own_records(tmp_path: Path):
    """The cluster is gone (its head restarted, the KubeRay cluster deleted): status, logs, the doctor and compare
    show what the runs' own records say (the job's output the run directory holds: its cause, its exit), where
    status had been one line of error and compare had shown a failed run as PENDING; cancel cannot, in one line."""
    sweep_dir = tmp_path / "gone"
    start = "rlaunch: Ray job for run {run}, attempt 1; code from /tmp/ray/session_x/runtime_resources/_ray_pkg_1\n"
    failed_output = (
        "Traceback (most recent call last):\nValueError: Total available GPUs 0 is less than total desired GPUs 1\n"
    )
    failed = ray_fixture_run(sweep_dir, "raysubmit_failed", f"{start}{failed_output}{ray_submit.ENTRY_EXITED} 1\n")
    stopped_output = f"{start}{ray_submit.ENTRY_STOPPED}\n"
    stopped = ray_fixture_run(sweep_dir, "raysubmit_stopped", stopped_output, "actor_rollout_ref.actor.optim.lr=2e-6")
    shown = sweep_cli("status", str(sweep_dir))
    assert shown.returncode == 0, shown.stderr
    assert "the Ray cluster did not answer (cannot use the Ray cluster at http://127.0.0.1:9: " in shown.stdout
    assert re.search(r"raysubmit_failed\s+FAILED .* cause gpu_unavailable: ValueError: Total available", shown.stdout)
    assert re.search(r"raysubmit_stopped\s+STOPPED .* cause cancelled: rlaunch: the Ray job was stopped", shown.stdout)
    assert_cause_everywhere(sweep_dir, failed, "gpu_unavailable", "FAILED")
    assert (
        "stopped through Ray's job API (sweep.py cancel, ray job stop, the dashboard): nothing to fix"
        in (stopped / "diagnosis.md").read_text()
    )
    read = subprocess.run(
        [
            sys.executable,
            str(PROJECT / "launch" / "report" / "doctor.py"),
            "--log",
            str(stopped / "ray_job.log"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert read.returncode == 0 and json.loads(read.stdout)["failure"]["kind"] == "cancelled", read.stdout + read.stderr
    assert json.loads(read.stdout)["outcome"] == "cancelled"
    cancel = sweep_cli("cancel", str(sweep_dir))
    assert cancel.returncode == 2
    assert cancel.stderr.startswith("sweep: error: cannot use the Ray cluster at http://127.0.0.1:9: "), cancel.stderr
    assert "or fix cluster.address" in cancel.stderr and cancel.stderr.count("\n") == 1


def test_a_ray_job_that_hangs_ends_as_hang_with_this_nodes_stacks_of_the_run(ray_head, tmp_path: Path):
    """The hang watchdog on cluster=ray: the stand-in driver's ranks hang at step 4 (one in an HTTP read, the other
    in a gloo all_reduce waiting for it); the entrypoint records the stacks of the run's own workers on this node
    and fails the job as a hang, which `status` names."""
    overrides = [
        "cluster=ray",
        f"cluster.address={ray_head['address']}",
        f"cluster.ray_auth_token_file={ray_head['token']}",
        f"cluster.shared_dir={tmp_path / 'shared'}",
        f"cluster.python={sys.executable}",
        "gpu=a40",
        "mode=quick_test",
        "launch.hang.floor_s=20",
        "launch.hang.factor=2",
        f"launch.sweep_id=rayhang-{tmp_path.name[-8:]}",
    ]
    cfg = compose_config(*overrides)
    facts = gather_facts(
        "x", "ray", None, snapshot=True, ray_address=ray_head["address"], ray_token_file=ray_head["token"]
    )
    plan = make_plan(cfg, facts, overrides, tmp_path / "shared" / "runs", sys.executable)
    plan = dataclasses.replace(
        plan, driver_command=[sys.executable, str(PROJECT / "tests" / "jobs" / "hang_driver.py"), "4"]
    )
    write_run_dir(plan, cfg)
    manifest = ray_submit.submit([plan], ray_head["address"], ray_head["token"], sys.executable)
    shown = wait_for(manifest.sweep_dir, r"FAILED|SUCCEEDED|STOPPED", 300)
    run_dir = Path(plan.run_dir)
    [record] = json.loads((run_dir / HANG_FILE).read_text())
    assert record["attempt"] == 1 and record["last_step"] == 3 and record["phase"] == "update_actor", record
    assert record["stuck_ranks"] == [f"{socket.gethostname()}:rank0", f"{socket.gethostname()}:rank1"], record
    assert "all_reduce (torch/distributed/" in record["evidence"] and "SocketIO.readinto" in record["evidence"]
    stacks = run_dir / record["stacks_dir"]
    assert len(list(stacks.glob("*-rank*-pid*.txt"))) == 2  # the run's two workers, not the cluster's others
    assert list(stacks.glob("*-driver-pid*.txt")) and "Node status" in (stacks / watchdog.RAY_STATUS_FILE).read_text()
    assert re.search(r"FAILED .*cause hang", shown), shown
    logs = sweep_cli("logs", manifest.sweep_dir, "-n", "1000").stdout
    assert "rlaunch: hang: no step for " in logs and "not requeued: cluster=ray: nothing requeues it" in logs, logs


def test_a_submission_waits_for_the_clusters_job_agent_and_nothing_else():
    class Client:
        def __init__(self, failures: list[str]) -> None:
            self.failures, self.calls = failures, 0

        def submit_job(self, **request: object) -> str:
            self.calls += 1
            if self.failures:
                raise RuntimeError(self.failures.pop(0))
            return "raysubmit_1"

    not_yet = f"Request failed with status code 500: {ray_submit.AGENT_NOT_YET}, please try again later.."
    client = Client([not_yet, not_yet])
    assert ray_submit.submit_when_an_agent_answers(client, {}) == "raysubmit_1" and client.calls == 3
    with pytest.raises(RuntimeError, match="status code 400"):  # any other refusal is not waited out
        ray_submit.submit_when_an_agent_answers(Client(["Request failed with status code 400: bad"]), {})
    with pytest.raises(RuntimeError, match="No available agent"):  # and the wait has an end
        ray_submit.submit_when_an_agent_answers(Client([not_yet] * 5), {}, wait_s=0.0)
