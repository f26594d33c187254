"""The job's driver for algo=rft: python -m algos.rft.pipeline --run-dir <run_dir> [--through STAGE]

Runs on: the job head, in place of verl's PPO driver (launch/job.py starts it with cwd = the run directory, the
plan's worker_env and RAY_ADDRESS of the job's Ray cluster). It reads what the plan wrote (verl_config.yaml: the
resolved PPO config, whose rollout/model/data keys are stage 1's; rlaunch_config.yaml: the `rft` root) and runs the
stages that are not done yet, each under <run_dir>/rft/<stage>/:

    generate  prompts.parquet -> verl.trainer.main_generation_server -> candidates.parquet
    filter    rewards' batch API -> sft.parquet (+ per_prompt.parquet, stats.json, <run_dir>/metrics/rft_filter.jsonl)
    sft       sft_config.yaml -> verl.trainer.sft_trainer_ray -> checkpoints in verl_config's trainer.default_local_dir

A requeued job runs this again: done stages are skipped, stage 3 resumes from its checkpoints (resume_mode auto).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from algos.rft import filter as rft_filter
from algos.rft import generate, sft
from algos.rft.stages import STAGE_ORDER, Stage

RFT_DIR = "rft"
METRICS_DIR = "metrics"


class StageFailed(RuntimeError):
    """A stage did not finish; the message names it and where its output is."""


@dataclass(frozen=True)
class RunFiles:
    run_dir: Path
    verl: dict[str, Any]  # verl_config.yaml
    rft: dict[str, Any]  # the rft root of rlaunch_config.yaml

    @classmethod
    def read(cls, run_dir: Path) -> RunFiles:
        verl = yaml.safe_load((run_dir / f"{generate.VERL_CONFIG_NAME}.yaml").read_text())
        ours = yaml.safe_load((run_dir / "rlaunch_config.yaml").read_text())
        return cls(run_dir=run_dir, verl=verl, rft=ours["rft"])

    def stage_dir(self, name: str) -> Path:
        return self.run_dir / RFT_DIR / name


def plan_stages(run: RunFiles) -> list[Stage]:
    """The three stages with their configurations and chained hashes; nothing is run or written."""
    generate_stage = Stage(
        name="generate",
        directory=run.stage_dir("generate"),
        config=generate.stage_config(run.verl),
        outputs=(generate.PROMPTS_FILE, generate.CANDIDATES_FILE),
    )
    reward = run.verl["reward"]["custom_reward_function"]
    filter_stage = Stage(
        name="filter",
        directory=run.stage_dir("filter"),
        # the reward's settings (timeouts, the stem judge) decide which samples are judged correct
        config={"k": int(run.rft["k"]), "reward": reward},
        upstream_hash=generate_stage.hash,
        outputs=(rft_filter.SFT_FILE, rft_filter.STATS_FILE, rft_filter.PER_PROMPT_FILE),
    )
    sft_file = filter_stage.output(rft_filter.SFT_FILE)
    sft_stage = Stage(
        name="sft",
        directory=run.stage_dir("sft"),
        config=sft.compose_sft_config(run.verl, run.rft.get("sft") or {}, sft_file),
        upstream_hash=filter_stage.hash,
        outputs=(f"{sft.SFT_CONFIG_NAME}.yaml",),
        extra_directories=(Path(run.verl["trainer"]["default_local_dir"]),),
    )
    return [generate_stage, filter_stage, sft_stage]


def stages_to_run(stages: list[Stage]) -> list[Stage]:
    """Every stage from the first one that is not done: a rerun stage makes the ones after it stale."""
    for index, stage in enumerate(stages):
        if not stage.is_done():
            return stages[index:]
    return []


def say(message: str) -> None:
    print(f"rlaunch rft: {message}", flush=True)


def run_verl(stage: Stage, command: list[str], run: RunFiles) -> None:
    """verl's entry point as a child process; its output goes to the job's log like the PPO driver's would."""
    say(f"stage {stage.name}: {' '.join(command[1:3])}")
    code = subprocess.call(command, cwd=run.run_dir)
    if code != 0:
        raise StageFailed(f"stage {stage.name} failed: {command[2]} exited with code {code} (its output is above)")


def run_generate(stage: Stage, run: RunFiles) -> dict[str, Any]:
    counts = generate.write_prompts(run.verl, stage.output(generate.PROMPTS_FILE))
    say(f"stage generate: {counts['prompts']} prompts x {run.rft['oversample']} samples")
    run_verl(stage, generate.generation_command(sys.executable, run.run_dir, stage.directory), run)
    return counts


def log_to_wandb(run: RunFiles, record: dict[str, Any]) -> None:
    """The filter's statistics in the run's W&B run as well: the plan's W&B identity is in this process's
    environment (WANDB_RUN_ID, resume allowed, group, tags, mode), so stage 3's trainer continues the same run."""
    trainer = run.verl["trainer"]
    wandb_on = "wandb" in trainer["logger"] and os.environ.get("WANDB_MODE") != "disabled"
    if not wandb_on or "WANDB_RUN_ID" not in os.environ:
        return
    import wandb

    tracked = wandb.init(project=trainer["project_name"], name=trainer["experiment_name"])
    try:
        tracked.log(record["data"], step=record["step"])
    finally:
        tracked.finish()


def run_filter(stage: Stage, run: RunFiles, upstream: Stage) -> dict[str, Any]:
    stats = rft_filter.run_filter(
        upstream.output(generate.CANDIDATES_FILE),
        stage.directory,
        run.run_dir / METRICS_DIR,
        k=int(run.rft["k"]),
        prompt_key=str(run.verl["data"]["prompt_key"]),
        reward_settings=run.verl["reward"]["custom_reward_function"].get("reward_kwargs") or {},
    )
    log_to_wandb(run, rft_filter.metric_line(stats))
    total = stats["total"]
    say(
        f"stage filter: kept {total['kept']} of {total['candidates']} candidates "
        f"({total['correct']} correct, {total['errored']} errored); {total['prompts_with_kept']} of "
        f"{total['prompts']} prompts kept at least one"
    )
    return stats["total"]


def run_sft(stage: Stage, run: RunFiles, upstream: Stage) -> dict[str, Any]:
    config = stage.config
    kept = int(json.loads((upstream.directory / "done.json").read_text())["summary"]["kept"])
    batch = int(config["data"]["train_batch_size"])
    if kept < batch:
        raise StageFailed(
            f"stage sft: stage 2 kept {kept} samples, fewer than one batch (rft.sft.data.train_batch_size={batch}): "
            "lower the batch, or raise rft.oversample / the prompt count"
        )
    (stage.directory / f"{sft.SFT_CONFIG_NAME}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    sft.check_ray_cluster(int(config["trainer"]["nnodes"]), int(config["trainer"]["n_gpus_per_node"]))
    run_verl(stage, sft.sft_command(sys.executable, stage.directory), run)
    return {"samples": kept, "checkpoints": config["trainer"]["default_local_dir"]}


def run_pipeline(run_dir: Path, through: str = STAGE_ORDER[-1]) -> list[str]:
    """Run the stages that are not done, up to and including `through`; returns the names of the stages run."""
    run = RunFiles.read(run_dir)
    stages = plan_stages(run)
    last = STAGE_ORDER.index(through)
    pending = {stage.name for stage in stages_to_run(stages)}
    ran = []
    for index, stage in enumerate(stages[: last + 1]):
        if stage.name not in pending:
            say(f"stage {stage.name}: done for this configuration ({stage.hash}), skipped")
            continue
        continued = stage.prepare()
        say(f"stage {stage.name}: {'continuing' if continued else 'starting'} ({stage.hash}) in {stage.directory}")
        try:
            if stage.name == "generate":
                summary = run_generate(stage, run)
            elif stage.name == "filter":
                summary = run_filter(stage, run, stages[index - 1])
            else:
                summary = run_sft(stage, run, stages[index - 1])
        except StageFailed:
            raise
        except Exception as error:  # one line for the job log; the traceback stays above it
            traceback.print_exc()
            raise StageFailed(f"stage {stage.name} failed: {type(error).__name__}: {error}") from error
        stage.finish(summary)
        ran.append(stage.name)
    return ran


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m algos.rft.pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="the run directory the plan wrote")
    parser.add_argument("--through", choices=STAGE_ORDER, default=STAGE_ORDER[-1], help="stop after this stage")
    args = parser.parse_args(argv)
    try:
        run_pipeline(args.run_dir.resolve(), args.through)
    except StageFailed as error:
        print(f"rlaunch rft: error: {error}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
