"""verl's batch and parallel-layout arithmetic, pure: what verl 0.9.1 and Megatron-core assert on the GPUs (whole
mini-batches over the data-parallel ranks, micro-batches and token budgets, Megatron's parallel products, the layer
split over the pipeline, heads over TP, experts over EP, the engine's TP over the nodes), refused before queueing
with the product or remainder that does not match and where verl would stop.

Runs on: the login node. launch/validate.py checks the planned config with it; the preflight's search over Megatron
layouts (launch/preflight.py) keeps only the candidates it passes. It reads the resolved config verl receives and the
plan's architecture, nothing else (no files, no verl import).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launch.errors import UserError
from launch.memory import LEGACY_CRITIC_UPDATE_TOKENS, critic_batching, trains_critic
from launch.schema import select

# the global micro-batch sizes older verl scripts still paste, by role under actor_rollout_ref: older verl divided them
# by the data-parallel ranks, verl 0.9.1 reads none of them (refused below with the per-GPU value)
GLOBAL_MICRO_BATCHES = {
    "actor": "ppo_micro_batch_size",
    "rollout": "log_prob_micro_batch_size",
    "ref": "log_prob_micro_batch_size",
}


class ConfigView(dict):
    """Attribute access (verl.data.train_batch_size) over the resolved config verl receives: our checks read a few
    keys of a thousand-key tree, and building a DictConfig of it costs ~50 ms a job of a sweep."""

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        return ConfigView(value) if isinstance(value, dict) else value


def check_global_micro_batches(verl: ConfigView, ranks: int) -> None:
    """verl's older scripts (its examples/tuning among them) set the global micro-batch; verl 0.9.1's engine workers
    read only the *_per_gpu one, so the run would use the profile's instead or stop at verl's own check: the
    per-GPU value it meant, computed."""
    for role, name in GLOBAL_MICRO_BATCHES.items():
        value = verl.actor_rollout_ref[role].get(name)
        if value is not None:
            key = f"actor_rollout_ref.{role}.{name}"
            raise UserError(
                f"{key}={value} is the global micro-batch of older verl, which verl 0.9.1 does not read: drop it and "
                f"set {key}_per_gpu={max(1, int(value) // ranks)} ({value} / {ranks} data-parallel ranks)"
            )


# Where verl 0.9.1's legacy trainer (trainer.use_v1=false) stops on PPO batch arithmetic, at the first actor update
# (after the first rollout): its engine workers assert where older verl's dp_actor split off a smaller last mini-batch
VERL_MINI_BATCHES = (
    "verl 0.9.1 stops at the first actor update: TrainingWorker.train_mini_batch (verl/workers/engine_workers.py) "
    "cuts each rank's share of the batch with tensordict_utils.make_iterator, which asserts whole mini-batches "
    "(older verl ran a smaller last mini-batch)"
)


VERL_MINI_OVER_RANKS = (
    "verl 0.9.1 stops at the first actor update: TrainingWorker.train_mini_batch (verl/workers/engine_workers.py) "
    "asserts mini_batch_size % data-parallel size == 0"
)


VERL_MICRO_BATCHES = (
    "verl 0.9.1 stops at the first actor update: prepare_micro_batches (verl/workers/engine/utils.py) asserts "
    "whole micro-batches"
)


def neighbours(whole: int, part: int) -> str:
    """The divisors of `whole` nearest to `part` on either side, as 'A or B' (one of them at the ends)."""
    below = next((d for d in range(min(part, whole), 0, -1) if whole % d == 0), 1)
    above = next((d for d in range(part + 1, whole + 1) if whole % d == 0), None)
    return f"{below} or {above}" if above is not None and below != above else str(below)


def check_ppo_batches(
    verl: ConfigView, gpus: str, n_gpus: int, sequence_tokens: int, set_by: Mapping[str, str] | None = None
) -> None:
    """PPO's update arithmetic: batch into mini-batches, mini-batches over the GPUs, micro-batches or token budgets.
    Each refusal says where verl 0.9.1 would stop (the first update, after a whole rollout). `set_by`: key -> who set
    its value, as a clause ("you set it on the command line"), said with a budget refused."""
    set_by = set_by or {}
    data, actor, rollout = verl.data, verl.actor_rollout_ref.actor, verl.actor_rollout_ref.rollout
    batch, mini = data.train_batch_size, actor.ppo_mini_batch_size
    # verl 0.9.1's v1 trainer (trainer.use_v1, its default) pads each batch with no-op samples to a multiple of the
    # mini-batch and the data-parallel size (trainer_base.py _balance_batch); its legacy trainer does not
    if batch % mini and not verl.trainer.get("use_v1", True):
        raise UserError(
            f"data.train_batch_size ({batch}) is not a multiple of actor_rollout_ref.actor.ppo_mini_batch_size "
            f"({mini}): {batch} % {mini} = {batch % mini}; make the batch a multiple of the mini-batch (e.g. "
            f"ppo_mini_batch_size={neighbours(batch, mini)}), or use verl's v1 trainer (trainer.use_v1=true), which "
            f"pads the batch; {VERL_MINI_BATCHES}"
        )
    sequences = mini * rollout.n
    if actor.get("strategy") == "megatron":  # its product already divides the GPUs (check_megatron)
        sizes = megatron_sizes(actor.megatron)
        ranks, sp = n_gpus // (sizes["TP"] * sizes["PP"] * sizes["CP"]), sizes["CP"]
        where = f"{ranks} data-parallel ranks ({n_gpus} GPUs / TP {sizes['TP']} x PP {sizes['PP']} x CP {sp})"
    else:
        # verl splits a mini-batch over the data-parallel ranks: the GPUs / the Ulysses group that shares a sequence
        sp = actor.ulysses_sequence_parallel_size
        check_sequence_parallel("actor_rollout_ref.actor.ulysses_sequence_parallel_size", sp, gpus, n_gpus)
        ranks = n_gpus // sp
        where = (
            gpus if sp == 1 else f"{ranks} data-parallel ranks ({n_gpus} GPUs / ulysses_sequence_parallel_size {sp})"
        )
    if sequences % ranks:
        raise UserError(
            f"a mini-batch of {sequences} sequences (ppo_mini_batch_size {mini} x rollout.n {rollout.n}) does not "
            f"split over {where}: {sequences} % {ranks} = {sequences % ranks}; change the mini-batch or the GPU count; "
            f"{VERL_MINI_OVER_RANKS}"
        )
    roles = built_roles(verl)
    if "critic" in roles:
        check_critic_sequence_parallel(verl.critic, gpus, n_gpus)
        critic_sequences = verl.critic.ppo_mini_batch_size * rollout.n
        critic_ranks = data_parallel_ranks(verl.critic, n_gpus)
        if critic_sequences % critic_ranks:
            raise UserError(
                f"a critic mini-batch of {critic_sequences} sequences (critic.ppo_mini_batch_size "
                f"{verl.critic.ppo_mini_batch_size} x rollout.n {rollout.n}) does not split over its {critic_ranks} "
                f"data-parallel ranks: {critic_sequences} % {critic_ranks} = {critic_sequences % critic_ranks}; change "
                f"critic.ppo_mini_batch_size or the GPU count; {VERL_MINI_OVER_RANKS.replace('actor', 'critic')}"
            )
        check_critic_micro_batches(verl, critic_sequences // critic_ranks)
    needed = budget_for_one_sequence(actor, sequence_tokens)
    split = f", split over ulysses_sequence_parallel_size {sp}" if sp > 1 else ""
    for key, budget in packed_budgets(verl).items():
        if budget is not None and budget < needed:
            who = f"{set_by[key]}: " if key in set_by else ""
            raise UserError(
                f"{key} ({budget}) cannot hold one sequence of data.max_prompt_length + max_response_length "
                f"({data.max_prompt_length} + {data.max_response_length} = {sequence_tokens}{split}); {who}raise it "
                f"to at least {needed} or shorten the lengths"
            )
    if not actor.use_dynamic_bsz:
        check_global_micro_batches(verl, ranks)
        micro = actor.ppo_micro_batch_size_per_gpu
        if micro is None:
            raise UserError(
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu is not set and use_dynamic_bsz is false: "
                "set one of them"
            )
        share = sequences // ranks
        rank = "GPU" if sp == 1 else "data-parallel rank"
        if share % micro:
            raise UserError(
                f"each {rank}'s share of a mini-batch ({sequences} / {ranks} = {share} sequences) is not a multiple "
                f"of actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu ({micro}): {share} % {micro} = "
                f"{share % micro}; pick a micro-batch that divides {share} (e.g. {neighbours(share, micro)}); "
                f"{VERL_MICRO_BATCHES}"
            )


def packed_budgets(verl: Any) -> dict[str, int | None]:
    """The token budgets of the roles the run builds, each where its dynamic batching is on: verl asserts a budget
    holds the longest sequence (utils/seqlen_balancing.py) at that role's first pass. `verl`: the resolved config
    (ConfigView) or the composed one (DictConfig)."""
    actor, rollout = verl.actor_rollout_ref.actor, verl.actor_rollout_ref.rollout
    roles = built_roles(verl)
    budgets: dict[str, int | None] = {}
    if actor.use_dynamic_bsz:
        budgets["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"] = actor.ppo_max_token_len_per_gpu
        budgets["actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu"] = rollout.log_prob_max_token_len_per_gpu
    ref = verl.actor_rollout_ref.get("ref") or {}
    if "actor_rollout_ref.ref" in roles and ref.get("log_prob_use_dynamic_bsz"):
        budgets["actor_rollout_ref.ref.log_prob_max_token_len_per_gpu"] = ref["log_prob_max_token_len_per_gpu"]
    if "critic" in roles:
        budgets |= critic_budgets(verl)
    return budgets


def budget_for_one_sequence(actor: Any, sequence_tokens: int) -> int:
    """The least token budget that holds one sequence: a Ulysses group (Megatron's context-parallel group) packs
    budget x its size tokens and splits each sequence over it."""
    if actor.get("strategy") == "megatron":
        share = megatron_sizes(actor.megatron)["CP"]
    else:
        share = int(actor.get("ulysses_sequence_parallel_size") or 1)
    return -(-sequence_tokens // share)


def critic_budgets(verl: ConfigView) -> dict[str, int | None]:
    """The critic's token budgets where its engine packs by tokens (memory.critic_batching): verl 0.9.1's v1 trainer
    gives it critic.ppo_infer_max_token_len_per_gpu (CriticConfig's default 32768) for the value pass and the update
    alike, its legacy trainer critic.ppo_max_token_len_per_gpu for the update; whether it packs is the engine's own
    use_dynamic_bsz (true by default), never critic.use_dynamic_bsz."""
    batching = critic_batching(verl)
    if not batching.dynamic:
        return {}
    budgets: dict[str, int | None] = {"critic.ppo_infer_max_token_len_per_gpu": batching.value_budget}
    if not batching.v1:
        budgets[LEGACY_CRITIC_UPDATE_TOKENS] = batching.update_budget
    return budgets


def check_critic_micro_batches(verl: ConfigView, share: int) -> None:
    """A critic engine without dynamic batching cuts its passes by the engine's own micro-batches, which verl 0.9.1
    copies from no other key (memory.critic_batching): unset, its first value pass stops at prepare_micro_batches
    (verl/workers/engine/utils.py: None x the group size); the update's must divide the rank's `share` of a
    mini-batch (asserted there)."""
    batching = critic_batching(verl)
    if batching.dynamic:
        return
    engine = batching.engine_key
    critic = verl.critic
    pasted = critic.get("ppo_micro_batch_size_per_gpu")
    for key, micro in (
        ("micro_batch_size_per_gpu", batching.micro_batch),
        ("infer_micro_batch_size_per_gpu", batching.value_micro_batch),
    ):
        if micro is None:
            theirs = f" (critic.ppo_micro_batch_size_per_gpu={pasted} is not copied there)" if pasted else ""
            raise UserError(
                f"{engine}.{key} is not set and {engine}.use_dynamic_bsz is false: verl 0.9.1's critic engine reads "
                f"its micro-batch from there alone{theirs} and would stop at the critic's first pass "
                f"(prepare_micro_batches, verl/workers/engine/utils.py); set ++{engine}.{key}=N, or drop "
                f"++{engine}.use_dynamic_bsz=false to pack by critic.ppo_infer_max_token_len_per_gpu"
            )
    micro = int(batching.micro_batch)
    if share % micro:
        raise UserError(
            f"each critic data-parallel rank's share of a mini-batch ({share} sequences) is not a multiple of "
            f"{engine}.micro_batch_size_per_gpu ({micro}): {share} % {micro} = {share % micro}; pick a micro-batch "
            f"that divides {share} (e.g. {neighbours(share, micro)}); "
            f"{VERL_MICRO_BATCHES.replace('actor', 'critic')}"
        )


def data_parallel_ranks(role: ConfigView, n_gpus: int) -> int:
    """A training role's data-parallel ranks: the GPUs over its Megatron TP x PP x CP, or over the Ulysses group of
    its FSDP engine (the critic's engine settings, critic.fsdp)."""
    if role.get("strategy") == "megatron":
        sizes = megatron_sizes(role.megatron)
        return max(1, n_gpus // (sizes["TP"] * sizes["PP"] * sizes["CP"]))
    return max(1, n_gpus // int((role.get("fsdp") or {}).get("ulysses_sequence_parallel_size") or 1))


def check_sequence_parallel(key: str, sp: int, gpus: str, n_gpus: int) -> None:
    """verl's FSDP engine builds a (GPUs / SP, SP) device mesh as the worker starts, which torch refuses unless SP
    divides the GPUs."""
    if n_gpus % sp:
        raise UserError(f"{key} ({sp}) does not divide {gpus}: choose a sequence-parallel size that divides {n_gpus}")


CRITIC_SP = "ulysses_sequence_parallel_size"


def check_critic_sequence_parallel(critic: ConfigView, gpus: str, n_gpus: int) -> None:
    """An FSDP critic's Ulysses size: its engine reads critic.fsdp's. verl 0.9.1 still takes the deprecated
    critic.ulysses_sequence_parallel_size of older scripts, but, unlike the actor's, does not copy it to the engine
    (FSDPCriticConfig): the critic would run without the sequence parallelism asked for."""
    if critic.get("strategy") == "megatron":
        return
    written, engine = int(critic.get(CRITIC_SP) or 1), int((critic.get("fsdp") or {}).get(CRITIC_SP) or 1)
    check_sequence_parallel(f"critic.{CRITIC_SP}", written, gpus, n_gpus)
    check_sequence_parallel(f"critic.fsdp.{CRITIC_SP}", engine, gpus, n_gpus)
    if written not in (1, engine):
        raise UserError(
            f"critic.{CRITIC_SP}={written}: verl 0.9.1's critic engine reads critic.fsdp.{CRITIC_SP} ({engine}) and, "
            f"unlike the actor's, never copies this deprecated key there, so the critic would run with SP {engine}: "
            f"write critic.fsdp.{CRITIC_SP}={written} instead"
        )


# Megatron's parallel sizes as verl's engine config names them (verl/trainer/config/engine/megatron.yaml), by the
# names its and Megatron-core's messages use
MEGATRON_SIZES = {
    "TP": "tensor_model_parallel_size",
    "PP": "pipeline_model_parallel_size",
    "CP": "context_parallel_size",
    "EP": "expert_model_parallel_size",
    "ETP": "expert_tensor_parallel_size",
    "VPP": "virtual_pipeline_model_parallel_size",
}


def megatron_sizes(megatron: dict[str, Any]) -> dict[str, int]:
    """TP, PP, CP, EP, ETP (null: Megatron-core takes TP) and VPP (null: 1) of one role's megatron block."""
    sizes = {name: megatron.get(key) for name, key in MEGATRON_SIZES.items()}
    sizes["ETP"] = sizes["ETP"] if sizes["ETP"] is not None else sizes["TP"]
    sizes["VPP"] = sizes["VPP"] if sizes["VPP"] is not None else 1
    return {name: int(value) for name, value in sizes.items()}


def built_roles(verl: Any) -> list[str]:
    """The roles whose training engine the run builds: the actor; the reference policy when a KL term needs it
    (verl's need_reference_policy); the critic when verl's need_critic would (critic.enable, else adv_estimator gae).
    `verl`: the resolved config (ConfigView) or the composed one (DictConfig)."""
    roles = ["actor_rollout_ref.actor"]
    if verl.actor_rollout_ref.actor.get("use_kl_loss") or verl.algorithm.get("use_kl_in_reward"):
        roles.append("actor_rollout_ref.ref")
    if trains_critic(verl):
        roles.append("critic")
    return roles


def megatron_roles(verl: ConfigView) -> list[str]:
    """The built roles (built_roles) on Megatron."""
    return [role for role in built_roles(verl) if (select(verl, role) or {}).get("strategy") == "megatron"]


def pipeline_layers(layers: int, pp: int, vpp: int, transformer: dict[str, Any]) -> tuple[int, int, str]:
    """(layers to split, stages they split over, what was counted) as Megatron-core splits a model's layers over the
    pipeline: the stages with a stated layer count (num_layers_in_first/last_pipeline_stage) take theirs; the
    embedding and the loss count as one layer each where account_for_*_in_pipeline_split says so."""
    counted = [f"{layers} layers"]
    first = transformer.get("num_layers_in_first_pipeline_stage")
    last = transformer.get("num_layers_in_last_pipeline_stage")
    if first is not None or last is not None:
        rest = layers - int(first or 0) - int(last or 0)
        stages = pp - (first is not None) - (last is not None)
        counted.append(f"less {int(first or 0)} first and {int(last or 0)} last-stage layers")
        return rest, max(stages, 1), ", ".join(counted)
    for part in ("embedding", "loss"):
        if transformer.get(f"account_for_{part}_in_pipeline_split"):
            layers += 1
            counted.append(f"+1 for the {part}")
    return layers, pp * vpp, ", ".join(counted)


def check_megatron(verl: ConfigView, llm: dict[str, Any]) -> None:
    """What Megatron-core asserts when verl builds each Megatron engine on the GPUs (parallel_state's world-size
    products, an interleaved schedule only over a pipeline, the layer split over the pipeline, heads over TP, experts
    over EP and none on a dense model), and verl's own dynamic context parallel checks, refused before queueing with
    the product that does not match. `llm`: the plan's architecture (its layers, heads and experts, 0 or absent for
    a dense model, unless `known` is false)."""
    trainer = verl.trainer
    n_gpus = trainer.nnodes * trainer.n_gpus_per_node
    gpus = f"{n_gpus} GPUs (trainer.nnodes {trainer.nnodes} x trainer.n_gpus_per_node {trainer.n_gpus_per_node})"
    known = llm.get("known") is not False
    experts = int(llm.get("experts") or 0) if known else None
    for role in megatron_roles(verl):
        node = select(verl, role)
        size = megatron_sizes(node["megatron"])
        key = f"{role}.megatron"
        tp, pp, cp, ep, etp, vpp = (size[name] for name in ("TP", "PP", "CP", "EP", "ETP", "VPP"))
        if n_gpus % (tp * pp * cp):
            raise UserError(
                f"{key}: TP {tp} x PP {pp} x CP {cp} x DP = {gpus} has no whole DP: {n_gpus} % {tp * pp * cp} = "
                f"{n_gpus % (tp * pp * cp)}; choose tensor/pipeline/context parallel sizes whose product divides "
                f"{n_gpus}"
            )
        if n_gpus % (etp * ep * pp):
            raise UserError(
                f"{key}: expert TP {etp} x EP {ep} x PP {pp} x expert DP = {gpus} has no whole expert DP: {n_gpus} % "
                f"{etp * ep * pp} = {n_gpus % (etp * ep * pp)}; choose expert_model_parallel_size / "
                f"expert_tensor_parallel_size whose product with PP divides {n_gpus}"
            )
        interleaved = node["megatron"].get("virtual_pipeline_model_parallel_size")
        if interleaved is not None and pp < 2:
            raise UserError(
                f"{key}.virtual_pipeline_model_parallel_size={interleaved} with pipeline_model_parallel_size {pp}: "
                "Megatron-core refuses an interleaved schedule without a pipeline as verl builds the engine "
                "('pipeline-model-parallel size should be greater than 1 with interleaved schedule'); set it to null, "
                "or raise pipeline_model_parallel_size above 1"
            )
        model = verl.critic.model if role == "critic" else verl.actor_rollout_ref.model
        check_dynamic_context_parallel(role, node["megatron"], n_gpus // (tp * pp), model.get("use_remove_padding"))
        if experts == 0 and ep > 1:
            raise UserError(
                f"{key}.expert_model_parallel_size ({ep}) on a dense model ({llm.get('name', 'the model')} has no "
                "experts): Megatron-core refuses expert parallelism without experts as verl builds the engine "
                "('num_moe_experts must be non None to use expert-parallel'); set it to 1"
            )
        if experts and experts % ep:
            fitting = [size for size in range(1, n_gpus + 1) if experts % size == 0 and n_gpus % (etp * size * pp) == 0]
            raise UserError(
                f"{key}.expert_model_parallel_size ({ep}) does not divide the model's {experts} experts: {experts} % "
                f"{ep} = {experts % ep}; choose an EP that divides {experts} and, with expert TP {etp} x PP {pp}, the "
                f"{n_gpus} GPUs: one of {', '.join(map(str, fitting))}"
            )
        if not known:
            continue
        transformer = node["megatron"].get("override_transformer_config") or {}
        uneven = [f"num_layers_in_{end}_pipeline_stage" for end in ("first", "last")]
        standalone = [f"account_for_{part}_in_pipeline_split" for part in ("embedding", "loss")]
        if any(transformer.get(name) is not None for name in uneven) and any(transformer.get(n) for n in standalone):
            raise UserError(
                f"{key}.override_transformer_config: {' / '.join(uneven)} with {' / '.join(standalone)}: Megatron-core "
                "asserts against the two together as verl builds the model ('Does not support standalone embedding "
                "stage and standalone loss stage with uneven pp'); keep one of them"
            )
        layers, stages, counted = pipeline_layers(int(llm["layers"]), pp, vpp, transformer)
        if layers % stages:
            split = f"PP {pp}" + (f" x VPP {vpp}" if vpp > 1 and stages == pp * vpp else "")
            raise UserError(
                f"the model's layers ({counted} = {layers}) do not split over {key} {split} = {stages} stages: "
                f"{layers} % {stages} = {layers % stages}; choose a pipeline size that divides {layers}, or set "
                "override_transformer_config.num_layers_in_first/last_pipeline_stage"
            )
        all_heads, kv_heads = int(llm["heads"]), int(llm["kv_heads"])
        for heads, what in ((all_heads, "attention heads"), (kv_heads, "key-value heads")):
            if heads % tp:
                # a TP Megatron-core takes: it divides both head counts, and with PP x CP the GPUs
                fitting = [
                    size
                    for size in range(1, n_gpus + 1)
                    if all_heads % size == 0 and kv_heads % size == 0 and n_gpus % (size * pp * cp) == 0
                ]
                raise UserError(
                    f"{key}.tensor_model_parallel_size ({tp}) does not divide the model's {heads} {what}: {heads} % "
                    f"{tp} = {heads % tp}; choose a TP that divides its {all_heads} attention and {kv_heads} key-value "
                    f"heads and, with PP {pp} x CP {cp}, the {n_gpus} GPUs: one of {', '.join(map(str, fitting))}"
                )


def check_dynamic_context_parallel(
    role: str, megatron: dict[str, Any], data_and_context_ranks: int, remove_padding: bool | None
) -> None:
    """verl 0.9.1's own refusals of dynamic context parallelism, raised as each Megatron worker builds its engine
    (verl/workers/engine/megatron/transformer_impl.py: _check_dcp_unsupported_features, _validate_dcp_world_size);
    the missing max_seqlen_per_dp_cp_rank is McoreEngineConfig's, which verl's own validation here raises already.
    `remove_padding`: the role's model.use_remove_padding, which verl's workers copy over the engine's own."""
    if not megatron.get("dynamic_context_parallel"):
        return
    key = f"{role}.megatron.dynamic_context_parallel=true"
    stops = "verl 0.9.1's Megatron engine refuses it as the worker starts"
    interleaved = megatron.get("virtual_pipeline_model_parallel_size")
    refusal = None
    if interleaved not in (None, 1):
        refusal = (
            f"with virtual_pipeline_model_parallel_size={interleaved}: {stops} (no virtual pipeline with it); set "
            "that to null, or dynamic_context_parallel=false"
        )
    elif data_and_context_ranks < 2 or data_and_context_ranks % 2:
        refusal = (
            f"over DP x CP = {data_and_context_ranks} rank(s) (the GPUs over TP x PP): {stops} (it needs an even count "
            "of at least 2); use more GPUs or smaller tensor/pipeline parallel sizes, or set it to false"
        )
    elif not remove_padding:
        model = "critic.model" if role == "critic" else "actor_rollout_ref.model"
        refusal = f"with {model}.use_remove_padding={remove_padding}: {stops} (it packs sequences); set that to true"
    elif megatron.get("pad_to_length"):
        refusal = f"with pad_to_length=true: {stops}; set pad_to_length=false"
    elif role == "critic":
        refusal = f"on the critic: {stops} (language models only, not a value model); set it to false"
    if refusal:
        raise UserError(f"{key} {refusal}")


def engine_tp_splits_heads(tp: int, heads: int, kv_heads: int) -> bool:
    """vLLM's and SGLang's attention layers split the query heads over the engine's TP, and the key-value heads too
    (or replicate them, where TP is a multiple of their count): vLLM's ModelConfig.verify_with_parallel_config and
    QKVParallelLinear refuse any other TP as the engine starts."""
    return heads % tp == 0 and (kv_heads % tp == 0 or tp % kv_heads == 0)


def check_engine_heads(verl: ConfigView, llm: dict[str, Any]) -> None:
    """The engine's TP over the model's attention heads (engine_tp_splits_heads), where the plan knows them."""
    rollout = verl.actor_rollout_ref.rollout
    tp, per_node = int(rollout.tensor_model_parallel_size), int(verl.trainer.n_gpus_per_node)
    if llm.get("known") is False or rollout.get("name") not in ("vllm", "sglang", "trtllm"):
        return
    heads, kv_heads = int(llm["heads"]), int(llm["kv_heads"])
    if engine_tp_splits_heads(tp, heads, kv_heads):
        return
    fitting = [size for size in range(1, max(per_node, tp) + 1) if engine_tp_splits_heads(size, heads, kv_heads)]
    fitting = [size for size in fitting if per_node % size == 0 or size % per_node == 0] or fitting
    split = f"{heads} attention heads" + ("" if heads % tp else f" and {kv_heads} key-value heads")
    raise UserError(
        f"actor_rollout_ref.rollout.tensor_model_parallel_size ({tp}) does not split the model's {split} "
        f"({llm.get('name', 'the model')}): {rollout.name} refuses it as the engine starts (each TP rank takes a whole "
        f"share of the heads); choose one of {', '.join(map(str, fitting))}"
    )


def ulysses_splits_heads(sp: int, heads: int, kv_heads: int) -> bool:
    """verl's Ulysses attention gives each rank of the group a whole share of the query heads, and of the key-value
    heads or a copy of one (models/transformers/monkey_patch.py asserts both as the worker patches the model)."""
    return heads % sp == 0 and (kv_heads % sp == 0 or sp % kv_heads == 0)


def check_ulysses_heads(verl: ConfigView, llm: dict[str, Any]) -> None:
    """Each FSDP role's Ulysses size over the model's attention heads (ulysses_splits_heads), where the plan knows
    them: the actor's (its reference follows it), and the critic's where it trains the actor's model."""
    if llm.get("known") is False:
        return
    heads, kv_heads = int(llm["heads"]), int(llm["kv_heads"])
    n_gpus = int(verl.trainer.nnodes) * int(verl.trainer.n_gpus_per_node)
    arr, critic = verl.actor_rollout_ref, verl.critic
    sizes = []
    if arr.actor.get("strategy") != "megatron":
        sizes.append(
            ("actor_rollout_ref.actor.ulysses_sequence_parallel_size", arr.actor.ulysses_sequence_parallel_size)
        )
    same_model = str(critic.model.path) == str(arr.model.path)
    if "critic" in built_roles(verl) and critic.get("strategy") != "megatron" and same_model:
        sizes.append((f"critic.fsdp.{CRITIC_SP}", int((critic.get("fsdp") or {}).get(CRITIC_SP) or 1)))
    for key, sp in sizes:
        if ulysses_splits_heads(int(sp), heads, kv_heads):
            continue
        fitting = [size for size in range(1, n_gpus + 1) if n_gpus % size == 0]
        fitting = [size for size in fitting if ulysses_splits_heads(size, heads, kv_heads)]
        split = f"{heads} attention heads" + ("" if heads % int(sp) else f" and {kv_heads} key-value heads")
        raise UserError(
            f"{key} ({sp}) does not split the model's {split} ({llm.get('name', 'the model')}): verl 0.9.1 asserts "
            f"it as the workers patch the model (each rank of the Ulysses group takes a whole share of the heads); "
            f"choose one of {', '.join(map(str, fitting))}"
        )


def check_rollout_span(verl: ConfigView) -> None:
    """The engine's TP against the GPUs per node: a TP group larger than a node spans whole nodes (vLLM over Ray) or
    it leaves one replica split across a node boundary."""
    trainer, tp = verl.trainer, verl.actor_rollout_ref.rollout.tensor_model_parallel_size
    per_node = trainer.n_gpus_per_node
    if tp > per_node and tp % per_node:
        raise UserError(
            f"actor_rollout_ref.rollout.tensor_model_parallel_size ({tp}) spans nodes of {per_node} GPUs "
            f"(trainer.n_gpus_per_node) unevenly: {tp} % {per_node} = {tp % per_node}; choose a TP that divides "
            f"{per_node} or a multiple of it"
        )


def check_batches(
    verl: ConfigView, max_position_embeddings: int, ppo_updates: bool = True, set_by: Mapping[str, str] | None = None
) -> None:
    """The arithmetic verl would otherwise check on the GPUs, hours later, or not at all; the values are of the right
    type and range already (launch/ranges.py, at the start of planning). `ppo_updates` false (RFT:
    the PPO config only generates; algos/rft/validate.py checks its SFT batches) skips the mini-batch arithmetic.
    `set_by`: check_ppo_batches's."""
    trainer, data, rollout = verl.trainer, verl.data, verl.actor_rollout_ref.rollout
    n_gpus = trainer.nnodes * trainer.n_gpus_per_node
    gpus = f"{n_gpus} GPUs (trainer.nnodes {trainer.nnodes} x trainer.n_gpus_per_node {trainer.n_gpus_per_node})"
    sequence_tokens = data.max_prompt_length + data.max_response_length
    # first: lengths beyond the model would otherwise surface as token budgets too small for them
    engine_reads = EngineContext.of(verl, max_position_embeddings)
    if sequence_tokens > engine_reads.longest:
        positions = engine_reads.longest
        room = positions - data.max_prompt_length
        shorter = (
            f"data.max_response_length={room}"
            if room >= 1
            else f"data.max_prompt_length={positions // 2} data.max_response_length={positions - positions // 2}"
        )
        lengths = f"data.max_prompt_length + max_response_length ({sequence_tokens})"
        fix = f"shorten them to {positions} in all (e.g. {shorter})"
        raise UserError(
            engine_reads.override_unread(lengths, sequence_tokens, fix)
            or f"{lengths} exceeds the model's context ({positions} positions): {fix}, or pick a longer-context llm"
        )
    if ppo_updates:
        check_ppo_batches(verl, gpus, n_gpus, sequence_tokens, set_by)
    tp = rollout.tensor_model_parallel_size
    if trainer.n_gpus_per_node % tp and n_gpus % tp:
        raise UserError(
            f"actor_rollout_ref.rollout.tensor_model_parallel_size ({tp}) does not divide {gpus}: "
            f"choose a TP size that divides {trainer.n_gpus_per_node}"
        )
    check_engine_context(rollout, data.max_prompt_length, sequence_tokens, engine_reads)
    check_engine_batching(rollout, engine_reads.longest)
    check_fsdp_sizes(verl, n_gpus, gpus)


def check_engine_batching(rollout: ConfigView, positions: int) -> None:
    """vLLM refuses to start with fewer batched tokens than sequences at once (SchedulerConfig: "max_num_batched_tokens
    must be greater than or equal to max_num_seqs": each running sequence takes a token a step). verl 0.9.1 first
    raises the tokens to max_model_len where chunked prefill is off (vllm_async_server _validate_configs)."""
    if rollout.name != "vllm":
        return
    tokens, sequences = int(rollout.max_num_batched_tokens), int(rollout.max_num_seqs)
    if not rollout.get("enable_chunked_prefill", True):
        tokens = max(tokens, int(rollout.get("max_model_len") or positions))
    if tokens < sequences:
        raise UserError(
            f"actor_rollout_ref.rollout.max_num_batched_tokens={rollout.max_num_batched_tokens} is below "
            f"actor_rollout_ref.rollout.max_num_seqs={sequences}: vLLM refuses to start (max_num_batched_tokens must "
            f"be >= max_num_seqs); raise max_num_batched_tokens to {sequences} or lower max_num_seqs to {tokens}"
        )


# Each role's FSDP settings, where the composed tree has them
FSDP_SIZE_KEYS = (
    "actor_rollout_ref.actor.fsdp_config.fsdp_size",
    "actor_rollout_ref.ref.fsdp_config.fsdp_size",
    "critic.fsdp.fsdp_size",
)


def check_fsdp_sizes(verl: ConfigView, n_gpus: int, gpus: str) -> None:
    """verl 0.9.1 shards over all the GPUs for fsdp_size < 0 or >= the GPUs, else builds a (GPUs // fsdp_size,
    fsdp_size) device mesh as the worker starts (engine/fsdp/utils.py create_device_mesh): 0 divides by zero there,
    and a size that does not divide the GPUs makes a mesh of the wrong size, which torch refuses."""
    for key in FSDP_SIZE_KEYS:
        size = select(verl, key)
        if not isinstance(size, int) or size < 0 or size >= n_gpus or (size and n_gpus % size == 0):
            continue
        divisors = [d for d in range(1, n_gpus) if n_gpus % d == 0]
        raise UserError(
            f"{key}={size}: verl 0.9.1 builds a device mesh of {n_gpus} GPUs // {size} x {size} as the worker starts, "
            f"which {'divides by zero' if size == 0 else f'is not {gpus}'}: use -1 (shard over all), or a size that "
            f"divides {n_gpus} ({', '.join(map(str, divisors))})"
        )


# verl 0.9.1 applies actor_rollout_ref.model.override_config to its own copy of the model's HF config
# (workers/config/model.py HFModelConfig.__post_init__: update_model_config; its "model_config" entry where it has
# one), so its trainer runs at the overridden positions, and its rollout servers take a null rollout.max_model_len
# from that copy and check a set one against it (vllm_async_server.py, async_sglang_server.py _validate_configs). The
# engines read the model directory's own config.json: verl starts vLLM as `serve <model dir>` with hf_overrides of
# quantization alone, and vLLM refuses a max_model_len beyond config.json's positions as it starts (its ModelConfig's
# max-length check) unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 reaches it, which only warns (RoPE positions beyond the
# trained length extrapolated); verl passes SGLang no context length, so SGLang takes config.json's and refuses
# longer requests. verl's own examples/gmpo_trainer/test_dapo_7b_math.sh sets the override and says to change
# max_position_embeddings in config.json as well.
POSITIONS_OVERRIDE = "actor_rollout_ref.model.override_config.max_position_embeddings"
LONG_CONTEXT_SWITCH = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}


@dataclass(frozen=True)
class EngineContext:
    """The model's positions as the run's rollout engine takes them: config.json's, or verl's override of them
    (POSITIONS_OVERRIDE) where the engine takes that too."""

    positions: int  # the model's config.json
    override: int | None  # a POSITIONS_OVERRIDE beyond them
    engine: str
    switch_on: bool  # LONG_CONTEXT_SWITCH in the workers' environment (cluster.env)

    @classmethod
    def of(cls, verl: ConfigView, positions: int) -> EngineContext:
        override_config = verl.actor_rollout_ref.model.get("override_config") or {}
        override_config = override_config.get("model_config", override_config)
        override = override_config.get("max_position_embeddings") if isinstance(override_config, dict) else None
        beyond = (
            override if isinstance(override, int) and not isinstance(override, bool) and override > positions else None
        )
        env = select(verl, "ray_kwargs.ray_init.runtime_env.env_vars") or {}
        switch_on = str(env.get(LONG_CONTEXT_SWITCH, "")).strip().lower() in ("1", "true")  # as vLLM's envs reads it
        return cls(positions, beyond, str(verl.actor_rollout_ref.rollout.name), switch_on)

    @property
    def longest(self) -> int:
        """The longest sequence the engine serves: beyond config.json's positions only for vLLM with its switch."""
        return self.override if self.override and self.engine == "vllm" and self.switch_on else self.positions

    @property
    def longest_max_model_len(self) -> int:
        """The longest rollout.max_model_len the engine starts with: SGLang is given none, so verl's own check against
        the override is the one that counts (every request stays within the data lengths, held to `longest`)."""
        return self.override if self.override and self.engine == "sglang" else self.longest

    def override_unread(self, subject: str, asked: int, shorter: str) -> str | None:
        """The line for `subject` (`asked` tokens) beyond config.json's positions, within the override the engine does
        not read; None without such an override (the plain refusal says it)."""
        if self.override is None or asked > self.override:
            return None
        engine = ENGINE_NAMES.get(self.engine, self.engine)
        if self.engine == "vllm":
            how = "it refuses a longer max_model_len as it starts"
            switch = f", set cluster.env.{LONG_CONTEXT_SWITCH}=1 (vLLM then extrapolates positions beyond them)"
        else:
            how = "verl passes it no context length, so longer requests fail" if self.engine == "sglang" else ""
            switch = ""
        return (
            f"{subject} exceeds the {self.positions} positions of the model's config.json, which {engine} reads"
            f"{f' ({how})' if how else ''}: {POSITIONS_OVERRIDE}={self.override} changes verl's copy of the config "
            f"only; set max_position_embeddings to {self.override} in the model's config.json, as verl's own DAPO "
            f"scripts ask{switch}, or {shorter}"
        )


def check_engine_context(rollout: ConfigView, prompt_tokens: int, sequence_tokens: int, reads: EngineContext) -> None:
    """rollout.max_model_len: verl 0.9.1's engine servers refuse one beyond the model's positions as they start
    (vllm/sglang/trtllm _validate_configs; `reads` says whose positions), and its vLLM server fails a request whose
    prompt leaves no token of room (generate: "leaves no room to generate"), which a max-length prompt does at
    max_model_len <= the prompt. A null one is the override's, where one is set (EngineContext)."""
    context = rollout.get("max_model_len")
    key = f"actor_rollout_ref.rollout.max_model_len={context}"
    if context is None and reads.override and reads.engine == "vllm" and not reads.switch_on:
        null = f"max_model_len {reads.override}, which verl gives vLLM from the override (rollout.max_model_len null),"
        fix = f"set actor_rollout_ref.rollout.max_model_len={sequence_tokens}"
        raise UserError(str(reads.override_unread(null, reads.override, fix)))
    if context is None:
        return
    positions = reads.longest_max_model_len
    if context > positions:
        raise UserError(
            reads.override_unread(key, context, f"set it to {sequence_tokens} (prompt + response)")
            or f"{key}: exceeds the model's context ({positions} positions); verl 0.9.1's rollout server refuses it "
            f"as it starts: set it to {sequence_tokens} (prompt + response) or leave it null (the model's {positions})"
        )
    if context <= prompt_tokens:
        raise UserError(
            f"{key}: leaves no room to generate after a prompt of data.max_prompt_length={prompt_tokens} tokens, and "
            f"verl 0.9.1 fails the first such prompt (its rollout server: leaves no room to generate); set it to "
            f"{sequence_tokens} (prompt + response) or leave it null"
        )
