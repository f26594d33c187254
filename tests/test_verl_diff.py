"""A pasted verl script is verl's run plus a listed set of changes: every key of the dumped verl_config.yaml that
differs from what verl's own main_ppo composes from the script's overrides is in plan.json's changed_from_verl, with
the layer that set it, and nothing else differs.

verl's own composition is made here through Hydra's public compose API on verl's shipped config directory (as verl's
`@hydra.main(config_path="config", config_name="ppo_trainer")` does), independently of launch/verl_diff.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_here
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from launch.provenance import VERL_KEY
from launch.rundir import VERL_CONFIG_NAME, Change
from launch.schema import verl_config_source
from launch.verl_diff import (
    MISSING_IN_VERL,
    apply_changes,
    differences,
    dtype_key_message,
    missing_node_message,
    moved_key_message,
    overlap,
    retired_key_message,
    verl_composition,
)

HOME_DATA = "/home/user/data"

# verl's example scripts, their overrides as the shell passes them (variables at the scripts' defaults). None of them
# is used by another test.
SCRIPTS = {
    # https://github.com/verl-project/verl/blob/main/examples/grpo_trainer/run_qwen3_8b_fsdp.sh (DEVICE=gpu defaults)
    "run_qwen3_8b_fsdp": [
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=False",
        f"data.train_files=['{HOME_DATA}/gsm8k/train.parquet', '{HOME_DATA}/math/train.parquet']",
        f"data.val_files=['{HOME_DATA}/gsm8k/test.parquet', '{HOME_DATA}/math/test.parquet']",
        "data.train_batch_size=1024",
        "data.max_prompt_length=1024",
        "data.max_response_length=2048",
        "data.filter_overlong_prompts=True",
        "data.truncation='error'",
        "actor_rollout_ref.model.path=Qwen/Qwen3-8B",
        "actor_rollout_ref.model.use_remove_padding=True",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "actor_rollout_ref.actor.ppo_mini_batch_size=256",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=24576",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.actor.fsdp_config.param_offload=False",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        "actor_rollout_ref.rollout.n=5",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=24576",
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True",
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=24576",
        "actor_rollout_ref.ref.fsdp_config.param_offload=True",
        "trainer.balance_batch=True",
        'trainer.logger=["console","wandb"]',
        "trainer.project_name=verl_grpo_gsm8k_math",
        "trainer.experiment_name=qwen3_8b_grpo_vllm_fsdp",
        "trainer.n_gpus_per_node=8",
        "trainer.nnodes=1",
        "trainer.save_freq=20",
        "trainer.test_freq=5",
        "trainer.total_epochs=15",
    ],
    # https://github.com/volcengine/verl/blob/main/examples/grpo_trainer/run_qwen3-1.7b.sh (its mini-batch of 80 does
    # not divide its 1024-prompt batch; 64 here, the rest verbatim)
    "run_qwen3-1.7b": [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={HOME_DATA}/gsm8k/train.parquet",
        f"data.val_files={HOME_DATA}/gsm8k/test.parquet",
        "data.train_batch_size=1024",
        "data.max_prompt_length=512",
        "data.max_response_length=1024",
        "data.filter_overlong_prompts=True",
        "data.truncation='error'",
        "actor_rollout_ref.model.path=Qwen/Qwen3-1.7B",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "actor_rollout_ref.model.use_remove_padding=True",
        "actor_rollout_ref.model.use_liger=True",
        "actor_rollout_ref.model.use_fused_kernels=True",
        "actor_rollout_ref.model.fused_kernel_options.impl_backend=triton",
        "actor_rollout_ref.actor.ppo_mini_batch_size=64",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=10",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
        "actor_rollout_ref.actor.fsdp_config.param_offload=False",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=20",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        "actor_rollout_ref.rollout.n=3",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=20",
        "actor_rollout_ref.ref.fsdp_config.param_offload=True",
        "algorithm.use_kl_in_reward=False",
        "trainer.critic_warmup=0",
        "trainer.logger=['console','wandb']",
        "trainer.project_name='verl_grpo_example_gsm8k'",
        "trainer.experiment_name='qwen3_1_7b_function_rm'",
        "trainer.n_gpus_per_node=8",
        "trainer.nnodes=1",
        "trainer.save_freq=-1",
        "trainer.test_freq=5",
        "trainer.total_epochs=15",
    ],
    # https://github.com/volcengine/verl/blob/main/examples/grpo_trainer/run_qwen2-7b_seq_balance.sh (its defaults:
    # rollout_mode=async, rollout_name=sglang, return_raw_chat=True)
    "run_qwen2-7b_seq_balance": [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={HOME_DATA}/gsm8k/train.parquet",
        f"data.val_files={HOME_DATA}/gsm8k/test.parquet",
        "data.return_raw_chat=True",
        "data.train_batch_size=1024",
        "data.max_prompt_length=512",
        "data.max_response_length=1024",
        "data.filter_overlong_prompts=True",
        "data.truncation='error'",
        "actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "actor_rollout_ref.model.use_remove_padding=True",
        "actor_rollout_ref.actor.ppo_mini_batch_size=256",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=24000",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
        "actor_rollout_ref.actor.fsdp_config.param_offload=False",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "actor_rollout_ref.rollout.name=sglang",
        "actor_rollout_ref.rollout.mode=async",
        "actor_rollout_ref.rollout.multi_turn.format=hermes",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        "actor_rollout_ref.rollout.n=5",
        "actor_rollout_ref.ref.fsdp_config.param_offload=True",
        "algorithm.use_kl_in_reward=False",
        "trainer.critic_warmup=0",
        "trainer.logger=['console','wandb']",
        "trainer.project_name='verl_grpo_example_gsm8k'",
        "trainer.experiment_name='qwen2_7b_function_rm_kl1e-3'",
        "trainer.val_before_train=False",
        "trainer.n_gpus_per_node=8",
        "trainer.nnodes=1",
        "trainer.save_freq=20",
        "trainer.test_freq=5",
        "trainer.total_epochs=15",
    ],
}

# What rlaunch may change under algo=verl: the gpu profile's hardware knobs, the run directory, tracking.
ALGO_VERL_LAYERS = {"rlaunch: run dir", "rlaunch: tracking"}


def verl_own_config(overrides: list[str]) -> dict[str, Any]:
    """python -m verl.trainer.main_ppo <overrides>: verl's ppo_trainer composed with exactly these overrides."""
    with initialize_config_dir(config_dir=verl_config_source().removeprefix("file://"), version_base=None):
        cfg = compose("ppo_trainer", overrides=overrides)
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def planned(tmp_path: Path, *args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(plan.json, verl_config.yaml as verl loads it) of one dry run through the CLI."""
    result = run_here(*args, "launch.dry_run=json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    dumped = OmegaConf.to_container(OmegaConf.load(Path(plan["run_dir"]) / f"{VERL_CONFIG_NAME}.yaml"))
    dumped.pop(VERL_KEY)  # rlaunch's own provenance block: exempt
    return plan, dumped  # type: ignore[return-value]


def assert_listed(theirs: dict[str, Any], dumped: dict[str, Any], changes: list[Change]) -> None:
    """Every key that differs is covered by a listed change with a layer, and the listed changes are exactly the
    difference: verl's composition plus them is the dumped config."""
    for key, _, _ in differences(theirs, dumped):
        covering = [change for change in changes if overlap(key, change.key)]
        assert covering, f"{key} differs from verl's own config but is not in changed_from_verl"
        assert all(change.by for change in covering)
    assert apply_changes(theirs, changes) == dumped
    for change in changes:  # nothing listed that does not differ
        assert change.verl != change.value or type(change.verl) is not type(change.value), change


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_pasted_script_differs_from_verl_only_where_listed(tmp_path, script):
    overrides = SCRIPTS[script]
    plan, dumped = planned(tmp_path, *overrides, "gpu=h100")
    changes = [Change(**change) for change in plan["changed_from_verl"]]
    assert_listed(verl_own_config(overrides), dumped, changes)
    layers = {change.by for change in changes}
    # the default algo's hyper-parameters the script never set, and the profile's knobs, are each named
    assert "algo=guru_baseline" in layers and "gpu=h100" in layers
    by_key = {change.key: change for change in changes}
    assert by_key["actor_rollout_ref.actor.optim.weight_decay"].by == "algo=guru_baseline"
    assert by_key["trainer.default_local_dir"].by == "rlaunch: run dir"
    assert any("add algo=verl" in warning for warning in plan["warnings"])  # the way to verl's own algorithm
    assert "data.val_max_samples" not in by_key  # the default mode never cuts validation


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_algo_verl_changes_only_hardware_run_dir_and_tracking(tmp_path, script):
    overrides = SCRIPTS[script]
    plan, dumped = planned(tmp_path, *overrides, "gpu=a100_80", "algo=verl")
    changes = [Change(**change) for change in plan["changed_from_verl"]]
    assert_listed(verl_own_config(overrides), dumped, changes)
    assert {change.by for change in changes} <= ALGO_VERL_LAYERS | {"gpu=a100_80"}
    assert {change.key for change in changes if change.by == "rlaunch: tracking"} <= {
        "trainer.logger",
        "ray_kwargs.ray_init.runtime_env.env_vars",
    }
    assert plan["verl"]["trainer"]["total_epochs"] == 15  # the script's cadence: mode=verl changes none of it
    assert not any("add algo=verl" in warning for warning in plan["warnings"])


@pytest.mark.parametrize("written", ["'${trainer.total_epochs}'", "${trainer.total_epochs}"])
def test_an_interpolation_typed_on_the_command_line_is_verls_and_kept_as_typed(tmp_path, written):
    # Hydra's list of the run's overrides resolves a `${...}` inside each string when read item by item: the quoted
    # form then reached the diff as the string '5', listed as a change of rlaunch's
    overrides = ["trainer.total_epochs=5", f"trainer.test_freq={written}"]
    plan, dumped = planned(tmp_path, *overrides, "gpu=h100", "algo=verl")
    changes = [Change(**change) for change in plan["changed_from_verl"]]
    assert_listed(verl_own_config(overrides), dumped, changes)
    assert "trainer.test_freq" not in {change.key for change in changes}
    assert dumped["trainer"]["test_freq"] == 5
    assert f"trainer.test_freq={written}" in plan["overrides"]  # what the user typed, as the manifest keeps it


def test_an_unchanged_key_is_never_listed_and_a_missing_one_covers_its_subkeys():
    theirs = {"a": {"b": 1, "c": [1, 2]}, "d": True}
    ours = {"a": {"b": 1.0, "c": [1, 2], "new": {"x": 1, "y": 2}}, "d": 1}
    assert sorted(differences(theirs, ours)) == [("a.new", MISSING_IN_VERL, {"x": 1, "y": 2}), ("d", True, 1)]


@pytest.mark.parametrize(
    "overrides",
    [
        ["actor_rollout_ref.actor.optim.lr=3e-6", "trainer.total_epochs=2"],  # values no interpolation reads
        ["data.train_files=['/d/a.parquet','/d/b.parquet']", "trainer.logger=['console']", "data.truncation='error'"],
        ["+ray_kwargs.ray_init.num_gpus=8", "++trainer.balance_batch=false"],
        ["actor_rollout_ref.rollout.n=5", "actor_rollout_ref.model.path=Qwen/Qwen3-8B"],  # read by interpolations
        ["actor_rollout_ref.actor.fsdp_config={param_offload: true}"],  # a dict: Hydra merges it
        ["~actor_rollout_ref.actor.checkpoint"],
    ],
)
def test_verl_composition_is_what_verls_own_hydra_composes(overrides):
    assert verl_composition(overrides) == verl_own_config(overrides)


def test_a_key_only_rlaunchs_layers_have_is_not_verls():
    ours_only = "reward.custom_reward_function.reward_kwargs.timeout_s=10"  # algo/ adds reward_kwargs, verl has none
    assert verl_composition([ours_only, "trainer.total_epochs=3"]) == verl_own_config(["trainer.total_epochs=3"])


# verl's multi-turn examples pass a config of their own (examples/sglang_multiturn/config/gsm8k_multiturn_grpo.yaml
# of https://github.com/verl-project/verl, whose run_qwen2.5-3b_gsm8k_multiturn.sh passes `--config-path="$PROJECT_DIR/
# examples/sglang_multiturn/config" --config-name='gsm8k_multiturn_grpo'`): verl's base in its defaults, keys of its
# own over it. Its searchpath here is verl's installed config directory (theirs is relative to verl's checkout).
OWN_CONFIG = """\
hydra:
  searchpath:
    - {verl_config}

defaults:
  - ppo_trainer
  - _self_

data:
  max_prompt_length: 1024
  max_response_length: 1024
  train_batch_size: 256
  return_raw_chat: True

actor_rollout_ref:
  hybrid_engine: True
  rollout:
    name: sglang
    multi_turn:
      enable: True
      max_assistant_turns: 5
      max_user_turns: ${{actor_rollout_ref.rollout.multi_turn.max_assistant_turns}}
"""
MULTITURN_SCRIPT = [  # run_qwen2.5-3b_gsm8k_multiturn.sh's own overrides, the ones this test needs
    "algorithm.adv_estimator=grpo",
    "data.train_batch_size=128",  # the command line's value wins over the file's 256
    "actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct",
    "actor_rollout_ref.actor.ppo_mini_batch_size=128",
    "actor_rollout_ref.rollout.n=16",
    f"data.train_files={HOME_DATA}/gsm8k/train.parquet",
    f"data.val_files={HOME_DATA}/gsm8k/test.parquet",
    "trainer.total_epochs=15",
]


def own_config_dir(root: Path, body: str = OWN_CONFIG) -> Path:
    directory = root / "examples" / "config"
    directory.mkdir(parents=True)
    (directory / "gsm8k_multiturn_grpo.yaml").write_text(body.format(verl_config=verl_config_source()))
    return directory


def test_a_config_of_ones_own_over_verls_base_is_what_verls_hydra_composes_from_it(tmp_path):
    directory = own_config_dir(tmp_path)
    flags = [f"--config-path={directory}", "--config-name='gsm8k_multiturn_grpo'"]
    with initialize_config_dir(config_dir=str(directory), version_base=None):
        theirs = OmegaConf.to_container(compose("gsm8k_multiturn_grpo", overrides=MULTITURN_SCRIPT), resolve=True)
    plan, dumped = planned(tmp_path, *flags, *MULTITURN_SCRIPT, "gpu=a100_80", "algo=verl")
    changes = [Change(**change) for change in plan["changed_from_verl"]]
    assert_listed(theirs, dumped, changes)  # type: ignore[arg-type]
    assert {change.by for change in changes} <= ALGO_VERL_LAYERS | {"gpu=a100_80"}
    rollout = dumped["actor_rollout_ref"]["rollout"]
    assert rollout["name"] == "sglang" and rollout["multi_turn"]["enable"] is True  # the file's keys
    assert rollout["multi_turn"]["max_user_turns"] == 5  # its interpolation too
    assert dumped["data"]["train_batch_size"] == 128 and dumped["data"]["return_raw_chat"] is True


def test_a_key_ones_own_config_adds_and_the_command_line_deletes_is_not_credited_to_rlaunch(tmp_path):
    """verl's gsm8k_multiturn_grpo_server.yaml sets rollout.sglang_rollout_mode, which verl 0.9.1's tree lacks; a user
    deletes it with `~` as told. verl's Hydra deletes it too: it is no change, nor one "by rlaunch"."""
    body = OWN_CONFIG.replace("    name: sglang\n", "    name: sglang\n    sglang_rollout_mode: server\n")
    directory = own_config_dir(tmp_path, body)
    flags = [f"--config-path={directory}", "--config-name=gsm8k_multiturn_grpo"]
    deleted = "~actor_rollout_ref.rollout.sglang_rollout_mode"
    with initialize_config_dir(config_dir=str(directory), version_base=None):
        theirs = compose("gsm8k_multiturn_grpo", overrides=[*MULTITURN_SCRIPT, deleted])
        theirs = OmegaConf.to_container(theirs, resolve=True)
    plan, dumped = planned(tmp_path, *flags, *MULTITURN_SCRIPT, deleted, "gpu=a100_80", "algo=verl")
    changes = [Change(**change) for change in plan["changed_from_verl"]]
    assert "sglang_rollout_mode" not in dumped["actor_rollout_ref"]["rollout"]
    assert not [change for change in changes if "sglang_rollout_mode" in change.key], changes
    assert_listed(theirs, dumped, changes)  # type: ignore[arg-type]


def test_a_config_of_ones_own_that_rlaunch_cannot_read_is_one_line(tmp_path):
    directory = own_config_dir(
        tmp_path, OWN_CONFIG.replace("  - _self_", "  - override actor_rollout_ref: x\n  - _self_")
    )
    for flags, expected in [
        (
            [f"--config-path={directory}", "--config-name=gsm8k_multiturn_grpo"],
            f"{directory}/gsm8k_multiturn_grpo.yaml: defaults ['ppo_trainer', ",
        ),
        (
            ["--config-path=config", "--config-name=gsm8k_multiturn_grpo"],
            "--config-name=gsm8k_multiturn_grpo: ",
        ),
        (["--config-name=gsm8k_multiturn_grpo"], "--config-name=gsm8k_multiturn_grpo: rlaunch composes one of verl's"),
    ]:
        result = run_here(*flags, "gpu=h100", "launch.dry_run=json", cwd=tmp_path)
        assert result.returncode == 2 and not (tmp_path / "runs").exists(), result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"rlaunch: error: {expected}"), line
    relative = run_here("--config-path=config", "--config-name=gsm8k_multiturn_grpo", "gpu=h100", cwd=tmp_path)
    assert "trainer/config/gsm8k_multiturn_grpo.yaml does not exist (a relative --config-path is read against" in (
        relative.stderr
    )


@pytest.mark.parametrize(
    "key, base, now",
    [
        # verl's examples before 0.9 (ppo_trainer/run_gemma.sh and the other PPO scripts; its sandbox-fusion script)
        ("critic.model.fsdp_config.param_offload", "ppo_trainer", "critic.fsdp.param_offload"),
        ("critic.model.fsdp_config.param_offload", "ppo_megatron_trainer", "critic.megatron.param_offload"),
        ("reward_model.sandbox_fusion.url", "ppo_trainer", "reward.sandbox_fusion.url"),
        ("actor_rollout_ref.ppo_mini_batch_size", "ppo_trainer", "actor_rollout_ref.actor.ppo_mini_batch_size"),
    ],
)
def test_a_key_verl_has_elsewhere_is_named_where_it_is(key, base, now):
    message = moved_key_message(key, base)
    assert message is not None and message.startswith(f"unknown key '{key}': verl 0.9.1's {base} has no such key")
    assert f"write {now}=..." in message and message.endswith(f"+{key}=...")


@pytest.mark.parametrize(
    "key",
    [
        "actor_rollout_ref.rollout.gpu_memory_utilization",  # verl has it: not unknown
        "actor_rollout_ref.rollout.gpu_memory_utilisation",  # misspelt: the spelling is suggested instead
        "trainer.foo.path",  # a plain word (path, enable, url) says nothing of where a key went
        "actor_rollout_ref.actor.foo.enable",
    ],
)
def test_a_key_that_did_not_move_is_not_said_to_have(key):
    assert moved_key_message(key, "ppo_trainer") is None


def test_an_older_verl_scripts_key_is_one_line_naming_where_verl_has_it_now(tmp_path):
    result = run_here("algo=verl", "gpu=h100", "critic.model.fsdp_config.param_offload=False", cwd=tmp_path)
    assert result.returncode == 2 and not (tmp_path / "runs").exists()
    (line,) = result.stderr.strip().splitlines()
    assert "write critic.fsdp.param_offload=..." in line


def test_a_key_no_verl_config_has_and_verls_code_never_reads_is_said_to_be_refused_by_verl_too():
    # verl's older Megatron examples (grpo_trainer/run_qwen2-7b_seq_balance_math_megatron.sh and eleven more)
    grad = retired_key_message("actor_rollout_ref.actor.megatron.grad_offload", "ppo_megatron_trainer")
    assert grad is not None and grad.startswith(
        "unknown key 'actor_rollout_ref.actor.megatron.grad_offload' (did you mean 'param_offload'?): no verl 0.9.1 "
        "config has grad_offload and verl's code never reads it"
    )
    legacy = retired_key_message("trainer.use_legacy_worker_impl", "ppo_trainer")  # gspo_trainer/run_qwen30b_gspo.sh
    assert legacy is not None and "verl would refuse it too" in legacy
    assert retired_key_message("actor_rollout_ref.model.torch_dtype", "ppo_trainer") is None  # verl's code reads it
    assert retired_key_message("gpu.usable_gbb", "ppo_trainer") is None  # rlaunch's own key: its spelling hint only
    assert retired_key_message("critic.model.fsdp_config.param_offload", "ppo_trainer") is None  # moved, not retired


def test_a_key_under_a_node_verl_lacks_names_the_node_and_where_verl_has_one_of_that_name(tmp_path):
    """verl's curriculum example (sglang_multiturn/run_qwen0.5b_gsm8k_multiturn_curriculum.sh) sets
    data.sampler.class_name: verl 0.9.1 has no data.sampler (its sampler is trainer.v1.sampler), and class_name is a
    word verl's code uses, so neither the moved nor the retired message applied and the line said "fix the
    spelling"."""
    result = run_here("algo=verl", "gpu=h100", "data.sampler.class_name=RandomCurriculumSampler", cwd=tmp_path)
    assert result.returncode == 2 and not (tmp_path / "runs").exists()
    (line,) = result.stderr.strip().splitlines()
    assert (
        "unknown key 'data.sampler.class_name': verl 0.9.1's ppo_trainer has no data.sampler and would refuse it"
        in line
    )
    assert "it has a sampler at trainer.v1.sampler (" in line and "custom_sampler" in line
    typo = missing_node_message("actor_rollout_ref.actor.fsdp_configs.x", "ppo_trainer")
    assert typo is not None and typo.startswith("unknown key 'actor_rollout_ref.actor.fsdp_configs.x' (did you mean")
    assert missing_node_message("actor_rollout_ref.actor.fsdp_config.nope", "ppo_trainer") is None  # only the leaf
    assert missing_node_message("actor_rollout_ref.actor.fsdp_config.param_offload", "ppo_trainer") is None  # verl's
    assert missing_node_message("gpu.nope.x", "ppo_trainer") is None  # rlaunch's own root


def test_a_dtype_set_where_verl_has_none_lists_verls_dtypes_per_role(tmp_path):
    """verl's own CISPO example (cispo_trainer/run_cispo_qwen2_5_0_5b_gsm8k.sh) sets
    actor_rollout_ref.model.torch_dtype, which verl 0.9.1 refuses: the line names the dtypes verl has, with what each
    sets and its default."""
    result = run_here("algo=verl", "gpu=h100", "actor_rollout_ref.model.torch_dtype=bfloat16", cwd=tmp_path)
    assert result.returncode == 2 and not (tmp_path / "runs").exists()
    (line,) = result.stderr.strip().splitlines()
    assert "unknown key 'actor_rollout_ref.model.torch_dtype': verl 0.9.1 sets no dtype there" in line
    assert "actor_rollout_ref.actor.fsdp_config.model_dtype=fp32 (the parameters FSDP keeps)" in line
    assert "actor_rollout_ref.rollout.dtype=bfloat16 (the compute dtype)" in line
    assert "lora.dtype" not in line  # verl's null placeholder is no dtype to set
    # verl's own keys are no unknown ones; a name verl has no dtype under is left to the other messages
    assert dtype_key_message("actor_rollout_ref.rollout.dtype", "ppo_trainer") is None
    assert dtype_key_message("actor_rollout_ref.model.path_dtypes", "ppo_trainer") is None


def test_an_environment_value_is_read_once_when_planned_and_verl_never_resolves_it_again(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A pasted `${oc.env:X}` is resolved as the run is planned (verl gets what was validated), and the plan says
    what it became. verl resolves the whole config it reads (main_ppo's OmegaConf.resolve): the command line that
    rlaunch's provenance record keeps must not carry the interpolation into the job, where a node without X would
    stop verl as it starts."""
    monkeypatch.setenv("RLAUNCH_PLANNED_NAME", "abc")
    result = cli(
        "algo=verl",
        "gpu=h100",
        "llm=qwen2_5_0_5b",
        "trainer.experiment_name=run-${oc.env:RLAUNCH_PLANNED_NAME}",
        "launch.skip_checks=[model,data]",
        f"launch.runs_dir={tmp_path}",
        "launch.dry_run=json",
    )
    monkeypatch.delenv("RLAUNCH_PLANNED_NAME")  # the job's node: the variable is not there
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads(result.stdout)
    said = [w for w in plan["warnings"] if "read this machine's environment as the run was planned" in w]
    assert said and "verl gets run-abc" in said[0], plan["warnings"]
    dumped = OmegaConf.load(Path(plan["run_dir"]) / f"{VERL_CONFIG_NAME}.yaml")
    # as verl does (main_ppo, then the trainer's trackers), here where RLAUNCH_PLANNED_NAME is not set
    OmegaConf.to_container(dumped, resolve=True)
    OmegaConf.resolve(dumped)
    tracked = OmegaConf.to_container(dumped, resolve=True)
    assert dumped.trainer.experiment_name == tracked["trainer"]["experiment_name"] == "run-abc"
    command = "trainer.experiment_name=run-${oc.env:RLAUNCH_PLANNED_NAME}"
    assert command in dumped[VERL_KEY].command and command in tracked[VERL_KEY]["command"]


@pytest.mark.parametrize("prefix", ["", "++"])
def test_a_whole_value_replaces_the_profiles_as_it_replaces_verls_default(cli, tmp_path: Path, prefix: str):
    """gpu=a40 sets override_optimizer_config to {fused: true} where verl's default is null. A pasted dict for it is
    the user's whole value, as in verl's own composition: Hydra had refused the plain one ("unknown key") and merged
    the `++` one into {fused: true, foreach: true}, which torch's AdamW refuses as the worker builds it."""
    key = "actor_rollout_ref.actor.optim.override_optimizer_config"
    result = cli(
        "algo=verl",
        "gpu=a40",
        "llm=qwen2_5_0_5b",
        f"{prefix}{key}={{foreach:true}}",
        "launch.skip_checks=[model,data]",
        f"launch.runs_dir={tmp_path}",
        "launch.dry_run=json",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads(result.stdout)
    assert plan["verl"]["actor_rollout_ref"]["actor"]["optim"]["override_optimizer_config"] == {"foreach": True}
    assert not [change for change in plan["changed_from_verl"] if change["key"].startswith(key)]
    assert f"rlaunch: note: {key}={{foreach:true}} replaces what gpu=a40 set there ({key}.fused)" in result.stderr


def test_a_whole_value_replaces_the_profile_of_each_job_of_a_gpu_sweep(cli, tmp_path: Path):
    """In a sweep over gpu= each job has its own profile: a40's job had died in Hydra ("Key 'foreach' is not in
    struct", said as an unknown key) where the same run planned alone was right."""
    key = "actor_rollout_ref.actor.optim.override_optimizer_config"
    result = cli(
        "-m",
        "algo=verl",
        "gpu=h100,a40",
        "llm=qwen2_5_0_5b",
        f"{key}={{foreach:false}}",
        "launch.skip_checks=[model,data]",
        f"launch.runs_dir={tmp_path}",
        "launch.dry_run=json",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    plans = [json.loads(line) for line in result.stdout.splitlines()]
    assert [plan["gpu_profile"] for plan in plans] == ["h100", "a40"]
    for plan in plans:
        assert plan["verl"]["actor_rollout_ref"]["actor"]["optim"]["override_optimizer_config"] == {"foreach": False}
        assert not [change for change in plan["changed_from_verl"] if change["key"].startswith(key)]
    assert result.stderr.count("replaces what gpu=a40 set there") == 1 and "gpu=h100 set" not in result.stderr

    kwargs = "reward.custom_reward_function.reward_kwargs"  # the algo's: rewritten once, before the sweep splits
    guru = cli("-m", "gpu=h100,a40", f"{kwargs}={{}}", "launch.skip_checks=[model,data]", "launch.dry_run=json")
    assert guru.returncode == 0, guru.stderr[-2000:]
    assert [
        json.loads(line)["verl"]["reward"]["custom_reward_function"]["reward_kwargs"]
        for line in guru.stdout.splitlines()
    ] == [{}, {}]


def test_a_key_the_user_made_follow_another_is_credited_to_the_layer_that_moved_that_one(cli, tmp_path: Path):
    """`max_model_len=${...max_num_batched_tokens}`: the value changed because gpu=h100 set the one it reads, as with
    verl's own interpolations (critic.use_dynamic_bsz follows the actor's)."""
    result = cli(
        "algo=verl",
        "gpu=h100",
        "llm=qwen2_5_0_5b",
        "actor_rollout_ref.rollout.max_model_len=${actor_rollout_ref.rollout.max_num_batched_tokens}",
        "launch.skip_checks=[model,data]",
        f"launch.runs_dir={tmp_path}",
        "launch.dry_run=json",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    changes = {change["key"]: change for change in json.loads(result.stdout)["changed_from_verl"]}
    followed = changes["actor_rollout_ref.rollout.max_num_batched_tokens"]
    assert changes["actor_rollout_ref.rollout.max_model_len"]["by"] == followed["by"] == "gpu=h100"
