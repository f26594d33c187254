"""The Megatron memory preflight (launch/megatron_memory.py) and the MoE architecture it reads: the sharding
arithmetic, each rule by itself, then verl's public Megatron runs (tests/data/megatron_cases.yaml) judged on their
cards: the ones verl ships as working fit, clearly oversized variants of them do not, and the ones sized to fill
their card are said to be too near it to call."""

from __future__ import annotations

import copy
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from launch import megatron_memory as mm
from launch.facts import architecture_of
from launch.memory import GIB, Architecture, Knobs, Phase, kv_per_sequence_gib, with_changes
from launch.schema import verl_config_source
from launch.verdict import Verdict

PROJECT = Path(__file__).resolve().parent.parent
CASES = yaml.safe_load((Path(__file__).parent / "data" / "megatron_cases.yaml").read_text())["cases"]


def llm_table(name: str) -> dict[str, Any]:
    return yaml.safe_load((PROJECT / "conf" / "llm" / f"{name}.yaml").read_text())


def gpu_profile(name: str) -> dict[str, Any]:
    return yaml.safe_load((PROJECT / "conf" / "gpu" / f"{name}.yaml").read_text())["gpu"]


@cache
def verl_megatron_config(overrides: tuple[str, ...]) -> dict[str, Any]:
    """`python -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer <overrides>`, composed as verl does."""
    with initialize_config_dir(config_dir=verl_config_source().removeprefix("file://"), version_base=None):
        cfg = compose("ppo_megatron_trainer", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def with_variant(overrides: list[str], changes: list[str]) -> tuple[str, ...]:
    """The case's overrides with a variant's: a key already set takes the variant's value (keeping its `+`)."""
    merged = {entry.split("=", 1)[0].lstrip("+"): entry for entry in overrides}
    for change in changes:
        key, value = change.split("=", 1)
        bare = key.lstrip("+")
        prefix = "+" if merged.get(bare, key).startswith("+") else ""
        merged[bare] = f"{prefix}{bare}={value}"
    return tuple(merged.values())


def architecture_of_case(case: dict[str, Any]) -> Architecture:
    return Architecture.from_llm(
        architecture_of(case["config_json"]) if "config_json" in case else llm_table(case["llm"])
    )


def judge(case: dict[str, Any], changes: list[str] | None = None) -> Verdict:
    """The Megatron verdict for a case (or its variant) on the card it names, as the preflight would give it."""
    verl = verl_megatron_config(with_variant(case["overrides"], changes or []))
    card = gpu_profile(case["gpu"])
    nccl = case.get("nccl_gib_per_communicator", card["nccl_gib_per_communicator"])
    knobs = with_changes(Knobs.from_verl(verl), communicator_gib=float(nccl))
    megatron = mm.MegatronKnobs.from_verl(verl)
    return mm.summarize(
        architecture_of_case(case), knobs, megatron, float(card["usable_gib"]), card["bf16_tflops"], "fail"
    )


def worst_peak(verdict: Verdict) -> float:
    return max(verdict.peaks_gib.values())


# --- the architecture: experts counted, dense models unchanged --------------------------------------------------


def pre_moe_params(arch: Architecture) -> int:
    """launch/memory.py's parameter count before experts existed, written out: every dense figure must stay it."""
    q, kv = arch.hidden * arch.heads * arch.head_dim, 2 * arch.hidden * arch.kv_heads * arch.head_dim
    o = arch.heads * arch.head_dim * arch.hidden
    biases = arch.heads * arch.head_dim + 2 * arch.kv_heads * arch.head_dim
    layer = q + kv + o + biases + 3 * arch.hidden * arch.intermediate + 2 * arch.hidden
    return arch.layers * layer + arch.vocab * arch.hidden * (1 if arch.tied_embeddings else 2) + arch.hidden


DENSE_OPTIONS = sorted(
    path.stem
    for path in (PROJECT / "conf" / "llm").glob("*.yaml")
    if not Architecture.from_llm(llm_table(path.stem)).is_moe
)


def test_the_llm_group_has_dense_and_mixture_options():
    options = {path.stem for path in (PROJECT / "conf" / "llm").glob("*.yaml")}
    assert len(DENSE_OPTIONS) >= 8 and {"qwen3_30b_a3b", "deepseek_v3"} <= options - set(DENSE_OPTIONS)


@pytest.mark.parametrize("name", DENSE_OPTIONS)
def test_dense_models_keep_their_parameter_count(name: str):
    arch = Architecture.from_llm(llm_table(name))
    assert arch.params == pre_moe_params(arch) and arch.active_params == arch.params
    assert arch.kv_bytes_per_token == 2 * arch.layers * arch.kv_heads * arch.head_dim * 2


@pytest.mark.parametrize(
    "name, total, active",
    [
        # https://huggingface.co/Qwen/Qwen3-30B-A3B: 30.5B parameters, 3.3B activated
        ("qwen3_30b_a3b", 30.5e9, 3.3e9),
        # https://arxiv.org/abs/2412.19437 (DeepSeek-V3): 671B total, 37B activated per token
        ("deepseek_v3", 671e9, 37e9),
        # https://huggingface.co/moonshotai/Moonlight-16B-A3B: 16B total, 3B activated
        ("moonlight_16b_a3b", 16e9, 3e9),
    ],
)
def test_moe_options_count_every_expert_and_the_active_ones(name: str, total: float, active: float):
    arch = Architecture.from_llm(llm_table(name))
    assert arch.params == pytest.approx(total, rel=0.02)
    assert arch.active_params == pytest.approx(active, rel=0.05)


def test_latent_attention_caches_one_latent_per_layer_on_every_engine_rank():
    arch = Architecture.from_llm(llm_table("deepseek_v3"))
    assert arch.kv_bytes_per_token == 61 * (512 + 64) * 2
    knobs = Knobs.from_verl(case_config("deepseek_v3_671b_256xh100"))
    per_rank = [kv_per_sequence_gib(arch, replace(knobs, rollout_tp=tp), 4096) for tp in (8, 32)]
    assert per_rank[0] == per_rank[1]  # an MLA cache has no heads to split over TP


# --- config.json: the MoE fields are read under each family's names ---------------------------------------------

QWEN3_30B_A3B = {  # https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json
    "model_type": "qwen3_moe",
    "num_hidden_layers": 48,
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "mlp_only_layers": [],
    "decoder_sparse_step": 1,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "max_position_embeddings": 40960,
}
DEEPSEEK_V3 = {  # https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json
    "model_type": "deepseek_v3",
    "num_hidden_layers": 61,
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
    "tie_word_embeddings": False,
    "max_position_embeddings": 163840,
}
MOONLIGHT = {  # https://huggingface.co/moonshotai/Moonlight-16B-A3B/blob/main/config.json
    "model_type": "deepseek_v3",
    "num_hidden_layers": 27,
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "intermediate_size": 11264,
    "moe_intermediate_size": 1408,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 1,
    "q_lora_rank": None,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 163840,
    "tie_word_embeddings": False,
    "max_position_embeddings": 8192,
}


@pytest.mark.parametrize(
    "name, config", [("qwen3_30b_a3b", QWEN3_30B_A3B), ("deepseek_v3", DEEPSEEK_V3), ("moonlight_16b_a3b", MOONLIGHT)]
)
def test_llm_options_say_what_their_config_json_says(name: str, config: dict[str, Any]):
    table, found = llm_table(name), architecture_of(config)
    assert set(table) - {"name", "path"} <= set(found)
    assert {key: table.get(key, 0) for key in found} == found  # what the table leaves out is the schema's 0


def test_config_json_moe_names_of_other_families():
    # Mixtral (https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json): experts as wide as
    # intermediate_size; Qwen1.5-MoE (https://huggingface.co/Qwen/Qwen1.5-MoE-A2.7B/blob/main/config.json): a
    # shared expert of its own width
    mixtral = architecture_of(
        {
            "num_hidden_layers": 32,
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "intermediate_size": 14336,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
        }
    )
    assert (mixtral["experts"], mixtral["experts_per_token"], mixtral["moe_intermediate"]) == (8, 2, 14336)
    qwen_moe = architecture_of(
        {
            "num_hidden_layers": 24,
            "hidden_size": 2048,
            "num_attention_heads": 16,
            "intermediate_size": 5632,
            "moe_intermediate_size": 1408,
            "num_experts": 60,
            "num_experts_per_tok": 4,
            "shared_expert_intermediate_size": 5632,
        }
    )
    assert (qwen_moe["experts"], qwen_moe["shared_expert_intermediate"], qwen_moe["dense_layers"]) == (60, 5632, 0)
    dense = architecture_of({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4})
    assert dense["experts"] == dense["kv_lora_rank"] == 0 and dense["head_dim"] == 16


# --- the sharding arithmetic, one rule at a time -----------------------------------------------------------------


def layout(**sizes: Any) -> mm.Layout:
    return mm.Layout(**{"n_gpus": 64, **sizes})


def megatron(actor: mm.Layout, **changes: Any) -> mm.MegatronKnobs:
    return mm.MegatronKnobs(actor=actor, ref=actor, recompute=mm.Recompute(), **changes)


DENSE = Architecture.from_llm(llm_table("qwen2_5_32b"))
MOE = Architecture.from_llm(llm_table("qwen3_30b_a3b"))


def test_doubling_tp_halves_the_dense_weights_per_rank():
    narrow, wide = (mm.stages(DENSE, layout(tp=tp))[0] for tp in (4, 8))
    assert narrow.dense_params == pytest.approx(2 * wide.dense_params)
    assert mm.states(megatron(layout(tp=4)), narrow, narrow).params == pytest.approx(
        2 * mm.states(megatron(layout(tp=8)), wide, wide).params
    )


def test_the_distributed_optimizer_divides_the_optimizer_state_by_data_parallel():
    shape = layout(tp=8)  # 64 GPUs: DP 8
    stage = mm.stages(DENSE, shape)[0]
    sharded = mm.states(megatron(shape), stage, stage).optimizer
    whole = mm.states(megatron(shape, distributed_optimizer=False), stage, stage).optimizer
    assert whole == pytest.approx(8 * sharded) and whole == pytest.approx(12 * stage.params)
    # neither the bf16 params nor the fp32 gradient buffer are sharded: 2 + 4 + 12/d bytes per parameter
    held = mm.states(megatron(shape), stage, stage)
    assert (held.params + held.grads + held.optimizer) / stage.params == pytest.approx(6 + 12 / 8)


def test_expert_parallelism_divides_the_expert_states():
    few, many = (mm.stages(MOE, layout(ep=ep))[0] for ep in (2, 8))
    assert few.expert_params == pytest.approx(4 * many.expert_params) and few.dense_params == many.dense_params
    # the experts' optimizer state is sharded over the expert-data-parallel group (64 / EP), not over DP
    for ep, stage in ((2, few), (8, many)):
        knobs = megatron(layout(ep=ep))
        expert_part = mm.states(knobs, replace(stage, dense_params=0.0), stage).optimizer
        assert expert_part == pytest.approx(12 * stage.expert_params / (64 // ep))


def test_the_hybrid_cpu_optimizer_keeps_its_fraction_off_the_card():
    stage = mm.stages(MOE, layout(ep=8))[0]
    held = mm.states(megatron(layout(ep=8), optimizer_cpu_fraction=0.75), stage, stage)
    assert held.optimizer == pytest.approx(held.optimizer_on_host / 3)


def test_pipeline_stages_split_the_layers_as_megatron_does():
    # run_deepseek671b_math_megatron_80gb.sh: 4 first, 1 last, the rest even over 14 stages
    assert layout(pp=16, first_stage_layers=4, last_stage_layers=1).stage_layers(61) == [4] + [4] * 14 + [1]
    # run_qwen3-235b_megatron_96gb.sh: the embedding and the loss each take a layer's place
    assert layout(pp=8, embedding_in_split=True, loss_in_split=True).stage_layers(94) == [11] + [12] * 6 + [11]
    first, *_, last = mm.stages(MOE, layout(pp=4))
    # the embedding on the first stage, the untied head and the final norm on the last
    assert last.dense_params - first.dense_params == MOE.hidden


def test_1f1b_holds_p_micro_batches_on_the_first_stage_and_the_interleaved_schedule_more():
    plain = layout(pp=4)
    assert [plain.in_flight(stage, 100) for stage in range(4)] == [4, 3, 2, 1]
    assert plain.in_flight(0, 2) == 2  # never more than the mini-batch has
    interleaved = layout(pp=4, vpp=2)
    assert interleaved.in_flight(0, 100) == 2 * 3 + 1 * 4 + 1


def test_full_recomputation_keeps_only_each_groups_input():
    shape = layout(tp=4)
    stage = mm.stages(DENSE, shape)[0]
    full = mm.stage_activations(DENSE, shape, mm.Recompute("full", "uniform", 1), stage, 4096, 100)
    none = mm.stage_activations(DENSE, shape, mm.Recompute(), stage, 4096, 100)
    assert full.saved == pytest.approx(DENSE.layers * 2 * DENSE.hidden / 4 * 4096)
    assert none.saved == pytest.approx(DENSE.layers * mm.layer_activation(DENSE, shape, moe=False) * 4096)
    assert full.saved < none.saved / 10
    grouped = mm.stage_activations(DENSE, shape, mm.Recompute("full", "uniform", 4), stage, 4096, 100)
    assert grouped.saved == pytest.approx(full.saved / 4) and grouped.transient > full.transient


def test_sequence_parallel_splits_every_saved_tensor_over_tp():
    narrow, wide = (mm.layer_activation(MOE, layout(tp=tp), moe=True) for tp in (1, 4))
    assert narrow == pytest.approx(4 * wide)


def test_context_parallel_splits_a_micro_batch_of_whole_sequences_but_not_a_token_budget():
    knobs = Knobs.from_verl(case_config("qwen2_5_32b_8xh20"))  # micro-batches of 1 x 8192 tokens
    assert mm.packing(knobs, layout(cp=2), knobs.train_tokens, 0).tokens == 8192 // 2
    dynamic = replace(knobs, dynamic_bsz=True, train_tokens=16384)
    assert mm.packing(dynamic, layout(cp=2), dynamic.train_tokens, 0).tokens == 16384


def test_offloading_leaves_nothing_of_the_trainer_beside_the_engine():
    stage = mm.stages(DENSE, layout(tp=8))[0]
    knobs = Knobs.from_verl(case_config("qwen2_5_32b_8xh20"))
    kept = mm.states(megatron(layout(tp=8)), stage, stage)
    on = megatron(layout(tp=8), param_offload=True, optimizer_offload=True, ref_param_offload=True)
    assert sum(mm.resident(knobs, on, kept).values()) == 0  # param_offload frees the gradient buffer too
    off = mm.resident(knobs, megatron(layout(tp=8)), kept)
    assert off["grads"] == kept.grads and off["ref params"] == kept.ref_params  # the script's KL loss: a ref


def test_verls_megatron_defaults_are_read_from_its_own_config():
    defaults = mm.MegatronKnobs.from_verl(verl_megatron_config(("actor_rollout_ref.rollout.name=vllm",)))
    assert defaults.actor == mm.Layout(n_gpus=8)  # trainer.n_gpus_per_node 8, every parallel size 1
    assert defaults.distributed_optimizer and defaults.grad_bytes == 4 and defaults.optimizer_bytes == 12
    assert defaults.recompute.granularity is None and not defaults.param_offload
    precise = mm.MegatronKnobs.from_verl(
        verl_megatron_config(
            (
                "actor_rollout_ref.rollout.name=vllm",
                "actor_rollout_ref.actor.optim.use_precision_aware_optimizer=True",
                "actor_rollout_ref.actor.optim.main_grads_dtype=bf16",
                "actor_rollout_ref.actor.optim.exp_avg_dtype=bf16",
                "actor_rollout_ref.actor.optim.exp_avg_sq_dtype=bf16",
            )
        )
    )
    assert precise.grad_bytes == 2 and precise.optimizer_bytes == 6  # 16-bit master remainder + two bf16 moments


# --- verl's public Megatron runs -------------------------------------------------------------------------------


def case_named(name: str) -> dict[str, Any]:
    return next(case for case in CASES if case["name"] == name)


def case_config(name: str) -> dict[str, Any]:
    return copy.deepcopy(verl_megatron_config(tuple(case_named(name)["overrides"])))


def test_the_cases_cover_the_shapes_the_model_claims():
    assert {case["gpu"] for case in CASES} >= {"h100", "h20"} and all(case["url"] for case in CASES)
    joined = [" ".join(case["overrides"]) for case in CASES]
    for key in ("expert_model_parallel_size=16", "recompute_granularity=full", "optimizer_cpu_offload=True"):
        assert any(key in text for text in joined), key
    assert {case["expect"] for case in CASES} == {"fits", "does_not_fit"}
    assert any(case.get("public") for case in CASES) and any(case.get("variants") for case in CASES)


@pytest.mark.parametrize("name", [case["name"] for case in CASES])
def test_each_public_run_is_judged_as_its_evidence_says(name: str):
    case = case_named(name)
    verdict = judge(case)
    if case.get("edge"):
        # sized by verl to fill its card: within EDGE_FRACTION of it, said as such, whichever way it went
        assert verdict.at_the_edge, verdict.arithmetic
        assert abs(worst_peak(verdict) / gpu_profile(case["gpu"])["usable_gib"] - 1) <= mm.EDGE_FRACTION
    else:
        assert verdict.fits == (case["expect"] == "fits"), verdict.arithmetic
        assert not verdict.at_the_edge, verdict.arithmetic


@pytest.mark.parametrize(
    "name, variant",
    [(case["name"], variant["name"]) for case in CASES for variant in case.get("variants", [])],
)
def test_a_clearly_oversized_variant_does_not_fit(name: str, variant: str):
    case = case_named(name)
    changes = next(item for item in case["variants"] if item["name"] == variant)["overrides"]
    verdict = judge(case, changes)
    assert not verdict.fits and not verdict.at_the_edge and not verdict.too_close_to_call, verdict.arithmetic


def test_deepseek_v3_on_96_h20s_agrees_with_verls_published_figures():
    """verl's DeepSeek performance page (URL in megatron_cases.yaml): GPU memory 66 GB and CPU memory 1500 GB per
    node for this run. The peak phase here is generation (the engine's reservation beside the communicators; the
    trainer offloads everything)."""
    case = case_named("deepseek_v3_671b_96xh20")
    verdict, public = judge(case), case["public"]
    assert worst_peak(verdict) * GIB == pytest.approx(public["gpu_memory_gb"] * 1e9, rel=0.10)
    assert verdict.host_ram_gib_per_node * GIB == pytest.approx(public["host_memory_gb_per_node"] * 1e9, rel=0.15)


def test_a_verdict_has_the_preflights_shape_and_says_where_it_is_rough():
    case = case_named("deepseek_v3_671b_256xh100")
    verl = case_config(case["name"])
    phases = mm.estimate(
        architecture_of_case(case),
        Knobs.from_verl(verl),
        mm.MegatronKnobs.from_verl(verl),
        gpu_profile("h100")["usable_gib"],
    )
    assert [phase.name for phase in phases] == ["training", "log-prob", "rollout"]
    assert all(isinstance(phase, Phase) for phase in phases)
    verdict = judge(case)
    assert {"fits", "misfit", "phases", "arithmetic", "host_ram_gib_per_node", "rough", "at_the_edge"} <= set(
        verdict.to_dict()
    )
    assert "pipeline stage" in verdict.phases["training"].notes[0] and "first order" in verdict.rough[0]
    assert Verdict.from_dict(verdict.to_dict()) == verdict  # plan.json keeps it whole


def test_a_megatron_critic_is_counted_beside_the_actor_and_in_its_own_update():
    """verl colocates the critic's Megatron engine with the actor's: its states stay on the card through the actor's
    phases (unless offloaded), and its update holds its own states and activations beside the actor's."""
    verl = case_config("qwen2_5_32b_8xh20")
    verl["algorithm"]["adv_estimator"] = "gae"
    verl["critic"]["enable"] = True
    knobs, megatron = Knobs.from_verl(verl), mm.MegatronKnobs.from_verl(verl)
    assert megatron.critic_engine is not None and not mm.not_modelled(knobs, megatron)
    arch = architecture_of_case(case_named("qwen2_5_32b_8xh20"))
    phases = {phase.name: phase for phase in mm.estimate(arch, knobs, megatron, 95.0)}
    assert list(phases) == ["training", "critic update", "log-prob", "rollout"]
    critic = megatron.critic_engine
    held = mm.critic_resident(arch, knobs, critic) / GIB
    # bf16 params + the fp32 gradient buffer + Adam's 12 B over the distributed optimizer's shards (a dense model),
    # on the critic's worst stage
    per_param = 2 + critic.grad_bytes + critic.optimizer_bytes / critic.actor.optimizer_shards
    assert held == pytest.approx(max(stage.params for stage in mm.stages(arch, critic.actor)) * per_param / GIB)
    terms = {term.name: term.gib for term in phases["training"].terms}
    assert terms["critic states"] == pytest.approx(held, abs=0.1)
    offloaded = replace(critic, param_offload=True, optimizer_offload=True)
    assert mm.critic_resident(arch, knobs, offloaded) == 0.0


# --- the fix search: launch.preflight=fix over Megatron's knobs -------------------------------------------------

# Qwen3-30B-A3B on two 8 x H100 nodes with verl's Megatron defaults (TP 1, PP 1, EP 1): every expert on every rank,
# a clear misfit
MOE_ON_DEFAULTS = (
    "backend=megatron",
    "gpu=h100",
    "llm=qwen3_30b_a3b",
    "algo=verl",
    "trainer.nnodes=2",
    "trainer.n_gpus_per_node=8",
    "data.train_batch_size=64",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=16",
    "data.max_prompt_length=1024",
    "data.max_response_length=2048",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
)


def settled(*overrides: str) -> tuple[Verdict, Verdict]:
    """(the verdict on the config as written, under launch.preflight=fail; the verdict after settle's policy)."""
    from conftest import compose_config, cpu_facts

    from launch import preflight
    from launch.compose_once import full_resolution

    def settle(*extra: str) -> Verdict:
        cfg = compose_config(*overrides, *extra)
        verdict, _ = preflight.settle(cfg, full_resolution(cfg), cpu_facts(), [*overrides, *extra], full_resolution)
        assert verdict is not None
        return verdict

    return settle("launch.preflight=fail"), settle("launch.preflight=fix")


def test_fix_applies_the_cheapest_fitting_megatron_change_when_the_user_set_none_of_its_keys():
    as_written, fixed = settled(*MOE_ON_DEFAULTS)
    assert not as_written.fits and not as_written.at_the_edge
    assert as_written.fits_with is not None and as_written.fits_with.on_your_gpus is not None
    assert fixed.fits and fixed.changed
    assert set(fixed.changed) == {override.split("=", 1)[0] for override in as_written.first_fitting_fixes}
    assert fixed.before is not None and not fixed.before.fits


@pytest.mark.parametrize(
    "mine",
    [
        ("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1",),
        (
            "actor_rollout_ref.actor.megatron.expert_model_parallel_size=1",
            "actor_rollout_ref.ref.megatron.param_offload=false",
        ),
    ],
)
def test_fix_never_changes_a_megatron_key_the_user_set(mine: tuple[str, ...]):
    as_written, fixed = settled(*MOE_ON_DEFAULTS, *mine)
    set_by_user = {override.split("=", 1)[0] for override in mine}
    assert not as_written.fits
    assert not set_by_user & set(fixed.changed), fixed.changed
    assert fixed.fits or not fixed.changed  # it applied a change that fits, or none


def test_a_megatron_misfit_within_the_margin_is_not_changed_by_fix():
    """verl's own Qwen3-30B-A3B script sits within the estimate's margin: fix leaves it as it is (the gate warns)."""
    from test_megatron import QWEN3_30B_A3B

    overrides = ("backend=megatron", "gpu=h100", "llm=qwen3_30b_a3b", "algo=verl", *QWEN3_30B_A3B)
    as_written, fixed = settled(*overrides)
    assert as_written.too_close_to_call and not fixed.changed


def test_the_knobs_beyond_the_search_leave_out_what_the_run_has_set_and_name_more_gpus():
    """A misfit the search cannot fix names what is left to try: never an offload or recompute already on, always
    more GPUs (a larger data-parallel group holds a smaller share of the distributed optimizer)."""
    eight = layout(n_gpus=8, tp=8)
    bare = mm.fixes_beyond(megatron(eight))
    assert "param_offload/optimizer_offload=true" in bare and "recompute_granularity=full" in bare
    assert "more GPUs (trainer.nnodes" in bare
    full = mm.Recompute(granularity="full", method="uniform")
    done = mm.fixes_beyond(replace(megatron(eight, param_offload=True, optimizer_offload=True), recompute=full))
    assert mm.HYBRID in bare and mm.HYBRID in done  # Megatron's hybrid CPU optimizer, unless the run set it
    assert "offload" not in done.replace(mm.HYBRID, "") and "recompute_granularity" not in done and "more GPUs" in done
    hybrid = replace(megatron(eight, param_offload=True), optimizer_cpu_fraction=1.0)
    assert mm.HYBRID not in mm.fixes_beyond(hybrid)
    half = mm.fixes_beyond(megatron(eight, param_offload=True))
    assert "actor_rollout_ref.actor.megatron.optimizer_offload=true" in half and "param_offload" not in half
