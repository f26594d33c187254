"""Bad values (wrong types, zero and negative sizes, fractions out of range, lists without brackets, requeues that
cannot finish the run) through launch/run.py: one line on stderr naming the key and the value, exit 2, and nothing
left under the runs directory; values at the edges of the ranges still plan.

The CLI runs in this process (launch/run.py executed as __main__, exactly what `python launch/run.py` runs): a
subprocess costs ~2-4 s of interpreter and import start-up per case, and there are dozens of cases. Two cases also run
as a real subprocess, to show the two agree.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path

import pytest
from conftest import compose_config, run_cli, run_here
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ValidationError
from test_readiness import dry_run, submission, tiny_run

from launch import choices, ranges, readiness
from launch.errors import UserError


@cache
def composed(*overrides: str) -> DictConfig:
    return compose_config(*overrides)


def base_config(key: str = "") -> DictConfig:
    """The default composed config (Megatron's for a key of its own, with a critic for a critic's key), a copy per use
    (composing verl's tree takes ~1 s)."""
    megatron = ["backend=megatron"] if ".megatron." in key else []
    critic = ["algorithm.adv_estimator=gae"] if key.startswith("critic.") or megatron else []
    return copy.deepcopy(composed(*megatron, *critic))


def left_behind(directory: Path) -> list[str]:
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


# override(s) -> a fragment of the one line. The first override's key and value must appear in the line.
BAD_VALUES: list[tuple[tuple[str, ...], str]] = [
    (("data.train_batch_size=abc",), "must be an integer >= 1 (verl's default is the int 1024)"),
    (("data.train_batch_size=-512",), "must be an integer >= 1"),
    (("data.train_batch_size=null",), "must be an integer >= 1"),
    (("data.val_batch_size=0",), "must be an integer >= 1 or null"),
    (("actor_rollout_ref.actor.ppo_mini_batch_size=0",), "(verl's ActorConfig.ppo_mini_batch_size is int)"),
    (("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=0",), "is Optional[int]"),
    (("actor_rollout_ref.rollout.n=five",), "must be an integer >= 1 (verl's RolloutConfig.n is int)"),
    (("actor_rollout_ref.rollout.n=2.5",), "must be an integer >= 1"),
    (("actor_rollout_ref.rollout.n=true",), "must be an integer >= 1"),
    (("actor_rollout_ref.rollout.val_kwargs.n=0",), "(verl's SamplingConfig.n is int)"),
    (("actor_rollout_ref.rollout.gpu_memory_utilization=1.5",), "must be a number > 0 and <= 1"),
    (("actor_rollout_ref.rollout.top_p=1.01",), "must be a number > 0 and <= 1 (verl's RolloutConfig.top_p is float)"),
    (("actor_rollout_ref.rollout.top_k=-2",), "must be an integer >= -1 (verl's RolloutConfig.top_k is int)"),
    (("actor_rollout_ref.rollout.val_kwargs.top_k=-5",), "which refuse it when generating"),
    (("actor_rollout_ref.rollout.dtype=bf16",), "bfloat16"),
    (("actor_rollout_ref.actor.optim.lr=-1",), "must be a number > 0 (verl's OptimizerConfig.lr is float); verl 0.9.1"),
    (("actor_rollout_ref.actor.optim.lr=0",), "a negative rate climbs the loss"),
    (("actor_rollout_ref.actor.optim.lr=nan",), "must be a number > 0"),
    (("actor_rollout_ref.actor.clip_ratio=-0.2",), "clip range turned inside out"),
    (("actor_rollout_ref.actor.optim.weight_decay=-1",), "would fail as the worker builds its optimizer (torch's"),
    (("critic.optim.lr=0", "algorithm.adv_estimator=gae"), "must be a number > 0 (verl's OptimizerConfig.lr is float)"),
    (("data.dataloader_num_workers=-1",), "would fail as the trainer builds its data loader (torch's DataLoader)"),
    (("actor_rollout_ref.actor.fsdp_config.fsdp_size=3",), "a device mesh of 8 GPUs // 3 x 3 as the worker starts"),
    (("actor_rollout_ref.actor.clip_ratio_c=1",), "asserts clip_ratio_c > 1.0"),
    (("algorithm.kl_ctrl.kl_coef=-1",), "(verl's KLControlConfig.kl_coef is float)"),
    (("trainer.total_epochs=0",), "verl 0.9.1 would train 0 steps"),
    (("algorithm.adv_estimator=grpoo",), "not one of verl's advantage estimators (core_algos.py): gae, gdpo,"),
    (("actor_rollout_ref.actor.policy_loss.loss_mode=bogus",), "would fail at the first actor update"),
    (("trainer.logger=[console,wandbb]",), "wandbb is not one of verl's tracking backends (utils/tracking.py): wandb,"),
    (("reward.reward_manager.name=bogus",), "not one of the reward managers verl registers (experimental/reward_loop"),
    # verl 0.9.1's main_ppo never reads the legacy reward settings (only its fully-async entry migrates them)
    (
        ("reward_model.reward_manager=prime",),
        "reward_model.reward_manager=prime: verl 0.9.1's main_ppo never reads the legacy reward_model.* settings (only "
        "its fully-async entry moves them to reward.*), so the run would silently go without it; write "
        "reward.reward_manager.name=prime",
    ),
    (("custom_reward_function.path=/r.py",), "so the run would silently go without it; write reward.custom_reward_fun"),
    (("sandbox_fusion.url=http://sandbox:8080",), "write reward.sandbox_fusion.url=http://sandbox:8080"),
    (("reward_model.num_workers=4",), "write reward.num_workers=4"),
    # the legacy FSDP reward worker's switches: 0.9.1's reward model has none, and another role's is no home for them
    (("reward_model.model.use_remove_padding=true",), "verl 0.9.1 has no such reward-model setting and would"),
    (("reward_model.model.fsdp_config.param_offload=true",), "reward.reward_model.rollout.*), and reward_model.*"),
    (("trainer.resume_mode=bogus",), "not one of the resume modes verl's trainer handles (trainer/ppo/v1/trainer_ba"),
    (("trainer.resume_mode=resume_path",), "verl 0.9.1 asserts a path to a checkpoint's global_step_<N> folder"),
    (("data.truncation=cut",), "not one of verl's truncation modes (utils/torch_functional.py): left, right, middle"),
    (("actor_rollout_ref.model.enable_gradient_checkpointing=off",), "would take 'off' for true"),
    (
        ("data.max_response_length=32768",),  # the root cause, before the token budgets it would overfill
        "(36864) exceeds the model's context (32768 positions): shorten them to 32768 in all (e.g. data.max_respon",
    ),
    (("actor_rollout_ref.rollout.max_model_len=40000",), "exceeds the model's context (32768 positions); verl 0.9.1"),
    (("actor_rollout_ref.rollout.max_model_len=4096",), "leaves no room to generate after a prompt of data.max_prompt"),
    (("actor_rollout_ref.rollout.max_num_batched_tokens=100",), "vLLM refuses to start (max_num_batched_tokens must"),
    (("actor_rollout_ref.actor.strategy=fsdp3",), "not one of the engines verl registers for a language_model"),
    (("actor_rollout_ref.actor.strategy=megatron",), "which the composed tree (backend=fsdp) lacks"),
    (("actor_rollout_ref.actor.strategy=torchtitan",), "the torchtitan engine's memory and layout are not modelled"),
    (
        ("critic.strategy=torchtitan", "algorithm.adv_estimator=gae"),
        "verl registers for a value_model on CUDA (workers/engine): fsdp, fsdp2, megatron, veomni; verl 0.9.1 would",
    ),
    (("actor_rollout_ref.actor.strategy=fsdp", "backend=megatron"), "write backend=fsdp"),
    (("data.filter_overlong_prompts=maybe",), "must be true or false (verl's default is the bool"),
    (("actor_rollout_ref.actor.use_kl_loss=",), "(empty: a shell variable the script never set?); verl 0.9.1 would"),
    (
        ("actor_rollout_ref.rollout.temperature=0", "actor_rollout_ref.rollout.n=8"),
        "samples greedily: the rollout.n=8 responses to a prompt are the same, so algorithm.adv_estimator=grpo's "
        "advantages are all 0 and verl 0.9.1 would train on nothing",
    ),
    (("trainer.n_gpus_per_node=0",), "must be an integer >= 1"),
    (("launch.preflight.policy=fix",), "launch.preflight holds a single value, not keys of its own: write launch.pre"),
    (("trainer.save_freq=0",), "must be -1 (never) or an integer >= 1"),
    (("trainer.test_freq=-5",), "treats every value <= 0 as never"),
    (("trainer.max_actor_ckpt_to_keep=0",), "keeps every checkpoint for 0 or less"),
    (("trainer.max_critic_ckpt_to_keep=-1",), "must be an integer >= 1 or null"),
    (("mode.time_budget_min=-5",), "must be an integer > 0 (rlaunch's ModeSettings.time_budget_min is int)"),
    (("mode.time_budget_min=abc",), "mode.time_budget_min=abc: must be a whole number of minutes"),
    (("mode.checkpoint_every_min=0",), "must be an integer >= 1 or null (rlaunch's ModeSettings.checkpoint_every_min"),
    (("cluster.max_requeues=-1",), "must be an integer >= 0 (rlaunch's ClusterSettings.max_requeues is int)"),
    (("trainer.logger=console,wandb",), "write a list in brackets (trainer.logger=[console,wandb])"),
    (
        ("data.train_files=~/data/train.parquet",),  # verl's examples write $HOME/data/...: Hydra refuses a bare ~
        "Hydra takes no unquoted ~; write data.train_files=$HOME/data/train.parquet (the shell expands it; verl does "
        "not)",
    ),
    (("~trainer.logger",), "~trainer.logger deletes 'trainer.logger', which the run reads: set a value instead"),
    # any key of verl's own config: verl reads it (struct mode) as it builds its datasets, its workers, ...
    (("~data.val_files",), "~data.val_files deletes 'data.val_files', which the run reads: set a value instead"),
    (("~actor_rollout_ref.rollout.name",), "deletes 'actor_rollout_ref.rollout.name', which the run reads"),
    (("data.train_files=a.parquet,b.parquet",), "add -m to sweep over a.parquet, b.parquet"),
    # verl's words it only meets in the job (read from its source: core_algos, rollout registry, torch_dtypes)
    (("actor_rollout_ref.rollout.mode=asyn",), "asyn is not one of the rollout modes verl registers"),
    (
        ("actor_rollout_ref.actor.kl_loss_type=low-var-kl", "actor_rollout_ref.actor.use_kl_loss=true"),
        "low-var-kl is not one of verl's KL estimators",
    ),
    (("algorithm.kl_ctrl.type=adaptiv", "algorithm.use_kl_in_reward=true"), "adaptiv is not one of verl's KL"),
    (("actor_rollout_ref.actor.fsdp_config.model_dtype=bf16x",), "bf16x is not one of verl's precisions"),
    (("algorithm.adv_estimator=null",), "algorithm.adv_estimator=null: choose one of verl's advantage estimators"),
    # FSDPOptimizerConfig's bare asserts: verl's own refusal names neither the key nor the words
    (
        ("actor_rollout_ref.actor.optim.lr_scheduler_type=cosinee",),
        "cosinee is not one of verl's LR schedules (FSDPOptimizerConfig, workers/config/optimizer.py): constant, "
        "cosine",
    ),
    (("actor_rollout_ref.actor.optim.warmup_style=cosinee",), "not one of verl's LR schedules"),
    (("critic.optim.lr_scheduler_type=linear", "algorithm.adv_estimator=gae"), "bare AssertionError"),
    (
        ("actor_rollout_ref.actor.use_dynamic_bsz=false", "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true"),
        "verl 0.9.1 asserts they are equal as its actor-rollout workers start",
    ),
    # a ${...} that cannot resolve is the user's: one line naming the key, not omegaconf's traceback
    (("data.train_batch_size=${oc.env:RLAUNCH_TEST_UNSET}",), "reads the environment variable RLAUNCH_TEST_UNSET"),
    (("data.max_response_length=${data.nope}",), "its value refers to data.nope, which the config does not have"),
    (("actor_rollout_ref.actor.optim.clip_grad=-1",), "must be a number > 0 (verl's OptimizerConfig.clip_grad"),
    (("actor_rollout_ref.actor.optim.min_lr_ratio=2",), "verl 0.9.1 asserts 0 <= min_lr_ratio <= 1"),
    (("actor_rollout_ref.actor.optim.betas=0.9",), "must be two decay rates in [0, 1)"),
    (("actor_rollout_ref.actor.optim.optimizer=AdamWW",), "torch.optim has no such class (did you mean 'AdamW'?)"),
    (("actor_rollout_ref.actor.optim.betas=[0.9,1.5]",), "must be two decay rates in [0, 1)"),
    (
        ("actor_rollout_ref.actor.optim.optimizer_impl=torch.optimm",),
        "torch has no module optimm (did you mean 'optim'?)",
    ),
    (("actor_rollout_ref.model.path=",), "is empty (a shell variable the script never set?)"),
    (("trainer.total_epochs='15'",), "it is the string '15': ${oc.env:...} gives strings"),
    # sbatch's numbers, the run directory's place, the option names, Ray's address
    (("cluster.mem_gb=-1", "cluster=slurm"), "must be an integer >= 1 or null"),
    (("cluster.signal_delay_s=-1", "cluster=slurm"), "must be an integer >= 0"),
    (("cluster.time_margin_min=-5", "cluster=slurm"), "must be an integer >= 0"),
    (("launch.sweep_id=../../etc",), "a sweep id is one directory name"),
    (("cluster.shared_dir=''",), "is empty: give the directory"),
    (("launch.runs_dir=/proc/nope",), "cannot create /proc/nope (No such file or directory)"),
    (("cluster.name=slurm", "cluster=local"), "is the name of the cluster option chosen, not a setting"),
    (("cluster=ray",), "cluster=ray needs cluster.address=http://<head>:8265"),
    (("+launch.dryrun=true",), "launch has no setting dryrun (did you mean 'dry_run'?), and nothing reads a new one"),
    (("cluster.address=ray://127.0.0.1:10001", "cluster=ray"), "Ray's job API is the head's dashboard URL"),
    # verl's docs advise it under SLURM, but rlaunch's job joins the Ray it started: Ray refuses a size on joining
    (
        ("ray_kwargs.ray_init.num_cpus=64",),
        "rlaunch starts verl on the Ray it sizes from the allocation (cluster.cpus_per_task, trainer.n_gpus_per_node, "
        "SLURM's), and verl 0.9.1's ray.init joining it would fail as the job starts (Ray: When connecting to an "
        "existing cluster, num_cpus must not be provided): drop ray_kwargs.ray_init.num_cpus",
    ),
    # peft reads a string target_modules as a regex over whole module names: a bare word matches no layer
    (
        ("actor_rollout_ref.model.target_modules=all_linear", "actor_rollout_ref.model.lora_rank=8"),
        "a bare word matches no layer (did you mean 'all-linear'?)",
    ),
    (
        ("actor_rollout_ref.model.target_modules='.*(q|v_proj'", "actor_rollout_ref.model.lora_rank=8"),
        "peft reads a string as a regular expression, and this one does not compile",
    ),
    (
        (
            "actor_rollout_ref.model.target_modules='.*(q|v)_proj'",
            "actor_rollout_ref.model.lora_rank=8",
            "actor_rollout_ref.rollout.name=sglang",
        ),
        "SGLang server cannot serve LoRA on a regex target_modules",
    ),
    (
        ("critic.loss_agg_mode=token_mean", "algorithm.adv_estimator=gae"),
        "token_mean is not one of verl's loss aggregations (core_algos.agg_loss): seq-mean-token-mean",
    ),
    (
        ("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=0", "backend=megatron"),
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=0: must be an integer >= 1",
    ),
    (
        ("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2.0", "backend=megatron"),
        "tensor_model_parallel_size=2.0: must be an integer >= 1 (verl's McoreEngineConfig",
    ),
    (
        ("actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=100", "actor_rollout_ref.actor.use_kl_loss=true"),
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu (100) cannot hold one sequence",
    ),
    (
        ("critic.ppo_mini_batch_size=100", "algorithm.adv_estimator=gae", "actor_rollout_ref.rollout.n=5"),
        "a critic mini-batch of 500 sequences (critic.ppo_mini_batch_size 100 x rollout.n 5) does not split over",
    ),
    (
        ("data.train_batch_size=1024", "actor_rollout_ref.actor.ppo_mini_batch_size=80", "trainer.use_v1=false"),
        "1024 % 80 = 64; make the batch a multiple of the mini-batch (e.g. ppo_mini_batch_size=64 or 128), or use "
        "verl's v1 trainer (trainer.use_v1=true), which pads the batch; verl 0.9.1 stops at the first actor update",
    ),
    # values verl 0.9.1 takes silently and then trains wrongly, or fails with only in the job
    (
        ("actor_rollout_ref.model.lora_alpha=0", "actor_rollout_ref.model.lora_rank=8"),
        "must be an integer > 0 (verl's HFModelConfig.lora_alpha is int); verl 0.9.1 would run it, LoRA's update "
        "scaled by alpha / rank: 0 trains nothing",
    ),
    # a TP that splits no head count is the cause, not a symptom of too few GPUs (the search keeps the run's TP)
    (
        (
            "actor_rollout_ref.rollout.tensor_model_parallel_size=3",
            "gpu=a40",
            "llm=qwen2_5_32b",
            "trainer.nnodes=2",
            "launch.dry_run=false",
        ),
        "(3) does not split the model's 40 attention heads (qwen2_5_32b): vllm refuses it as the engine starts",
    ),
    # verl asserts a Ulysses size that splits the heads as the workers patch the model (monkey_patch.py)
    (
        ("actor_rollout_ref.actor.ulysses_sequence_parallel_size=8",),
        "(8) does not split the model's 28 attention heads (qwen2_5_7b): verl 0.9.1 asserts it as the workers patch "
        "the model (each rank of the Ulysses group takes a whole share of the heads); choose one of 1, 2, 4",
    ),
    (
        ("critic.fsdp.ulysses_sequence_parallel_size=8", "algorithm.adv_estimator=gae"),
        "critic.fsdp.ulysses_sequence_parallel_size (8) does not split the model's 28 attention heads",
    ),
    # Megatron-core's words (not installed here): verl's own yaml comments name inverse_square_root and a constant WSD
    (
        ("actor_rollout_ref.actor.optim.lr_decay_style=inverse_square_root", "backend=megatron"),
        "inverse_square_root is not one of Megatron-core's LR decay styles (OptimizerParamScheduler): constant, "
        "linear, cosine, inverse-square-root, WSD",
    ),
    (
        (
            "actor_rollout_ref.actor.optim.lr_wsd_decay_style=constant",
            "actor_rollout_ref.actor.optim.lr_decay_style=WSD",
            "backend=megatron",
        ),
        "constant is not one of Megatron-core's WSD decay styles (OptimizerParamScheduler): linear, cosine",
    ),
    (
        ("actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=ful", "backend=megatron"),
        "ful is not one of Megatron-core's recompute granularitys (TransformerConfig): full, selective",
    ),
    (
        ("actor_rollout_ref.model.lora.rank=-1", "backend=megatron"),
        "must be an integer >= 0 (verl's default is the int 0); verl 0.9.1 would quietly train every parameter",
    ),
    (("actor_rollout_ref.rollout.agent.num_workers=0",), "splitting the batch over no workers"),
    (("reward.num_workers=-1",), "must be an integer >= 1 (verl's RewardConfig.num_workers is int); verl 0.9.1 would"),
    (
        ("actor_rollout_ref.rollout.agent.default_agent_loop=tool_agnet",),
        "tool_agnet is not one of the agent loops verl registers (experimental/agent_loop): single_turn_agent, "
        "tool_agent; verl 0.9.1 would fail at the first rollout",
    ),
    (
        ("algorithm.rollout_correction.rollout_is=tokenn",),
        "tokenn is not one of verl's importance-sampling levels (trainer/ppo/rollout_corr_helper.py; null for none): "
        "sequence, token",
    ),
    (
        ("algorithm.pf_ppo.reweight_method=poww", "algorithm.use_pf_ppo=true"),
        "poww is not one of verl's PF-PPO reweighting methods (core_algos.compute_pf_ppo_reweight_data): max_min, "
        "max_random, pow",
    ),
    (("data.seed=abc",), "data.seed=abc: must be an integer >= 0 or null"),
    (("critic.ppo_epochs=0", "algorithm.adv_estimator=gae"), "verl 0.9.1 would run it, never updating the critic"),
    (
        ("critic.fsdp.ulysses_sequence_parallel_size=3", "algorithm.adv_estimator=gae"),
        "critic.fsdp.ulysses_sequence_parallel_size (3) does not divide 8 GPUs",
    ),
    (
        ("critic.ulysses_sequence_parallel_size=2", "algorithm.adv_estimator=gae"),
        "unlike the actor's, never copies this deprecated key there, so the critic would run with SP 1: write "
        "critic.fsdp.ulysses_sequence_parallel_size=2 instead",
    ),
    # verl's engines skip every optimizer step whose gradient norm is not finite: a NaN coefficient trains nothing
    (("actor_rollout_ref.actor.entropy_coeff=nan",), "actor_rollout_ref.actor.entropy_coeff=nan: must be a finite"),
    (("algorithm.kl_ctrl.horizon=0",), "algorithm.kl_ctrl.horizon=0: must be an integer > 0"),
    (("actor_rollout_ref.rollout.prompt_length=-1",), "keeping each prompt's last N tokens (-1: all but the first"),
]


def outside(allowed: ranges.Range) -> float:
    """A value just outside `allowed`: below its low end."""
    return allowed.low if allowed.low_open else allowed.low - 1


@pytest.mark.parametrize(("key", "allowed"), list(ranges.RANGES.items()), ids=list(ranges.RANGES))
def test_every_key_of_the_range_table_refuses_a_value_outside_and_a_word(key: str, allowed: ranges.Range):
    """The whole table, on a config composed once (the CLI cases run a handful of them end to end)."""
    for value in (outside(allowed), "many"):
        cfg = base_config(key)
        try:
            OmegaConf.update(cfg, key, value, force_add=False)
        except ValidationError:  # our own roots are typed by launch/schema.py: a word never composes
            assert ranges.schema_field_type(key) is not None and isinstance(value, str), key
            continue
        with pytest.raises(UserError, match=rf"^{re.escape(key)}={value}: must be "):
            ranges.check_ranges(cfg)
    ranges.check_ranges(base_config(key))


@pytest.mark.parametrize(("overrides", "fragment"), BAD_VALUES, ids=[" ".join(o) for o, _ in BAD_VALUES])
def test_bad_value_is_one_line_exit_2_and_leaves_nothing(cli, tmp_path: Path, overrides: tuple[str, ...], fragment):
    result = cli(*overrides, "launch.dry_run=true")
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlaunch: error: "), result.stderr[-3000:]
    key, _, value = overrides[0].partition("=")
    assert key in lines[0] and value.strip("'") in lines[0], lines[0]  # the value as verl would get it
    assert fragment in lines[0], lines[0]
    assert left_behind(tmp_path) == [], "a refusal leaves no directory behind (not even Hydra's .hydra/)"


@pytest.mark.parametrize(
    "overrides",
    [("actor_rollout_ref.actor.ppo_mini_batch_size=0",), ("trainer.logger=console,wandb", "cluster=local")],
    ids=["range", "ambiguous-list"],
)
def test_the_real_cli_in_a_subprocess_says_the_same(cli, tmp_path: Path, overrides: tuple[str, ...]):
    in_process = cli(*overrides)
    (tmp_path / "subprocess").mkdir()
    real = run_cli(*overrides, cwd=tmp_path / "subprocess")
    assert in_process.returncode == real.returncode == 2
    assert in_process.stderr == real.stderr
    assert left_behind(tmp_path) == ["subprocess"]


def test_a_pasted_rollout_dynamic_batching_switch_brings_the_actors_along(cli, tmp_path: Path):
    """verl asserts actor.use_dynamic_bsz == rollout.log_prob_use_dynamic_bsz (engine_workers.py); the gpu profile
    turns the actor's on, and a script that turns the rollout's off would die as its workers start."""
    result = cli("actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=false", "launch.dry_run=json")
    assert result.returncode == 0, result.stderr[-3000:]
    plan = json.loads(result.stdout)
    arr = plan["verl"]["actor_rollout_ref"]
    assert arr["actor"]["use_dynamic_bsz"] is False and arr["rollout"]["log_prob_use_dynamic_bsz"] is False
    assert any("actor_rollout_ref.actor.use_dynamic_bsz=false too" in warning for warning in plan["warnings"])


def test_a_wrong_type_inside_the_range_is_not_given_the_fate_of_a_value_outside_it(cli, tmp_path: Path):
    result = cli("trainer.total_epochs=1.5", "launch.dry_run=true")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "rlaunch: error: trainer.total_epochs=1.5: must be an integer >= 1 (verl's default is the int 30)"
    ), "1.5 epochs is no run of 0 steps"


def test_a_critic_verl_never_builds_is_not_judged(cli, tmp_path: Path):
    """GRPO builds no critic (verl's need_critic): its values are never read, so they are not refused either."""
    assert cli("critic.optim.lr=0", "critic.loss_agg_mode=whatever", "launch.dry_run=true").returncode == 0


def test_the_critic_budget_checked_is_the_one_verls_trainer_gives_its_engine(cli, tmp_path: Path):
    """verl 0.9.1's v1 trainer gives the critic's engine critic.ppo_infer_max_token_len_per_gpu (trainer_base.py
    init_workers); its legacy trainer reads critic.ppo_max_token_len_per_gpu."""
    gae = ("algorithm.adv_estimator=gae", "launch.dry_run=true")
    result = cli("+critic.ppo_infer_max_token_len_per_gpu=100", *gae)
    assert result.returncode == 2 and "critic.ppo_infer_max_token_len_per_gpu (100) cannot hold" in result.stderr
    planned = cli("critic.ppo_max_token_len_per_gpu=100", *gae)  # v1: not the engine's budget
    assert planned.returncode == 0, planned.stderr[-3000:]
    # the default model is not here: verl's own critic checks (they read its files) are said to wait for the job
    assert "verl's own critic checks were left to the job" in planned.stdout
    legacy = cli("critic.ppo_max_token_len_per_gpu=100", "trainer.use_v1=false", *gae)
    assert legacy.returncode == 2 and "critic.ppo_max_token_len_per_gpu (100) cannot hold" in legacy.stderr


def test_values_at_the_edges_still_plan(cli, tmp_path: Path):
    edges = {
        "actor_rollout_ref.rollout.gpu_memory_utilization": 1.0,
        "actor_rollout_ref.rollout.top_p": 1.0,
        "actor_rollout_ref.rollout.top_k": 0,  # vLLM's "disabled"
        "actor_rollout_ref.actor.optim.lr": 1e-9,
        "actor_rollout_ref.actor.clip_ratio": 0.0,
        "actor_rollout_ref.actor.kl_loss_coef": 0.0,
        "trainer.save_freq": -1,
        "trainer.test_freq": 1,
        "trainer.total_training_steps": None,
        "actor_rollout_ref.rollout.temperature": 0.0,  # greedy: with one response per prompt GRPO still learns
        "actor_rollout_ref.rollout.n": 1,
        # verl 0.9.1's v1 trainer pads the batch to whole mini-batches (trainer_base.py _balance_batch)
        "data.train_batch_size": 1000,
        "actor_rollout_ref.actor.ppo_mini_batch_size": 256,
    }
    written = [f"{key}={'null' if value is None else value}" for key, value in edges.items()]
    result = cli(*written, "cluster.max_requeues=0", "launch.dry_run=json")
    assert result.returncode == 0, result.stderr[-3000:]
    plan = json.loads(result.stdout)
    for key, value in edges.items():
        node = plan["verl"]
        for part in key.split("."):
            node = node[part]
        assert node == value, key


def test_a_bug_keeps_its_traceback_and_removes_the_sweep_directory_it_created(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Not bad input: rlaunch itself failed. The traceback is for the bug report; the empty sweep directory Hydra
    created for the invocation goes all the same."""

    def broken(cfg: object, overrides: object = ()) -> list[str]:
        raise RuntimeError("a bug in rlaunch")

    monkeypatch.setattr("launch.readiness.prepare", broken)
    result = cli("launch.dry_run=true")
    assert result.returncode == 1 and "RuntimeError: a bug in rlaunch" in result.stderr
    assert "Traceback" in result.stderr
    assert left_behind(tmp_path) == []


def test_types_read_from_verl_source_are_verls_dataclass_annotations():
    """ranges.py reads verl's field annotations with `ast` (planning does not import verl); they are exactly what
    typing.get_type_hints says of the imported dataclasses."""
    import typing

    from verl.trainer.config import KLControlConfig
    from verl.workers.config import FSDPActorConfig, FSDPOptimizerConfig, RolloutConfig, SamplingConfig

    for cls in (FSDPActorConfig, FSDPOptimizerConfig, RolloutConfig, SamplingConfig, KLControlConfig):
        hints = typing.get_type_hints(cls)
        target = f"{cls.__module__}.{cls.__name__}"
        for key in ranges.RANGES:
            name = key.rpartition(".")[2]
            found = ranges.verl_field_type(target, name)
            if name not in hints:
                assert found is None, (target, name)
                continue
            assert found is not None, (target, name)
            kind, nullable = found[1]
            args = [arg for arg in typing.get_args(hints[name]) if arg is not type(None)]
            assert (kind, nullable) == ((args[0] if args else hints[name]).__name__, bool(args)), (target, name)


# --- requeues: the run must end within the attempts SLURM is asked for ---------------------------------------------


def slow_run(tmp_path: Path) -> list[str]:
    """A 3B model on one A40 with 8k-token responses: minutes a step, 10 steps an epoch, 50-min attempts (quick_test);
    a checkpoint every 5 steps, so only the number of attempts is wrong."""
    overrides = [*tiny_run(tmp_path, per_source=40), "llm=qwen2_5_3b", "data.max_response_length=8192"]
    overrides = [o for o in overrides if not o.startswith("actor_rollout_ref.model.path")]
    # it needs 2 A40s for memory (the preflight says so); these tests are about its time
    overrides.append("launch.preflight=warn")
    return [*overrides, "trainer.total_training_steps=null", "trainer.save_freq=5", "launch.skip_checks=[hub_cache]"]


def test_more_attempts_than_max_requeues_allow_is_refused_with_the_numbers_that_fit(tmp_path: Path):
    overrides = [*slow_run(tmp_path), "trainer.total_epochs=100"]
    time = dry_run(tmp_path, "cluster=slurm", *overrides).predicted_time
    assert time is not None
    needed = time.attempts
    fitting_steps = readiness.steps_within(4 * time.attempt_min, time.step_s, time.validation_s, time.test_freq)
    assert time.validations > 0 and fitting_steps < int(4 * time.attempt_min * 60 // time.step_s), "validations count"
    assert needed > 4 and 10 <= fitting_steps < 1000, time
    with pytest.raises(UserError) as refused:
        submission(tmp_path, *overrides)
    message = str(refused.value)
    assert f"needs {needed} attempts of 50 min (1000 steps x {time.step_s:g} s" in message
    assert "cluster.max_requeues=3 allows 1 + 3" in message
    assert f"trainer.total_epochs={fitting_steps // 10} or trainer.total_training_steps={fitting_steps}" in message
    assert f"cluster.max_requeues={needed - 1}" in message and "mode.time_budget_min=" in message
    # each fix it names is enough
    for fix in (f"trainer.total_epochs={fitting_steps // 10}", f"cluster.max_requeues={needed - 1}"):
        assert submission(tmp_path, *overrides, fix).readiness.problems == ()
    budget = message.split("mode.time_budget_min=")[1].split(")")[0]
    assert submission(tmp_path, *overrides, f"mode.time_budget_min={budget}").readiness.problems == ()


def test_a_run_that_needs_requeues_is_refused_unless_verl_resumes_from_its_last_checkpoint(tmp_path: Path):
    """rlaunch requeues the job and verl resumes only under resume_mode=auto: disable starts every attempt over."""
    overrides = [*slow_run(tmp_path), "trainer.total_epochs=2", "cluster.max_requeues=10"]
    time = dry_run(tmp_path, "cluster=slurm", *overrides).predicted_time
    assert time is not None and time.attempts > 1
    assert submission(tmp_path, *overrides).readiness.problems == ()
    with pytest.raises(UserError, match=r"trainer.resume_mode=disable and the run needs \d+ attempts .* from step 0"):
        submission(tmp_path, *overrides, "trainer.resume_mode=disable")


def test_a_dry_run_shows_too_many_attempts_as_not_ready(tmp_path: Path):
    plan = dry_run(tmp_path, "cluster=slurm", *slow_run(tmp_path), "trainer.total_epochs=100000")
    assert any(warning.startswith("not ready: the run needs") for warning in plan.warnings), plan.warnings


def test_verls_words_are_read_from_its_source_and_its_examples_words_are_among_them():
    """Each set comes from verl's own code: an empty one (verl's source moved) would turn its check off."""
    for key in choices.CHOICES:
        assert choices.allowed_words(key), key
    assert {"grpo", "gae", "rloo", "reinforce_plus_plus", "remax", "gpg", "opo"} <= set(
        choices.allowed_words("algorithm.adv_estimator")
    )
    assert {"vanilla", "gspo", "cispo", "sapo"} <= set(
        choices.allowed_words("actor_rollout_ref.actor.policy_loss.loss_mode")
    )
    assert {"console", "wandb", "file", "tensorboard"} <= set(choices.allowed_words("trainer.logger"))
    assert set(choices.allowed_words("data.truncation")) == {"error", "left", "right", "middle"}
    assert set(choices.allowed_words("trainer.resume_mode")) == {"auto", "disable", "resume_path"}
    assert set(choices.allowed_words("actor_rollout_ref.actor.optim.lr_scheduler_type")) == {"constant", "cosine"}
    # the reward loop's registry (the legacy workers/reward_manager one also registers prime and batch: 0.9.1 never
    # reads it), rate_limited registered under an alias of its decorator
    assert {"naive", "dapo", "rate_limited"} <= set(choices.allowed_words("reward.reward_manager.name"))
    assert "prime" not in choices.allowed_words("reward.reward_manager.name")


def test_verls_engines_are_read_from_its_registry():
    """The engines verl registers (EngineRegistry.register under verl/workers/engine), per model type."""
    assert {"fsdp", "fsdp2", "megatron", "torchtitan", "veomni"} <= set(choices.registered_engines("language_model"))
    assert {"fsdp", "fsdp2", "megatron"} <= set(choices.registered_engines("value_model"))
    assert "torchtitan" not in choices.registered_engines("value_model")


def test_a_strategy_of_the_composed_tree_plans(tmp_path: Path):
    plan = dry_run(tmp_path, "actor_rollout_ref.actor.strategy=fsdp2")
    assert plan.verl["actor_rollout_ref"]["actor"]["strategy"] == "fsdp2"


def test_a_refusal_removes_the_shared_dir_it_made_and_keeps_one_that_was_there(tmp_path: Path):
    """Hydra makes its output directory's parents before rlaunch's checks run: a new cluster.shared_dir outside the
    working directory (and its rlaunch/) had been left behind, empty; one that existed (empty too) stays."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    refused = ("actor_rollout_ref.actor.optim.lr=-1", "launch.dry_run=true")
    result = run_here(*refused, f"cluster.shared_dir={elsewhere / 'new' / 'shared'}", cwd=work)
    assert result.returncode == 2 and "optim.lr=-1" in result.stderr, result.stderr[-3000:]
    assert list(elsewhere.iterdir()) == [], list(elsewhere.rglob("*"))
    existing = elsewhere / "existing"
    existing.mkdir()
    result = run_here(*refused, f"cluster.shared_dir={existing}", cwd=work)
    assert result.returncode == 2, result.stderr[-3000:]
    assert existing.is_dir() and list(existing.iterdir()) == [], list(existing.rglob("*"))
