"""The plan as a person reads it: the dry run's text (plan.txt in the run directory), the preflight's verdict with
its arithmetic, and the message of a refused submission.

Runs on: the login node (printing and writing a plan) and in the job (nothing reads it there). Owns every line of
text a plan is shown as; the plan (launch/plan.py), the preflight (launch/preflight.py) and readiness
(launch/readiness.py) produce data, never text.
"""

from __future__ import annotations

import json
import math
import shlex

from launch.container import describe as describe_container
from launch.facts import borrowed_positions, variant_hint
from launch.megatron_memory import EDGE as MEGATRON_EDGE
from launch.megatron_memory import FIXES as MEGATRON_FIXES
from launch.memory import FSDP_EDGE
from launch.plan import HOST_RAM_MARGIN, sync_command
from launch.rundir import Change, Plan, gib_text
from launch.steptime import StepTime
from launch.verdict import CHEAPEST, Verdict
from launch.watchdog import Validations, predicted_step_s, watch_off_reason, window_text

SHOWN_VALUE_CHARS = 40  # a value longer than this (a file list, the worker env) is cut in the text; plan.json has it


def render_preflight(verdict: Verdict | None) -> list[str]:
    if verdict is None:
        return ["  preflight     off"]
    predicted = verdict.predicted
    # a misfit only within the estimate's band is queued with a warning by every policy (preflight.gate): the headline
    # says so rather than a refusal the gate does not make
    head = "fits" if verdict.fits else "TOO CLOSE TO CALL, queued" if verdict.too_close_to_call else "DOES NOT FIT"
    lines = [
        f"  preflight     {head} (launch.preflight={verdict.policy}); predicted MFU {predicted.mfu:.0%}, "
        f"{predicted.tokens_per_s_per_gpu} tokens/s/GPU; host RAM {verdict.host_ram_gib_per_node} GiB/node"
    ]
    lines += [f"                {line}" for line in verdict.arithmetic]
    usual = verdict.typical
    if usual:
        peaks = ", ".join(f"{name} {peak:.1f}" for name, peak in usual.peaks_gib.items())
        lines.append(
            f"  typical       {peaks} GiB with {usual.prompt_tokens} + {usual.response_tokens}-token sequences "
            f"({usual.source}; the verdict above is the worst case: every sequence at full length)"
        )
    notes = verdict.job_software.shown(verdict.megatron) if verdict.job_software is not None else ()
    lines += [f"  job software  {note}" for note in notes]
    for item in verdict.not_counted:
        lines.append(f"  not counted   {item}")
    lines += [f"  rough         {item}" for item in verdict.rough]
    if verdict.at_the_edge:
        lines.append(f"  too close     {', '.join(verdict.at_the_edge)}: {edge_words(verdict)}")
    for key, value in verdict.changed.items():
        lines.append(f"  changed       {key}={value}  (by launch.preflight={verdict.policy})")
    if verdict.cheapest_fix:
        lines.append(f"  cheapest fix  {' '.join(verdict.cheapest_fix)}")
    if verdict.fits_with:
        lines.append(f"  what fits     {verdict.fits_with.summary}")
    if not verdict.fits and not verdict.cheapest_fix and not verdict.fits_with:
        lines.append(f"  no fix found  {beyond_the_search(verdict)}")
    elif not verdict.fits and verdict.policy in ("fix", "tune") and verdict.unfixable_without_your_keys:
        lines.append(f"  not fixed     {not_fixed(verdict)}")
    return lines


def not_fixed(verdict: Verdict) -> str:
    """Why launch.preflight=fix (or tune) leaves a misfit as it is: every fix that fits changes a key the user set."""
    theirs = {key for fix in verdict.fixes for key in fix.you_set}
    cheapest = [override.split("=", 1)[0].lstrip("+") for override in verdict.cheapest_fix]
    yours = [key for key in cheapest if key in theirs] or sorted(theirs)
    named = f" ({', '.join(yours)})" if yours else ""
    return (
        f"the cheapest fix that fits changes a key you set{named}, and so does every other, which launch.preflight=fix "
        "never does: change it yourself "
        "or leave it out"
    )


def edge_words(verdict: Verdict) -> str:
    """The band a phase at the edge lies in, and why its verdict cannot be called there (memory.Edge)."""
    edge = MEGATRON_EDGE if verdict.megatron else FSDP_EDGE
    return f"within the estimate's band around the card ({edge.words()}): too close to call"


def too_close(verdict: Verdict, job: str) -> str:
    """The gate's warning on a misfit only within its estimate's band (Verdict.too_close_to_call): queued, with the fix
    to take if it runs out of memory."""
    peaks = ", ".join(f"{name} {verdict.phases[name].peak_gib:.1f}" for name in verdict.at_the_edge)
    fix = " ".join(verdict.cheapest_fix) or beyond_the_search(verdict)
    return (
        f"preflight cannot call {job}: {peaks} of {verdict.capacity_gib:.1f} GiB, {edge_words(verdict)}: queued; "
        f"if it runs out of memory: {fix}"
    )


def beyond_the_search(verdict: Verdict) -> str:
    """What to change when the preflight's search found no change that fits: Megatron's knobs in words (more GPUs,
    parallelism, the hybrid CPU optimizer), or, for FSDP, the card and the lengths."""
    return verdict.beyond or (MEGATRON_FIXES if verdict.rough else "none fits: use a bigger card or shorter lengths")


def render_tracking(plan: Plan) -> str:
    env = plan.worker_env
    mode = env["WANDB_MODE"]
    where = (
        f"W&B {mode}, run {env['WANDB_RUN_ID']} in group {env['WANDB_RUN_GROUP']}" if mode != "disabled" else "W&B off"
    )
    line = f"  tracking      {where}; metrics/attempt-<n>.jsonl per attempt"
    sync = sync_command(plan)
    return line + (f"\n                no W&B credentials: offline; afterwards: {sync}" if sync else "")


def render_batch(plan: Plan) -> str:
    """PPO's batch arithmetic; for algo=rft, what its generation stage does (its SFT config is rft/sft/ in the run
    dir once stage 3 starts)."""
    verl = plan.verl
    actor, rollout = verl["actor_rollout_ref"]["actor"], verl["actor_rollout_ref"]["rollout"]
    if plan.driver == "rft":
        return (
            f"  rft           generate {rollout['n']} samples per prompt at temperature {rollout['temperature']} "
            "(every prompt at once: the engine batches them), keep the correct ones, fine-tune (algos/rft)"
        )
    micro = (
        f" {actor['ppo_max_token_len_per_gpu']} tokens/GPU per micro-batch (dynamic)"
        if actor["use_dynamic_bsz"]
        else f" micro-batch {actor['ppo_micro_batch_size_per_gpu']}/GPU"
    )
    return (
        f"  batch         {verl['data']['train_batch_size']} prompts x {rollout['n']} rollouts;"
        f" mini-batch {actor['ppo_mini_batch_size']};{micro}"
    )


def render_sbatch_request(plan: Plan) -> str:
    """The sbatch options of the resources line; a plan that queues nothing on SLURM says they are what a SLURM
    submission of it would ask for (a local run takes this machine as it is)."""
    res = plan.resources
    partition = f" --partition={res.partition}" if res.partition else ""
    request = f" --gres={res.gres} --cpus-per-task={res.cpus_per_task} --mem={res.mem_gb}G --time={res.time_min}"
    request += partition
    return request if plan.cluster == "slurm" else f" on SLURM this would request:{request}"


def render(plan: Plan) -> str:
    """The readable plan (launch.dry_run=true)."""
    verl, res = plan.verl, plan.resources
    rollout = verl["actor_rollout_ref"]["rollout"]
    lines = [
        f"rlaunch plan  {plan.job_name}   run {plan.run_id}  (sweep {plan.sweep_id})",
        f"  gpu profile   {plan.gpu_profile}: {plan.gpu_selected_by}",
        f"  model         {plan.llm['name']} ({plan.llm['path']}; architecture from {plan.llm['source']})",
        *([f"  positions     {borrowed}"] if (borrowed := borrowed_positions(plan.llm)) else []),
        f"  cluster       {plan.cluster} -> {plan.execution}: {plan.execution_reason}",
        f"  resources     {res.nodes} node(s) x {res.gpus_per_node} GPU(s) = {res.nodes * res.gpus_per_node} GPUs;"
        + render_sbatch_request(plan),
        render_batch(plan),
        f"  rollout       {rollout['name']} TP {rollout['tensor_model_parallel_size']}, "
        f"gpu_memory_utilization {rollout['gpu_memory_utilization']}, max_num_seqs {rollout['max_num_seqs']}",
        f"  run dir       {plan.run_dir}",
        *([f"  code          {plan.code_dir} (snapshot at submission: the job imports it)"] if plan.code_dir else []),
        *([f"  container     {describe_container(plan.container)}"] if plan.container else []),
        render_tracking(plan),
        f"  verl command  {shlex.join(plan.driver_command)}",
    ]
    if plan.preflight is None and plan.llm.get("known") is False:
        lines.append(
            f"  preflight     cannot judge: the architecture of {plan.llm['path']} is unknown here"
            f"{variant_hint(plan.llm['path'])}"
        )
        lines.append(
            "  step time     cannot forecast it either: no time check, trainer.save_freq="
            f"{plan.verl['trainer'].get('save_freq')} stays in steps (llm=... names an architecture)"
        )
    else:
        lines += render_preflight(plan.preflight)
    if plan.node_short_of_host_ram_gib is not None:
        lines.append(f"  host RAM      DOES NOT FIT: {host_ram_shortfall(plan)}")
    lines += render_step_time(plan.time)
    lines += render_hang_watch(plan)
    lines += render_readiness(plan)
    lines += render_changes(plan.changed_from_verl, plan.run_dir)
    lines += [f"  WARNING       {warning}" for warning in plan.warnings]
    return "\n".join(lines)


def _shown(value: object, run_dir: str) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace(run_dir, "<run dir>")
    return text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 3] + "..."


def render_changes(changes: list[Change], run_dir: str) -> list[str]:
    """What differs from verl's own composition of the user's keys, one line a key, grouped by the layer that set
    it (plan.json's changed_from_verl holds the full values)."""
    if not changes:
        return ["  from verl     nothing changed: verl's own config for your keys, exactly"]
    lines = [f"  from verl     {len(changes)} key(s) differ from verl's own config for your keys (changed_from_verl):"]
    layer = None
    for change in changes:
        if change.by != layer:
            layer = change.by
            lines.append(f"    by {layer}")
        lines.append(f"      {change.key}: {_shown(change.verl, run_dir)} -> {_shown(change.value, run_dir)}")
    return lines


def render_hang_watch(plan: Plan) -> list[str]:
    """The hang watchdog's window as the job will start it (launch/watchdog.py; measured steps replace the plan's)."""
    settings = plan.cluster_settings
    off = watch_off_reason(plan)
    if off:
        return [f"  hang watch    off ({off})"]
    validations = Validations.of(plan)
    window = window_text(
        predicted_step_s(plan), settings.hang_factor, settings.hang_floor_s, validations, validations.predicted_s
    )
    return [
        f"  hang watch    {window}: every rank's stack, then the attempt stops; requeued once, only if the stacks "
        "show a transient cause (launch.hang.factor/floor_s/enabled)"
    ]


def render_step_time(time: StepTime | None) -> list[str]:
    """One step's phases, each with where its figure came from, and the lengths they assume."""
    if time is None:
        return []
    phases = " + ".join(f"{phase} {seconds:g}" for phase, seconds in time.phases_s.items())
    lengths = time.lengths
    lines = [
        f"  step time     {phases} = {time.step_s:g} s ({time.source}), at {lengths.prompt_tokens:.0f} prompt + "
        f"{lengths.response_tokens:.0f} response tokens ({lengths.source})"
    ]
    calibrated = {phase: origin for phase, origin in time.sources.items() if origin != "model"}
    lines += [f"                {phase} {time.phases_s[phase]:g} s: {origin}" for phase, origin in calibrated.items()]
    inputs = time.inputs
    if "concurrency" in inputs:
        lines.append(
            f"                generate: {inputs['engines']} engine(s) x {inputs['sequences_per_engine']:g} sequences, "
            f"{inputs['concurrency']} at once, {inputs['decode_steps']} decode steps (longest response "
            f"{inputs['longest_response']})"
        )
    return lines


def render_readiness(plan: Plan) -> list[str]:
    """The plan text's lines: data read, and the predicted time against the limit."""
    if plan.readiness is None:
        return []
    files = plan.readiness.data
    read = [file for file in files if file.rows is not None]
    lines = []
    if files:
        rows = sum(file.rows or 0 for file in read)
        sources = len({source for file in read for source in file.data_sources})
        lines.append(f"  data          {len(read)}/{len(files)} file(s) read: {rows} rows, {sources} data source(s)")
    time = plan.predicted_time
    if time is not None:
        validations = time.validations + int(time.validates_before_training)
        validating = f" + {validations} validation(s) x {time.validation_s:g} s" if validations else ""
        checkpoint = (
            f"first checkpoint at step {time.first_checkpoint_step}"
            if time.checkpoints
            else f"no checkpoint (trainer.save_freq={plan.verl['trainer'].get('save_freq')})"
        )
        attempts = f"{time.attempts} attempt(s)" if time.attempts else "never: no attempt keeps a step"
        lines.append(
            f"  time          {time.total_steps} steps ({time.steps_per_epoch}/epoch) x {time.step_s} s{validating} "
            f"+ start-up predicted = {time.wall_min} min vs {time.time_limit_min} min limit -> {attempts}; "
            f"{checkpoint}"
        )
    disk = plan.readiness.disk
    if disk is not None:
        keep = plan.verl["trainer"].get("max_actor_ckpt_to_keep")
        retention = f"trainer.max_actor_ckpt_to_keep={keep}" if keep else "max_actor_ckpt_to_keep=null keeps every one"
        measured = disk.free_gib is not None
        free = f"{gib_text(disk.free_gib)} free at {disk.probed}" if measured else "free space not measured"
        lines.append(
            f"  disk          checkpoints {gib_text(disk.one_gib)} each, {disk.saves} save(s), at most {disk.kept} on "
            f"disk ({retention}) = {gib_text(disk.needed_gib)} vs {free}"
        )
    # a readiness note that is no warning is information (readiness.judge's `information`: a path made absolute)
    warned = set(plan.warnings)
    lines += [f"  note          {note}" for note in plan.readiness.notes if note not in warned]
    return lines


def host_ram_shortfall(plan: Plan) -> str:
    """What holds a node's host RAM where the preflight's estimate exceeds the user's cluster.mem_gb, or 1.2 x it
    the node (plan.node_short_of_host_ram), largest first, each with the setting that shrinks it."""
    verdict, node_gib = plan.preflight, plan.node_short_of_host_ram_gib
    assert verdict is not None and node_gib is not None
    where = f"partition {plan.resources.partition}'s" if plan.resources.partition else "the cluster's"
    held = sorted(verdict.host_ram, key=lambda term: -term.gib)
    parts = [f"{term.name} {term.gib:g} GiB" + (f" ({term.note})" if term.note else "") for term in held]
    estimate = verdict.host_ram_gib_per_node
    if plan.host_ram_limit_is_mem_gb:
        enough = math.ceil(HOST_RAM_MARGIN * estimate)
        return (
            f"the estimate {estimate:g} GiB per node exceeds cluster.mem_gb={node_gib:g} (--mem={node_gib:g}G), past "
            f"which SLURM's cgroup ends the job: {'; '.join(parts)}; or raise cluster.mem_gb (to {enough}: "
            f"{HOST_RAM_MARGIN:g} x the estimate), or drop it for rlaunch's own --mem"
        )
    return (
        f"{HOST_RAM_MARGIN:g} x the estimate {estimate:g} GiB = {math.ceil(HOST_RAM_MARGIN * estimate)} GiB per node "
        f"exceeds {where} {node_gib:g} GiB nodes: {'; '.join(parts)}; or a partition with bigger nodes "
        "(cluster.partition)"
    )


def host_ram_refusal(plan: Plan, verb: str = "refuses") -> str:
    return f"preflight {verb} {plan.job_name}: host RAM: {host_ram_shortfall(plan)}"


def refusal(verdict: Verdict, job: str, verb: str = "refuses") -> str:
    """The message of a refused (or, `verb="warns"`, a warned) submission: the first line names the misfit and the
    cheapest fix."""
    found = verdict.fits_with
    fix_text = " ".join(verdict.cheapest_fix) or beyond_the_search(verdict)
    summary = f"; {found.summary}" if found is not None and found.summary else ""
    # a fix that touches a key the user set is advice only: launch.preflight=fix would not apply it
    or_fix = f"; {not_fixed(verdict)}" if verdict.unfixable_without_your_keys else " (or launch.preflight=fix)"
    worst = ""
    if verdict.typical is not None and verdict.typical.fits:
        usual = verdict.typical
        worst = (
            f"; this is the worst case, every sequence at full length: at {usual.prompt_tokens} + "
            f"{usual.response_tokens} tokens ({usual.source}) it fits, so where the run's sequences stay near those, "
            "launch.preflight=warn queues it as it is (launch.expect.prompt_tokens/response_tokens say the lengths)"
        )
    lines = [f"preflight {verb} {job}: {verdict.misfit_arithmetic}; cheapest fix: {fix_text}{or_fix}{summary}{worst}"]
    lines.append(f"  cheapest: {CHEAPEST}")
    lines += [f"  {line}" for line in verdict.arithmetic]
    for fix in verdict.fixes:
        state = "fits" if fix.fits else "still too big"
        mine = f"; you set {', '.join(fix.you_set)}" if fix.you_set else ""
        lines.append(f"  fix: {fix.fix}: {fix.overrides} -> peaks {fix.peaks_gib} ({state}{mine})")
    return "\n".join(lines)
