"""rlaunch's entry point: python launch/run.py [overrides] [-m]

Runs on: the login node (cluster=slurm) or the machine that trains (cluster=local). One pipeline per job:
compose (Hydra) -> facts -> plan -> validate -> (preflight) -> write the run directory -> print / submit / run.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import hydra
import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf._utils import get_yaml_loader

from launch import auto, calibration, choices, errors, preflight, provenance, ranges, readiness, snapshot
from launch.auto import (
    fsdp_knob_deletions,
    launcher_aliases,
    resolve_auto,
    submit_hint,
    verl_config_name,
)
from launch.cli_help import register_help_resolver
from launch.compose_once import Resolve, apply_value_overrides, full_resolution, mode_read_from_overrides
from launch.cores import in_order
from launch.facts import Facts, gather_facts
from launch.lengths import TypicalLengths
from launch.manifest import Manifest
from launch.overrides import key_of, parse, value_in
from launch.plan import checkpoint_dir, make_plan
from launch.rejected import discard_rejected_invocation
from launch.render import render
from launch.rundir import METRICS_DIR, PLAN_TEXT_FILE, RLAUNCH_CONFIG_FILE, VERL_CONFIG_NAME, Plan, save_plan
from launch.schema import RLAUNCH_ROOTS, register_schemas
from launch.validate import check_sweep_id, validate
from launch.verdict import Verdict
from launch.verl_diff import (
    backend_key_message,
    base_config,
    dtype_key_message,
    missing_node_message,
    moved_key_message,
    retired_key_message,
)

# libyaml's safe dumper writes what yaml.safe_dump writes, ~4x faster (a sweep writes two files per job)
_BASE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
# verl reads its config through Hydra, whose YAML loader (OmegaConf's) takes more plain scalars for numbers than
# PyYAML does: a run id such as 72e784279643 came back as the float inf and Ray refused it as WANDB_RUN_ID
_OMEGACONF_RESOLVER = get_yaml_loader()("")
_STR_TAG = "tag:yaml.org,2002:str"


class YamlForOmegaConf(_BASE_DUMPER):  # type: ignore[misc, valid-type]
    """Quotes every string that OmegaConf's loader would read as something else."""


def _represent_str(dumper: yaml.BaseDumper, value: str) -> yaml.ScalarNode:
    read_as = _OMEGACONF_RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
    return dumper.represent_scalar(_STR_TAG, value, style="'" if read_as != _STR_TAG else None)


YamlForOmegaConf.add_representer(str, _represent_str)
YAML_DUMPER = YamlForOmegaConf


def said_with_cluster_choice(plan: Plan, chosen_by: str | None) -> Plan:
    """The plan's execution reason (plan text, plan.json, the plan-only run's last line) with why cluster=auto chose
    its cluster in place of the bare `cluster=local`: a user who named no cluster learns why it is not SLURM."""
    named = f"cluster={plan.cluster}"
    if not chosen_by or not plan.execution_reason.startswith(named):
        return plan
    return replace(plan, execution_reason=f"{chosen_by} -> {plan.cluster}{plan.execution_reason[len(named) :]}")


def plan_job(
    cfg: DictConfig,
    overrides: list[str],
    job_name: str = "",
    gather: Callable[..., Facts] = gather_facts,
    resolve: Resolve = full_resolution,
) -> Plan:
    """words + repairs + data -> facts -> preflight (whose policy may change knobs, in cfg, before anything is
    planned) -> plan, made once -> validate -> readiness (model, data, files, time, disk: refused in dispatch when the
    run executes). `resolve`: how the job's config becomes plain data (a sweep's composer lends its quicker one,
    launch/compose_once.py). cfg is not changed once the plan is made. A sweep's job deletes its own gpu profile's
    FSDP knobs under backend=megatron first, as a single run's command line does (launch/auto.py
    without_fsdp_knobs): its overrides, and so its plan and run id, are then the ones it would have alone."""
    deletions = fsdp_knob_deletions(overrides)
    overrides = [*overrides, *deletions]
    with naming_the_job(overrides):
        apply_value_overrides(parse(deletions), cfg)
        choices.check_deletions(overrides)
        choices.check_group_names(overrides)
        choices.check_our_additions(cfg, overrides)
        choices.check_words(cfg)  # before prepare's repairs: the words as the user wrote them
        choices.check_legacy_reward_keys(cfg)
        choices.check_booleans(cfg, overrides)
        choices.check_strategies(cfg)
        choices.check_resume_path(cfg)
        choices.check_optimizers(cfg)
        choices.check_lora_targets(cfg)
        choices.check_lora_rank_key(cfg)
        choices.check_dapo_overlong_buffer(cfg)
        repairs, resolved_paths = readiness.prepare(cfg, overrides)
        data = readiness.read_data(cfg)
        readiness.apply_data_facts(cfg, data)
        facts = gather(
            str(cfg.actor_rollout_ref.model.path),
            str(cfg.cluster.name),
            cfg.cluster.get("partition"),
            readiness.node_hub_cache(cfg),
            snapshot=bool(cfg.cluster.get("snapshot")),
            ray_address=cfg.cluster.address if cfg.cluster.name == "ray" else None,
            ray_token_file=cfg.cluster.get("ray_auth_token_file"),
            checkpoint_dir=checkpoint_dir(cfg, Path.cwd()),
        )
        records = calibration.records_for(cfg)
        typical = calibration.typical_for(cfg, records, readiness.measure_prompts(cfg, data))
        verdict, resolved = preflight.settle(cfg, resolve(cfg), facts, overrides, resolve, typical)
        plan = checked_plan(cfg, facts, overrides, job_name, resolved, verdict, records, typical)
        judged = readiness.judge(cfg, plan, facts, data, repairs, resolved_paths)
        return said_with_cluster_choice(judged, auto.chosen_cluster.reason)


def swept_choices(overrides: Sequence[str]) -> list[str]:
    """The job's own overrides, as given, of the keys its sweep varies (`llm=qwen2_5_3b`); none outside a sweep. The
    sweep's command line is Hydra's record of this invocation (the launcher keeps it current while jobs plan)."""
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return []
    # as typed: iterating the node would resolve a `${...}` inside an override string against the sweep's config
    given = OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)
    swept = {key_of(override) for override in parse([str(o) for o in given]) if override.is_sweep_override()}
    return [override.input_line or "" for override in parse(overrides) if key_of(override) in swept]


@contextmanager
def naming_the_job(overrides: Sequence[str]) -> Iterator[None]:
    """A sweep stops at its first refused job, and its one line starts with what sets that job apart from the
    others, `job llm=qwen2_5_0_5b: ...`: the message alone does not say which of the values to change. A single
    run's message stays as it is; a bug keeps its traceback."""
    varied = swept_choices(overrides)
    try:
        yield
    except Exception as error:
        message = errors.explain(error, key_explainers(overrides)) if varied else None
        if message is None:
            raise
        # a message that starts with one of the job's swept values names that one already
        apart = [value for value in varied if not message.startswith(value)]
        raise errors.UserError(f"job {' '.join(apart)}: {message}" if apart else message) from error


def checked_plan(
    cfg: DictConfig,
    facts: Facts,
    overrides: list[str],
    job_name: str,
    resolved: dict[str, Any] | None = None,
    verdict: Verdict | None = None,
    calibration_records: tuple[calibration.StoreRecord, ...] = (),
    typical: TypicalLengths | None = None,
) -> Plan:
    """plan -> validate. The checks read files verl will load from the code snapshot (the reward file), which only a
    submission writes: until then they read the checkout files the snapshot will hold (snapshot.at_checkout)."""
    plan = make_plan(
        cfg, facts, overrides, Path.cwd(), sys.executable, job_name, resolved, verdict, calibration_records, typical
    )
    checked = replace(plan, verl=snapshot.at_checkout(plan.verl, plan.code_dir)) if plan.code_dir else plan
    validate(cfg, checked, facts)
    return plan


def write_run_dir(plan: Plan, cfg: DictConfig) -> None:
    """Everything needed to reproduce the run, written before anything runs: the plan, verl's config exactly as verl
    reads it, our own roots of the composed config, and the provenance (launch/provenance.py)."""
    run_dir = Path(plan.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / METRICS_DIR).mkdir(exist_ok=True)  # verl's file logger opens its file there and creates no directory
    save_plan(plan)
    (run_dir / PLAN_TEXT_FILE).write_text(render(plan) + "\n")
    ours = {root: OmegaConf.to_container(cfg[root], resolve=True) for root in RLAUNCH_ROOTS}
    (run_dir / RLAUNCH_CONFIG_FILE).write_text(yaml.dump(ours, Dumper=YAML_DUMPER, sort_keys=False))
    record = provenance.write_planned(plan)
    # verl passes its whole config to wandb.init: the record rides along under one key verl does not read
    verl_config = as_literals({**plan.verl, provenance.VERL_KEY: record})
    (run_dir / f"{VERL_CONFIG_NAME}.yaml").write_text(yaml.dump(verl_config, Dumper=YAML_DUMPER, sort_keys=False))


def as_literals(tree: Any) -> Any:
    r"""The resolved config with every `${` kept literal through what verl does to it: main_ppo resolves the whole
    config in place (OmegaConf.resolve, which turns an escaped `\${` into a bare `${`), and the trainer then reads it
    resolved again (to_container(resolve=True) for the trackers). A string that holds `${` (the command line in the
    provenance record, a value the user escaped) would be resolved the second time against the node's environment: a
    variable only the login node had stops the job as it starts. Written as `\\\${`: the first resolution leaves
    `\${`, every later one reads the literal `${`."""
    if isinstance(tree, dict):
        return {key: as_literals(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [as_literals(value) for value in tree]
    return tree.replace("${", "\\\\\\${") if isinstance(tree, str) else tree


def refuse_duplicate_runs(plans: list[Plan]) -> None:
    """Two jobs of a sweep that plan the same run (the run id hashes the overrides that make a run: launch.*
    settings and gpu=auto's resolved choice do not) would share one run directory, its checkpoints and its W&B
    run, the later overwriting the earlier."""
    seen: dict[str, Plan] = {}
    for plan in plans:
        first = seen.setdefault(plan.run_id, plan)
        if first is plan:
            continue
        apart = sorted(set(first.overrides) ^ set(plan.overrides)) or ["nothing"]
        raise errors.UserError(
            f"two jobs of this sweep are the same run {plan.run_id} (they differ in {', '.join(apart)}; launch.* "
            "settings and a gpu=auto that chose the other's profile make no run of their own): they would share one "
            "run directory, its checkpoints and W&B run; sweep keys that change the run, or run them one at a time"
        )


def dispatch(jobs: list[tuple[Plan, DictConfig]]) -> None:
    """After planning, for one job (a single run, or each job of a local sweep) or a whole SLURM sweep: write the run
    directories, then print (dry run), submit, or run here."""
    plans = [plan for plan, _ in jobs]
    refuse_duplicate_runs(plans)
    cfg = jobs[0][1]
    dry_run = str(cfg.launch.dry_run).lower()
    executes = readiness.executes(cfg, plans[0])  # planning alone never refuses
    if executes:
        warnings = preflight.gate(plans, str(cfg.launch.preflight))
        readiness.refuse(plans)
        for warning in warnings:
            print(warning, file=sys.stderr)
    scripts = {}
    if plans[0].cluster == "slurm" and dry_run in ("true", "json"):
        # shown, not submitted: a submission's script is rendered once, by submitit itself, from the same parameters
        from launch import slurm

        for group, script in slurm.render_all(plans, slurm.max_array_size()):
            for plan in group.plans:
                scripts[plan.run_id] = script

    def write(job: tuple[Plan, DictConfig]) -> str:
        """The job's run directory, and its JSON line for a JSON dry run (rendered where it is written)."""
        plan, job_cfg = job
        write_run_dir(plan, job_cfg)
        if dry_run != "json":
            return ""
        return json.dumps(plan.to_dict() | ({"sbatch": scripts[plan.run_id]} if scripts else {}))

    lines = in_order(write, jobs)  # a large sweep's files on every core (launch/cores.py)
    if not executes:  # sweep.py status|logs then list what was planned, and say that nothing was submitted
        Manifest.planned(plans).write()
    # a sweep's runs that each fit their filesystem but not together (refused above for runs that execute)
    shared_disk = None if executes else readiness.sweep_disk_problem(plans)
    if dry_run == "json":
        for line in lines:
            print(line, flush=True)
        if shared_disk:
            print(f"WARNING       not ready: {shared_disk}", file=sys.stderr, flush=True)
        return
    if dry_run == "true":
        shown: set[str] = set()
        for plan in plans:
            print(render(plan), flush=True)
            script = scripts.get(plan.run_id)
            if script is not None and script not in shown:
                shown.add(script)
                print(f"\n# sbatch script (not submitted: dry run)\n{script}", flush=True)
        if shared_disk:
            print(f"WARNING       not ready: {shared_disk}", flush=True)
        return
    if shared_disk:  # planned only (no GPU here): said before the plans' own lines
        print(f"WARNING       not ready: {shared_disk}", flush=True)
    if plans[0].cluster == "slurm":
        submit_sweep(plans, int(cfg.cluster.max_requeues))
    elif plans[0].cluster == "ray":
        submit_ray_jobs(plans, cfg)
    else:
        for plan in plans:
            run_here(plan)


def submit_sweep(plans: list[Plan], max_requeues: int) -> None:
    from launch import slurm

    manifest = slurm.submit(plans, max_requeues)
    arrays = ", ".join(f"{array.job_id} ({array.tasks} task(s))" for array in manifest.arrays)
    print(f"queued {len(manifest.runs)} job(s) as {len(manifest.arrays)} array(s): {arrays}", flush=True)
    for run in manifest.runs:
        print(f"  {run.job_id:>12}  {run.run_id}  {run.job_name}", flush=True)
    print(f"sweep {manifest.sweep_id}: python launch/sweep.py status {manifest.sweep_dir}", flush=True)


def submit_ray_jobs(plans: list[Plan], cfg: DictConfig) -> None:
    from launch import ray_submit

    cluster = cfg.cluster
    for warning in dict.fromkeys(warning for plan in plans for warning in plan.warnings):
        print(f"rlaunch: warning: {warning}", file=sys.stderr, flush=True)
    manifest = ray_submit.submit(plans, str(cluster.address), cluster.get("ray_auth_token_file"), str(cluster.python))
    submitted = manifest.runs[-len(plans) :]  # the manifest also lists earlier submissions of this sweep
    print(f"submitted {len(submitted)} Ray job(s) to {manifest.address}", flush=True)
    for run in submitted:
        print(f"  {run.job_id:>28}  {run.run_id}  {run.job_name}", flush=True)
    print(f"sweep {manifest.sweep_id}: python launch/sweep.py status {manifest.sweep_dir}", flush=True)


def run_here(plan: Plan) -> None:
    if plan.execution == "plan-only":
        print(render(plan))
        print(
            f"\nNot running: {plan.execution_reason}. The run directory holds the plan and verl's config. To run it: "
            "the same command on a GPU machine, or from a SLURM login node with cluster=slurm"
        )
        return
    from launch.job import run_local

    run_local(plan)


def key_explainers(overrides: Sequence[str]) -> tuple[errors.KeyExplainer, ...]:
    """What rlaunch knows of an unknown key beyond its spelling, for the run `overrides` describe (launch/errors.py
    explain): a ~key of theirs that deleted it, or verl's base (the backend they choose) that has it elsewhere."""
    base = base_config(overrides)
    return (
        partial(errors.deleted_key_message, overrides=overrides),
        backend_key_message,
        partial(dtype_key_message, base=base),
        partial(moved_key_message, base=base),
        partial(retired_key_message, base=base),
        partial(missing_node_message, base=base),
        ranges.sft_key_message,
    )


def exit_with_message(error: Exception) -> None:
    """The launcher's one-line exit (launch/errors.py); a refusal, or a bug, leaves no sweep directory behind."""
    # main() rewrote argv: a pasted --config-name is backend=... in it
    explainers = key_explainers(sys.argv[1:])
    errors.exit_with_message(error, cleanup=discard_rejected_invocation, key_explainers=explainers)


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> None:
    # Caught here, inside the job: Hydra would otherwise log "Error executing job ..." before our message.
    try:
        run_job(cfg)
    except Exception as error:
        exit_with_message(error)


def run_job(cfg: DictConfig) -> None:
    # as typed: iterating the node would resolve a `${...}` inside an override string against the run's config
    typed = OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)
    dispatch([(plan_job(cfg, [str(override) for override in typed]), cfg)])


def main() -> None:
    # Hydra would print multi-line errors and exit 1 itself; with HYDRA_FULL_ERROR it raises, and we reword.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    register_schemas()
    register_help_resolver()
    try:
        inspecting = {"--info", "-i", "--cfg", "-c", "--shell-completion", "-sc", "--run", "-r"} & set(sys.argv[1:])
        if inspecting and {"-m", "--multirun"} & set(sys.argv[1:]):
            raise errors.UserError(
                f"{sorted(inspecting)[0]} shows one run's config and -m sweeps: drop -m and give one value per key "
                "(gpu=a40, not gpu=a40,h100); launch.dry_run=true -m shows every job of a sweep"
            )
        if sys.argv[1:] == ["--version"]:  # Hydra's own flag would name Hydra's version alone
            from importlib.metadata import version

            print(f"rlaunch {version('rlaunch')} (verl {version('verl')}, hydra-core {version('hydra-core')})")
            return
        dashed = [arg for arg in sys.argv[1:] if arg.split("=")[0] in ("--dry-run", "--dry_run", "--dryrun")]
        if dashed:  # Hydra's argparse would print its usage and 'unrecognized arguments'
            raise errors.UserError(
                f"{dashed[0]}: a dry run is an override here, not a flag: launch.dry_run=true (launch.dry_run=json "
                "prints each job's plan as one JSON line)"
            )
        typed_id = value_in(sys.argv[1:], "launch.sweep_id")
        if typed_id is not None:
            check_sweep_id(typed_id)
        argv, notes = launcher_aliases(sys.argv[1:])
        argv, config_notes = verl_config_name(argv)  # a pasted `--config-name=ppo_megatron_trainer`
        notes += config_notes
        for note in notes:
            print(note, file=sys.stderr, flush=True)
        resolved, reason = resolve_auto(argv)
        hint = submit_hint(argv, resolved)
        sys.argv = [sys.argv[0], *resolved]
        # Hydra's entry would compose the whole config once only to read hydra.mode, then again to run it
        with auto.chosen_cluster.said(reason), mode_read_from_overrides():
            hydra_main()
        if hint:
            print(hint, file=sys.stderr)
    except Exception as error:
        exit_with_message(error)


if __name__ == "__main__":
    main()
