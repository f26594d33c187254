"""The plan is a pure function of (cfg, facts, overrides): ids, resources, the verl config and command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import PROJECT, compose_config, cpu_facts

from launch.errors import UserError
from launch.facts import PartitionFacts, read_model_config
from launch.gpu import DetectedGpus
from launch.plan import make_plan, make_run_id
from launch.render import render
from launch.rundir import load_plan, save_plan
from launch.validate import validate

GOLDEN = Path(__file__).parent / "golden"


def plan_for(tmp_path, *overrides, facts=None):
    cfg = compose_config(*overrides)
    return make_plan(cfg, facts or cpu_facts(), list(overrides), working_dir=tmp_path, python="/venv/bin/python")


def test_run_id_is_stable_and_ignores_launch_keys():
    base = make_run_id("s1", ["gpu=a40", "algo=mtl_pcgrad"])
    assert base == make_run_id("s1", ["algo=mtl_pcgrad", "gpu=a40", "launch.dry_run=json", "gpu.selected_by='x'"])
    assert base != make_run_id("s2", ["gpu=a40", "algo=mtl_pcgrad"])
    assert base != make_run_id("s1", ["gpu=h100", "algo=mtl_pcgrad"])
    assert len(base) == 12


def test_verl_config_is_verl_only_with_absolute_paths(tmp_path):
    plan = plan_for(tmp_path, "gpu=a40", "algo=mtl_pcgrad")
    verl = plan.verl
    assert {"gpu", "llm", "mode", "algo", "dataset", "cluster", "launch"}.isdisjoint(verl)
    assert verl["trainer"]["default_local_dir"] == str(Path(plan.run_dir) / "checkpoints")
    assert Path(plan.run_dir).is_relative_to(tmp_path)
    assert Path(verl["reward"]["custom_reward_function"]["path"]).is_absolute()
    env = verl["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]
    assert env["RLAUNCH_PCGRAD_ENABLED"] == "1" and env["RLAUNCH_PCGRAD_TASK_KEY"] == "data_source"
    assert "${" not in json.dumps(verl), "verl receives a fully resolved config"
    assert plan.driver_command[1:3] == ["-m", "verl.trainer.main_ppo"]
    assert f"--config-path={plan.run_dir}" in plan.driver_command


def test_relative_output_directories_are_the_run_directorys(tmp_path):
    """verl's workers write rollouts, validation generations and profiles from where they start, the code snapshot
    (docs/facts.md#ray): a relative directory goes under the run directory, listed as the run dir's change; an
    absolute one stays; verl's default profile directory moves only when a profiler runs."""
    outputs = ["trainer.rollout_data_dir=rollouts", f"trainer.validation_data_dir={tmp_path}/val"]
    profiling = ["global_profiler.tool=torch_memory", "global_profiler.save_path=./mem_snapshots"]
    plan = plan_for(tmp_path, "algo=verl", *outputs, *profiling)
    run_dir, trainer = Path(plan.run_dir), plan.verl["trainer"]
    assert (trainer["rollout_data_dir"], trainer["validation_data_dir"]) == (
        str(run_dir / "rollouts"),
        f"{tmp_path}/val",
    )
    saved = {
        plan.verl["global_profiler"]["save_path"],
        plan.verl["actor_rollout_ref"]["actor"]["profiler"]["save_path"],
    }
    assert saved == {str(run_dir / "mem_snapshots")}  # each role's profiler follows the global one
    changes = {change.key: change.by for change in plan.changed_from_verl}
    for key in ("trainer.rollout_data_dir", "global_profiler.save_path", "actor_rollout_ref.actor.profiler.save_path"):
        assert changes[key] == "rlaunch: run dir", key
    assert "trainer.validation_data_dir" not in changes
    unprofiled = plan_for(tmp_path, "algo=verl").verl["global_profiler"]["save_path"]
    assert unprofiled == "outputs/profile"  # verl's default, unused without a tool


def test_baseline_sends_no_pcgrad_switch(tmp_path):
    env = plan_for(tmp_path, "algo=guru_baseline").verl["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]
    assert not any(key.startswith("RLAUNCH_PCGRAD") for key in env)


def test_gpu_count_has_one_source(tmp_path):
    plan = plan_for(tmp_path, "trainer.nnodes=2", "trainer.n_gpus_per_node=4", "gpu=a100_80")
    res = plan.resources
    assert (res.nodes, res.gpus_per_node, res.gres) == (2, 4, "gpu:4")
    assert res.cpus_per_task == 16 * 4 and res.mem_gb == 128 * 4  # the a100_80 profile's per-GPU host share
    assert plan.verl["trainer"]["nnodes"] == 2 and plan.verl["trainer"]["n_gpus_per_node"] == 4


def test_partition_caps_resources_and_types_gres(tmp_path):
    partition = PartitionFacts(
        "gpu", cpus_per_node=48, mem_gib_per_node=250.0, gpus_per_node=8, gres_type="a100", max_time_min=2880, nodes=4
    )
    plan = plan_for(tmp_path, "gpu=a100_80", "cluster=slurm", "mode=quick_test", facts=cpu_facts(partition=partition))
    res = plan.resources
    assert (res.cpus_per_task, res.mem_gb) == (48, 250)  # the 8xA100 node shape of docs/background.md#low-mfu
    assert res.gres == "gpu:a100:8"
    assert res.time_min == 60 + 15
    assert plan.execution == "submit"
    untyped = PartitionFacts("debug", 128, 1000.0, 8, None, None, 2)
    assert plan_for(tmp_path, "cluster=slurm", facts=cpu_facts(partition=untyped)).resources.gres == "gpu:8"


def test_a_dry_run_says_in_its_cluster_line_that_it_stops_at_the_plan(tmp_path):
    """cluster=auto on a login node plans only: the plan had said 'slurm -> submit' beside 'this only planned'."""
    dry = plan_for(tmp_path, "cluster=slurm", "launch.dry_run=true")
    assert dry.execution == "submit"
    assert dry.execution_reason.endswith("(launch.dry_run: planned only, nothing started)")
    assert "dry_run" not in plan_for(tmp_path, "cluster=slurm", "launch.dry_run=false").execution_reason


def test_no_gpu_local_plans_only_and_says_why(tmp_path):
    plan = plan_for(tmp_path, "cluster=local")
    assert plan.execution == "plan-only" and "no GPU" in plan.execution_reason
    gpu_facts = cpu_facts(gpus=DetectedGpus("NVIDIA A40", 44.4, 2, "nvml"))
    assert plan_for(tmp_path, "cluster=local", facts=gpu_facts).execution == "run-local"


def tiny_model_dir(root: Path, **config) -> Path:
    model = root / "tiny-qwen"
    model.mkdir()
    hf_config = {
        "model_type": "qwen2",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 1000,
        "tie_word_embeddings": True,
        "max_position_embeddings": 32768,
        **config,
    }
    (model / "config.json").write_text(json.dumps(hf_config))
    return model


def test_local_model_config_json_wins_over_the_llm_table(tmp_path):
    model = tiny_model_dir(tmp_path)
    facts = cpu_facts(model_config=read_model_config(str(model)))
    plan = plan_for(tmp_path, f"actor_rollout_ref.model.path={model}", facts=facts)
    assert plan.llm["layers"] == 2 and plan.llm["head_dim"] == 16 and plan.llm["source"].endswith("config.json")
    # the llm/ group's default is no claim about the model: nothing to warn of
    assert not any("differs from llm=" in warning for warning in plan.warnings)
    named = plan_for(tmp_path, "llm=qwen2_5_7b", f"actor_rollout_ref.model.path={model}", facts=facts)
    assert named.llm["layers"] == 2  # the path wins over an llm= named too, and the conflict is said
    assert any("differs from llm=qwen2_5_7b" in warning for warning in named.warnings)


def test_an_llm_named_on_the_command_line_gives_the_architecture_of_any_path(tmp_path):
    """A base model and its Instruct share an architecture: llm=qwen2_5_32b describes Qwen/Qwen2.5-32B too."""
    plan = plan_for(tmp_path, "llm=qwen2_5_32b", "actor_rollout_ref.model.path=Qwen/Qwen2.5-32B")
    assert plan.llm.get("known") is not False and plan.llm["layers"] == 64 and plan.llm["path"] == "Qwen/Qwen2.5-32B"
    assert "llm=qwen2_5_32b" in plan.llm["source"]
    # without llm= on the command line the path is unknown: the default llm/ option says nothing of it
    unknown = plan_for(tmp_path, "actor_rollout_ref.model.path=Qwen/Qwen2.5-32B")
    assert unknown.llm["known"] is False


@pytest.mark.parametrize(
    "overrides, model_tag",
    [
        (["actor_rollout_ref.model.path=Qwen/Qwen3-1.7B"], "Qwen3-1.7B"),
        (["llm=qwen3_8b"], "qwen3_8b"),
        ([], "qwen2_5_7b"),
    ],
)
def test_wandb_tags_and_run_name_name_the_model_actually_used(tmp_path, overrides, model_tag):
    plan = plan_for(tmp_path, "gpu=a40", *overrides)
    assert plan.worker_env["WANDB_TAGS"].split(",") == ["a40", "standard", "guru_baseline", model_tag]
    # the W&B run's name too: a pasted model.path is not named after the llm/ default it replaced
    assert plan.verl["trainer"]["experiment_name"] == f"guru_baseline-{model_tag}-a40-standard"


def test_short_context_model_is_refused_with_the_arithmetic(tmp_path):
    model = tiny_model_dir(tmp_path, max_position_embeddings=4096)
    facts = cpu_facts(model_config=read_model_config(str(model)))
    cfg = compose_config(f"actor_rollout_ref.model.path={model}")
    plan = make_plan(cfg, facts, [], working_dir=tmp_path, python="python")
    with pytest.raises(UserError, match=r"\(12288\) exceeds the model's context \(4096 positions\)"):
        validate(cfg, plan, facts)


def normalized(text: str, plan) -> str:
    text = text.replace(plan.run_dir, "<run_dir>").replace(str(PROJECT), "<project>")
    return text.replace(os.path.expanduser("~"), "<home>")


@pytest.mark.parametrize("combo", [("gpu=a40", "algo=guru_baseline"), ("gpu=h100", "algo=mtl_pcgrad")])
def test_plan_matches_golden_record(tmp_path, combo, monkeypatch):
    """A change of the rendered plan or of the config verl receives shows up in review. If the change is intended,
    delete the record file (or run with RLAUNCH_REGOLD=1) and commit the new one. One home directory for every
    machine: the plan text cuts long values, and a longer home (CI's) would cut them elsewhere."""
    monkeypatch.setenv("HOME", "/home/golden")
    monkeypatch.delenv("RLAUNCH_DATA_DIR", raising=False)
    plan = plan_for(tmp_path, *combo, "mode=quick_test")
    record = {
        "render": normalized(render(plan), plan).splitlines(),
        "verl": json.loads(normalized(json.dumps(plan.verl, sort_keys=True), plan)),
    }
    path = GOLDEN / f"plan_{'_'.join(o.split('=')[1] for o in combo)}.json"
    if os.environ.get("RLAUNCH_REGOLD") or (not path.exists() and os.environ.get("CI") != "true"):
        path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    assert path.exists(), f"{path.name} is missing: CI never writes a golden record (RLAUNCH_REGOLD=1 locally)"
    assert record == json.loads(path.read_text()), f"plan changed: if intended, delete {path.name} and re-run"


@pytest.mark.parametrize(
    "overrides, ignored",
    [
        (["gpu=h100", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=40"], "ppo_micro_batch_size_per_gpu"),
        (  # verl's 72B LoRA example (examples/tuning/70b) still pastes the global, deprecated size
            ["gpu=h100", "actor_rollout_ref.actor.ppo_micro_batch_size=176"],
            "actor_rollout_ref.actor.ppo_micro_batch_size ",
        ),
        (
            [
                "gpu=a40",
                "actor_rollout_ref.actor.use_dynamic_bsz=false",
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
            ],
            None,  # the user chose the mode: nothing to say
        ),
        (["gpu=a40", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=9000"], None),
    ],
)
def test_a_pasted_micro_batch_the_profiles_token_packing_ignores_is_named(tmp_path, overrides, ignored):
    """verl's scripts set micro-batches; the GPU profiles pack by tokens (use_dynamic_bsz=true), so verl would ignore
    them silently."""
    warnings = [w for w in plan_for(tmp_path, *overrides).warnings if "ignored by verl" in w]
    if ignored is None:
        assert not warnings
    else:
        assert len(warnings) == 1 and ignored in warnings[0]
        assert "use_dynamic_bsz=false to use yours" in warnings[0]


def test_the_dumped_verl_config_reads_back_through_omegaconf_with_every_string_a_string():
    """verl reads verl_config.yaml through Hydra (OmegaConf's YAML loader), which takes 72e784279643, a run id seen
    in CI, for the float inf; Ray then refused it as WANDB_RUN_ID. Such strings are written quoted."""
    import yaml
    from omegaconf import OmegaConf

    from launch.run import YAML_DUMPER

    data = {"run_id": "72e784279643", "other": "1e5", "flag": "true", "count": "12", "path": "/r/72e7", "lr": 1e-6}
    text = yaml.dump(data, Dumper=YAML_DUMPER, sort_keys=False)
    assert OmegaConf.to_container(OmegaConf.create(text)) == data


def test_the_plan_reads_back_typed_from_its_run_directory(tmp_path):
    """plan.json holds the Plan; the job and the report tools read it back as the same Plan, typed. A key a newer
    rlaunch added is left out; a plan missing a field this one needs is refused with what to do."""
    plan = plan_for(tmp_path, "algo=guru_baseline")
    Path(plan.run_dir).mkdir(parents=True)
    save_plan(plan)
    assert load_plan(plan.run_dir) == plan
    assert isinstance(load_plan(plan.run_dir).cluster_settings.ray_timeout_s, int)
    path = Path(plan.run_dir) / "plan.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "from_a_newer_rlaunch": 1}))
    assert load_plan(plan.run_dir) == plan
    del data["driver"]
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match=r"plan.json is not a plan this rlaunch can read .*plan it again"):
        load_plan(plan.run_dir)


def test_the_plan_is_made_once_and_the_config_never_changes_after(tmp_path, monkeypatch):
    """The preflight's tune changes knobs BEFORE the plan: make_plan runs once, and cfg is what it planned."""
    from omegaconf import OmegaConf

    from launch import run

    planned_from = []
    make = run.make_plan

    def recording(cfg, *args, **kwargs):
        planned_from.append(OmegaConf.to_container(cfg, resolve=False))
        return make(cfg, *args, **kwargs)

    monkeypatch.setattr(run, "make_plan", recording)
    overrides = ["gpu=a40", "launch.preflight=tune", "launch.dry_run=true", f"cluster.shared_dir={tmp_path}"]
    cfg = compose_config(*overrides)
    plan = run.plan_job(cfg, overrides)
    assert len(planned_from) == 1 and OmegaConf.to_container(cfg, resolve=False) == planned_from[0]
    assert plan.preflight is not None and plan.preflight.changed
    assert plan.resources.mem_gb >= 1.2 * plan.preflight.host_ram_gib_per_node
    tuned = {change.key for change in plan.changed_from_verl if change.by == "launch.preflight=tune"}
    assert tuned == set(plan.preflight.changed)
