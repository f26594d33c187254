"""The config tree: every gpu x mode x algo composes over verl's own ppo_trainer and passes verl's validation, and
each group owns only its keys (README.md#how-a-run-is-put-together; docs/background.md#profile-first-then-mode: a
mode that touched hardware knobs undid the profile)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from conftest import ALGOS, GPUS, MODES, compose_config, cpu_facts
from omegaconf import OmegaConf

from launch.plan import make_plan
from launch.schema import RLAUNCH_ROOTS
from launch.validate import validate

# What a mode may change: duration and cadence (and the experiment's name, which names the mode).
MODE_KEYS = {
    "mode.name",
    "mode.time_budget_min",
    "mode.checkpoint_every_min",
    "trainer.total_epochs",
    "trainer.total_training_steps",
    "trainer.test_freq",
    "trainer.save_freq",
    "trainer.val_before_train",
    "data.val_max_samples",
}
# What a gpu profile may change: its facts (gpu.*) and the hardware knobs (README.md#how-a-run-is-put-together).
HARDWARE_KNOBS = {
    "actor_rollout_ref.model.enable_gradient_checkpointing",
    "actor_rollout_ref.actor.use_dynamic_bsz",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.actor.fsdp_config.param_offload",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.fsdp_config.param_offload",
    "actor_rollout_ref.rollout.gpu_memory_utilization",
    "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "actor_rollout_ref.rollout.max_num_seqs",
    "actor_rollout_ref.rollout.max_num_batched_tokens",
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    # torch's AdamW implementation: foreach (verl's default) allocates whole-size temporaries in the step, fused does
    # not (launch/memory.py, measured by bench/gpu_cases.py); the small cards choose fused
    "actor_rollout_ref.actor.optim.override_optimizer_config",
    "actor_rollout_ref.actor.optim.override_optimizer_config.fused",
}
NAME_KEYS = {"trainer.experiment_name"}  # interpolates algo/llm/gpu/mode names: differs by construction


def flatten(node, prefix=""):
    """Leaf key -> value, interpolations left as written: a diff then shows which keys a group SETS."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: node}


def composed(gpu, mode, algo):
    return flatten(OmegaConf.to_container(compose_config(f"gpu={gpu}", f"mode={mode}", f"algo={algo}"), resolve=False))


def diff_keys(a, b):
    return {key for key in a.keys() | b.keys() if a.get(key, "<absent>") != b.get(key, "<absent>")}


@pytest.fixture(scope="module")
def all_configs():
    return {combo: composed(*combo) for combo in itertools.product(GPUS, MODES, ALGOS)}


def test_every_combination_composes_and_passes_verl_validation(tmp_path: Path):
    checked = 0
    for gpu, mode, algo in itertools.product(GPUS, MODES, ALGOS):
        cfg = compose_config(f"gpu={gpu}", f"mode={mode}", f"algo={algo}")
        plan = make_plan(cfg, cpu_facts(), [f"gpu={gpu}"], working_dir=tmp_path, python="python")
        assert not set(RLAUNCH_ROOTS) & plan.verl.keys(), "our roots must be stripped before verl sees the config"
        validate(cfg, plan, cpu_facts())  # ours, then verl's own
        checked += 1
    assert checked == len(GPUS) * len(MODES) * len(ALGOS)


def test_modes_change_only_duration_and_cadence(all_configs):
    for gpu, algo in itertools.product(GPUS, ALGOS):
        for mode_a, mode_b in itertools.combinations(MODES, 2):
            changed = diff_keys(all_configs[gpu, mode_a, algo], all_configs[gpu, mode_b, algo])
            assert changed, f"modes {mode_a} and {mode_b} compose identically"
            stray = changed - MODE_KEYS - NAME_KEYS
            assert not stray, f"mode {mode_a} vs {mode_b} on {gpu} changes non-mode keys: {sorted(stray)}"


def test_gpus_change_only_hardware_knobs_and_facts(all_configs):
    for mode, algo in itertools.product(MODES, ALGOS):
        for gpu_a, gpu_b in itertools.combinations(GPUS, 2):
            changed = diff_keys(all_configs[gpu_a, mode, algo], all_configs[gpu_b, mode, algo])
            stray = {key for key in changed if not key.startswith("gpu.")} - HARDWARE_KNOBS - NAME_KEYS
            assert not stray, f"gpu {gpu_a} vs {gpu_b} changes keys it does not own: {sorted(stray)}"
            # ...and the profiles really differ where their hardware does, not only in their facts
            assert changed & HARDWARE_KNOBS, f"{gpu_a} and {gpu_b} set identical hardware knobs"


def test_bigger_cards_get_bigger_packs(all_configs):
    budget = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"
    fraction = "actor_rollout_ref.rollout.gpu_memory_utilization"
    configs = {gpu: all_configs[gpu, "standard", "guru_baseline"] for gpu in GPUS}
    assert configs["a100_40"][budget] <= configs["a100_80"][budget] <= configs["h100"][budget]
    # docs/background.md#a40-oom: an engine reserving 0.8 of an A40 starved the trainer
    assert configs["a40"][fraction] <= 0.5 < configs["a100_80"][fraction]
    assert configs["a40"]["actor_rollout_ref.actor.fsdp_config.optimizer_offload"] is True
    assert configs["h100"]["actor_rollout_ref.actor.fsdp_config.optimizer_offload"] is False


def test_algos_differ_only_in_method_switches(all_configs):
    changed = diff_keys(
        all_configs["a100_80", "standard", "guru_baseline"], all_configs["a100_80", "standard", "mtl_pcgrad"]
    )
    # trainer.v1.trainer_mode is verl's trainer-selection hook: mtl_pcgrad selects the PCGrad plugin's trainer (the
    # method itself), so it belongs to algo/ like the pcgrad switches
    assert changed - NAME_KEYS == {"algo.name", "algo.pcgrad.enabled", "trainer.v1.trainer_mode"}


def test_verl_keys_sit_at_the_root_as_in_verl_docs():
    cfg = compose_config("actor_rollout_ref.actor.optim.lr=3e-6", "trainer.total_epochs=2", "data.train_batch_size=256")
    assert cfg.actor_rollout_ref.actor.optim.lr == 3e-6
    assert cfg.trainer.total_epochs == 2 and cfg.data.train_batch_size == 256
    assert cfg.actor_rollout_ref.rollout.name == "vllm"
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.actor_rollout_ref.model.path == cfg.llm.path == "Qwen/Qwen2.5-7B-Instruct"


def test_guru_baseline_has_reasoning360_hyperparameters():
    cfg = compose_config("algo=guru_baseline")
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert (cfg.data.max_prompt_length, cfg.data.max_response_length) == (4096, 8192)
    assert (cfg.data.train_batch_size, rollout.n, actor.ppo_mini_batch_size) == (512, 16, 64)
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.optim.lr) == (0.2, 0.2, 1e-6)
    assert actor.use_kl_loss is False and cfg.algorithm.use_kl_in_reward is False
    assert actor.loss_agg_mode == "token-mean"
    assert Path(cfg.reward.custom_reward_function.path).is_file()


def test_gpu_auto_composed_directly_is_the_default_profile():
    cfg = compose_config("gpu=auto")
    assert cfg.gpu.name == "a100_80" and "default profile" in cfg.gpu.selected_by


@pytest.mark.parametrize("llm", sorted(p.stem for p in (Path(__file__).parent.parent / "conf" / "llm").glob("*.yaml")))
def test_every_llm_has_consistent_architecture(llm):
    facts = compose_config(f"llm={llm}").llm
    assert facts.hidden % facts.heads == 0 and facts.heads % facts.kv_heads == 0
    assert facts.head_dim in (64, 128)
    assert facts.vocab > 100_000


def test_llm_roster_covers_the_issue():
    names = {p.stem for p in (Path(__file__).parent.parent / "conf" / "llm").glob("*.yaml")}
    wanted = {f"qwen2_5_{s}" for s in ("0_5b", "1_5b", "3b", "7b", "14b", "32b", "72b")} | {"qwen3_8b", "llama3_1_8b"}
    assert wanted <= names
