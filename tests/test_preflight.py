"""The memory preflight: each term against hand-computed values, the estimator against the H100 measurements of
bench/gpu_memory.py, the seed scenarios, public must-OOM and must-fit cases, verl's documented minimum configs, the
policies, and the shipped profiles."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import PROJECT, compose_config, cpu_facts, run_cli, run_here
from omegaconf import open_dict

from bench.preflight_accuracy import load_cases
from launch import memory, preflight
from launch.compose_once import full_resolution
from launch.errors import UserError
from launch.facts import PartitionFacts
from launch.gpu import load_profiles
from launch.memory import GIB, Architecture, Knobs
from launch.plan import host_memory_gb, llm_architecture, make_plan
from launch.render import render
from launch.rundir import Plan
from launch.verdict import Verdict

GPU_MEASUREMENTS = json.loads((Path(__file__).parent / "data" / "gpu_memory_h100.json").read_text())
GPU_CASES = json.loads((Path(__file__).parent / "data" / "gpu_cases_h100.json").read_text())
QWEN_7B = Architecture(28, 3584, 28, 4, 128, 18944, 152064, False)
QWEN_1_5B = Architecture(28, 1536, 12, 2, 128, 8960, 151936, True)


def knobs(**changes) -> Knobs:
    base = Knobs(
        n_gpus=8,
        gpus_per_node=8,
        prompt_length=4096,
        response_length=8192,
        dynamic_bsz=True,
        train_tokens=16384,
        logprob_tokens=32768,
        micro_batch=None,
        logprob_micro_batch=None,
        checkpointing=True,
        param_offload=False,
        optimizer_offload=False,
        ref_model=False,
        lora_rank=0,
        entropy=False,
        fused_kernels=False,
        engine="vllm",
        engine_fraction=0.6,
        rollout_tp=1,
        max_num_seqs=256,
        max_num_batched_tokens=8192,
    )
    return replace(base, **changes)


def verdict_for(*overrides: str, packages: dict | None = None) -> Verdict:
    return judged(*overrides, packages=packages)[0]


def judged(*overrides: str, packages: dict | None = None) -> tuple[Verdict, dict[str, Any]]:
    """The verdict, and the verl keys the policy would set with their values."""
    cfg = compose_config(*overrides)
    plan = make_plan(cfg, cpu_facts(), list(overrides), Path("/tmp"), "python")
    return preflight.judge(cfg, plan.verl, plan.llm, plan.overrides, packages or {})


# --- terms against hand-computed values -----------------------------------------------------------------------------


def test_parameter_counts_match_the_published_models():
    assert abs(QWEN_7B.params / 7.615e9 - 1) < 0.005  # Qwen2.5-7B: 7.61 B
    assert abs(QWEN_1_5B.params / 1.544e9 - 1) < 0.005  # Qwen2.5-1.5B: 1.54 B
    assert QWEN_7B.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2 == 56 * 1024  # docs/facts.md#memory: 56 KiB


def test_model_states_are_16_bytes_per_param_sharded():
    states = memory.model_states(QWEN_7B, knobs(n_gpus=8))
    assert states["params"] == pytest.approx(QWEN_7B.params * 4 / 8)
    assert states["grads"] == pytest.approx(QWEN_7B.params * 4 / 8)
    assert states["optimizer"] == pytest.approx(QWEN_7B.params * 8 / 8)
    assert memory.model_states(QWEN_7B, knobs(pcgrad_tasks=6))["pcgrad"] == pytest.approx(6 * QWEN_7B.params * 4 / 8)
    lora = memory.model_states(QWEN_7B, knobs(lora_rank=32))
    # the frozen base in verl's default model_dtype fp32, the adapters in fp32
    assert lora["params"] == pytest.approx(QWEN_7B.params * 4 / 8 + memory.trainable_params(QWEN_7B, 32) * 4 / 8)
    # r x (fan_in + fan_out) over q, k, v, o, gate, up, down: (7168 + 4096 + 4096 + 7168 + 3 x 22528) x 32 x 28
    assert memory.trainable_params(QWEN_7B, 32) == 90112 * 32 * 28 == 80_740_352  # PEFT reports 80.7 M


def test_logits_activations_and_kv_terms():
    tokens = 16384
    phase = memory.training_phase(QWEN_7B, knobs(train_tokens=tokens), 79.2)
    terms = {term.name: term.gib for term in phase.terms}
    assert terms["logits"] == pytest.approx(4.0 * tokens * 152064 / GIB)  # pure torch, bf16 logits
    assert terms["activations"] == pytest.approx(2.3 * tokens * 3584 * 28 / GIB)  # each layer's input
    flash = {t.name: t.gib for t in memory.training_phase(QWEN_1_5B, knobs(flash_ce=True), 79.2).terms}
    # flash-attn's in-place cross-entropy, then lm_head's bf16 gradient beside it (measured 3.9 GiB for 8k tokens
    # of Qwen2.5-7B's head: logits 2.3 + gradient 1.0 + the layers' inputs)
    assert flash["logits"] == pytest.approx((2.0 * tokens * 151936 + 2.0 * 151936 * 1536 + 4.0 * tokens * 1536) / GIB)
    lora = {t.name: t.gib for t in memory.training_phase(QWEN_1_5B, knobs(flash_ce=True, lora_rank=8), 79.2).terms}
    assert lora["logits"] == pytest.approx(2.0 * tokens * 151936 / GIB)  # a frozen lm_head gets no gradient
    fused = {t.name: t.gib for t in memory.training_phase(QWEN_7B, knobs(fused_kernels=True), 79.2).terms}
    # one 512-token chunk in fp32 beside lm_head's gradient buffers, or the recomputed layer when that is larger
    chunk = (12.0 * 512 * 152064 + 6.0 * 152064 * 3584) / GIB
    layer = (29.0 * 3584 + 10.6 * 18944) * tokens / GIB
    assert fused.get("recomputed layer", 0) == pytest.approx(layer) and layer > chunk and "logits" not in fused
    no_ckpt = memory.saved_activations(QWEN_7B, False, tokens)
    assert no_ckpt == pytest.approx((29.0 * 3584 + 7.3 * 18944) * tokens * 28)


def test_ulysses_splits_a_micro_batch_of_sequences_but_a_token_budget_is_per_gpu_already():
    """verl packs ppo_max_token_len_per_gpu x SP tokens for a Ulysses group, so each GPU holds the budget; a fixed
    micro-batch of whole sequences is what SP splits."""

    def activations(**changes) -> float:
        phase = memory.training_phase(QWEN_7B, knobs(**changes), 79.2)
        return {term.name: term.gib for term in phase.terms}["activations"]

    budget = activations(train_tokens=16384)
    assert activations(train_tokens=16384, sequence_parallel=2) == pytest.approx(budget)
    fixed = {"dynamic_bsz": False, "micro_batch": 4, "train_tokens": 4 * 4096}
    assert activations(**fixed, sequence_parallel=2) == pytest.approx(activations(**fixed) / 2)


def test_rollout_reservation_depends_on_the_engine():
    k = knobs(engine_fraction=0.5, param_offload=False, optimizer_offload=False)
    vllm = {t.name: t.gib for t in memory.rollout_phase(QWEN_7B, k, 80.0).terms}
    assert vllm["vllm reservation"] == pytest.approx(0.5 * 80.0)  # of TOTAL memory
    sglang = {t.name: t.gib for t in memory.rollout_phase(QWEN_7B, replace(k, engine="sglang"), 80.0).terms}
    free = 80.0 - sglang["resident trainer state"] - memory.NON_TORCH_GIB
    assert sglang["sglang reservation"] == pytest.approx(0.5 * free)  # of FREE memory
    # the verdict flips with the engine: vLLM at 0.9 next to the resident trainer state overflows, SGLang cannot
    assert not memory.rollout_phase(QWEN_7B, replace(k, engine_fraction=0.9), 80.0).fits
    assert memory.rollout_phase(QWEN_7B, replace(k, engine="sglang", engine_fraction=0.9), 80.0).fits


def test_vllm_needs_room_for_one_sequence_of_its_max_model_len_which_verl_makes_the_models_context():
    """Qwen3-8B's KV cache is 144 KiB a token: one 40960-token sequence needs 5.62 GiB, the figure vLLM's own refusal
    prints for it ("To serve at least one request with the model's max seq len (40960), (5.62 GiB KV cache is
    needed")."""
    qwen3_8b = Architecture(36, 4096, 32, 8, 128, 12288, 151936, False, max_position_embeddings=40960)
    assert memory.kv_per_sequence_gib(qwen3_8b, knobs(), 40960) == pytest.approx(5.62, abs=0.005)
    # 20 GiB of engine on an A40 holds the weights (15.3), the prefill and one 12288-token sequence, not one of 40960
    tight = knobs(engine_fraction=0.45)
    phase = memory.rollout_phase(qwen3_8b, tight, 44.4)
    assert not phase.fits and "not one 40960-token sequence" in phase.hard_failure
    assert "null: verl gives vLLM the model's positions" in phase.hard_failure
    capped = replace(tight, engine_max_model_len=tight.sequence)
    assert memory.rollout_phase(qwen3_8b, capped, 44.4).fits
    assert memory.engine_context(qwen3_8b, replace(tight, engine="sglang")) == 12288  # SGLang caps a request
    fix = preflight.candidate_fixes(qwen3_8b, tight, 44.4)[0]
    assert fix.changes == {"engine_max_model_len": 12288}  # free, so first


def test_a_llama_3_1_run_whose_engine_cannot_hold_its_131072_context_is_fixed_by_capping_max_model_len():
    overrides = ("gpu=a40", "llm=llama3_1_8b", "actor_rollout_ref.rollout.tensor_model_parallel_size=1")
    verdict = verdict_for(*overrides)
    assert not verdict.phases["rollout"].fits
    assert "131072-token sequence" in verdict.phases["rollout"].failure
    assert verdict.first_fitting_fixes == ("actor_rollout_ref.rollout.max_model_len=12288",)
    assert verdict_for(*overrides, "actor_rollout_ref.rollout.max_model_len=12288").fits


def test_host_ram_counts_offloaded_states_and_sleeping_engine():
    base = memory.host_ram_per_node(QWEN_7B, knobs())
    offloaded = memory.host_ram_per_node(QWEN_7B, knobs(param_offload=True, optimizer_offload=True))
    assert offloaded - base == pytest.approx(8 * QWEN_7B.params * 12 / 8 / GIB)
    assert base == pytest.approx(
        8 * (QWEN_7B.params * 2 / GIB + memory.HOST_GIB_PER_GPU_PROCESS) + memory.HOST_BASE_GIB_PER_NODE
    )
    assert host_memory_gb(256, 300.0, 1000.0) == 360  # never below 1.2 x the estimate
    assert host_memory_gb(512, 300.0, 1000.0) == 512
    assert host_memory_gb(256, 900.0, 1000.0) == 256  # the node cannot give 1080: the plan says so instead


def test_host_ram_terms_sum_to_the_estimate_and_name_the_setting_that_shrinks_each():
    offloaded = knobs(param_offload=True, optimizer_offload=True)
    terms = memory.host_ram_terms(QWEN_7B, offloaded)
    assert sum(term.gib for term in terms) == pytest.approx(memory.host_ram_per_node(QWEN_7B, offloaded))
    notes = {term.name: term.note for term in terms}
    assert notes["the actor's offloaded params"] == "actor_rollout_ref.actor.fsdp_config.param_offload=false"
    assert "the actor's offloaded params" not in {term.name for term in memory.host_ram_terms(QWEN_7B, knobs())}
    assert "tensor_model_parallel_size" in notes["8 sleeping engine shard(s)' weights"]


def host_ram_plans(node_gib: float, *overrides: str) -> list:
    partition = PartitionFacts("small", 128, node_gib, 8, None, None, 2)
    cfg = compose_config("cluster=slurm", "gpu=a100_80", *overrides)
    facts = cpu_facts(partition=partition)
    verdict, _ = preflight.judge(cfg, full_resolution(cfg), llm_architecture(cfg, facts, list(overrides))[0], [], {})
    return [make_plan(cfg, facts, list(overrides), Path("/tmp"), "python", verdict=verdict)]


def test_a_node_short_of_host_ram_is_shown_in_the_plan_refused_on_submission_and_warned_under_warn():
    # the default 7B on 8 GPUs: ~178 GiB of host RAM per node (8 sleeping TP-1 engines hold the weights 8 times)
    (short,) = host_ram_plans(100.0)
    assert short.node_short_of_host_ram_gib == 100.0 and short.preflight is not None and short.preflight.fits
    assert short.resources.mem_gb <= 100  # --mem stays what the node has: SLURM would refuse more at submission
    line = next(line for line in render(short).splitlines() if line.startswith("  host RAM"))
    assert "DOES NOT FIT" in line and "exceeds partition small's 100 GiB nodes" in line
    assert line.index("sleeping engine") < line.index("worker processes")  # largest first
    with pytest.raises(UserError, match=r"^preflight refuses a100_80: host RAM: 1.2 x the estimate"):
        preflight.gate([short], "fail")
    with pytest.raises(UserError, match="host RAM"):
        preflight.gate([short], "fix")
    (warning,) = preflight.gate([short], "warn")
    assert warning.startswith("preflight warns a100_80: host RAM")
    (roomy,) = host_ram_plans(1000.0)
    assert roomy.node_short_of_host_ram_gib is None and preflight.gate([roomy], "fail") == []
    # the user's --mem (validate checks it against the node) below the estimate itself: SLURM's cgroup ends the job
    (given,) = host_ram_plans(100.0, "cluster.mem_gb=90")
    assert given.node_short_of_host_ram_gib == 90.0 and given.resources.mem_gb == 90 and given.host_ram_limit_is_mem_gb
    line = next(line for line in render(given).splitlines() if line.startswith("  host RAM"))
    assert "DOES NOT FIT: the estimate" in line and "exceeds cluster.mem_gb=90 (--mem=90G)" in line
    assert "or raise cluster.mem_gb (to " in line and "exceeds partition" not in line
    with pytest.raises(UserError, match=r"^preflight refuses a100_80: host RAM: the estimate .* cluster.mem_gb=90"):
        preflight.gate([given], "fail")
    assert preflight.gate([given], "warn")[0].startswith("preflight warns a100_80: host RAM: the estimate")
    # a --mem above the estimate is the user's call, even under 1.2 x it: only the estimate itself is refused
    estimate = given.preflight.host_ram_gib_per_node
    (enough,) = host_ram_plans(1000.0, f"cluster.mem_gb={math.ceil(estimate) + 1}")
    assert enough.node_short_of_host_ram_gib is None


def test_the_host_ram_terms_round_trip_through_plan_json():
    (short,) = host_ram_plans(100.0)
    assert (
        short.preflight.host_ram
        and Plan.from_dict(json.loads(json.dumps(short.to_dict()))).preflight.host_ram == short.preflight.host_ram
    )


# --- the estimator against GPU measurements (bench/gpu_memory.py on an H100) --------------------------------------


def shape_architecture(shape: dict) -> Architecture:
    head_dim = shape["hidden"] // shape["heads"]
    return Architecture(
        shape["layers"],
        shape["hidden"],
        shape["heads"],
        shape["kv_heads"],
        head_dim,
        shape["intermediate"],
        shape["vocab"],
        False,
    )


MODEL_ROWS = [row for row in GPU_MEASUREMENTS["rows"] if row["phase"] in ("train", "logprob")]


@pytest.mark.parametrize(
    "row",
    MODEL_ROWS,
    ids=lambda r: (
        f"{r['phase']}-{r['method']}-{r['checkpointing']}-L{r['shape']['layers']}h{r['shape']['hidden']}"
        f"V{r['shape']['vocab']}t{r['tokens']}"
    ),
)
def test_each_measured_step_is_predicted_within_15_percent_never_under_by_more_than_5(row):
    """What one micro-batch adds above the model states, measured on an H100 (HF Qwen2 in bf16, verl's log-prob
    paths), against the estimator's terms: the fitted rows and the held-out whole models alike."""
    arch = shape_architecture(row["shape"])
    if row["phase"] == "train":
        terms = memory.training_dynamic(arch, row["checkpointing"], row["method"], row["tokens"], 0.0)
    else:
        terms = memory.logprob_dynamic(arch, row["method"], row["tokens"], 0.0)
    ratio = row["measured_bytes"] / sum(terms.values())
    assert 0.85 <= ratio <= 1.05, f"measured / predicted = {ratio:.3f}"


def test_margins_are_the_measured_ones():
    """Outside torch and fragmentation as the whole one-GPU cases measured them (expandable segments on, as verl
    trains): where a case filled the card, reserved over allocated within FRAGMENTATION of the transient bytes."""
    margins = GPU_MEASUREMENTS["margins"]
    assert GPU_MEASUREMENTS["device"].startswith("NVIDIA H100") and GPU_CASES["device"].startswith("NVIDIA H100")
    assert memory.NON_TORCH_GIB >= margins["non_torch_gib"]  # one process, no communicator
    filled = 0
    for case in GPU_CASES["cases"]:
        measured = case["train"] if "allocated_gib" in case["train"] else case["train_half"]
        assert memory.NON_TORCH_GIB >= measured["non_torch_gib"] - 0.01  # with a one-rank NCCL group
        if measured["total_gib"] < 0.95 * GPU_CASES["capacity_gib"]:
            continue  # with room to spare the allocator keeps freed segments mapped (up to 60 % more at 7B's sizes)
        transient = measured["allocated_gib"] - case["logprob"]["states_gib"]
        slack = (measured["reserved_gib"] - measured["allocated_gib"]) / transient
        assert slack <= memory.FRAGMENTATION, case["name"]  # a full card: what it really needed beyond allocated
        filled += 1
    assert filled >= 1
    assert len(MODEL_ROWS) >= 20


# --- the A40 scenario (docs/background.md#a40-oom), public must-OOM and must-fit cases ------------------------------

SEED_A40 = [
    "gpu=a40",
    "llm=qwen2_5_1_5b",
    "dataset=gsm8k",
    "data.max_prompt_length=512",
    "data.max_response_length=512",
    "trainer.n_gpus_per_node=1",
    "actor_rollout_ref.actor.use_dynamic_bsz=false",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.model.enable_gradient_checkpointing=true",
    "actor_rollout_ref.model.use_fused_kernels=false",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
]
RESIDENT = [
    "actor_rollout_ref.actor.fsdp_config.param_offload=false",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload=false",
]


def test_seed_a40_engine_at_0_8_with_resident_trainer_ooms_and_names_fixes():
    verdict = verdict_for(*SEED_A40, *RESIDENT, "actor_rollout_ref.rollout.gpu_memory_utilization=0.8")
    assert not verdict.fits and not verdict.phases["rollout"].fits
    assert verdict.fixes and verdict.first_fitting_fixes
    assert "lower the engine's memory fraction" in verdict.fixes[0].fix  # cheapest first


def test_seed_a40_engine_at_0_4_with_offload_fits():
    verdict = verdict_for(
        *SEED_A40,
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
        "actor_rollout_ref.actor.fsdp_config.param_offload=true",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
    )
    assert verdict.fits, verdict.arithmetic


def test_verl_2828_entropy_on_80gb_ooms():
    """The reporter's run took verl's padded path, where entropy_from_logits runs eagerly (not compiled)."""
    verdict = verdict_for(
        "gpu=a100_80",
        "actor_rollout_ref.model.use_fused_kernels=false",
        "actor_rollout_ref.model.use_remove_padding=false",
        "actor_rollout_ref.actor.entropy_coeff=0.001",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=32768",
    )
    assert not verdict.phases["training"].fits
    assert verdict.phases["training"].terms["entropy"] > 13.9  # verl#2828: a 13.91 GiB entropy allocation


def test_7b_full_finetune_unsharded_on_one_80gb_card_ooms():
    verdict = verdict_for("gpu=a100_80", "trainer.n_gpus_per_node=1", "actor_rollout_ref.rollout.n=8")
    assert not verdict.phases["training"].fits  # 16 B/param x 7.6 B = 113 GiB of states alone


def test_default_7b_run_on_eight_a100_80_fits():
    assert verdict_for("gpu=a100_80").fits


@pytest.mark.parametrize("gpu", ["a40", "a100_40", "a100_80", "h100"])
def test_every_shipped_profile_fits_every_shipped_algorithm(gpu):
    """PCGrad's task buffers live only during the update (freed before the engine wakes); RFT generates with no
    trainer on the card, so its rollout phase is the engine alone. On a100_40 PCGrad's six fp32 gradient buffers
    (21.3 GiB per GPU at 7B on 8) beside the gradients the last task accumulates do not fit 39.4 GiB: the verdict
    says so and asks for 16 GPUs, which fit."""
    baseline, pcgrad, rft = (
        verdict_for(f"gpu={gpu}", f"algo={algo}") for algo in ("guru_baseline", "mtl_pcgrad", "rft")
    )
    assert baseline.fits and rft.fits
    if gpu == "a100_40":
        assert not pcgrad.fits and "trainer.nnodes=2" in pcgrad.first_fitting_fixes
        assert verdict_for(f"gpu={gpu}", "algo=mtl_pcgrad", "trainer.nnodes=2").fits
    else:
        assert pcgrad.fits
    assert pcgrad.phases["training"].terms["pcgrad buffers"] > 0
    assert pcgrad.phases["rollout"].peak_gib == baseline.phases["rollout"].peak_gib
    assert rft.phases["rollout"].terms["resident trainer state"] == 0.0
    assert rft.phases["rollout"].peak_gib <= baseline.phases["rollout"].peak_gib
    if gpu == "a100_80":  # no actor offload on the big cards: the baseline keeps params and optimizer there
        assert baseline.phases["rollout"].terms["resident trainer state"] > 10


# verl's documented minimum configurations (tests/data/public_cases.yaml, run in verl's image, which ships flash-attn)
VERL_MIN = {
    case["name"]: case for case in load_cases() if "(verl MIN)" in case["name"] or "tuning example" in case["name"]
}


@pytest.mark.parametrize("name", sorted(VERL_MIN))
def test_verl_documented_minimum_configs_fit_when_auto_finds_flash_attn(name):
    """cluster.flash_attn=auto on a login node that shares the job's venv (flash-attn installed)."""
    verdict = verdict_for(*VERL_MIN[name]["overrides"], packages={"flash-attn": "2.8"})
    assert verdict.job_software is not None and verdict.job_software.software.flash_attn
    assert verdict.fits, verdict.arithmetic


# verl's examples/grpo_trainer/run_qwen2-7b_math.sh (0.9.x) with Qwen2.5-32B pasted in and the micro-batches of its
# 32B examples: the states on the GPUs
VERL_32B = (
    "gpu=h100",
    "llm=qwen2_5_32b",
    "data.max_prompt_length=1024",
    "data.max_response_length=1024",
    "data.train_batch_size=1024",
    "actor_rollout_ref.actor.ppo_mini_batch_size=256",
    "actor_rollout_ref.rollout.n=5",
    "actor_rollout_ref.actor.use_dynamic_bsz=false",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.actor.use_kl_loss=true",
    "actor_rollout_ref.actor.fsdp_config.param_offload=false",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload=false",
    "actor_rollout_ref.ref.fsdp_config.param_offload=true",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
)


# --- policies ------------------------------------------------------------------------------------------------------


def test_fix_never_changes_a_key_the_user_set():
    _, proposed = judged(
        *SEED_A40, *RESIDENT, "actor_rollout_ref.rollout.gpu_memory_utilization=0.8", "launch.preflight=fix"
    )
    assert not any("gpu_memory_utilization" in key for key in proposed)
    assert all("param_offload" not in key for key in proposed)  # also set on the command line


def tuned_plan(*overrides: str) -> tuple[dict, Architecture, Knobs, float, int, int]:
    cfg = compose_config(*overrides, "launch.preflight=tune")
    plan = make_plan(cfg, cpu_facts(), list(overrides), Path("/tmp"), "python")
    verdict, proposed = preflight.judge(cfg, plan.verl, plan.llm, plan.overrides, {})
    rollout = plan.verl["actor_rollout_ref"]["rollout"]
    mini = plan.verl["actor_rollout_ref"]["actor"]["ppo_mini_batch_size"] * rollout["n"]
    batch = plan.verl["data"]["train_batch_size"] * rollout["n"]
    base = verdict.knobs  # what the preflight judged, the GPU's NCCL buffers included
    assert base is not None
    return proposed, Architecture.from_llm(plan.llm), base, float(cfg.gpu.usable_gib), mini, batch


def knobs_after(base: Knobs, tuned: dict) -> Knobs:
    """The knobs verl will run with once tune's overrides are applied."""
    dynamic, keys = base.dynamic_bsz, preflight.KEYS
    changes = {"engine_fraction": float(tuned.get(keys["engine_fraction"], base.engine_fraction))}
    if dynamic:
        changes["train_tokens"] = int(tuned.get(keys["train_tokens"], base.train_tokens))
        changes["logprob_tokens"] = int(tuned.get(keys["logprob_tokens"], base.logprob_tokens))
    else:
        micro = int(tuned.get(keys["micro_batch"], base.micro_batch))
        logprob_micro = int(tuned.get(keys["logprob_micro_batch"], base.logprob_micro_batch))
        changes |= {"micro_batch": micro, "train_tokens": micro * base.sequence}
        changes |= {"logprob_micro_batch": logprob_micro, "logprob_tokens": logprob_micro * base.sequence}
    return replace(base, **changes)


@pytest.mark.parametrize("dynamic", [False, True])
def test_tune_fills_what_is_idle_and_one_step_more_does_not_fit(dynamic):
    """The training and log-prob micro-batches (or token budgets) and the engine fraction each go to the largest
    value that fits with TUNE_HEADROOM spare: the tuned plan fits, and one step more of any of them does not (or
    passes what verl can use: the GPU's share of a mini-batch, of the batch)."""
    tuned, arch, base, capacity, mini, batch = tuned_plan(
        "gpu=a100_80", "llm=qwen2_5_1_5b", f"actor_rollout_ref.actor.use_dynamic_bsz={str(dynamic).lower()}"
    )
    keys = preflight.KEYS
    train_key = keys["train_tokens" if dynamic else "micro_batch"]
    logprob_key = keys["logprob_tokens" if dynamic else "logprob_micro_batch"]
    assert {train_key, logprob_key, keys["engine_fraction"]} <= set(tuned), tuned
    after = knobs_after(base, tuned)
    headroom = preflight.TUNE_HEADROOM
    assert preflight.fits(arch, after, capacity, headroom)
    assert after.train_tokens > base.train_tokens and after.logprob_tokens > base.logprob_tokens
    assert after.engine_fraction > base.engine_fraction, "the rollout phase left memory unused"
    share = mini // base.n_gpus
    if dynamic:
        more_train = replace(after, train_tokens=after.train_tokens + preflight.TOKEN_STEP)
        more_logprob = replace(after, logprob_tokens=after.logprob_tokens + preflight.TOKEN_STEP)
        train_limit, logprob_limit = share * base.sequence, batch // base.n_gpus * base.sequence
    else:
        bigger = [m for m in range(after.micro_batch + 1, share + 1) if share % m == 0]
        more_micro = bigger[0] if bigger else share + 1
        more_train = preflight.with_train_tokens(after, more_micro * base.sequence)
        logprob_share = batch // base.n_gpus  # log-prob micro-batches divide it too (prepare_micro_batches)
        bigger = [m for m in range(after.logprob_micro_batch + 1, logprob_share + 1) if logprob_share % m == 0]
        more = bigger[0] if bigger else logprob_share + 1
        more_logprob = replace(after, logprob_micro_batch=more, logprob_tokens=more * base.sequence)
        train_limit, logprob_limit = share * base.sequence, batch // base.n_gpus * base.sequence
    assert more_train.train_tokens > train_limit or not preflight.fits(arch, more_train, capacity, headroom)
    assert more_logprob.logprob_tokens > logprob_limit or not preflight.fits(arch, more_logprob, capacity, headroom)
    more_engine = replace(after, engine_fraction=round(after.engine_fraction + 0.05, 2))
    assert not preflight.fits(arch, more_engine, capacity, headroom)
    if not dynamic:
        assert share % after.micro_batch == 0, "verl needs a micro-batch that divides the GPU's share"


def test_tune_raises_engine_concurrency_to_what_its_kv_cache_holds():
    _, arch, base, capacity, mini, batch = tuned_plan("gpu=a100_80", "llm=qwen2_5_1_5b")
    timid = replace(base, max_num_seqs=64)
    changes = preflight.tune(arch, timid, capacity, set(), mini, batch)
    after = replace(timid, **changes)
    seqs = changes["max_num_seqs"]
    room = memory.engine_memory(arch, after, capacity)[3]
    typical = memory.kv_per_sequence_gib(arch, after, int(after.sequence * preflight.TYPICAL_FRACTION))
    assert seqs == preflight.MAX_ENGINE_SEQS or seqs * typical <= room < (seqs + 1) * typical
    assert after.engine_fraction == changes["engine_fraction"] > base.engine_fraction  # raised first, then filled
    locked = preflight.tune(arch, timid, capacity, {preflight.KEYS["max_num_seqs"]}, mini, batch)
    assert "max_num_seqs" not in locked, "a key the user set stays"


def test_tune_never_raises_vllms_concurrency_above_its_batched_tokens():
    """vLLM refuses max_num_seqs > max_num_batched_tokens as it starts; SGLang has no such rule."""
    _, arch, base, capacity, mini, batch = tuned_plan("gpu=a100_80", "llm=qwen2_5_1_5b")
    few_tokens = replace(base, max_num_seqs=64, max_num_batched_tokens=300)
    assert preflight.tune(arch, few_tokens, capacity, set(), mini, batch)["max_num_seqs"] == 300
    sglang = preflight.tune(arch, replace(few_tokens, engine="sglang"), capacity, set(), mini, batch)
    assert sglang["max_num_seqs"] > 300


def test_tune_on_a40_raises_the_engine_fraction_the_issue_saw_idle():
    """a40 ships the engine at 0.45 with the trainer offloaded: ~23 GiB sat idle during rollout."""
    tuned, *_ = tuned_plan("gpu=a40")
    assert float(tuned[preflight.KEYS["engine_fraction"]]) > 0.45


def test_tuned_plan_passes_verls_checks(tmp_path: Path):
    """The tuned micro-batches go through the same validation (ours and verl's) as any plan."""
    for dynamic in ("true", "false"):
        result = run_here(
            "gpu=a100_80",
            "llm=qwen2_5_1_5b",
            f"actor_rollout_ref.actor.use_dynamic_bsz={dynamic}",
            "launch.preflight=tune",
            "launch.dry_run=json",
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        plan = json.loads(result.stdout)
        assert plan["preflight"]["fits"] and plan["preflight"]["changed"]


def test_fail_policy_refuses_submission_and_queues_nothing(slurm_env, tmp_path: Path):
    squeue = ["squeue", "-h", "-o", "%i"]
    before = subprocess.run(
        squeue, env={**__import__("os").environ, **slurm_env}, capture_output=True, text=True
    ).stdout
    result = run_cli(
        *SEED_A40,
        *RESIDENT,
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.8",
        "cluster=slurm",
        f"cluster.shared_dir={tmp_path}",
        cwd=tmp_path,
        env=slurm_env,
    )
    assert result.returncode == 2, result.stdout[-2000:]
    first = result.stderr.strip().splitlines()[0]
    assert first.startswith("rlaunch: error: preflight refuses") and "cheapest fix:" in first
    after = subprocess.run(squeue, env={**__import__("os").environ, **slurm_env}, capture_output=True, text=True).stdout
    assert set(after.split()) <= set(before.split()), "nothing queued"
    assert not list(tmp_path.rglob("manifest.json"))


def test_fix_policy_produces_a_plan_that_fits_and_dry_run_never_refuses(tmp_path: Path):
    # 1.5B on one A100 80GB with the engine at 0.8 next to the whole resident trainer state: 17 + 63 + 1 > 79 GiB
    misfit = [
        "gpu=a100_80",
        "llm=qwen2_5_1_5b",
        "trainer.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.8",
    ]
    dry = run_here(*misfit, "launch.dry_run=json", cwd=tmp_path)
    assert dry.returncode == 0 and json.loads(dry.stdout)["preflight"]["fits"] is False
    fixed = run_here(*misfit, "launch.preflight=fix", "launch.dry_run=json", cwd=tmp_path)
    plan = json.loads(fixed.stdout)
    assert plan["preflight"]["fits"] is True and plan["preflight"]["changed"]
    assert plan["verl"]["actor_rollout_ref"]["rollout"]["gpu_memory_utilization"] == 0.8  # the user's value stays


# verl's examples/sglang_multiturn/geo3k/run_qwen2.5-3b_geo3k_multiturn.sh ("run on 8xH100"), its language model
# planned as llm=qwen2_5_3b, with the micro-batches, offloads and TP it sets by hand and fused kernels off
GEO3K_BY_HAND = (
    "algo=verl",
    "gpu=h100",
    "llm=qwen2_5_3b",
    "data.train_batch_size=256",
    "data.max_prompt_length=2048",
    "data.max_response_length=2048",
    "actor_rollout_ref.actor.ppo_mini_batch_size=256",
    "actor_rollout_ref.actor.use_dynamic_bsz=false",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32",
    "actor_rollout_ref.model.use_fused_kernels=false",
    "actor_rollout_ref.actor.fsdp_config.param_offload=false",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload=false",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=32",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
    "actor_rollout_ref.rollout.n=16",
    "trainer.n_gpus_per_node=8",
)


def test_fix_refuses_what_it_cannot_fix_without_your_keys_and_a_worst_case_misfit_says_the_typical_fits():
    """launch.preflight=fix changes no key the user set: where every fitting fix does, the run is refused as under
    fail (it had been queued to die), naming the key. The verdict is the worst case (32 sequences of 4096 tokens in
    one micro-batch); at the typical lengths it fits, and the refusal says so, with the switch that queues it."""
    from launch.render import render_preflight
    from launch.rundir import Plan

    cfg = compose_config(*GEO3K_BY_HAND, "launch.preflight=fix")
    plan = make_plan(cfg, cpu_facts(), list(GEO3K_BY_HAND), Path("/tmp"), "python")
    verdict, changes = preflight.judge(cfg, plan.verl, plan.llm, plan.overrides, {})
    assert not verdict.fits and not changes and verdict.unfixable_without_your_keys
    assert verdict.typical is not None and verdict.typical.fits
    job = replace(Plan.from_dict(plan.to_dict()), preflight=verdict, job_name="geo3k")
    with pytest.raises(UserError) as refused:
        preflight.gate([job], "fix")
    first = str(refused.value).splitlines()[0]
    assert first.startswith("preflight refuses geo3k: ") and "(or launch.preflight=fix)" not in first
    assert (
        "cheapest fix: actor_rollout_ref.model.use_fused_kernels=true; the cheapest fix that fits changes a key "
        "you set (actor_rollout_ref.model.use_fused_kernels)" in first
    )
    assert "this is the worst case, every sequence at full length: at 1024 + 1024 tokens" in first
    assert "launch.preflight=warn queues it as it is" in first
    shown = "\n".join(render_preflight(verdict))
    assert (
        "  not fixed     the cheapest fix that fits changes a key you set (actor_rollout_ref.model.use_fused" in shown
    )


# --- the shipped profiles ------------------------------------------------------------------------------------------

LLMS = sorted(p.stem for p in (PROJECT / "conf" / "llm").glob("*.yaml"))
PROFILES = load_profiles()


@pytest.mark.parametrize("gpu", sorted(PROFILES))
def test_every_shipped_profile_fits_every_llm_or_says_what_fits(gpu):
    """No table of what big models need: a misfit on one 8-GPU node gets the cheapest change the preflight searched,
    and that change fits (with it, the count the search names fits; it says so only when nothing fits the 8)."""
    for llm in LLMS:
        verdict = verdict_for(f"gpu={gpu}", f"llm={llm}")
        if verdict.fits:
            continue
        found = verdict.fits_with
        assert found.summary, f"{gpu} x {llm}"
        change = found.on_your_gpus or found.searched_count
        if change is None:
            assert "no GPU count" in found.summary and "no offload" in found.summary, found.summary
            continue
        assert verdict_for(f"gpu={gpu}", f"llm={llm}", *change.overrides).fits, (gpu, llm, change)


def test_a_32b_run_on_8_h100s_says_what_fits():
    """The issue's pasted Qwen2.5-32B run on 8 H100s: the preflight says what fits, searched (offload on the 8, or
    the GPU count), where a hand table once said "needs at least 32"."""
    verdict = verdict_for(*VERL_32B)
    assert not verdict.fits
    found = verdict.fits_with
    # AdamW's step holds 16 + 4 B/param of 32.8 B over 8 GPUs (81 GiB) even with the states offloaded between phases
    assert found.on_your_gpus is None
    assert found.summary == (
        "no offload or rollout TP fits it on 8; with param+optimizer offload it needs 16 GPUs (host RAM 552 GiB/node); "
        "as it is it needs 32 GPUs"
    )
    for needed in (found.gpus_needed_offloaded, found.gpus_needed):
        assert verdict_for(*VERL_32B, *needed.overrides).fits, needed
    fewer = [o.replace("trainer.nnodes=2", "trainer.nnodes=1") for o in found.gpus_needed_offloaded.overrides]
    assert not verdict_for(*VERL_32B, *fewer).fits
    first = preflight.refusal(verdict, "job").splitlines()[0]
    assert "cheapest fix: " in first and found.summary in first
    # a case the offload does fit on the 8: torch's fused AdamW has no whole-size temporaries in its step
    fused = verdict_for(*VERL_32B, "actor_rollout_ref.actor.optim.override_optimizer_config={fused: true}")
    assert fused.fits_with.summary.startswith("fits on 8 with optimizer offload (host RAM "), fused.fits_with
    assert "; without optimizer offload it needs 32 GPUs" in fused.fits_with.summary


def test_fit_table_command_prints_json(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, str(PROJECT / "launch" / "fit_table.py"), "llm=qwen2_5_1_5b", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    table = json.loads(result.stdout)
    assert {row["gpu"] for row in table} == set(PROFILES) and {row["gpus"] for row in table} == {1, 2, 4, 8, 16}
    assert all(set(row["peaks_gib"]) == {"training", "log-prob", "rollout"} for row in table)
    assert all(row["cheapest_fix"] is None for row in table if row["fits"]), "a row that fits needs no fix"
    fractions = [item for row in table for item in row["tuned"] if "gpu_memory_utilization" in item]
    assert fractions and all(0 < float(item.split("=")[1]) < 1 for item in fractions), fractions


def test_fit_table_piped_shows_every_override_in_full(tmp_path: Path):
    env = {key: value for key, value in __import__("os").environ.items() if key != "COLUMNS"}
    result = subprocess.run(
        [sys.executable, str(PROJECT / "launch" / "fit_table.py"), "llm=qwen2_5_1_5b"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "…" not in result.stdout
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0." in result.stdout
    assert "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=" in result.stdout


def test_plan_carries_the_verdict(tmp_path: Path):
    cfg = compose_config("gpu=a40")
    with open_dict(cfg):
        cfg.launch.preflight = "warn"
    plan = make_plan(cfg, cpu_facts(), [], tmp_path, "python")
    verdict = preflight.check_plan(cfg, plan, {})
    record = verdict.to_dict()  # what plan.json holds
    for phase in ("training", "log-prob", "rollout"):
        assert {"peak_gib", "capacity_gib", "fits"} <= set(record["phases"][phase])
    assert "mfu" in record["predicted"] and "tokens_per_s_per_gpu" in record["predicted"]


@pytest.mark.parametrize(
    "eager_by", ["actor_rollout_ref.actor.use_torch_compile=false", "actor_rollout_ref.model.use_remove_padding=false"]
)
def test_verl_compiles_the_entropy_unless_told_not_to_or_padded(eager_by: str):
    """torch.compile fuses entropy_from_logits' row reductions: without it (or on verl's padded path, which calls it
    eagerly) the softmax and its product are materialized, and the entropy term grows from 2 to 10 B per token x vocab
    in training (both measured on the H100)."""
    knobs = (
        "gpu=a100_80",
        "actor_rollout_ref.model.use_fused_kernels=false",
        "actor_rollout_ref.actor.entropy_coeff=0.001",
    )
    compiled = verdict_for(*knobs).phases["training"].terms["entropy"]
    eager = verdict_for(*knobs, eager_by).phases["training"].terms["entropy"]
    assert eager == pytest.approx(5 * compiled, rel=0.01)


# --- each GPU's share of the batch, the critic, typical lengths -----------------------------------------------------

SHARE = (
    "gpu=h100",
    "llm=qwen2_5_1_5b",
    "trainer.n_gpus_per_node=4",
    "data.max_prompt_length=512",
    "data.max_response_length=1024",
    "actor_rollout_ref.rollout.n=32",
    "actor_rollout_ref.actor.use_dynamic_bsz=false",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=40",
)


def test_two_plans_differing_only_in_a_batch_below_the_micro_batch_differ():
    """The issue's report: 4 and 8 prompts x n=32 on 4 GPUs give 32 and 64 sequences per GPU; a log-prob micro-batch
    of 40 holds 32 and 40 of them, so the peaks differ (they were planned byte-identically)."""
    small, large = (
        verdict_for(*SHARE, f"data.train_batch_size={b}", f"actor_rollout_ref.actor.ppo_mini_batch_size={b}")
        for b in (4, 8)
    )
    assert small.phases["log-prob"].peak_gib < large.phases["log-prob"].peak_gib
    assert small.knobs is not None and small.knobs.logprob_tokens_on_gpu == 32 * 1536
    assert large.knobs is not None and large.knobs.logprob_tokens_on_gpu == 40 * 1536


@pytest.mark.parametrize("sp, dynamic", [(1, False), (2, False), (1, True), (2, True)])
def test_the_share_is_verls_split_over_data_parallel_ranks(sp: int, dynamic: bool):
    """verl 0.9.1: TrainingWorker.train_mini_batch gives each data-parallel rank mini_batch_size (x n) //
    (world / Ulysses SP) sequences; prepare_micro_batches cuts micro-batches of micro_batch_size_per_gpu sequences
    (or budget x SP tokens) from that share; each GPU of the SP group holds 1/SP of them."""
    n_gpus, sequence = 8, 1000  # a mini-batch of 3 prompts x n=8 = 24 sequences
    k = knobs(
        n_gpus=n_gpus,
        sequence_parallel=sp,
        prompt_length=400,
        response_length=600,
        dynamic_bsz=dynamic,
        micro_batch=None if dynamic else 16,
        train_tokens=16384 if dynamic else 16 * sequence,
        mini_batch_sequences=24,
        batch_sequences=96,
    )
    share = 24 // (n_gpus // sp)  # verl: mini_batch_size // get_data_parallel_size()
    group = min(16384 * sp, share * sequence) if dynamic else min(16, share) * sequence
    assert k.train_tokens_on_gpu == group // sp  # the arithmetic; the next test runs verl's own split
    phase = memory.training_phase(QWEN_7B, k, 79.2)
    assert f"{group // sp} tokens per micro-batch" in phase.notes[0]


def test_the_fixed_micro_batch_split_is_verls_own():
    """verl's own prepare_micro_batches on a rank's share (6 sequences) with a micro-batch of 4 that verl 0.9.1 would
    refuse and one of 2: whole micro-batches of 2 sequences, as the estimator counts."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("verl")
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.utils import prepare_micro_batches

    data = TensorDict({"input_ids": torch.zeros(6, 3, dtype=torch.long)}, batch_size=[6])
    tu.assign_non_tensor(data, use_dynamic_bsz=False, micro_batch_size_per_gpu=2)
    micro_batches, _ = prepare_micro_batches(data)
    assert [len(micro) for micro in micro_batches] == [2, 2, 2]
    k = knobs(dynamic_bsz=False, micro_batch=2, train_tokens=2 * 12288, mini_batch_sequences=6 * 8)
    assert k.train_tokens_on_gpu == 2 * 12288


GAE = ("gpu=a100_80", "llm=qwen2_5_1_5b", "algorithm.adv_estimator=gae")


def test_a_gae_run_counts_the_critic_in_every_phase():
    grpo = verdict_for("gpu=a100_80", "llm=qwen2_5_1_5b")
    gae = verdict_for(*GAE)
    assert set(gae.phases) == set(grpo.phases) | {"critic update", "values"}
    assert not gae.not_counted
    for phase in ("training", "log-prob"):
        assert gae.phases[phase].terms["critic state"] > 0
        assert gae.phases[phase].peak_gib > grpo.phases[phase].peak_gib
    assert (
        gae.phases["rollout"].terms["resident trainer state"] > (grpo.phases["rollout"].terms["resident trainer state"])
    )
    critic = gae.phases["critic update"].terms
    assert critic["actor state"] > 0 and "logits" not in critic  # a value head has no vocabulary logits
    offloaded = verdict_for(*GAE, "critic.fsdp.param_offload=true", "critic.fsdp.optimizer_offload=true")
    assert "critic state" not in {k for k, v in offloaded.phases["training"].terms.items() if v > 0}
    assert offloaded.host_ram_gib_per_node > gae.host_ram_gib_per_node
    assert verdict_for(*GAE, "launch.dry_run=true") and gae.knobs is not None and gae.knobs.critic


def test_the_critic_starts_from_the_actors_model():
    from launch.readiness import critic_from_actor

    cfg = compose_config(*GAE)
    assert critic_from_actor(cfg) and cfg.critic.model.path == cfg.actor_rollout_ref.model.path


def test_expected_response_tokens_change_the_typical_line_and_only_it():
    fixed = (
        "gpu=a100_80",
        "llm=qwen2_5_1_5b",
        "actor_rollout_ref.actor.use_dynamic_bsz=false",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
    )
    half, stated = verdict_for(*fixed), verdict_for(*fixed, "launch.expect.response_tokens=1000")
    assert stated.typical.response_tokens == 1000 and half.typical.response_tokens == 4096
    assert stated.typical.prompt_tokens == half.typical.prompt_tokens == 2048
    assert stated.typical.source == "prompt: half of data.max_prompt_length; response: launch.expect.response_tokens"
    assert stated.typical.peaks_gib["training"] < half.typical.peaks_gib["training"]
    for key in ("phases", "arithmetic", "fits", "host_ram_gib_per_node", "predicted", "knobs"):
        assert getattr(stated, key) == getattr(half, key), key


def test_typical_lengths_precedence():
    from launch.lengths import typical_lengths

    cfg = compose_config("data.max_prompt_length=1000", "data.max_response_length=4000")
    assert (typical_lengths(cfg).prompt_tokens, typical_lengths(cfg).response_tokens) == (500, 2000)
    measured = typical_lengths(cfg, 300, 900)
    assert (measured.prompt_tokens, measured.response_tokens) == (300, 900) and "measured" in measured.source
    with open_dict(cfg):
        cfg.launch.expect.response_tokens = 1200
    stated = typical_lengths(cfg, 300, 900)
    assert (stated.prompt_tokens, stated.response_tokens) == (300, 1200)
    assert stated.source == "prompt: measured; response: launch.expect.response_tokens"


def test_prompt_lengths_are_measured_only_from_a_cached_tokenizer(tmp_path: Path):
    from launch.lengths import measure_prompt_lengths

    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"prompt": [[{"role": "user", "content": "hi " * n}] for n in range(1, 21)]}), path)
    assert measure_prompt_lengths([str(path)], str(tmp_path / "no-such-tokenizer")) is None


# verl's examples/tuning/7b/qwen2-7b_grpo_2_h800_fsdp_vllm.sh (Qwen2-7B, both offloads, rollout TP 2, 2 GPUs)
TUNING_2_H800 = (
    "llm=qwen2_7b",
    "trainer.n_gpus_per_node=2",
    "data.train_batch_size=1024",
    "data.max_prompt_length=1024",
    "data.max_response_length=1024",
    "actor_rollout_ref.actor.ppo_mini_batch_size=256",
    "actor_rollout_ref.actor.fsdp_config.param_offload=true",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
    "actor_rollout_ref.rollout.n=5",
)


def test_nvls_buffers_are_a_searched_fix_on_cards_whose_nccl_opens_them():
    """On H800s NCCL opens no NVLS channels; the same script on H100s holds 2.7 GiB per communicator instead of 0.7,
    and its update no longer fits. Turning NVLS off (cluster.env.NCCL_NVLS_ENABLE=0) is the cheapest fix, `fix`
    applies it to the job's environment, and a run that sets it is judged with the smaller buffers."""
    assert verdict_for("gpu=h800", *TUNING_2_H800).fits
    verdict, _ = judged("gpu=h100", *TUNING_2_H800)
    assert not verdict.fits
    assert verdict.first_fitting_fixes == ("++cluster.env.NCCL_NVLS_ENABLE='0'",), verdict.first_fitting_fixes
    nvls = next(fix for fix in verdict.fixes if fix.fix.startswith("turn NCCL's NVLink SHARP off"))
    assert nvls.fits and nvls.overrides == {"++cluster.env.NCCL_NVLS_ENABLE": "0"}
    _, proposed = judged("gpu=h100", *TUNING_2_H800, "launch.preflight=fix")
    assert proposed == {"++cluster.env.NCCL_NVLS_ENABLE": "0"}
    assert verdict_for("gpu=h100", *TUNING_2_H800, "+cluster.env.NCCL_NVLS_ENABLE=0").fits
    # the user's own setting is theirs: fix leaves it, and the advice still says what would fit
    _, kept = judged("gpu=h100", *TUNING_2_H800, "+cluster.env.NCCL_NVLS_ENABLE=1", "launch.preflight=fix")
    assert "cluster.env.NCCL_NVLS_ENABLE" not in kept
    # no NVLS on H800s: nothing to turn off in a misfit there (the optimizer back on the card)
    on_card = "actor_rollout_ref.actor.fsdp_config.optimizer_offload=false"
    h800 = verdict_for("gpu=h800", *TUNING_2_H800, on_card)
    assert not h800.fits and h800.fixes and not [fix for fix in h800.fixes if "SHARP" in fix.fix]
    assert [fix for fix in verdict_for("gpu=h100", *TUNING_2_H800, on_card).fixes if "SHARP" in fix.fix]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["llm=foo"], "unknown llm 'foo'"),
        (["actor_rollout_ref.rollout.n=five"], "actor_rollout_ref.rollout.n=five: must be an integer >= 1"),
        (["gpu=a40"], "fit_table.py plans every gpu profile in its rows: drop gpu="),
    ],
)
def test_fit_table_refuses_bad_input_in_one_line(args: list[str], said: str, capsys: pytest.CaptureFixture[str]):
    """As run.py does: one line, exit 2 (a gpu= had relabelled every row with one profile's capacity)."""
    from launch.fit_table import main as fit_table

    with pytest.raises(SystemExit) as ended:
        fit_table(args)
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err.count("\n") == 1 and said in err, err


def test_inspecting_a_sweep_is_one_line(tmp_path: Path):
    result = run_here("gpu=a40,h100", "-m", "--info", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "--info shows one run's config and -m sweeps: drop -m" in result.stderr


def test_the_printed_nvls_fix_is_taken_as_printed(tmp_path: Path):
    """The plan printed `cluster.env.NCCL_NVLS_ENABLE='0'`, which Hydra refuses pasted (cluster.env holds no such key:
    "unknown key ... add +"); printed with `++` (add or override) it plans, and with the key set already too.
    launch.preflight=fix sets it in the job's environment, the plain key."""
    verdict, _ = judged("gpu=h100", *TUNING_2_H800)
    printed = verdict.cheapest_fix
    assert printed == ("++cluster.env.NCCL_NVLS_ENABLE='0'",), printed
    assert verdict_for("gpu=h100", *TUNING_2_H800, *printed).fits
    assert verdict_for("gpu=h100", *TUNING_2_H800, "+cluster.env={NCCL_NVLS_ENABLE:'1'}", *printed).fits
    pasted = run_here("gpu=h100", *TUNING_2_H800, *printed, "launch.dry_run=true", cwd=tmp_path)
    assert pasted.returncode == 0 and "unknown key" not in pasted.stderr, pasted.stderr[-2000:]
    fixed = run_here("gpu=h100", *TUNING_2_H800, "launch.preflight=fix", "launch.dry_run=json", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    plan = json.loads(fixed.stdout.splitlines()[-1])
    assert plan["preflight"]["fits"] and plan["preflight"]["changed"] == {"cluster.env.NCCL_NVLS_ENABLE": "'0'"}
