"""Tracking: W&B identity through verl's own Tracking class inside a Ray actor (real wandb, offline), offline by
default, provenance in the run directory and the W&B config, per-attempt metric files merged back in step order,
and secrets kept out of everything rlaunch writes."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import PROJECT, compose_config, cpu_facts, local_ray, run_cli
from metric_fixtures import make_run
from wandb.proto import wandb_internal_pb2

from launch import provenance
from launch.errors import UserError
from launch.facts import wandb_credentials
from launch.job import attempt_command
from launch.plan import make_plan
from launch.render import render
from launch.report.metrics import read_run, series, validation_series
from launch.run import write_run_dir
from launch.rundir import load_plan, read_history
from launch.secret_guard import copy_redacted

FAKE_KEY = "fake0123456789abcdef0123456789abcdef0123"


def plan_for(tmp_path: Path, *overrides: str, **facts: object):
    cfg = compose_config("cluster=local", "gpu=a40", "algo=mtl_pcgrad", "launch.sweep_id=track", *overrides)
    plan = make_plan(cfg, cpu_facts(**facts), ["algo=mtl_pcgrad", *overrides], tmp_path, sys.executable)
    return plan, cfg


def test_without_credentials_runs_are_offline_and_the_plan_says_how_to_sync(tmp_path: Path):
    offline, _ = plan_for(tmp_path)
    assert offline.worker_env["WANDB_MODE"] == "offline"
    assert f"wandb sync {offline.run_dir}/wandb/offline-run-*" in render(offline)
    online, _ = plan_for(tmp_path, wandb_credentials="WANDB_API_KEY")
    assert online.worker_env["WANDB_MODE"] == "online" and "wandb sync" not in render(online)
    forced, _ = plan_for(tmp_path, "launch.wandb_mode=disabled", wandb_credentials="~/.netrc")
    assert forced.worker_env["WANDB_MODE"] == "disabled"
    # a pasted logger without wandb: verl never starts a W&B run, so the plan names none to sync
    console_only, _ = plan_for(tmp_path, "trainer.logger=[console]", wandb_credentials="WANDB_API_KEY")
    assert console_only.worker_env["WANDB_MODE"] == "disabled"
    assert "W&B off" in render(console_only) and "wandb sync" not in render(console_only)
    assert {key: online.worker_env[key] for key in ("WANDB_RUN_ID", "WANDB_RESUME", "WANDB_RUN_GROUP")} == {
        "WANDB_RUN_ID": online.run_id,
        "WANDB_RESUME": "allow",
        "WANDB_RUN_GROUP": "track",
    }


def test_credentials_are_found_in_the_environment_or_netrc_and_never_copied(tmp_path: Path):
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine api.wandb.ai\n  login user\n  password {FAKE_KEY}\n")
    netrc.chmod(0o600)
    assert wandb_credentials({"WANDB_API_KEY": FAKE_KEY}) == "WANDB_API_KEY"
    assert wandb_credentials({"NETRC": str(netrc)}) == "~/.netrc"
    assert wandb_credentials({"NETRC": str(netrc), "WANDB_BASE_URL": "https://wandb.example.org"}) == ""
    assert wandb_credentials({"NETRC": str(tmp_path / "none")}) == ""


def run_record(path: Path, timeout_s: float = 120.0):
    """The run record of a .wandb file. wandb-core writes the file from its own process: on a loaded machine the
    record has been seen to land after wandb.finish() returned in the actor, and a chunk to be read half-written.
    (The deadline bounds only a failure: 30 s ran out once with a second suite beside this one on two cores.)"""
    from google.protobuf.message import DecodeError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = [record.run for record in wandb_records(path) if record.HasField("run")]
        except DecodeError:  # a chunk wandb-core is still writing: read the file again
            found = []
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"no run record in {path} after {timeout_s:.0f} s"
        time.sleep(0.5)


def wandb_records(path: Path):
    """The records of a .wandb file (W&B's LevelDB-style log: 32 KiB blocks of checksum/length/type-framed
    chunks; wandb 0.31 no longer ships a Python reader)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    position, block, pending = 7, 32768, b""
    while position + 7 <= len(data):
        left = block - position % block
        _, length, kind = struct.unpack("<IHB", data[position : position + 7]) if left >= 7 else (0, 0, 0)
        if left < 7 or (kind == 0 and length == 0):
            position += left
            continue
        pending += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # FULL or LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def test_verls_tracking_in_a_ray_actor_gets_the_identity_only_through_the_runtime_env(tmp_path, monkeypatch):
    import ray

    for name in [name for name in os.environ if name.startswith(("WANDB_", "VERL_FILE"))]:
        monkeypatch.delenv(name)
    plan, cfg = plan_for(tmp_path)
    write_run_dir(plan, cfg)
    config = yaml.safe_load((Path(plan.run_dir) / "verl_config.yaml").read_text())  # what verl's driver reads

    @ray.remote
    class TaskRunner:  # where verl 0.9.1 runs its trainer, and so its Tracking
        def fit(self, config: dict) -> dict:
            import wandb
            from verl.utils.tracking import Tracking

            trainer = config["trainer"]
            tracking = Tracking(trainer["project_name"], trainer["experiment_name"], trainer["logger"], config)
            tracking.log({"perf/throughput": 123.0}, step=1)
            seen = {"id": wandb.run.id, "dir": wandb.run.dir}
            wandb.finish()
            return seen

    # a Ray of its own: without an address ray.init joins any Ray started on this host (a dev-cluster job's)
    with local_ray(runtime_env=plan.verl["ray_kwargs"]["ray_init"]["runtime_env"], num_cpus=1):
        seen = ray.get(TaskRunner.remote().fit.remote(config), timeout=120)
    run_dir = Path(plan.run_dir)
    offline_runs = list((run_dir / "wandb").glob(f"offline-run-*-{plan.run_id}"))
    assert seen["id"] == plan.run_id and len(offline_runs) == 1, seen
    run = run_record(offline_runs[0] / f"run-{plan.run_id}.wandb")
    assert (run.run_id, run.run_group, run.job_type) == (plan.run_id, "track", "mtl_pcgrad")
    assert list(run.tags) == ["a40", "standard", "mtl_pcgrad", "qwen2_5_7b"]
    assert run.display_name == "mtl_pcgrad-qwen2_5_7b-a40-standard"
    in_config = {update.key: json.loads(update.value_json) for update in run.config.update}
    assert in_config["rlaunch"]["run_id"] == plan.run_id and in_config["rlaunch"]["preflight"] is None
    assert in_config["rlaunch"]["packages"]["verl"] == "0.9.1"
    assert read_history(run_dir) == {1: {"perf/throughput": 123.0}}  # verl's file logger, attempt 1's file


def test_provenance_records_the_checkout_packages_preflight_and_each_attempt(tmp_path, monkeypatch):
    result = run_cli("gpu=a40", "algo=guru_baseline", "launch.dry_run=true", "launch.sweep_id=prov", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    run_dir = next((tmp_path / "runs" / "rlaunch" / "prov").glob("*/plan.json")).parent
    record = json.loads((run_dir / "provenance.json").read_text())
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT, capture_output=True, text=True).stdout.strip()
    assert record["git_sha"] == head
    assert record["packages"]["verl"] == "0.9.1" and "torch" in record["packages"] and "ray" in record["packages"]
    assert record["preflight"]["fits"] is True and set(record["preflight"]["peaks_gib"]) == {
        "training",
        "log-prob",
        "rollout",
    }
    assert record["config_files"]["plan.json"] == provenance.sha256_of(run_dir / "plan.json")
    assert (record["git_diff_file"] is None) == (not record["git_dirty"])
    verl_config = yaml.safe_load((run_dir / "verl_config.yaml").read_text())
    assert verl_config["rlaunch"] == record  # what verl hands to wandb.init as the run's config

    for name, value in {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "c[1-2]", "SLURM_ARRAY_TASK_ID": "3"}.items():
        monkeypatch.setenv(name, value)
    overrides = provenance.record_attempt(run_dir, 2)
    assert json.loads((run_dir / "provenance.json").read_text())["slurm"]["node_list"] == "c[1-2]"
    plan = load_plan(run_dir)
    command, env = attempt_command(plan, 2, overrides)
    assert env["VERL_FILE_LOGGER_PATH"] == str(run_dir / "metrics" / "attempt-2.jsonl")
    # verl's own Hydra, on the dumped config, with this attempt's overrides from the command line
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(run_dir), version_base=None):
        composed = compose("verl_config", overrides=[arg for arg in command if arg.startswith("++")])
    assert composed.rlaunch.slurm.node_list == "c[1-2]" and composed.rlaunch.attempt == 2
    assert composed.rlaunch.slurm.job_id == "4242"
    assert composed.ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH == env["VERL_FILE_LOGGER_PATH"]


def test_a_dirty_checkout_is_recorded_with_its_diff_and_hash(tmp_path: Path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--local", str(PROJECT), str(clone)], check=True)
    (clone / "README.md").write_text((clone / "README.md").read_text() + "\nlocal experiment\n")
    result = subprocess.run(
        [sys.executable, str(clone / "launch" / "run.py"), "gpu=a40", "launch.dry_run=true", "launch.sweep_id=dirty"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(clone)},
    )
    assert result.returncode == 0, result.stderr
    run_dir = next((tmp_path / "runs" / "rlaunch" / "dirty").glob("*/plan.json")).parent
    record = json.loads((run_dir / "provenance.json").read_text())
    diff = (run_dir / "git_diff.patch").read_text()
    assert record["git_dirty"] is True and "+local experiment" in diff
    assert record["git_diff_sha256"] == provenance.hashlib.sha256(diff.encode()).hexdigest()


def test_a_secret_on_the_command_line_is_refused_before_anything_is_written(tmp_path: Path):
    for override in (
        f"+cluster.env.WANDB_API_KEY={FAKE_KEY}",
        f"trainer.experiment_name={FAKE_KEY}",
        f"trainer.experiment_name={FAKE_KEY}=x",  # an override Hydra's grammar rejects: its secret still refused
    ):
        result = run_cli("gpu=a40", override, cwd=tmp_path, env={"HF_TOKEN": FAKE_KEY})
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert "secret on the command line" in result.stderr and FAKE_KEY not in result.stderr
        assert not (tmp_path / "runs").exists()  # not even Hydra's .hydra/overrides.yaml
    # a secret-named key in an override Hydra cannot read: Hydra's own refusal, one line, nothing written
    result = run_cli("gpu=a40", "+cluster.env.WANDB_API_KEY='unterminated", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "cannot parse the override" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_secret_in_cluster_env_is_refused(tmp_path: Path):
    with pytest.raises(UserError, match=r"cluster.env.HF_TOKEN: a secret in cluster.env"):
        plan_for(tmp_path, "+cluster.env.HF_TOKEN=abc")


def test_copied_logs_have_secret_values_masked(tmp_path: Path):
    source = tmp_path / "logs"
    (source / "sub").mkdir(parents=True)
    (source / "raylet.out").write_text(f"env WANDB_API_KEY={FAKE_KEY} started\n")
    (source / "sub" / "blob.bin").write_bytes(b"\xff\xfe" + FAKE_KEY.encode())
    copy_redacted(source, tmp_path / "copy", [FAKE_KEY])
    assert (tmp_path / "copy" / "raylet.out").read_text() == "env WANDB_API_KEY=<redacted> started\n"
    assert (tmp_path / "copy" / "sub" / "blob.bin").read_bytes() == b"\xff\xfe" + FAKE_KEY.encode()  # binary as is


def test_attempts_merge_in_step_order_with_the_latest_attempt_winning(tmp_path: Path):
    run_dir = make_run(tmp_path / "sweep", "mtl_pcgrad", "a40", resumed_from=5)
    history = read_history(run_dir)
    assert list(history) == list(range(11))
    throughput = dict(series(history, "perf/throughput"))
    assert throughput[6] == throughput[7] == 1000.0  # attempt 1's lost steps 6-7 (throughput 1.0) are gone
    assert history[5]["perf/throughput"] == 1000.0 and "val-core/math__fixture/acc/mean@1" in history[5]
    math = dict(validation_series(history)[("math__fixture", "reward")])
    assert math == {0: 0.0, 5: 0.1, 10: 0.2}
    assert len(read_run(run_dir).attempts) == 2
