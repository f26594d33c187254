"""What a sweep shares between its jobs changes no job: planned in a sweep (one composition per combination of group
choices, its resolution reused, verl's verdict cached by the part verl reads, jobs spread over forked processes),
every job's plan, verl config and verdict equal planning it alone."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import compose_config, cpu_facts, run_cli
from omegaconf import OmegaConf

from launch import cores, verl_checks
from launch.errors import UserError
from launch.plan import make_plan
from launch.provenance import VERL_KEY
from launch.rundir import PLAN_FILE, RLAUNCH_CONFIG_FILE, VERL_CONFIG_NAME
from launch.validate import run_verl_validation, verl_checked_part

SWEEP_ID = "launch.sweep_id=equal-alone"
FORKED = {"RLAUNCH_CORES": "2"}  # small sweeps fork too: the jobs after the first are planned in two processes


# A sweep's job names the cluster cluster=auto chose among its overrides: planned alone, that cluster is typed, and
# only the plan's reason says so
CHOSEN = "cluster=auto: no SLURM controller answers here (sinfo) -> local"


def as_typed(reason: str) -> str:
    return reason.replace(CHOSEN, "cluster=local", 1)


def run_files(run_dir: Path) -> dict[str, object]:
    """What a run directory records of its plan, less what names the invocation (job name, provenance)."""
    plan = json.loads((run_dir / PLAN_FILE).read_text())
    plan.pop("job_name")
    plan["execution_reason"] = as_typed(plan["execution_reason"])
    verl = yaml.safe_load((run_dir / f"{VERL_CONFIG_NAME}.yaml").read_text())
    verl.pop(VERL_KEY)  # the provenance record: planning time and command line
    return {"plan": plan, "verl": verl, "ours": (run_dir / RLAUNCH_CONFIG_FILE).read_text()}


@pytest.mark.slow
def test_every_job_of_a_sweep_is_planned_as_it_is_alone(tmp_path: Path):
    # ppo_mini_batch_size is read by interpolations (its job resolves in full), lr by none (reused resolution)
    sweep = run_cli(
        "gpu=a40,h100",
        "actor_rollout_ref.actor.ppo_mini_batch_size=32,64",
        "actor_rollout_ref.actor.optim.lr=2e-6",
        SWEEP_ID,
        "launch.dry_run=json",
        "-m",
        cwd=tmp_path,
        env=FORKED,
    )
    assert sweep.returncode == 0, sweep.stderr
    lines = [json.loads(line) for line in sweep.stdout.splitlines()]
    assert len(lines) == 4
    in_sweep = {line["run_id"]: (line, run_files(Path(line["run_dir"]))) for line in lines}
    shutil.rmtree(Path(lines[0]["run_dir"]).parent)
    for run_id, (line, files) in in_sweep.items():
        alone = run_cli(*line["overrides"], cwd=tmp_path)
        assert alone.returncode == 0, alone.stderr
        plan = json.loads(alone.stdout)
        assert plan["run_id"] == run_id
        reason = as_typed(line["execution_reason"])
        assert {**plan, "job_name": ""} == {**line, "job_name": "", "execution_reason": reason}, line["overrides"]
        assert run_files(Path(plan["run_dir"])) == files, line["overrides"]


@pytest.mark.slow
def test_a_job_verl_rejects_refuses_the_sweep_with_verls_own_words(tmp_path: Path):
    """The rejected job is planned in a forked process; its message is the one planning it alone gives, after the
    job's own values of what the sweep varies, and the rejected invocation leaves nothing behind."""
    sweep = run_cli(
        "actor_rollout_ref.rollout.mode=async,sync", "gpu=a40,h100", SWEEP_ID, "launch.dry_run=json", "-m",
        cwd=tmp_path, env=FORKED,
    )  # fmt: skip
    alone = run_cli("actor_rollout_ref.rollout.mode=sync", "gpu=a40", SWEEP_ID, "launch.dry_run=json", cwd=tmp_path)
    assert sweep.returncode == alone.returncode == 2
    message = alone.stderr.strip().splitlines()[-1]
    assert message.startswith("rlaunch: error: verl rejects the config: Rollout mode 'sync' has been removed")
    job = "job actor_rollout_ref.rollout.mode=sync gpu=a40: "
    assert sweep.stderr.strip().splitlines()[-1] == message.replace("rlaunch: error: ", f"rlaunch: error: {job}", 1)
    assert sweep.stdout == ""
    assert not list(tmp_path.rglob(PLAN_FILE))


VERL_CASES = [
    [],
    ["algo=mtl_pcgrad", "gpu=h100"],
    ["actor_rollout_ref.rollout.mode=sync"],
    ["actor_rollout_ref.model.lora_rank=8"],
    ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"],
    ["actor_rollout_ref.rollout.val_kwargs.do_sample=true", "actor_rollout_ref.rollout.val_kwargs.temperature=0"],
    ["actor_rollout_ref.rollout.val_kwargs.do_sample=true", "actor_rollout_ref.rollout.temperature=0"],
]


def verdict(verl: dict) -> str:
    try:
        run_verl_validation(OmegaConf.create(verl))
    except UserError as error:
        return str(error)
    return "accepted"


@pytest.mark.parametrize("overrides", VERL_CASES, ids=lambda o: " ".join(o) or "default")
def test_verls_verdict_on_the_part_it_reads_is_its_verdict_on_the_whole_config(tmp_path: Path, overrides):
    cfg = compose_config("llm=qwen2_5_0_5b", *overrides)
    verl = make_plan(cfg, cpu_facts(), list(overrides), tmp_path, "python").verl
    assert verdict(verl_checked_part(verl)) == verdict(verl)


def test_verls_verdict_is_cached_by_the_part_it_reads(tmp_path: Path):
    def key(*overrides: str) -> str:
        verl = make_plan(compose_config(*overrides), cpu_facts(), list(overrides), tmp_path, "python").verl
        return verl_checks.config_key(verl_checked_part(verl), {}, {"verl": "0.9.1"})

    assert key("data.seed=1") == key("data.seed=2") == key("trainer.val_before_train=false")
    assert key("data.seed=1") != key("actor_rollout_ref.actor.optim.lr=3e-6")
    assert key("data.seed=1") != key("data.train_batch_size=256")  # verl reads the batch size
    assert key("data.seed=1") != key("trainer.n_gpus_per_node=4")


def test_a_value_that_still_holds_an_interpolation_is_checked_with_the_whole_config():
    verl = {"actor_rollout_ref": {"model": {"path": "${data.model}"}}, "data": {"model": "m", "seed": 1}}
    assert verl_checked_part(verl) is verl


def square_or_refuse(item: int) -> int:
    if item in (5, 9):
        raise UserError(f"item {item} refused")
    if item == 7:
        raise KeyError("a bug")
    return item * item


def test_forked_work_comes_back_in_order(monkeypatch):
    monkeypatch.setenv(cores.CORES_VARIABLE, "3")
    parent = os.getpid()
    assert cores.in_order(lambda item: (item * item, os.getpid() == parent), list(range(12))) == [
        (item * item, item <= 3)
        for item in range(12)  # item 0 and the first slice (1-3) here, 4-11 forked
    ]


def test_the_first_failure_in_order_is_raised_as_planning_one_by_one_would(monkeypatch):
    monkeypatch.setenv(cores.CORES_VARIABLE, "3")
    with pytest.raises(UserError) as refused:
        cores.in_order(square_or_refuse, list(range(12)))  # slices 1-3 here, 4-7 and 8-11 forked: 5 and 9 fail
    assert str(refused.value) == "item 5 refused"
    monkeypatch.setenv(cores.CORES_VARIABLE, "2")
    with pytest.raises(RuntimeError, match="a bug"):
        cores.in_order(square_or_refuse, [0, 1, 2, 7, 8, 9])
    monkeypatch.setenv(cores.CORES_VARIABLE, "1")
    with pytest.raises(UserError) as refused:
        cores.in_order(square_or_refuse, list(range(12)))
    assert str(refused.value) == "item 5 refused"


@pytest.mark.parametrize("swept", ["launch.preflight=warn,fix", "gpu=auto,a100_80"])
def test_jobs_of_a_sweep_that_are_the_same_run_are_refused_before_anything_is_written(tmp_path: Path, swept: str):
    """launch.* settings and gpu=auto's choice make no run of their own (the run id leaves them out): the two jobs
    had shared one run directory, its checkpoints and its W&B run, the second overwriting the first."""
    refused = run_cli("llm=qwen2_5_0_5b", swept, SWEEP_ID, "launch.dry_run=json", "-m", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr[-2000:]
    (line,) = [line for line in refused.stderr.splitlines() if line.startswith("rlaunch: error:")]
    assert "two jobs of this sweep are the same run" in line and "sweep keys that change the run" in line
    assert not refused.stdout.strip()
    assert not list(tmp_path.rglob("plan.json"))


def test_a_refused_job_whose_swept_value_is_the_bad_one_is_named_once(tmp_path: Path):
    refused = run_cli("llm=qwen2_5_0_5b", "actor_rollout_ref.actor.optim.lr=1e-6,-3e-06", SWEEP_ID, "-m", cwd=tmp_path)
    (line,) = [line for line in refused.stderr.splitlines() if line.startswith("rlaunch: error:")]
    assert line.startswith("rlaunch: error: actor_rollout_ref.actor.optim.lr=-3e-06: must be a number > 0"), line
