"""The memory preflight: a verdict per phase, the cheapest fixes for a misfit, and tuning for a timid configuration.

Runs on: the login node, before the plan is made and at submission. It reads a job's resolved verl config, the
architecture and the GPU profile's usable memory, and returns a verdict plus the typed verl knob values its policy
changes (judge, pure); settle applies them to the config once, before the plan is made from it (the plan takes
--mem from the verdict's host-RAM estimate); gate refuses or warns at submission.
Policies (launch.preflight): fail (refuse a misfit at submission), fix (apply the first set of fixes that fits), tune
(raise micro-batch / token budget and engine concurrency to the largest that fit with TUNE_HEADROOM spare), warn,
off. fix and tune never change a key the user set on the command line; they say so instead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from launch.compose_once import Resolve
from launch.errors import UserError
from launch.facts import Facts
from launch.job_software import job_software, skipped_engine_check
from launch.memory import (
    Architecture,
    Knobs,
    engine_memory,
    estimate,
    flops_per_token,
    host_ram_per_node,
    kv_per_sequence_gib,
    predicted_mfu,
    rollout_phase,
    with_changes,
)
from launch.overrides import keys_of
from launch.plan import llm_architecture
from launch.readiness import trains_critic
from launch.render import refusal
from launch.rundir import Plan

TUNE_HEADROOM = 0.90  # tune fills at most 90 % of the card: the 10 % absorb what no estimate sees
TOKEN_STEP = 1024  # token budgets are tuned in steps of this many tokens
MAX_ENGINE_SEQS = 1024
TYPICAL_FRACTION = 0.5  # "typical" sequences: half the maximum prompt + response length (README: worst case vs typical)

# verl key of each knob a fix or tune may set
KEYS = {
    "engine_fraction": "actor_rollout_ref.rollout.gpu_memory_utilization",
    "checkpointing": "actor_rollout_ref.model.enable_gradient_checkpointing",
    "fused_kernels": "actor_rollout_ref.model.use_fused_kernels",
    "train_tokens": "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "logprob_tokens": "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
    "micro_batch": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "logprob_micro_batch": "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "optimizer_offload": "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
    "param_offload": "actor_rollout_ref.actor.fsdp_config.param_offload",
    "rollout_tp": "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "max_num_seqs": "actor_rollout_ref.rollout.max_num_seqs",
    "nnodes": "trainer.nnodes",
}

REF_KEYS = {
    "logprob_tokens": "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
    "logprob_micro_batch": "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
}


@dataclass(frozen=True)
class Fix:
    description: str
    changes: dict[str, Any]  # Knobs field -> new value


def user_keys(overrides: list[str]) -> set[str]:
    return keys_of(overrides)


def fits(arch: Architecture, knobs: Knobs, capacity: float, headroom: float = 1.0) -> bool:
    return all(phase.fits and phase.peak_gib <= capacity * headroom for phase in estimate(arch, knobs, capacity))


def sequence_per_gpu_limit(knobs: Knobs, mini_batch_sequences: int) -> int:
    """verl never packs more than a GPU's share of a mini-batch into one micro-batch."""
    return max(1, mini_batch_sequences // knobs.n_gpus)


def with_train_tokens(knobs: Knobs, tokens: int) -> Knobs:
    """The training micro-batch in the knob that is live: the token budget (dynamic) or the micro-batch size."""
    if knobs.dynamic_bsz:
        return with_changes(knobs, train_tokens=tokens)
    micro = max(1, tokens // knobs.sequence)
    return with_changes(knobs, micro_batch=micro, train_tokens=micro * knobs.sequence)


def candidate_fixes(arch: Architecture, knobs: Knobs, capacity: float) -> list[Fix]:
    """Cheapest first in lost throughput."""
    fixes = []
    rollout = rollout_phase(arch, knobs, capacity)
    if not rollout.fits and knobs.engine != "sglang":
        for step in range(int(knobs.engine_fraction * 20) - 1, 1, -1):
            fraction = step / 20
            if rollout_phase(arch, with_changes(knobs, engine_fraction=fraction), capacity).fits:
                fixes.append(Fix(f"lower the engine's memory fraction to {fraction}", {"engine_fraction": fraction}))
                break
    if not knobs.fused_kernels:
        fixes.append(Fix("compute log-probs in 512-token chunks (fused kernels)", {"fused_kernels": True}))
    if not knobs.checkpointing:
        fixes.append(Fix("turn on gradient checkpointing", {"checkpointing": True}))
    halved = max(knobs.train_tokens // 2, knobs.sequence)
    if halved < knobs.train_tokens:
        if knobs.dynamic_bsz:
            changes = {"train_tokens": halved, "logprob_tokens": max(knobs.logprob_tokens // 2, knobs.sequence)}
            fixes.append(Fix(f"halve the token budget per GPU to {halved}", changes))
        else:
            micro = max(1, (knobs.micro_batch or 1) // 2)
            changes = {
                "micro_batch": micro,
                "train_tokens": micro * knobs.sequence,
                "logprob_micro_batch": max(1, (knobs.logprob_micro_batch or 1) // 2),
            }
            fixes.append(Fix(f"halve the micro-batch to {micro}", changes))
    if not knobs.optimizer_offload:
        fixes.append(Fix("offload the optimizer state to host RAM between updates", {"optimizer_offload": True}))
    if not knobs.param_offload:
        fixes.append(Fix("offload the parameters to host RAM between phases", {"param_offload": True}))
    if knobs.rollout_tp * 2 <= knobs.gpus_per_node:
        fixes.append(Fix(f"raise rollout TP to {knobs.rollout_tp * 2}", {"rollout_tp": knobs.rollout_tp * 2}))
    fixes.append(Fix(f"use twice the GPUs ({knobs.n_gpus * 2})", {"n_gpus": knobs.n_gpus * 2}))
    return fixes


def overrides_for(changes: dict[str, Any], knobs: Knobs) -> dict[str, Any]:
    """Knobs changes -> verl key overrides."""
    out = {}
    for name, value in changes.items():
        if name == "n_gpus":
            out[KEYS["nnodes"]] = value // knobs.gpus_per_node if value >= knobs.gpus_per_node else 1
        elif name == "train_tokens" and not knobs.dynamic_bsz:
            continue  # follows micro_batch
        elif name == "logprob_tokens" and not knobs.dynamic_bsz:
            continue
        elif name in KEYS:
            out[KEYS[name]] = value
            if name in REF_KEYS and knobs.ref_model:  # the reference model's log-prob pass has the same shape
                out[REF_KEYS[name]] = value
    return out


def first_fitting(arch: Architecture, knobs: Knobs, capacity: float, fixes: list[Fix]) -> tuple[dict[str, Any], Knobs]:
    """Apply fixes cumulatively, cheapest first, until the plan fits; the verl keys and typed values of that set (or
    none) and the knobs they give."""
    current, applied = knobs, {}
    for fix in fixes:
        current = with_changes(current, **fix.changes)
        applied.update(overrides_for(fix.changes, knobs))
        if fits(arch, current, capacity):
            return applied, current
    return {}, knobs


def as_overrides(changes: dict[str, Any]) -> list[str]:
    return [f"{key}={value}" for key, value in changes.items()]


def plan_fixes(
    arch: Architecture, knobs: Knobs, capacity: float, locked: set[str]
) -> tuple[list[dict], list[str], tuple[dict[str, Any], Knobs]]:
    """Every single fix with its predicted peaks; the first cumulative set that fits (advice: it may touch keys the
    user set); and the first such set among the fixes that leave the user's keys alone (what `fix` applies)."""
    fixes = candidate_fixes(arch, knobs, capacity)
    reports = []
    for fix in fixes:
        keys = overrides_for(fix.changes, knobs)
        phases = estimate(arch, with_changes(knobs, **fix.changes), capacity)
        reports.append(
            {
                "fix": fix.description,
                "overrides": keys,
                "peaks_gib": {phase.name: round(phase.peak_gib, 1) for phase in phases},
                "fits": all(phase.fits for phase in phases),
                **({"you_set": sorted(locked & set(keys))} if locked & set(keys) else {}),
            }
        )
    allowed = [fix for fix in fixes if not locked & set(overrides_for(fix.changes, knobs))]
    advice = as_overrides(first_fitting(arch, knobs, capacity, fixes)[0])
    return reports, advice, first_fitting(arch, knobs, capacity, allowed)


TUNABLE = ("train", "logprob", "engine_fraction", "max_num_seqs")


def largest(arch: Architecture, capacity: float, candidates: list[Knobs]) -> Knobs | None:
    """The last of the ascending candidates that fits with TUNE_HEADROOM spare, stopping at the first misfit after
    a fit (below the first fit, e.g. an engine fraction too small for one sequence, nothing stops the walk)."""
    best = None
    for candidate in candidates:
        if fits(arch, candidate, capacity, TUNE_HEADROOM):
            best = candidate
        elif best is not None:
            break
    return best


def train_candidates(knobs: Knobs, mini_batch_sequences: int) -> list[Knobs]:
    """Token budgets in TOKEN_STEPs up to the GPU's share of a mini-batch, or the micro-batches that divide it (verl
    requires that)."""
    share = sequence_per_gpu_limit(knobs, mini_batch_sequences)
    if knobs.dynamic_bsz:
        return [
            with_changes(knobs, train_tokens=t) for t in range(knobs.sequence, share * knobs.sequence + 1, TOKEN_STEP)
        ]
    return [with_train_tokens(knobs, m * knobs.sequence) for m in range(1, share + 1) if share % m == 0]


def logprob_candidates(knobs: Knobs, batch_sequences: int) -> list[Knobs]:
    """The log-prob pass goes over the whole batch: budgets up to the GPU's share of it."""
    share = max(1, batch_sequences // knobs.n_gpus)
    if knobs.dynamic_bsz:
        budgets = range(knobs.sequence, share * knobs.sequence + 1, TOKEN_STEP)
        return [with_changes(knobs, logprob_tokens=t) for t in budgets]
    return [with_changes(knobs, logprob_micro_batch=m, logprob_tokens=m * knobs.sequence) for m in range(1, share + 1)]


def engine_sequences(arch: Architecture, knobs: Knobs, capacity: float) -> int:
    """How many typical-length sequences the engine's KV cache holds (what max_num_seqs can usefully be)."""
    kv_room = engine_memory(arch, knobs, capacity)[3]
    per_sequence = kv_per_sequence_gib(arch, knobs, max(1, int(knobs.sequence * TYPICAL_FRACTION)))
    return int(kv_room / per_sequence) if per_sequence > 0 and kv_room > 0 else 0


def tune(
    arch: Architecture,
    knobs: Knobs,
    capacity: float,
    locked: set[str],
    mini_batch_sequences: int,
    batch_sequences: int = 0,
    what: tuple[str, ...] = TUNABLE,
) -> dict:
    """Raise what leaves memory idle, in order, each to the largest value that fits with TUNE_HEADROOM spare (so
    one step more does not): the training micro-batch or token budget, the log-prob micro-batch or budget (over
    `batch_sequences`), the engine's memory fraction, then its concurrency (the typical-length sequences its KV cache
    holds). Keys the user set stay. Returns Knobs changes."""
    changes: dict[str, Any] = {}
    train_key = KEYS["train_tokens"] if knobs.dynamic_bsz else KEYS["micro_batch"]
    if "train" in what and train_key not in locked:
        best = largest(arch, capacity, train_candidates(knobs, mini_batch_sequences))
        if best is not None and best.train_tokens != knobs.train_tokens:
            changes.update(
                {"train_tokens": best.train_tokens} if knobs.dynamic_bsz else {"micro_batch": best.micro_batch}
            )
            knobs = best
    logprob_key = KEYS["logprob_tokens"] if knobs.dynamic_bsz else KEYS["logprob_micro_batch"]
    if "logprob" in what and batch_sequences and logprob_key not in locked:
        best = largest(arch, capacity, logprob_candidates(knobs, batch_sequences))
        if best is not None and best.logprob_tokens != knobs.logprob_tokens:
            changes.update(
                {"logprob_tokens": best.logprob_tokens}
                if knobs.dynamic_bsz
                else {"logprob_micro_batch": best.logprob_micro_batch}
            )
            knobs = best
    if "engine_fraction" in what and KEYS["engine_fraction"] not in locked:
        steps = [with_changes(knobs, engine_fraction=step / 20) for step in range(1, 20)]
        best = largest(arch, capacity, steps)
        if best is not None and best.engine_fraction > knobs.engine_fraction:
            changes["engine_fraction"] = best.engine_fraction
            knobs = best
    if "max_num_seqs" in what and KEYS["max_num_seqs"] not in locked:
        wanted = min(MAX_ENGINE_SEQS, engine_sequences(arch, knobs, capacity))
        if wanted > knobs.max_num_seqs:
            changes["max_num_seqs"] = wanted
    return changes


def summarize(arch: Architecture, knobs: Knobs, capacity: float, bf16_tflops: float) -> dict[str, Any]:
    phases = estimate(arch, knobs, capacity)
    mfu = predicted_mfu(knobs)
    return {
        "fits": all(phase.fits for phase in phases),
        "misfit": next((phase.name for phase in phases if not phase.fits), None),  # the first phase that does not fit
        "phases": {phase.name: phase.to_dict() for phase in phases},
        "arithmetic": [phase.arithmetic() for phase in phases],
        "host_ram_gib_per_node": round(host_ram_per_node(arch, knobs), 1),
        "predicted": {
            "mfu": round(mfu, 3),
            "tokens_per_s_per_gpu": round(mfu * bf16_tflops * 1e12 / flops_per_token(arch, knobs.sequence)),
            "train_tokens_per_micro_batch": knobs.train_tokens,
        },
    }


def run(
    arch: Architecture,
    knobs: Knobs,
    capacity: float,
    bf16_tflops: float,
    policy: str,
    overrides: list[str],
    mini_batch_sequences: int,
    batch_sequences: int = 0,
    length_fraction: float = TYPICAL_FRACTION,
) -> dict[str, Any]:
    """The verdict for the plan as it is, and the verl keys the policy changes with their typed values
    (`apply_overrides`): `fix` the cheapest set that fits, `tune` that set and then the largest knobs that fit (tuned
    from the fixed plan)."""
    locked = user_keys(overrides)
    verdict = summarize(arch, knobs, capacity, bf16_tflops) | {"policy": policy}
    applicable: dict[str, Any] = {}
    fixed = knobs
    if not verdict["fits"]:
        verdict["fixes"], verdict["first_fitting_fixes"], (applicable, fixed) = plan_fixes(
            arch, knobs, capacity, locked
        )
        if not applicable:
            verdict["unfixable_without_your_keys"] = True
    proposed: dict[str, Any] = {}
    if policy in ("fix", "tune") and not verdict["fits"]:
        proposed = dict(applicable)
    if policy == "tune" and (verdict["fits"] or applicable):
        tuned = tune(arch, fixed, capacity, locked, mini_batch_sequences, batch_sequences)
        proposed.update(overrides_for(tuned, fixed))
    verdict["apply_overrides"] = proposed
    verdict["typical"] = typical(arch, knobs, capacity, mini_batch_sequences, length_fraction)
    return verdict


def typical(
    arch: Architecture, knobs: Knobs, capacity: float, mini_batch_sequences: int, fraction: float = TYPICAL_FRACTION
) -> dict[str, Any]:
    """The peaks when every sequence is `fraction` of its maximum length: what a run usually sees. The verdict
    stays on the worst case (full-length sequences filling the micro-batch or the token budget); a token budget is
    filled by typical sequences too, up to the GPU's share of a mini-batch."""
    length = max(1, int(knobs.sequence * fraction))
    if knobs.dynamic_bsz:
        share = sequence_per_gpu_limit(knobs, mini_batch_sequences) * length
        usual = with_changes(knobs, train_tokens=min(knobs.train_tokens, share))
    else:
        usual = with_changes(
            knobs,
            train_tokens=(knobs.micro_batch or 1) * length,
            logprob_tokens=(knobs.logprob_micro_batch or 1) * length,
        )
    phases = estimate(arch, usual, capacity)
    return {
        "sequence_tokens": length,
        "fraction_of_max": fraction,
        "peaks_gib": {phase.name: round(phase.peak_gib, 1) for phase in phases},
        "fits": all(phase.fits for phase in phases),
    }


def judge(
    cfg: Any,
    verl: dict[str, Any],
    llm: dict[str, Any],
    overrides: list[str],
    packages: dict[str, str],
    length_fraction: float = TYPICAL_FRACTION,
) -> dict[str, Any]:
    """The preflight of one job's config (cfg: the composed config; verl: its resolved verl keys; llm: the
    architecture launch/plan.py's llm_architecture finds; packages: the venv's; length_fraction: the sequences' share
    of their maximum length for the `typical` figures). Pure."""
    tasks = len(cfg.dataset.domains) if cfg.algo.pcgrad.enabled else 0
    software = job_software(cfg.cluster, str(verl["actor_rollout_ref"]["rollout"]["name"]), packages)
    knobs = with_changes(
        Knobs.from_verl(verl, pcgrad_tasks=tasks, flash_ce=software.flash_attn),
        engine_weights_in_host_ram=software.engine_weights_in_host_ram,
        communicator_gib=float(cfg.gpu.nccl_gib_per_communicator),
    )
    if cfg.algo.name == "rft":  # stage 3's SFT takes the profile's actor knobs (algos/rft/sft.py): same training phase
        knobs = with_changes(knobs, trainer_beside_engine=False)
    mini_batch_sequences = verl["actor_rollout_ref"]["actor"]["ppo_mini_batch_size"] * knobs_rollout_n(verl)
    verdict = run(
        Architecture.from_llm(llm),
        knobs,
        float(cfg.gpu.usable_gib),
        float(cfg.gpu.bf16_tflops),
        str(cfg.launch.preflight),
        overrides,
        mini_batch_sequences,
        int(verl["data"]["train_batch_size"]) * knobs_rollout_n(verl),
        length_fraction,
    )
    skipped = skipped_engine_check(verl)
    verdict["job_software"] = software.to_dict() | {"notes": software.lines() + ([skipped] if skipped else [])}
    verdict["knobs"] = asdict(knobs)  # what was judged: the doctor reads it back instead of rebuilding it
    verdict["not_counted"] = not_counted(verl)
    return verdict


def check_plan(
    cfg: Any, plan: Any, packages: dict[str, str], length_fraction: float = TYPICAL_FRACTION
) -> dict[str, Any]:
    """The preflight of a planned job (launch.plan.Plan): what-if questions of the report, the fit table and tests."""
    return judge(cfg, plan.verl, plan.llm, plan.overrides, packages, length_fraction)


def not_counted(verl: dict[str, Any]) -> list[str]:
    """What the estimator does not model yet, said in the plan rather than left out silently."""
    algorithm = verl["algorithm"]
    missing = []
    if trains_critic(verl):
        missing.append(
            f"the critic (algorithm.adv_estimator={algorithm['adv_estimator']}): its model states, activations and "
            "value pass share the actor's GPUs in verl, and are not in the peaks above"
        )
    if (verl.get("reward", {}).get("reward_model") or {}).get("enable"):
        missing.append("the reward model (reward.reward_model.enable=true): not in the peaks above")
    return missing


def knobs_rollout_n(verl: dict[str, Any]) -> int:
    return int(verl["actor_rollout_ref"]["rollout"]["n"])


def settle(
    cfg: DictConfig, resolved: dict[str, Any], facts: Facts, overrides: list[str], resolve: Resolve
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The preflight of one job BEFORE its plan is made: (the verdict on the config as it will be planned, that
    config resolved). `fix` and `tune` set their typed knob values in cfg (never a key the user set) first, so the
    plan is made once, from the config that runs; the verdict then says what changed and what it was before. `fail`
    and `warn` change nothing (gate() refuses or warns at submission). None: `off`, or a model nothing here knows."""
    if cfg.launch.preflight == "off":
        return None, resolved
    llm, _ = llm_architecture(cfg, facts, overrides)
    if llm.get("known") is False:
        return None, resolved
    verdict = judge(cfg, resolved, llm, overrides, facts.packages)
    changes = verdict.pop("apply_overrides")
    if not changes:
        return verdict, resolved
    with open_dict(cfg):
        for key, value in changes.items():
            OmegaConf.update(cfg, key, value, merge=False)
    resolved = resolve(cfg)
    settled = judge(cfg, resolved, llm, overrides, facts.packages)
    settled.pop("apply_overrides")
    settled["changed"] = {key: str(value) for key, value in changes.items()}
    settled["before"] = {"fits": verdict["fits"], "predicted": verdict["predicted"]}
    return settled, resolved


def gate(plans: list[Plan], policy: str) -> list[str]:
    """The preflight's policy for plans that are about to run: `fail` refuses the first that does not fit (one
    UserError, the cheapest fix first), `warn` returns the same message for each as a warning; `fix` and `tune` have
    already changed the config before it was planned (settle), `off` judged nothing."""
    misfits = [plan for plan in plans if plan.preflight is not None and not plan.preflight["fits"]]
    if policy == "fail" and misfits:
        raise UserError(refusal(misfits[0].preflight, misfits[0].job_name))
    if policy == "warn":
        return [refusal(plan.preflight, plan.job_name, verb="warns") for plan in misfits if plan.preflight is not None]
    return []
