"""The PCGrad verl plugin as verl loads it: through the `verl.plugins` entry point in a fresh interpreter, inert
unless the run selects it (algo=guru_baseline runs verl's stock trainer, worker and loss), the algo=mtl_pcgrad config
through verl's validation, the start-up check, the task mapping and the domain-stratified order, and the real verl
driver started with algo=mtl_pcgrad on CPU up to verl's GPU check with the plugin active."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import compose_config, cpu_facts, require_or_skip, run_cli

from algos.tasks import PcgradWorkerSettings, stratified_order, stratify_batch, task_of
from launch.errors import UserError
from launch.plan import make_plan
from launch.validate import validate

PROJECT = Path(__file__).resolve().parent.parent


def fresh_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A new interpreter that imports only verl: whatever of ours runs, verl's entry-point loading brought it in."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_PCGRAD")}
    result = subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=240, cwd="/"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def plan_for(tmp_path: Path, *overrides: str):
    cfg = compose_config(*overrides)
    return cfg, make_plan(cfg, cpu_facts(), list(overrides), working_dir=tmp_path, python=sys.executable)


INSPECT_RUN = """
import json, sys
from omegaconf import OmegaConf
import verl
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, get_trainer_cls
from verl.trainer.ppo.utils import Role
import verl.workers.engine_workers as engine_workers
from verl.workers.engine.base import BaseEngine
from verl.workers.engine.fsdp.transformer_impl import FSDPEngine
from verl.workers.utils.losses import ppo_loss

config = OmegaConf.create(json.loads(open({plan!r}).read())["verl"])
trainer_cls = get_trainer_cls(config.trainer.v1.trainer_mode)
trainer = object.__new__(trainer_cls)  # the role -> worker mapping needs the config only
trainer.config = config
trainer._init_resource_pool_mgr()
worker_cls = trainer.role_worker_mapping[Role.ActorRollout].__ray_actor_class__
print(json.dumps({{
    "registered": sorted(TRAINER_REGISTRY),
    "trainer": f"{{trainer_cls.__module__}}.{{trainer_cls.__qualname__}}",
    "worker": f"{{worker_cls.__module__}}.{{worker_cls.__qualname__}}",
    "actor_worker": f"{{worker_cls.actor_worker_cls.__module__}}.{{worker_cls.actor_worker_cls.__qualname__}}",
    "stock_actor_worker_cls": engine_workers.ActorRolloutRefWorker.actor_worker_cls.__qualname__,
    "init_model_is_verls": worker_cls.init_model is engine_workers.ActorRolloutRefWorker.init_model,
    "loss_is_verls": engine_workers.ppo_loss is ppo_loss,
    "engine_step_is_verls": BaseEngine.train_batch.__module__ == "verl.workers.engine.base"
        and FSDPEngine.forward_backward_batch.__module__ == "verl.workers.engine.fsdp.transformer_impl",
    "pcgrad_module_loaded": "algos.verl_pcgrad" in sys.modules,
}}))
"""


def inspect_run(tmp_path: Path, *overrides: str) -> dict:
    """verl's own view of a planned run, in a fresh interpreter with the plan's worker env: the trainer class that
    trainer.v1.trainer_mode resolves to, the worker class it gives the actor role, and what that worker trains with."""
    _, plan = plan_for(tmp_path, *overrides)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"verl": plan.verl}))
    result = fresh_python(INSPECT_RUN.format(plan=str(plan_file)), env=plan.worker_env)
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_guru_baseline_runs_verls_stock_trainer_worker_and_loss(tmp_path: Path):
    seen = inspect_run(tmp_path, "algo=guru_baseline")
    assert seen["trainer"] == "verl.trainer.ppo.v1.trainer_sync.PPOTrainerSync"
    assert seen["worker"] == "verl.workers.engine_workers.ActorRolloutRefWorker"
    assert seen["actor_worker"] == "verl.workers.engine_workers.TrainingWorker"
    assert seen["init_model_is_verls"] and seen["loss_is_verls"] and seen["engine_step_is_verls"]
    assert "mtl_pcgrad" not in seen["registered"] and not seen["pcgrad_module_loaded"]


@pytest.mark.slow
def test_mtl_pcgrad_runs_the_plugin_trainer_and_worker_with_verls_loss(tmp_path: Path):
    seen = inspect_run(tmp_path, "algo=mtl_pcgrad")
    assert seen["trainer"] == "algos.verl_pcgrad.PcgradTrainer"
    assert seen["worker"] == "algos.verl_pcgrad.PcgradActorRolloutRefWorker"
    assert seen["actor_worker"] == "algos.verl_pcgrad.PcgradTrainingWorker"
    # the same loss wiring as the baseline (init_model is verl's), and verl's classes themselves are untouched
    assert seen["init_model_is_verls"] and seen["loss_is_verls"] and seen["engine_step_is_verls"]
    assert seen["stock_actor_worker_cls"] == "TrainingWorker"


@pytest.mark.slow
def test_plugin_loads_through_the_entry_point_only_when_selected():
    code = (
        "import sys, verl\n"
        "print('plugin', 'algos.verl_plugin' in sys.modules)\n"
        "print('pcgrad', 'algos.verl_pcgrad' in sys.modules)\n"
        "print('trainer_base', 'verl.trainer.ppo.v1.trainer_base' in sys.modules)\n"
        "if 'algos.verl_pcgrad' in sys.modules:\n"
        "    from verl.trainer.ppo.v1 import get_trainer_cls\n"
        "    print('resolves', get_trainer_cls('mtl_pcgrad').__qualname__)\n"
    )
    inert = fresh_python(code, env={}).stdout
    assert "plugin True" in inert, "verl must import the entry point in every process"
    assert "pcgrad False" in inert and "trainer_base False" in inert, "unselected, the plugin must import nothing"
    active = fresh_python(code, env={"RLAUNCH_PCGRAD_ENABLED": "1"}).stdout
    assert "plugin True" in active and "pcgrad True" in active and "resolves PcgradTrainer" in active


def test_mtl_pcgrad_config_passes_ours_and_verls_validation(tmp_path: Path):
    cfg, plan = plan_for(tmp_path, "algo=mtl_pcgrad", "gpu=a100_80")
    validate(cfg, plan, cpu_facts())  # ours, then verl's validate_config and RolloutConfig
    assert plan.verl["trainer"]["v1"]["trainer_mode"] == "mtl_pcgrad"
    env = plan.verl["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]
    assert env["RLAUNCH_PCGRAD_ENABLED"] == "1" and json.loads(env["RLAUNCH_PCGRAD_TASK_MAP"]) == {}
    assert PcgradWorkerSettings.from_env(env) == PcgradWorkerSettings(enabled=True)


def test_pcgrad_switch_and_trainer_mode_must_agree(tmp_path: Path):
    with pytest.raises(UserError, match="contradicts trainer.v1.trainer_mode=sync"):
        plan_for(tmp_path, "algo=mtl_pcgrad", "trainer.v1.trainer_mode=sync")
    with pytest.raises(UserError, match="algo.pcgrad.enabled=False contradicts"):
        plan_for(tmp_path, "algo=guru_baseline", "trainer.v1.trainer_mode=mtl_pcgrad")


def test_task_map_travels_to_the_workers(tmp_path: Path):
    _, plan = plan_for(tmp_path, "algo=mtl_pcgrad", "+algo.pcgrad.task_map={openai/gsm8k: math, simulation: codegen}")
    settings = PcgradWorkerSettings.from_env(plan.worker_env)
    assert settings.task_map == {"openai/gsm8k": "math", "simulation": "codegen"}
    assert task_of("openai/gsm8k", settings.task_map) == "math"
    assert task_of("simulation__codeio", settings.task_map) == "codegen"
    assert task_of("math__deepscaler", settings.task_map) == "math"
    assert task_of("unknown_set", {}) == "unknown_set"


def test_startup_check_fails_loudly_when_a_worker_lacks_pcgrad():
    from algos.verl_pcgrad import PcgradTrainer, check_worker_status

    active = {"active": True, "task_key": "data_source", "seed": 0, "actor_worker": "PcgradTrainingWorker"}
    check_worker_status([{**active, "rank": 0}, {**active, "rank": 1}])
    with pytest.raises(RuntimeError, match=r"PCGrad is NOT active on actor rank\(s\) \[1\]"):
        check_worker_status([{**active, "rank": 0}, {**active, "rank": 1, "active": False}])
    with pytest.raises(RuntimeError, match="settings differ"):
        check_worker_status([{**active, "rank": 0}, {**active, "rank": 1, "seed": 3}])
    saved = os.environ.pop("RLAUNCH_PCGRAD_ENABLED", None)
    try:
        with pytest.raises(RuntimeError, match="RLAUNCH_PCGRAD_ENABLED is not 1"):
            PcgradTrainer(config=None)
    finally:
        if saved is not None:
            os.environ["RLAUNCH_PCGRAD_ENABLED"] = saved


def test_stratified_order_keeps_small_domains_in_every_mini_batch():
    """GURU-like shares (math 10x the small domains), 8 ranks x 8 mini-batches, GRPO groups of 16 rollouts."""
    shares = {"math": 24, "codegen": 12, "logic": 8, "simulation": 4, "table": 8, "stem": 8}  # prompts
    tasks = [task for task, prompts in shares.items() for _ in range(prompts * 16)]
    lengths = [(37 * i) % 900 + 50 for i in range(len(tasks))]
    dp, minis = 8, 8
    order = stratified_order(tasks, lengths, dp, minis)
    assert sorted(order) == list(range(len(tasks)))
    per_rank, per_mini = len(tasks) // dp, len(tasks) // dp // minis
    for mini in range(minis):
        global_mini = [order[r * per_rank + mini * per_mini + i] for r in range(dp) for i in range(per_mini)]
        counts = Counter(tasks[i] for i in global_mini)
        assert set(counts) == set(shares), f"mini-batch {mini} lacks {set(shares) - set(counts)}"
        for task, prompts in shares.items():  # each mini-batch gets its fair share, +-1 per rank
            assert abs(counts[task] - prompts * 16 / minis) <= dp
    for rank in range(dp):  # ...and each rank nearly the same count of each task: little padding
        counts = Counter(tasks[i] for i in order[rank * per_rank : (rank + 1) * per_rank])
        for task, prompts in shares.items():
            assert abs(counts[task] - prompts * 16 / dp) <= minis
    tokens = [sum(lengths[i] for i in order[r * per_rank : (r + 1) * per_rank]) for r in range(dp)]
    assert max(tokens) / min(tokens) < 1.05, f"token balance across ranks: {tokens}"


def test_stratify_batch_logs_counts_and_respects_the_switch():
    tasks = ["math"] * 12 + ["stem"] * 4
    order, metrics = stratify_batch(tasks, [10] * 16, dp_size=2, mini_batch=8, stratify=True)
    assert sorted(order) == list(range(16))
    assert metrics["pcgrad/batch_samples/math"] == 12 and metrics["pcgrad/batch_samples/stem"] == 4
    assert metrics["pcgrad/batch_cells_with/stem"] == 4  # all 2 ranks x 2 mini-batches
    assert stratify_batch(tasks, [10] * 16, 2, 8, stratify=False)[0] is None
    assert stratify_batch(tasks, [10] * 16, 2, 6, stratify=True)[0] is None  # not whole mini-batches: verl's order


def test_aligned_part_sizes_give_every_rank_the_same_micro_batch_count():
    from algos.verl_pcgrad import aligned_part_size

    assert aligned_part_size([5, 2], use_dynamic_bsz=False, micro_batch_size=4) == (6, 3)  # 2 micro-batches of 3
    assert aligned_part_size([0, 3], use_dynamic_bsz=False, micro_batch_size=4) == (3, 3)
    assert aligned_part_size([4, 4], use_dynamic_bsz=False, micro_batch_size=2) == (4, 2)
    assert aligned_part_size([0, 3], use_dynamic_bsz=True, micro_batch_size=None) == (3, None)


@pytest.mark.slow
def test_real_verl_driver_reaches_the_gpu_check_with_the_plugin_active(tmp_path: Path):
    """launch/run.py plans algo=mtl_pcgrad on a tiny local model and GURU-shaped data; verl's own entry point on the
    planned config (with the plan's worker env, as the job runs it) gets through validation, ray.init, the task
    runner (where the plugin's trainer announces itself), TransferQueue, tokenizer and dataset, and stops at verl's
    GPU check: the honest end of the CPU path (docs/facts.md#verl)."""
    from tiny_assets import make_tiny_dataset, make_tiny_model

    model = make_tiny_model(tmp_path / "model", weights=False)
    train, val = make_tiny_dataset(tmp_path / "data")
    planned = run_cli(
        "algo=mtl_pcgrad",
        "cluster=local",
        "mode=quick_test",
        "launch.dry_run=json",
        "launch.preflight=off",
        f"launch.runs_dir={tmp_path / 'runs'}",
        f"actor_rollout_ref.model.path={model}",
        f"data.train_files=[{train}]",
        f"data.val_files=[{val}]",
        "trainer.n_gpus_per_node=1",
        "data.train_batch_size=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "data.max_prompt_length=64",
        "data.max_response_length=64",
        "trainer.logger=[console]",
        cwd=tmp_path,
    )
    assert planned.returncode == 0, planned.stderr[-3000:]
    plan = json.loads(planned.stdout)
    assert plan["verl"]["trainer"]["v1"]["trainer_mode"] == "mtl_pcgrad"
    # verl's own ray.init on a 2-core machine: enough logical CPUs for TransferQueue, or it hangs (docs/facts.md#verl)
    command = [sys.executable, *plan["driver_command"][1:], "ray_kwargs.ray_init.num_cpus=16"]
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS",) and not k.startswith("RLAUNCH_PCGRAD")}
    try:
        result = subprocess.run(
            command,
            cwd=plan["run_dir"],
            env={**env, **plan["worker_env"], "WANDB_MODE": "offline"},
            capture_output=True,
            text=True,
            timeout=420,
        )
    except subprocess.TimeoutExpired:
        require_or_skip("verl's driver did not reach the GPU check within 420 s on this machine")
        return
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Total available GPUs 0 is less than total desired GPUs 1" in output, output[-4000:]
    assert "rlaunch: PCGrad plugin active: trainer 'mtl_pcgrad' (verl 0.9.1)" in output, output[-4000:]
