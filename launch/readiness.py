"""What would fail in the queue, found on the login node: the model, the data, the files and the time.

Runs on: the login node (or the machine of a cluster=local run), between composing and submitting. It owns
- the model: what actor_rollout_ref.model.path names (launch/facts.py reads it: a local config.json, the HF cache,
  or the llm/ option with that path), and, when the job runs offline (HF_HUB_OFFLINE=1), whether the HF cache the
  nodes read holds its config, tokenizer and weights;
- the data: data.train_files / val_files exist and are parquet with verl's columns, enough rows for one batch, every
  data_source a domain rlaunch scores (unless the run brings its own reward function); read from parquet metadata and
  the one column needed (pyarrow), so GURU's 92k rows take well under a second;
- the files verl opens by path in the job (the reward function, a dataset class, the rollout's tool, agent-loop and
  router configs), read where the job's Ray workers will open them;
- the time: the steps verl runs (rows // batch per epoch; the fewer of total_training_steps and the epochs'), the
  plan's step time and verl's validations, the first checkpoint within one attempt (a requeued job without a
  checkpoint starts over), the attempts counted in the steps each keeps to its last checkpoint (Schedule); for
  algo=rft, its generation stage within one attempt and its SFT stage's attempts (RftTime);
- the disk: what verl's checkpoints hold at most at once (the saves, max_actor_ckpt_to_keep, an earlier attempt's
  leftovers) against the free space of trainer.default_local_dir's filesystem, a sweep's runs together;
- repairs of pasted configs: a `trainer.logger` without `file` gets it back (compare and doctor read those
  files), the data file lists name absolute files: glob patterns are resolved to the files they match (GURU
  copies name files differently), relative paths (and a relative model path) to the files they name from here, and a
  token budget the gpu profile set shorter than one sequence is raised to hold one.
Problems refuse a run that executes (a submission or a local run); a dry run shows them as warnings. A check that
cannot see the truth from here (data only the compute nodes see) is switched off with launch.skip_checks=[name].
"""

from __future__ import annotations

import ast
import glob
import json
import math
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from algos.rft import planned_sft_config
from launch import snapshot
from launch.errors import UserError
from launch.facts import (
    Facts,
    cached_file,
    hub_cache_dir,
    is_local_path,
    local_file,
    missing_weights,
    model_config_file,
    variant_hint,
)
from launch.layout_checks import budget_for_one_sequence, packed_budgets
from launch.lengths import (
    JSON_SUFFIXES,
    PromptStats,
    chat_prompts_without_template,
    file_records,
    measure_prompt_lengths,
    message_problem,
    sample_prompts,
    typical_lengths,
)
from launch.lora_targets import ALL_LINEAR, judged_targets, reach
from launch.memory import GIB, Architecture, Knobs, trainable_params, trains_critic
from launch.overrides import as_written, keys_of
from launch.ranges import check_ranges, shown
from launch.rundir import CheckpointDisk, DataRead, PredictedTime, Readiness, ReadinessProblem, gib_text
from launch.schema import RLAUNCH_ROOTS, LaunchSettings, choices_of, select, verl_package_dir
from launch.steptime import (
    STARTUP_MIN,
    STEP_TIME_MARGIN,
    Card,
    Lengths,
    budget_reaching,
    every_and_last,
    generate_s,
    spent_s,
    steps_within,
    update_s,
    validation_s,
    verl_validations,
)
from launch.verl_diff import option_tree

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

    from launch.rundir import Plan

CHECKS = choices_of(LaunchSettings, "skip_checks")
DATA_KEYS = ("data.train_files", "data.val_files")
# verl fetches these itself (hdfs via its copy_to_local); nothing here can look inside them
REMOTE_PREFIXES = ("hdfs://", "s3://", "gs://", "gcs://", "az://", "abfs://", "http://", "https://")
OFFLINE_VALUES = ("1", "true", "yes", "on")
# changed_from_verl's label for a value prepare's repairs set (the style of "rlaunch: run dir", "launch.preflight=fix")
READINESS_REPAIR = "rlaunch: readiness repair"


@dataclass(frozen=True)
class DataFile:
    key: str  # data.train_files or data.val_files
    path: str
    rows: int | None = None  # None: not read (remote, missing, unreadable)
    sources: tuple[str, ...] = ()  # distinct values of the data_source column
    problem: str = ""
    note: str = ""
    fix: str = ""  # where the path is right and its content is not: what to do instead of correcting the path
    # the column the problem is in ("": the file itself): verl loads every file as the trainer starts, but reads a
    # column only where it uses the rows (judge_data's rows_unused)
    column: str = ""
    media: tuple[str, ...] = ()  # the image/video/audio columns it has (data.image_key, ...): multimodal rows


@dataclass(frozen=True)
class DataReport:
    files: tuple[DataFile, ...] = ()
    notes: tuple[str, ...] = ()

    def rows(self, key: str) -> int | None:
        """Rows of every file under `key`, or None when one of them could not be read."""
        counts = [file.rows for file in self.files if file.key == key]
        known = [count for count in counts if count is not None]
        return sum(known) if counts and len(known) == len(counts) else None

    def sources(self) -> list[str]:
        return sorted({source for file in self.files for source in file.sources})


@dataclass
class Findings:
    """Problems by check name (refusals when the run executes), and notes for the plan."""

    problems: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --- repairs before planning ---------------------------------------------------------------------------------------


def file_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, ListConfig | list | tuple):
        return [str(item) for item in value]
    return [str(value)]


def is_remote(path: str) -> bool:
    return path.startswith(REMOTE_PREFIXES)


def local_data_paths(path: str) -> list[str] | None:
    """The absolute files a local data path names: a glob pattern's sorted matches, a relative path made absolute
    from here; None where there is nothing to change (remote, absolute, a pattern or file not found here)."""
    if is_remote(path):
        return None
    if glob.has_magic(path):
        matches = sorted(glob.glob(os.path.expanduser(path)))
        return [os.path.abspath(match) for match in matches] or None
    if path.startswith("~"):  # quoted past Hydra: verl would take it for a directory named ~
        return [os.path.expanduser(path)]
    if os.path.isabs(path) or not os.path.isfile(path):
        return None
    return [os.path.abspath(path)]


def resolve_data_paths(cfg: DictConfig) -> list[str]:
    """Glob patterns in data.train_files / val_files become the sorted files they match, so the plan records the
    exact list verl reads, and a relative path the file it names from here: verl reads the data in its Ray workers,
    which start in the code snapshot, not where rlaunch was started (docs/facts.md#ray). A pattern or path that names
    nothing stays as it is (the data check says so)."""
    notes = []
    for key in DATA_KEYS:
        value = OmegaConf.select(cfg, key)
        paths, changed = [], False
        for path in file_list(value):
            if not path.strip():  # Path("") is the working directory: it would be judged a directory and globbed
                listed = isinstance(value, ListConfig | list | tuple)
                written = f"{key}={[str(item) for item in value]}" if listed else f"{key}={path!r}"
                raise UserError(
                    f"{written} holds an empty path (a shell variable the script never set?), which verl 0.9.1 "
                    "refuses as its dataset loads ('Unsupported file format'): give the data file's path"
                    + (", or drop the empty entry" if listed else "")
                )
            found = local_data_paths(path)
            paths += found or [path]
            if found:
                changed = True
                notes.append(
                    f"{key}: {path} -> {len(found)} file(s)" if glob.has_magic(path) else f"{key}: {path} -> {found[0]}"
                )
        if changed:
            with open_dict(cfg):
                OmegaConf.update(cfg, key, paths, merge=False)
    return notes


# Local paths verl opens in its Ray workers, which start in the code snapshot (docs/facts.md#ray): a relative one
# names the directory rlaunch read only here
MODEL_PATH_KEYS = ("actor_rollout_ref.model.path",)


def absolute_model_paths(cfg: DictConfig) -> list[str]:
    """A model path relative to where rlaunch was started becomes the directory rlaunch read its architecture from
    (launch/facts.py is_local_path): in the job, verl would look for it in the snapshot, then take it for a hub id.
    A path under ~ is expanded: verl does not expand it, and transformers refuses it as a hub id."""
    notes = []
    for key in MODEL_PATH_KEYS:
        path = OmegaConf.select(cfg, key)
        if isinstance(path, str) and not path.strip():  # is_local_path("") is the working directory
            raise UserError(
                f"{key} is empty (a shell variable the script never set?): give the model's hub id or directory"
            )
        if not isinstance(path, str) or path.startswith("/") or not is_local_path(path):
            continue
        absolute = os.path.expanduser(path) if path.startswith("~") else os.path.abspath(path)
        with open_dict(cfg):
            OmegaConf.update(cfg, key, absolute, merge=False)
        notes.append(f"resolved {key}: {path} -> {absolute}")
    return notes


def ensure_file_logger(cfg: DictConfig) -> list[str]:
    """verl's file logger writes the metrics compare and doctor read back; a pasted logger list drops it."""
    written = "null" if cfg.trainer.logger is None else None
    loggers = [str(logger) for logger in file_list(cfg.trainer.logger)]
    if "file" in loggers:
        return []
    with open_dict(cfg):
        cfg.trainer.logger = [*loggers, "file"]
    reason = "compare and doctor read the per-attempt metric files"
    return [f"trainer.logger={written or loggers} has no 'file': added it ({reason})"]


# verl 0.9.1's critic.model.path default (trainer/config/model/hf_model.yaml): a placeholder its own model check rejects
VERL_CRITIC_PLACEHOLDER = "~/models/deepseek-llm-7b-chat"


def critic_from_actor(cfg: DictConfig) -> list[str]:
    """A run that trains a critic (verl's need_critic: critic.enable, else adv_estimator=gae, verl's default) and
    leaves critic.model.path at verl's placeholder starts its critic from the actor's model, as verl's examples do."""
    if not trains_critic(cfg) or str(cfg.critic.model.path) != VERL_CRITIC_PLACEHOLDER:
        return []
    actor = str(cfg.actor_rollout_ref.model.path)
    with open_dict(cfg):
        cfg.critic.model.path = actor
    return [
        f"algorithm.adv_estimator={cfg.algorithm.adv_estimator} trains a critic, and critic.model.path was verl's "
        f"placeholder {VERL_CRITIC_PLACEHOLDER} (verl's own check rejects it): the critic starts from the actor's "
        f"model {actor}; set critic.model.path to choose another"
    ]


def prepare(cfg: DictConfig, overrides: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """The repairs, applied to the composed config before it is planned; returns what the plan's warnings say, and
    its notes: the local paths made absolute, information, not a problem. The range table comes first: this is where
    planning first reads the values. `overrides`: the job's own."""
    check_ranges(cfg)
    check_skip_names(cfg)
    check_chat_template_kwargs(cfg)
    absolute = absolute_model_paths(cfg) + [f"resolved {note}" for note in resolve_data_paths(cfg)]
    repairs = ensure_file_logger(cfg) + critic_from_actor(cfg) + dynamic_batching_pair(cfg, overrides)
    repairs += profile_budgets_hold_one_sequence(cfg, overrides)
    return repairs + environment_read_here(cfg, overrides), absolute


def profile_budgets_hold_one_sequence(cfg: DictConfig, overrides: Sequence[str]) -> list[str]:
    """A token budget the gpu profile set (conf/gpu/*.yaml), not the user, shorter than one sequence of
    data.max_prompt_length + max_response_length is raised to hold one: the profile's is a packing size for its
    card, not a limit the script asked for (verl alone packs only where the script sets use_dynamic_bsz), and verl
    asserts each budget it packs by holds the longest sequence. One the user typed stays, and is refused naming them
    (launch/layout_checks.py check_ppo_batches)."""
    needed = one_sequence_budget(cfg)
    said = []
    for key, budget in profile_budgets_short_of_one_sequence(cfg, overrides).items():
        with open_dict(cfg):
            OmegaConf.update(cfg, key, needed, merge=False)
        said.append(
            f"{key}={budget} (gpu={cfg.gpu.name}) cannot hold one sequence of data.max_prompt_length + "
            f"max_response_length ({cfg.data.max_prompt_length} + {cfg.data.max_response_length}), which verl 0.9.1 "
            f"asserts of every budget it packs by: raised to {needed}; set {key} yourself to choose another"
        )
    return said


def one_sequence_budget(cfg: DictConfig) -> int:
    sequence_tokens = int(cfg.data.max_prompt_length) + int(cfg.data.max_response_length)
    return budget_for_one_sequence(cfg.actor_rollout_ref.actor, sequence_tokens)


def profile_budgets_short_of_one_sequence(cfg: DictConfig, overrides: Sequence[str]) -> dict[str, int]:
    """The packed token budgets the gpu profile set and the user did not, shorter than one sequence: {key: the
    profile's value}. Read from the profile, not the config, so the same before the repair raised them and after."""
    # the profile as composed: l40s, rtx6000ada and a6000 take their budgets from a40's through their defaults list
    profile = option_tree("gpu", str(cfg.gpu.name))
    needed, typed = one_sequence_budget(cfg), keys_of(overrides)
    short = {key: select(profile, key) for key in packed_budgets(cfg) if key not in typed}
    return {key: budget for key, budget in short.items() if isinstance(budget, int) and budget < needed}


def raised_budgets(cfg: DictConfig, overrides: Sequence[str]) -> list[str]:
    """The budgets profile_budgets_hold_one_sequence raised in this config: changed_from_verl credits them to the gpu
    layer, whose tree sets them (verl_diff._layer_of), though the value is the repair's (launch/plan.py relabels)."""
    short = profile_budgets_short_of_one_sequence(cfg, overrides)
    return [key for key, budget in short.items() if select(cfg, key) != budget]


def environment_read_here(cfg: DictConfig, overrides: Sequence[str]) -> list[str]:
    """A value of the user's that reads an environment variable (${oc.env:X}) is resolved here, as the run is
    planned, and verl gets the value (what was validated): verl alone would read the job's environment. Said, with
    what it became, so that `${oc.env:SLURM_JOB_ID,local}` turning into `local` is seen."""
    said = []
    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if "${oc.env:" in value and key.split(".")[0] not in RLAUNCH_ROOTS:
            became = OmegaConf.select(cfg, key, default=None)
            said.append(
                f"{key}={value} read this machine's environment as the run was planned: verl gets {shown(became)} "
                "(the job's environment is not read again; export the variable before planning, or write the value)"
            )
    return said


# verl 0.9.1 asserts these equal as its actor-rollout workers start (engine_workers.py init_model); its yaml makes the
# rollout's follow the actor's, which a gpu profile sets
DYNAMIC_PAIR = ("actor_rollout_ref.actor.use_dynamic_bsz", "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz")


def dynamic_batching_pair(cfg: DictConfig, overrides: Sequence[str]) -> list[str]:
    """The pair apart: where the user typed one of them, the other (a profile's, or verl's interpolation) takes the
    user's value, said in the plan; where the user typed both apart, refused."""
    values = {key: bool(OmegaConf.select(cfg, key)) for key in DYNAMIC_PAIR}
    if len(set(values.values())) == 1:
        return []
    typed = [key for key in DYNAMIC_PAIR if key in keys_of(overrides)]
    if len(typed) != 1:
        actor, rollout = (f"{key}={str(values[key]).lower()}" for key in DYNAMIC_PAIR)
        raise UserError(
            f"{actor} and {rollout}: verl 0.9.1 asserts they are equal as its actor-rollout workers start "
            "(engine_workers.py); set both to true or both to false"
        )
    mine = typed[0]
    other = next(key for key in DYNAMIC_PAIR if key != mine)
    value = values[mine]
    with open_dict(cfg):
        OmegaConf.update(cfg, other, value, merge=False)
    word = str(value).lower()
    return [
        f"{mine}={word} is yours, and verl 0.9.1 asserts {other} equals it as its workers start (engine_workers.py): "
        f"{other}={word} too (a gpu profile's value yields)"
    ]


def check_chat_template_kwargs(cfg: DictConfig) -> None:
    """verl 0.9.1 spreads data.apply_chat_template_kwargs into every apply_chat_template call (rl_dataset.py,
    agent_loop.py: **kwargs), which fails on anything but a mapping; so would the prompts' measuring here."""
    value = cfg.data.get("apply_chat_template_kwargs")
    if value is None or isinstance(value, DictConfig):
        return
    raise UserError(
        f"data.apply_chat_template_kwargs={shown(value)}: must be a mapping of the chat template's keyword arguments, "
        "e.g. +data.apply_chat_template_kwargs.enable_thinking=false (verl 0.9.1 passes it as **kwargs to "
        "apply_chat_template, and fails on anything else)"
    )


def check_skip_names(cfg: DictConfig) -> None:
    unknown = [name for name in skipped(cfg) if name not in CHECKS]
    if unknown:
        raise UserError(
            f"launch.skip_checks names unknown check(s) {', '.join(unknown)}: choose from {', '.join(CHECKS)}"
        )


def skipped(cfg: DictConfig) -> list[str]:
    return [str(name) for name in cfg.launch.get("skip_checks") or []]


# --- data ----------------------------------------------------------------------------------------------------------


# verl 0.9.1's RLHFDataset picks its reader by the file name's suffix, as written (rl_dataset.py), else raises
VERL_DATA_SUFFIXES = (".parquet", *JSON_SUFFIXES)
# verl 0.9.1's reward managers (experimental/reward_loop/reward_manager) read this column by name; data.reward_fn_key
# is read only by its legacy managers, which main_ppo no longer builds
DATA_SOURCE = "data_source"
REWRITE = "write the files the way verl's examples/data_preprocess scripts do"


# what a multimodal processor's save_pretrained writes (transformers: processing_utils, image/video processors), by
# which AutoProcessor finds it
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json", "video_preprocessor_config.json")
# verl's multimodal columns (trainer/config/data/legacy_data.yaml), read by its dataset where a row has any
MEDIA_KEYS = {"data.image_key": "images", "data.video_key": "videos", "data.audio_key": "audios"}


def column_problems(
    key: str, path: str, names: list[str], prompt_is_text: bool, reward_is_text: bool, columns: dict[str, str]
) -> tuple[str, str, str]:
    """What verl cannot use in a file's columns, its fix and the column it is in (the prompt's first): a missing one;
    prompts stored as plain text (verl applies the chat template to a list of {role, content} messages and drops or
    fails on a string); reward_model stored as text (verl reads reward_model['ground_truth'])."""
    prompt = columns["data.prompt_key"]
    required = {role: name for role, name in columns.items() if role not in MEDIA_KEYS}  # media: only where used
    missing = [name for name in required.values() if name not in names]
    if missing:
        said = [name if role == name else f"{role} '{name}'" for role, name in required.items() if name in missing]
        fix = REWRITE + (", or set data.prompt_key to the column you have" if prompt in missing else "")
        column = prompt if prompt in missing else missing[0]
        return f"{key} file {path} lacks verl's column(s) {', '.join(said)} (it has {', '.join(names)})", fix, column
    if prompt_is_text:
        return (
            (
                f"{key} file {path}: its prompts ({prompt}) are plain text; verl 0.9.1 applies the chat template to a "
                "list of messages and would drop or fail on every row"
            ),
            f'{REWRITE} ([{{"role": "user", "content": ...}}])',
            prompt,
        )
    if reward_is_text:
        return (
            f"{key} file {path}: its reward_model column holds text; verl reads reward_model['ground_truth']",
            f"{REWRITE} (reward_model as a struct of style and ground_truth)",
            "reward_model",
        )
    return "", "", ""


def no_ground_truth(key: str, path: str, names: list[str]) -> tuple[str, str, str]:
    return (
        f"{key} file {path} lacks verl's reward_model.ground_truth (it has {', '.join(names)})",
        REWRITE,
        "reward_model",
    )


def null_ground_truth(key: str, path: str, missing: int, rows: int | None) -> tuple[str, str, str]:
    return (
        f"{key} file {path}: {missing} of {rows} rows have a null reward_model.ground_truth, which no reward can judge "
        "an answer against (rlaunch's scores each such sample 0, as an error)",
        "give every row its ground truth, or drop the rows without one",
        "reward_model",
    )


def null_ground_truths(parquet: Any) -> int:
    """Rows whose reward_model.ground_truth is null, from the file's metadata alone (a column of nulls only, or the
    row groups' null counts): reading the column itself would read every codegen test. 0 where the writer kept no
    statistics."""
    import pyarrow as pa

    reward = parquet.schema_arrow.field("reward_model").type
    if not pa.types.is_struct(reward) or reward.get_field_index("ground_truth") < 0:
        return 0
    if pa.types.is_null(reward.field("ground_truth").type):
        return parquet.metadata.num_rows
    metadata, nulls = parquet.metadata, 0
    for group in range(metadata.num_row_groups):
        for index in range(metadata.num_columns):
            chunk = metadata.row_group(group).column(index)
            if chunk.path_in_schema == "reward_model.ground_truth" and chunk.statistics is not None:
                nulls += chunk.statistics.null_count or 0
    return nulls


def read_parquet(key: str, path: str, columns: dict[str, str]) -> DataFile:
    """A parquet file's metadata (rows, schema) and the distinct values of its data_source column only."""
    # only for a file there is (pyarrow.compute alone takes ~0.2 s to import, a fifth of a plan's own time)
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(Path(path).expanduser())
    except Exception as error:  # pyarrow raises ArrowInvalid, OSError, ... for a file that is not parquet
        return DataFile(key, path, problem=f"{key} file {path} is not readable parquet ({error})", fix=REWRITE)
    schema, rows = parquet.schema_arrow, parquet.metadata.num_rows
    names = list(schema.names)

    def text(name: str) -> bool:
        return name in names and (
            pa.types.is_string(schema.field(name).type) or pa.types.is_large_string(schema.field(name).type)
        )

    problem, fix, column = column_problems(
        key, path, names, text(columns["data.prompt_key"]), text("reward_model"), columns
    )
    if not problem and "reward_model" in names:
        reward = schema.field("reward_model").type
        if pa.types.is_struct(reward) and reward.get_field_index("ground_truth") < 0:
            problem, fix, column = no_ground_truth(key, path, names)
    if not problem and (missing := null_ground_truths(parquet)):
        problem, fix, column = null_ground_truth(key, path, missing, rows)
    if problem:
        return DataFile(key, path, rows=rows, problem=problem, fix=fix, column=column)
    source_column = parquet.read(columns=[DATA_SOURCE]).column(0)
    sources = tuple(sorted(str(value) for value in pc.unique(source_column).to_pylist()))
    return DataFile(key, path, rows=rows, sources=sources, media=media_columns(names, columns))


def media_columns(names: list[str], columns: dict[str, str]) -> tuple[str, ...]:
    return tuple(columns[key] for key in MEDIA_KEYS if columns.get(key) in names)


def read_json(key: str, path: str, columns: dict[str, str]) -> DataFile:
    """A .json / .jsonl file's rows (datasets' json loader reads it for verl): the columns any row has, and the
    first value of each column, by which datasets types it."""
    try:
        records = file_records(str(Path(path).expanduser()))
    except (ValueError, UnicodeDecodeError) as error:
        return DataFile(
            key, path, problem=f"{key} file {path} is not readable JSON or JSON lines ({error})", fix=REWRITE
        )
    names = list(dict.fromkeys(name for row in records for name in row))
    first = {name: next((row[name] for row in records if row.get(name) is not None), None) for name in names}
    prompt_is_text = isinstance(first.get(columns["data.prompt_key"]), str)
    reward_is_text = isinstance(first.get("reward_model"), str)
    problem, fix, column = column_problems(key, path, names, prompt_is_text, reward_is_text, columns)
    if not problem and isinstance(first.get("reward_model"), dict) and "ground_truth" not in first["reward_model"]:
        problem, fix, column = no_ground_truth(key, path, names)
    truths = [row["reward_model"].get("ground_truth") for row in records if isinstance(row.get("reward_model"), dict)]
    if not problem and (missing := sum(truth is None for truth in truths)):
        problem, fix, column = null_ground_truth(key, path, missing, len(records))
    if problem:
        return DataFile(key, path, rows=len(records), problem=problem, fix=fix, column=column)
    sources = tuple(sorted({str(row.get(DATA_SOURCE)) for row in records}))
    media = media_columns([name for name in names if first.get(name)], columns)
    return DataFile(key, path, rows=len(records), sources=sources, media=media)


def read_file(key: str, path: str, columns: dict[str, str]) -> DataFile:
    """One data file, as far as this machine sees it, read as verl's RLHFDataset would by its suffix."""
    if is_remote(path):
        return DataFile(key, path, note=f"{path} is remote: not checked here (verl fetches it in the job)")
    local = Path(path).expanduser()
    if local.is_dir():
        glob_fix = f"name its files, or a glob ({key}={path.rstrip('/')}/*.parquet)"
        return DataFile(key, path, problem=f"{key} file {path} is a directory, which verl cannot read", fix=glob_fix)
    if not local.is_file():
        why = "matches no file" if glob.has_magic(path) else "does not exist"
        return DataFile(key, path, problem=f"{key} file {path} {why}")
    if not path.endswith(VERL_DATA_SUFFIXES):
        return DataFile(
            key,
            path,
            problem=f"{key} file {path}: verl 0.9.1 reads only files named *.parquet, *.json or *.jsonl (by the name, "
            "in lower case: rl_dataset.py raises 'Unsupported file format' for any other)",
            fix="rename it, or convert it to parquet",
        )
    read = (read_json if path.endswith(JSON_SUFFIXES) else read_parquet)(key, path, columns)
    return read if read.problem else replace(read, **malformed_messages(key, path, columns["data.prompt_key"]))


# the rows whose messages are read for their role and content: the measured sample of a file's prompts begins with them
MESSAGE_SAMPLE_ROWS = 64


def malformed_messages(key: str, path: str, prompt_key: str) -> dict[str, str]:
    """A file whose first prompts hold messages verl's chat template cannot read: the problem, its fix and its column
    (empty where there is none). verl fails on them as it templates the prompt (its agent loop's chat template)."""
    for row, prompt in enumerate(sample_prompts([str(Path(path).expanduser())], prompt_key, MESSAGE_SAMPLE_ROWS)):
        wrong = message_problem(prompt)
        if wrong:
            problem = (
                f"{key} file {path}: in row {row} of its prompts (data.prompt_key={prompt_key}) {wrong}; verl 0.9.1 "
                "applies the chat template to every message's role and content and would fail on it"
            )
            return {
                "problem": problem,
                "fix": f'{REWRITE} ([{{"role": "user", "content": ...}}])',
                "column": prompt_key,
            }
    return {}


def read_data(cfg: DictConfig) -> DataReport:
    """Every train and val file, as far as this machine can see them."""
    columns = {"data.prompt_key": str(cfg.data.prompt_key), DATA_SOURCE: DATA_SOURCE, "reward_model": "reward_model"}
    columns |= {key: str(cfg.data.get(key.split(".", 1)[1], default)) for key, default in MEDIA_KEYS.items()}
    files = [read_file(key, path, columns) for key in DATA_KEYS for path in file_list(OmegaConf.select(cfg, key))]
    reward_fn_key = cfg.data.get("reward_fn_key")
    notes = ()
    if reward_fn_key not in (None, DATA_SOURCE):
        notes = (
            f"data.reward_fn_key={reward_fn_key} is not read by verl 0.9.1's reward managers, which take each row's "
            f"'{DATA_SOURCE}' column whatever it says: name the column {DATA_SOURCE}",
        )
    return DataReport(files=tuple(files), notes=notes)


TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json")
# a chat template in a file of its own: transformers' (.jinja) and a multimodal processor's (.json)
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")


def model_file_here(path: str, names: tuple[str, ...]) -> bool:
    """Whether this machine holds one of the model's files `names` (a local directory, or this shell's HF cache)."""
    if is_local_path(path):
        return any((Path(path).expanduser() / name).is_file() for name in names)
    return any(cached_file(path, name, hub_cache_dir(os.environ)) is not None for name in names)


def tokenizer_here(path: str) -> bool:
    """Whether this machine holds the model's tokenizer: checked by file name first, so a plan without one never pays
    for importing transformers."""
    return model_file_here(path, TOKENIZER_FILES)


def train_files_read(report: DataReport, key: str = "data.train_files") -> tuple[str, ...]:
    """The train (or `key`'s) files whose rows were read here (the ones a prompt can be sampled from)."""
    return tuple(file.path for file in report.files if file.key == key and file.rows and not file.problem)


def measure_prompts(cfg: DictConfig, report: DataReport, key: str = "data.train_files") -> PromptStats | None:
    """The prompts' lengths in tokens on a sample of the train (or `key`'s) files that were read, tokenized as verl
    does, when the tokenizer is here (launch/lengths.py); None otherwise. Read once per files and tokenizer (a sweep's
    jobs share them)."""
    files = train_files_read(report, key)
    tokenizer = tokenizer_of(cfg)
    if not files or "data" in skipped(cfg) or not tokenizer_here(tokenizer):
        return None
    kwargs = cfg.data.get("apply_chat_template_kwargs") or {}
    kwargs = OmegaConf.to_container(kwargs, resolve=True) if isinstance(kwargs, DictConfig) else dict(kwargs)
    stamp = tuple(Path(path).stat().st_mtime_ns for path in files)
    template = custom_chat_template(cfg)
    return _measured_prompts(
        files, stamp, tokenizer, str(cfg.data.prompt_key), json.dumps(kwargs, sort_keys=True), template
    )


def custom_chat_template(cfg: DictConfig) -> str | None:
    template = cfg.actor_rollout_ref.model.get("custom_chat_template")
    return None if template is None else str(template)


def tokenizer_of(cfg: DictConfig) -> str:
    return str(cfg.actor_rollout_ref.model.get("tokenizer_path") or cfg.actor_rollout_ref.model.path)


@cache
def _measured_prompts(
    files: tuple[str, ...], _stamp: tuple[int, ...], tokenizer: str, prompt_key: str, kwargs: str, template: str | None
) -> PromptStats | None:
    return measure_prompt_lengths(
        list(files), tokenizer, prompt_key=prompt_key, chat_template_kwargs=json.loads(kwargs), chat_template=template
    )


def judge_chat_template(cfg: DictConfig, report: DataReport, findings: Findings) -> None:
    """Chat prompts for a tokenizer without a chat template (a base model): verl's dataset filter drops every prompt
    it cannot template ("Error processing one of the samples, skipping...") and its agent loop fails on the rest."""
    files = list(train_files_read(report))
    tokenizer = tokenizer_of(cfg)
    if not files or not tokenizer_here(tokenizer) or model_file_here(tokenizer, CHAT_TEMPLATE_FILES):
        return
    if chat_prompts_without_template(files, tokenizer, str(cfg.data.prompt_key), custom_chat_template(cfg)):
        findings.problems.append(
            (
                "data",
                f"the prompts in data.train_files are chat messages, and the tokenizer of {tokenizer} has no chat "
                "template (a base model's?): verl applies one to every prompt and would drop them all; set "
                "actor_rollout_ref.model.custom_chat_template to a Jinja chat template, or use the model's chat "
                "(instruct) version",
            )
        )


def judge_multimodal(cfg: DictConfig, report: DataReport, findings: Findings) -> None:
    """Rows with images, videos or audio need the model's multimodal processor: verl's dataset asserts "processor is
    needed to process multimodal data" at the first such row (utils/dataset/rl_dataset.py), and verl takes the
    processor from the tokenizer's path with its own hf_processor (workers/config/model.py), None for a text-only
    model. transformers' AutoProcessor finds a processor by the files it saved (PROCESSOR_FILES); a directory with
    none of them loads a tokenizer only, which verl's hf_processor turns into None on any machine. Judged for a local
    tokenizer this machine holds (loading the processor itself would need the job's torchvision, which a login node
    may lack)."""
    files = [file for file in report.files if file.media and not rows_unused(cfg, file)]
    tokenizer = tokenizer_of(cfg)
    if not files or not tokenizer_here(tokenizer):
        return
    if model_file_here(tokenizer, PROCESSOR_FILES):
        return
    first = files[0]
    findings.problems.append(
        (
            "data",
            f"{first.key} file {first.path} has multimodal columns ({', '.join(first.media)}) but {tokenizer} has no "
            "multimodal processor (a text-only model): verl's dataset would stop at the first such row (\"processor is "
            'needed to process multimodal data"); use a vision-language model (actor_rollout_ref.model.path), or '
            "text-only data",
        )
    )


def scored_domains(cfg: DictConfig) -> tuple[set[str], Any, Any] | None:
    """(domains rlaunch scores, the data_source -> domain function, the data_source -> why it is not scored function
    the scorer itself raises with), or None when the run brings its own reward."""
    from launch.schema import project_path

    path = cfg.reward.custom_reward_function.get("path")
    if not path or Path(str(path)).resolve() != Path(project_path("rewards/verl_entry.py")).resolve():
        return None
    from rewards.scorer import DOMAINS, domain_of, refusal

    return set(DOMAINS), domain_of, refusal


@cache
def verl_default_sources() -> tuple[frozenset[str], tuple[str, ...]]:
    """The data_source values verl 0.9.1's default reward scores (verl/utils/reward_score/__init__.py
    default_compute_score, what every reward manager falls back to without reward.custom_reward_function.path): the
    strings it compares data_source with, and the prefixes it tests with startswith. Read from its source, without
    importing verl (torch and Ray): any other data_source raises NotImplementedError at the first reward."""
    source = verl_package_dir() / "utils" / "reward_score" / "__init__.py"
    tree = ast.parse(source.read_text())
    function = next(
        node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "default_compute_score"
    )
    exact: set[str] = set()
    prefixes: list[str] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "data_source":
            for compared in node.comparators:
                values = compared.elts if isinstance(compared, (ast.List, ast.Tuple, ast.Set)) else [compared]
                exact.update(v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "startswith"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "data_source"
        ):
            prefixes += [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return frozenset(exact), tuple(prefixes)


def verl_scores(source: str) -> bool:
    exact, prefixes = verl_default_sources()
    return source in exact or source.startswith(prefixes)


def apply_data_facts(cfg: DictConfig, report: DataReport) -> None:
    """dataset.domains from the data itself: PCGrad's task count (the preflight's one gradient shard per task)."""
    known = scored_domains(cfg)
    sources = report.sources()
    if not sources or known is None:
        return
    _, domain_of, _ = known
    with open_dict(cfg):
        cfg.dataset.domains = sorted({domain_of(source) for source in sources})


def missing_file_fix(cfg: DictConfig, key: str, set_on_command_line: dict[str, str]) -> str:
    """Where the path came from decides the fix: the user's own `key=...`, or the dataset group under dataset.root.
    A pasted verl script (algo=verl) that drops the key gets the dataset group's files too, not verl's own default
    (its gsm8k under ~/data/rlhf): said as such, never offered as a fix."""
    if key in set_on_command_line and cfg.algo.name == "verl":
        return (
            f"{key}={set_on_command_line[key]} was set on the command line: correct the path there (without it, "
            f"rlaunch reads dataset={cfg.dataset.name}'s files under dataset.root, not verl's own default)"
        )
    if key in set_on_command_line:
        return (
            f"{key}={set_on_command_line[key]} was set on the command line: correct the path there, or drop it to "
            f"read dataset={cfg.dataset.name}'s files under dataset.root"
        )
    # conf/dataset/<name>.yaml: the root is $RLAUNCH_DATA_DIR/<name> (default ~/data/<name>)
    obtain = cfg.dataset.get("obtain")
    return (
        f"set dataset.root=<your copy> (now {cfg.dataset.root}), or RLAUNCH_DATA_DIR to the directory holding "
        f"{cfg.dataset.name}/, or set {key}" + (f"; no copy yet: {obtain}" if obtain else "")
    )


def judge_data(
    cfg: DictConfig, report: DataReport, findings: Findings, set_on_command_line: dict[str, str] | None = None
) -> None:
    """`set_on_command_line`: key -> value as written, for the overrides of this job (the plan's)."""
    batch = int(cfg.data.train_batch_size)
    for file in report.files:
        if file.problem and rows_unused(cfg, file):
            findings.notes.append(
                f"{file.problem}: not refused, as verl reads that column only where it validates, and this run never "
                "does (trainer.val_before_train=false, trainer.test_freq<=0)"
            )
    for key in DATA_KEYS:
        bad = [file for file in report.files if file.key == key and file.problem and not rows_unused(cfg, file)]
        if not bad:
            continue
        first = bad[0]
        fix = first.fix or (
            missing_file_fix(cfg, key, set_on_command_line or {})
            if first.rows is None
            else f"{REWRITE}, or set data.prompt_key to the column you have"
        )
        count = f" ({len(bad)} of {len([f for f in report.files if f.key == key])} files)" if len(bad) > 1 else ""
        findings.problems.append(("data", f"{first.problem}{count}: {fix}"))
    findings.notes += dict.fromkeys(file.note for file in report.files if file.note)  # a file both keys name: once
    judge_chat_template(cfg, report, findings)
    judge_multimodal(cfg, report, findings)
    for key in DATA_KEYS:
        if not file_list(OmegaConf.select(cfg, key)):
            findings.problems.append(
                (
                    "data",
                    f"{key} names no file: verl 0.9.1 builds its {'train' if key == DATA_KEYS[0] else 'validation'} "
                    "dataset from it as the trainer starts, and fails on none; give one or more files",
                )
            )
    train_rows = report.rows("data.train_files")
    usable = rows_verl_trains(cfg.data, train_rows) if train_rows is not None else None
    if usable == 0:
        findings.problems.append(("data", f"data.train_files hold no rows: verl trains 0 steps; {REWRITE}"))
    elif usable is not None and usable < batch and cfg.algo.name != "rft":
        # algo=rft's first stage is verl's main_generation_server, which generates for every row and never reads
        # data.train_batch_size (main_generation_server.py); its SFT stage's batch is rft.sft's, on rows not yet made
        findings.problems.append(
            (
                "data",
                f"data.train_files hold {usable} rows, fewer than one batch (data.train_batch_size={batch}): verl "
                f"drops the incomplete batch and trains 0 steps; lower data.train_batch_size to at most {usable}",
            )
        )
    if report.rows("data.val_files") == 0:
        findings.problems.append(
            (
                "data",
                "data.val_files hold no rows: verl 0.9.1 builds its validation loader with a batch of every row (0), "
                "which torch refuses as the trainer starts; give files with rows",
            )
        )
    judge_overlong_filter(cfg, report, findings)
    judged = (
        report if validates(cfg) else replace(report, files=tuple(f for f in report.files if f.key != "data.val_files"))
    )
    manager = OmegaConf.select(cfg, "reward.reward_manager.name")
    if OmegaConf.select(cfg, "reward.reward_manager.source", default="register") == "importlib":
        if report.sources():  # its file and class are checked with the files verl opens (judge_files)
            findings.notes.append(
                f"data_source values not checked: reward.reward_manager.source=importlib builds your own reward "
                f"manager ({manager}), which verl 0.9.1 scores with and which need not call its default_compute_score"
            )
        return
    known = scored_domains(cfg)
    if known is None and not cfg.reward.custom_reward_function.get("path"):
        if reward_model_scores(cfg):
            if report.sources():
                findings.notes.append(
                    "data_source values not checked: with the reward model on and no reward function of the run's "
                    "own, verl 0.9.1 scores every response with the reward model alone"
                )
            return
        judge_verl_default_reward(judged, findings)
        return
    if known is None:
        if report.sources():
            findings.notes.append("data_source values not checked: the run uses its own reward function")
        return
    domains, domain_of, refusal = known
    judge_stem_judge(cfg, judged, domain_of, findings)
    for file, roles in each_file_once(judged.files):
        unknown = [source for source in file.sources if domain_of(source) not in domains]
        refused = [source for source in file.sources if source not in unknown and refusal(source)]
        if refused:  # a domain rlaunch scores, a dataset its reward does not (the scorer would raise its refusal)
            more = " and more" if len(refused) > 5 else ""
            others = f" (also {', '.join(refused[1:5])}{more})" if refused[1:] else ""
            findings.problems.append(
                (
                    "data_sources",
                    f"{refusal(refused[0])}{others}, in {file.path}{roles}: the first reward would fail; rename the "
                    "data sources, or set reward.custom_reward_function.path to your own reward function",
                )
            )
        if unknown:
            shown = ", ".join(unknown[:5]) + (f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else "")
            findings.problems.append(
                (
                    "data_sources",
                    f"data_source {shown} in {file.path}{roles} maps to no reward domain rlaunch scores "
                    f"({', '.join(sorted(domains))}, named <domain>__<dataset>): rename the data sources, or set "
                    "reward.custom_reward_function.path to your own reward function",
                )
            )


def judge_stem_judge(cfg: DictConfig, report: DataReport, domain_of: Any, findings: Findings) -> None:
    """rlaunch's stem reward asks a verifier model (rewards/domains/stem.py): data with stem rows and no judge set in
    reward_kwargs scores every stem sample 0, as an error, for the whole run."""
    from rewards.domains.stem import unset_judge_keys

    stem_files = [file.path for file in report.files if any(domain_of(source) == "stem" for source in file.sources)]
    kwargs = OmegaConf.select(cfg, "reward.custom_reward_function.reward_kwargs") or {}
    unset = unset_judge_keys(kwargs)
    if not stem_files or not unset:
        return
    root = "reward.custom_reward_function.reward_kwargs"
    others = f" (and {len(stem_files) - 1} more files)" if len(stem_files) > 1 else ""
    keys = " and ".join(f"{root}.{key}" for key in unset)
    findings.problems.append(
        (
            "data_sources",
            f"{stem_files[0]}{others} has stem rows, which rlaunch's reward judges with a verifier model, and {keys} "
            f"{'is' if len(unset) == 1 else 'are'} not set: every stem sample would score 0 as an error; set "
            f"{root}.stem_judge_url to its OpenAI-compatible server and {root}.stem_judge_model to its served model "
            "name, or leave the stem data out",
        )
    )


def each_file_once(files: Sequence[DataFile]) -> list[tuple[DataFile, str]]:
    """Each file read once, with " (data.train_files and data.val_files)" where both keys name it: what its rows lack
    is said once, naming both roles."""
    keys_of_path: dict[str, list[str]] = {}
    for file in files:
        keys_of_path.setdefault(file.path, []).append(file.key)
    firsts = {file.path: file for file in reversed(files)}
    return [
        (firsts[path], f" ({' and '.join(dict.fromkeys(keys))})" if len(set(keys)) > 1 else "")
        for path, keys in keys_of_path.items()
    ]


def reward_model_scores(cfg: DictConfig) -> bool:
    """verl 0.9.1 without a reward function of the run's own scores with the reward model alone when it is on
    (experimental/reward_loop/reward_loop.py compute_score): default_compute_score is never called. (The legacy
    reward_model.enable, which main_ppo never reads, is refused: choices.check_legacy_reward_keys.)"""
    return bool(OmegaConf.select(cfg, "reward.reward_model.enable", default=False))


def rows_unused(cfg: DictConfig, file: DataFile) -> bool:
    """A problem in a validation file's column that verl never reads: verl 0.9.1 loads the validation files whether or
    not it validates (trainer/ppo/v1/trainer_base.py _init_dataloader), which fails on the file itself (its name,
    format or no rows), and reads their rows only as it validates; data.filter_overlong_prompts alone templates every
    prompt as the files load, and drops the rows it cannot template (all of them, and the loader then fails)."""
    if file.key != DATA_KEYS[1] or not file.column or validates(cfg):
        return False
    return not (cfg.data.get("filter_overlong_prompts") and file.column == str(cfg.data.prompt_key))


def validates(cfg: DictConfig | Mapping[str, Any]) -> bool:
    """verl scores the validation files only where it validates: before training (trainer.val_before_train) or
    every trainer.test_freq steps (ray_trainer/trainer_base: test_freq > 0). `cfg`: the config, or the plan's verl."""
    trainer = cfg["trainer"]
    return bool(trainer.get("val_before_train", True)) or int(trainer.get("test_freq") or -1) > 0


def judge_overlong_filter(cfg: DictConfig, report: DataReport, findings: Findings) -> None:
    """data.filter_overlong_prompts: verl's RLHFDataset drops every prompt longer than data.max_prompt_length as it
    loads (rl_dataset.py maybe_filter_out_long_prompts). Where the measured sample says too few remain (none, or
    fewer than one batch when the sample is every row), the trainer fails or trains 0 steps: refused; a share dropped
    is said. Without the filter verl keeps them, and its agent loop cuts each to its last rollout.prompt_length tokens
    (agent_loop.py _cap_text_prompt_length): said too, as a prompt's beginning (often its instructions) is lost."""
    limit, batch = int(cfg.data.max_prompt_length), int(cfg.data.train_batch_size)
    if not cfg.data.get("filter_overlong_prompts"):
        cut_at = int(OmegaConf.select(cfg, "actor_rollout_ref.rollout.prompt_length", default=None) or limit)
        for key in DATA_KEYS:
            stats = measure_prompts(cfg, report, key)
            cut = stats.longer_than(cut_at) if stats is not None and stats.lengths else 0
            if cut:
                findings.notes.append(
                    f"{cut} of {stats.rows} prompts sampled from {key} are longer than {cut_at} tokens (max "
                    f"{stats.max}): with data.filter_overlong_prompts=false verl keeps them and its agent loop keeps "
                    f"each one's last {cut_at} tokens, losing its beginning; raise data.max_prompt_length to "
                    f"{stats.max}, or set data.filter_overlong_prompts=true to drop them"
                )
        return
    for key in DATA_KEYS:
        stats, rows = measure_prompts(cfg, report, key), report.rows(key)
        if stats is None or not stats.lengths or rows is None:
            continue
        dropped = stats.longer_than(limit)
        if not dropped:
            continue
        kept = round(rows * (stats.rows - dropped) / stats.rows)
        said = (
            f"{dropped} of {stats.rows} prompts sampled from {key} are longer than data.max_prompt_length={limit} "
            f"tokens (p50 {stats.p50}, max {stats.max}), and verl's filter (data.filter_overlong_prompts=true) drops "
            "them as it loads"
        )
        fix = f"raise data.max_prompt_length to {stats.max}, or set data.filter_overlong_prompts=false"
        every_row = stats.rows == rows
        if key == DATA_KEYS[0] and (dropped == stats.rows or (every_row and kept < batch)):
            findings.problems.append(
                ("data", f"{said}: {kept} rows remain, fewer than one batch ({batch}), and verl trains 0 steps; {fix}")
            )
        elif dropped == stats.rows:
            findings.problems.append(
                ("data", f"{said}: none remain, and verl's validation loader fails as the trainer starts; {fix}")
            )
        else:
            findings.notes.append(f"{said}: about {kept} of {rows} rows remain")


def judge_verl_default_reward(report: DataReport, findings: Findings) -> None:
    """No reward function of the run's own or rlaunch's (algo=verl): verl's default scores a fixed list of data
    sources and raises NotImplementedError for any other, at the first reward of the first step."""
    for file, roles in each_file_once(report.files):
        unknown = [source for source in file.sources if not verl_scores(source)]
        if unknown:
            shown = ", ".join(unknown[:5]) + (f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else "")
            findings.problems.append(
                (
                    "data_sources",
                    f"data_source {shown} in {file.path}{roles} is not one verl's default reward scores (verl 0.9.1's "
                    "default_compute_score raises NotImplementedError for it at the first step): set "
                    "reward.custom_reward_function.path to your reward function, or use rlaunch's GURU reward "
                    "(algo=guru_baseline) for <domain>__<dataset> sources",
                )
            )


# --- model ---------------------------------------------------------------------------------------------------------


def job_environment(cfg: DictConfig) -> dict[str, str]:
    """The variables the job's processes see: the submitting shell's (SLURM propagates them) and cluster.env."""
    return {**os.environ, **{str(k): str(v) for k, v in (cfg.cluster.get("env") or {}).items()}}


def node_hub_cache(cfg: DictConfig) -> str:
    return hub_cache_dir(job_environment(cfg))


def download_command(path: str, cache_dir: str) -> str:
    return f"HF_HUB_CACHE={cache_dir} hf download {path}"


def judge_model(cfg: DictConfig, plan: Plan, facts: Facts, findings: Findings) -> None:
    path = str(cfg.actor_rollout_ref.model.path)
    cache = node_hub_cache(cfg)
    if plan.llm.get("known") is False:
        findings.problems.append(
            (
                "model",
                f"model {path} is unknown here (not a local directory, not in the HF cache {cache}, no llm/ option "
                f"with that path), so the preflight cannot judge it: fill the cache ({download_command(path, cache)}), "
                f"pick the llm/ option of that model (llm=...){variant_hint(path)}, or give a local path "
                "(actor_rollout_ref.model.path=/dir)",
            )
        )
    tokenizer = tokenizer_of(cfg)
    if is_local_path(tokenizer) and Path(tokenizer).expanduser().is_dir() and not tokenizer_here(tokenizer):
        # transformers then builds an empty tokenizer from the directory's config alone: every prompt becomes []
        findings.problems.append(
            (
                "model",
                f"{tokenizer} has no tokenizer ({' or '.join(TOKENIZER_FILES)}), which verl's workers load from it: "
                "copy the model's tokenizer files there, or set actor_rollout_ref.model.tokenizer_path",
            )
        )
    weights = local_weights_problem(path, cfg.actor_rollout_ref.actor.get("megatron") or {})
    if weights:
        findings.problems.append(("model", weights))
    findings.problems += [("model", problem) for problem in model_path_problems(cfg, plan) if problem]
    judge_lora_targets(cfg, findings)
    offline = job_environment(cfg).get("HF_HUB_OFFLINE", "").lower() in OFFLINE_VALUES
    snapshot = facts.hub_snapshot
    if offline and snapshot is not None and snapshot.missing and not is_local_path(path):
        findings.problems.append(
            (
                "hub_cache",
                f"the job runs with HF_HUB_OFFLINE=1 but the HF cache the nodes read ({snapshot.cache_dir}) lacks "
                f"{', '.join(snapshot.missing)} of {path}: download it there first "
                f"({download_command(path, snapshot.cache_dir)}), or give a local path",
            )
        )


def model_roles(cfg: DictConfig) -> list[tuple[str, DictConfig]]:
    """The model blocks verl's workers build: the actor's, and the critic's where verl trains one."""
    roles = [("actor_rollout_ref.model", cfg.actor_rollout_ref.model)]
    if trains_critic(cfg):
        roles.append(("critic.model", cfg.critic.model))
    return roles


def model_path_problems(cfg: DictConfig, plan: Plan) -> list[str | None]:
    """The other paths verl's workers load a model's parts from as they build it (workers/config/model.py
    HFModelConfig, engine/fsdp/transformer_impl.py): the tokenizer, the modules of external_lib, a LoRA adapter
    (where LoRA is on), and the critic's own model where verl trains one. A hub id is fetched in the job (the HF
    cache check covers offline jobs): only local paths are judged here, as the actor's is."""
    roles = model_roles(cfg)
    problems: list[str | None] = []
    for prefix, model in roles:
        if prefix == "critic.model":
            critic = str(model.path)
            problems.append(missing_local_path(f"{prefix}.path", critic, "the critic's model"))
            if critic != str(cfg.actor_rollout_ref.model.path) and Path(critic).expanduser().is_dir():
                problems.append(local_weights_problem(critic, cfg.critic.get("megatron") or {}, f"{prefix}.path"))
        tokenizer = model.get("tokenizer_path")
        if tokenizer is not None:
            problems.append(missing_local_path(f"{prefix}.tokenizer_path", str(tokenizer), "the tokenizer"))
        problems.append(external_lib_problem(f"{prefix}.external_lib", model.get("external_lib"), plan))
        problems.append(unknown_model_type_problem(f"{prefix}.path", str(model.path), model, plan))
        if int(model.get("lora_rank") or 0) > 0 and model.get("lora_adapter_path") is not None:
            problems.append(lora_adapter_problem(f"{prefix}.lora_adapter_path", str(model.lora_adapter_path)))
    return problems


def judge_lora_targets(cfg: DictConfig, findings: Findings) -> None:
    """A LoRA model's target_modules against the layers of its model, as peft resolves them (launch/lora_targets.py):
    peft's refusal is a problem (verl would stop as it builds the actor), list entries that name no layer a note
    (peft ignores them: LoRA on fewer layers than written)."""
    roles = model_roles(cfg)
    caches = list(dict.fromkeys((node_hub_cache(cfg), hub_cache_dir(os.environ))))
    for prefix, model in roles:
        config_file = model_config_file(str(model.path), caches) if judged_targets(model) else None
        found = reach(config_file, model) if config_file is not None else None
        if found is None:
            continue
        where = f"{prefix}.target_modules={shown(model.get('target_modules'))}"
        role = "critic" if prefix.startswith("critic") else "actor"
        layers = f"the linear layers of {found.model_class}: {', '.join(found.linear_names)}"
        if found.refusal:
            findings.problems.append(
                (
                    "model",
                    f"{where}: peft refuses it on {model.path} as verl builds the LoRA {role} "
                    f"({found.refusal}); name layers of the model ({layers}) or write {ALL_LINEAR}",
                )
            )
        elif found.unmatched:
            findings.notes.append(
                f"{where}: {', '.join(found.unmatched)} name(s) no layer of {model.path}; peft ignores them and adapts "
                f"the others ({layers})"
            )


def missing_local_path(key: str, path: str, what: str) -> str | None:
    """A local path (as is_local_path reads one: the actor's model path is judged so) that names no directory."""
    if not is_local_path(path) or Path(path).expanduser().is_dir():
        return None
    found = "a file" if Path(path).expanduser().exists() else "nothing"
    return f"{key}={path} names {found} here, and verl's workers load {what} from it as they start: fix the path"


# what peft's PeftModel.from_pretrained reads first of an adapter directory
ADAPTER_CONFIG = "adapter_config.json"


def lora_adapter_problem(key: str, path: str) -> str | None:
    """verl loads the adapter with peft (PeftModel.from_pretrained) as the LoRA actor is built."""
    missing = missing_local_path(key, path, "the LoRA adapter (peft's PeftModel.from_pretrained)")
    if missing or not is_local_path(path) or (Path(path).expanduser() / ADAPTER_CONFIG).is_file():
        return missing
    return (
        f"{key}={path} holds no {ADAPTER_CONFIG}, which peft reads as verl builds the LoRA actor: point it at the "
        "directory a LoRA adapter was saved to (save_pretrained)"
    )


def external_lib_problem(key: str, value: Any, plan: Plan) -> str | None:
    """verl imports each module of external_lib by name as it builds the model config (utils/import_utils.py
    import_external_libs), in the job's Python, which starts in the code snapshot: a top-level package neither this
    Python nor the checkout has fails the job. A container's Python is another: not judged from here."""
    if value is None or plan.container:
        return None
    for name in file_list(value):
        top = name.split(".")[0]
        if not importable_in_the_job(top):
            return (
                f"{key}={name}: no module {top} is installed here or in the checkout, and verl imports it as it "
                "builds the model (ModuleNotFoundError in the job): install it, or correct the name"
            )
    return None


def unknown_model_type_problem(key: str, path: str, model: DictConfig, plan: Plan) -> str | None:
    """verl's workers read a model's config with transformers' AutoConfig (workers/config/model.py HFModelConfig,
    trust_remote_code from the model block): a model_type this transformers does not know, without the model's own
    code (config.json's auto_map, with trust_remote_code on), fails there, in the job. A container's transformers is
    another: not judged from here."""
    config_file = Path(path).expanduser() / "config.json"
    if plan.container or not is_local_path(path) or not config_file.is_file():
        return None
    try:
        raw = json.loads(config_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # facts.architecture_read refuses it
    model_type = raw.get("model_type") if isinstance(raw, dict) else None
    if not model_type:
        return None
    import transformers
    from transformers import CONFIG_MAPPING

    own_code = bool(raw.get("auto_map"))
    if model_type in CONFIG_MAPPING or (own_code and model.get("trust_remote_code")):
        return None
    prefix = key.rpartition(".")[0]
    if own_code:
        fix = f"set {prefix}.trust_remote_code=true to load the model's own code (its auto_map)"
    else:
        fix = "use a transformers that knows it, or add the model's code (config.json's auto_map) with "
        fix += f"{prefix}.trust_remote_code=true"
    return (
        f"{key}={path}: its config.json's model_type {model_type!r} is one transformers {transformers.__version__} "
        f"does not know: verl's workers fail as they read it (AutoConfig.from_pretrained raises ValueError); {fix}"
    )


def importable_in_the_job(top: str, *more_dirs: str) -> bool:
    """A top-level module the job's Python finds: installed here (the job runs this venv, on the shared filesystem),
    in the checkout (the job starts in its snapshot), or in `more_dirs` (the job's PYTHONPATH, a module's own
    directory)."""
    return module_in_the_job(top, *more_dirs) is not None


def module_in_the_job(name: str, *more_dirs: str) -> ModuleSpec | None:
    """The spec of a (dotted) module the job's Python finds where importable_in_the_job looks for its top-level
    package, each further part looked up in its parent's directories: importlib's find_spec would import (run) the
    parent packages first. None where no place has it."""
    from importlib.machinery import PathFinder
    from importlib.util import find_spec

    from launch.schema import PROJECT_DIR

    top, *parts = name.split(".")
    try:
        found = [find_spec(top), PathFinder.find_spec(top, [str(PROJECT_DIR), *more_dirs])]
    except (ImportError, ValueError):  # an empty or relative name
        return None
    for spec in found:
        for depth in range(1, len(parts) + 1):
            if spec is None or not spec.submodule_search_locations:
                spec = None
                break
            spec = PathFinder.find_spec(".".join([top, *parts[:depth]]), list(spec.submodule_search_locations))
        if spec is not None:
            return spec
    return None


def job_pythonpath(plan: Plan) -> list[str]:
    """The job's PYTHONPATH entries: cluster.env's (in the workers' runtime env) before the submitting shell's,
    which SLURM propagates."""
    joined = [plan.worker_env.get("PYTHONPATH", ""), os.environ.get("PYTHONPATH", "")]
    return [entry for value in joined for entry in value.split(os.pathsep) if entry]


# The packages the job's `python -m verl.trainer.main_ppo` (or rlaunch's own driver) imports: one a PYTHONPATH entry
# holds is imported instead of the venv's that rlaunch planned with
JOB_PACKAGES = ("verl", "ray", "omegaconf", "hydra", "torch", "transformers", "tensordict", "vllm", "sglang")


def shadowed_packages(plan: Plan) -> tuple[list[str], list[str]]:
    """(problems, notes): a PYTHONPATH entry holding a package the job imports puts it before the venv's. A `verl`
    without verl.trainer.main_ppo stops the job at once ("No module named 'verl.trainer'"); any other is said, with
    the version rlaunch planned with. A container's Python is another: not judged from here."""
    from importlib.metadata import PackageNotFoundError, version
    from importlib.util import find_spec

    if plan.container:
        return [], []
    problems, notes = [], []
    named = "cluster.env.PYTHONPATH" if plan.worker_env.get("PYTHONPATH") else "PYTHONPATH"
    for entry in dict.fromkeys(job_pythonpath(plan)):
        root = Path(entry).expanduser()
        for package in JOB_PACKAGES:
            there = root / package
            if not (there / "__init__.py").is_file() and not (root / f"{package}.py").is_file():
                continue
            installed = find_spec(package)
            if (
                installed is not None
                and installed.origin
                and Path(installed.origin).parent.resolve() == there.resolve()
            ):
                continue  # the entry is where the venv's own copy lives
            try:
                planned = f"the installed {package} {version(package)}"
            except PackageNotFoundError:
                planned = f"the venv's (no {package} is installed here)"
            if package == "verl" and not (there / "trainer" / "main_ppo.py").is_file():
                problems.append(
                    f"{named} entry {entry} holds a verl package without verl/trainer/main_ppo.py: the job imports "
                    f"it instead of {planned} and stops at once (No module named 'verl.trainer'); drop {entry} from "
                    f"{named}"
                )
            else:
                notes.append(
                    f"{named} entry {entry} holds its own {package}, which the job imports instead of {planned} "
                    "that this plan was checked with"
                )
    return problems, notes


def unimportable_imports(source: str, module_dir: Path, search: Sequence[str]) -> list[str]:
    """The top-level modules a file imports unconditionally (module level, outside try/if) that the job's Python
    would not find: loading the file fails (verl/utils/import_utils.py load_module: RuntimeError 'Error loading
    module from module_path=...' from the ModuleNotFoundError)."""
    tops = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            tops += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.append(node.module.split(".")[0])
    return [top for top in dict.fromkeys(tops) if not importable_in_the_job(top, str(module_dir), *search)]


def local_weights_problem(
    path: str, megatron: Mapping[str, Any], key: str = "actor_rollout_ref.model.path"
) -> str | None:
    """A local model directory verl's workers would load no weights from: from_pretrained raises OSError as the actor
    is built (a Megatron actor reading a dist checkpoint does not load them)."""
    if not is_local_path(path) or not Path(path).expanduser().is_dir() or megatron.get("use_dist_checkpointing"):
        return None
    missing = missing_weights(local_file(path))
    if not missing:
        return None
    return (
        f"{path} lacks {', '.join(missing)}, which verl's workers load from it (from_pretrained fails as the model is "
        f"built): copy the model's weight files there, or point {key} at the complete model"
    )


# --- time ----------------------------------------------------------------------------------------------------------


def validation_batches(verl: dict[str, Any], val_rows: int) -> list[int]:
    """The sequences of each validation batch: rows (data.val_max_samples applied) x val_kwargs.n, in batches of
    data.val_batch_size (verl's default: the whole set)."""
    data = verl["data"]
    limit = int(data.get("val_max_samples") or -1)
    rows = min(val_rows, limit) if limit > 0 else val_rows
    n = int((verl["actor_rollout_ref"]["rollout"].get("val_kwargs") or {}).get("n") or 1)
    batch = int(data.get("val_batch_size") or rows or 1)
    return [min(batch, rows - start) * n for start in range(0, rows, batch)]


def one_validation_s(cfg: DictConfig, plan: Plan, val_rows: int | None) -> float:
    """Seconds of one validation at the plan's typical lengths (0 without validation files read)."""
    if not val_rows or plan.time is None:
        return 0.0
    arch, knobs, card = Architecture.from_llm(plan.llm), Knobs.from_verl(plan.verl), Card.of(cfg.gpu)
    return validation_s(arch, knobs, card, plan.time, validation_batches(plan.verl, val_rows))


def rows_verl_trains(data: Mapping[str, Any], train_rows: int) -> int:
    """The training rows verl's dataset keeps: data.train_max_samples caps them where set (> 0)."""
    limit = int(data.get("train_max_samples") or -1)
    return min(train_rows, limit) if limit > 0 else train_rows


@dataclass(frozen=True)
class VerlSteps:
    """The steps verl 0.9.1's fit loop runs: it stops at trainer.total_training_steps or at the end of
    trainer.total_epochs, whichever comes first (trainer/ppo/v1/trainer_base.py fit, main_ppo's default
    trainer.use_v1=true; the legacy trainer/ppo/ray_trainer.py loops over the epochs the same way). Its last-step save
    and validation (is_last_step: global_steps >= total_training_steps) come only where the step count ends the run;
    a run its epochs end saves and validates on save_freq's and test_freq's multiples alone."""

    total: int
    per_epoch: int
    by_epochs: bool  # trainer.total_training_steps is more than the epochs allow: a value that changes nothing

    @classmethod
    def of(cls, trainer: Mapping[str, Any], steps_per_epoch: int) -> VerlSteps:
        epochs_allow = steps_per_epoch * int(trainer["total_epochs"])
        limit = trainer.get("total_training_steps")
        by_epochs = limit is not None and int(limit) > epochs_allow
        return cls(epochs_allow if limit is None or by_epochs else int(limit), steps_per_epoch, by_epochs)

    def acts(self, freq: int) -> int:
        """How often verl acts every freq-th step (its saves, its validations) in this run; never where freq <= 0."""
        if self.by_epochs:
            return self.total // freq if freq > 0 else 0
        return every_and_last(self.total, freq)

    def note(self, trainer: Mapping[str, Any]) -> str | None:
        """Said where trainer.total_training_steps asks for more than verl runs."""
        if not self.by_epochs or self.per_epoch == 0:  # no whole batch: the data check refuses it
            return None
        asked = int(trainer["total_training_steps"])
        return (
            f"time: trainer.total_training_steps={asked} is more than the {self.total} step(s) "
            f"trainer.total_epochs={trainer['total_epochs']} allows ({self.per_epoch}/epoch): verl 0.9.1 stops at the "
            f"end of its epochs, after step {self.total}, with no last-step save or validation; set "
            f"trainer.total_epochs={math.ceil(asked / self.per_epoch)} to run {asked} steps"
        )


def mini_batches_over_the_batch(verl: Mapping[str, Any]) -> list[str]:
    """A PPO mini-batch of more prompts than the batch, under use_dynamic_bsz. verl 0.9.1 compares the two only
    without it (workers/config/actor.py and critic.py validate: the plan stops at verl's own check then), and its v1
    trainer pads each step's batch with no-op samples up to a whole mini-batch (trainer/ppo/v1/trainer_base.py
    _balance_batch, upsample_batch_to_divisible_size): every step is then one update, the padding's passes on top.
    Its legacy trainer (trainer.use_v1=false) asserts whole mini-batches: launch/layout_checks.py refuses that."""
    if not verl["trainer"].get("use_v1", True):
        return []
    batch, n = int(verl["data"]["train_batch_size"]), int(verl["actor_rollout_ref"]["rollout"]["n"])
    roles = {"actor_rollout_ref.actor": verl["actor_rollout_ref"]["actor"]}
    if trains_critic(verl):
        roles["critic"] = verl["critic"]
    said = []
    for prefix, role in roles.items():
        mini = int(role["ppo_mini_batch_size"])
        if mini > batch and role.get("use_dynamic_bsz"):
            said.append(
                f"{prefix}.ppo_mini_batch_size={mini} is more than data.train_batch_size={batch}: under "
                f"{prefix}.use_dynamic_bsz=true verl 0.9.1 takes it, pads each step's {batch} x {n} sequences with "
                f"no-op ones up to one mini-batch ({mini} x {n}) and makes one update a step (x ppo_epochs), as "
                f"{batch} would, spending passes on the padding; set {prefix}.ppo_mini_batch_size={batch} or less"
            )
    return said


def warmup_covers_the_run(verl: Mapping[str, Any], steps: int, at_most: bool) -> str | None:
    """The actor's learning-rate warmup over most of the run's `steps` (`at_most`: trainer.total_training_steps, the
    rows unread): the LR never, or only late, reaches optim.lr. verl 0.9.1 warms up over optim.lr_warmup_steps, or
    where that is <= 0 over int(lr_warmup_steps_ratio x its total training steps), linearly from 0, one scheduler step
    a training step (workers/engine/fsdp/transformer_impl.py _build_lr_scheduler, engine_workers.py), step k (from 1)
    at (k - 1) / warmup of the LR (utils/torch_functional.py, zero_indexed_step)."""
    optim = verl["actor_rollout_ref"]["actor"]["optim"]
    prefix = "actor_rollout_ref.actor.optim"
    given = optim.get("lr_warmup_steps")
    if given is not None and int(given) > 0:
        warmup, key = int(given), f"{prefix}.lr_warmup_steps={given}"
    else:
        ratio = float(optim.get("lr_warmup_steps_ratio") or 0.0)
        warmup, key = int(ratio * steps), f"{prefix}.lr_warmup_steps_ratio={shown(ratio)}"
    if steps < 2 or 2 * warmup <= steps:  # the LR at its value for at least half of the run
        return None
    run = f"at most {steps} training steps (trainer.total_training_steps)" if at_most else f"{steps} training steps"
    if warmup >= steps:
        reached = f"no step trains at it: the last runs at {100 * (steps - 1) // warmup} % of it"
    else:
        reached = f"only steps {warmup + 1}-{steps} train at it"
    if key.startswith(f"{prefix}.lr_warmup_steps_ratio"):
        fix = f"{prefix}.lr_warmup_steps_ratio=0.1 (a tenth of the run) or 0 (none)"
    elif steps >= 10:
        fix = f"{prefix}.lr_warmup_steps={steps // 10} (a tenth of the run) or -1 (none)"
    else:
        fix = f"{prefix}.lr_warmup_steps=-1 (none)"
    return (
        f"{key} warms the learning rate up over {warmup} step(s) of this run's {run}: verl 0.9.1 raises it linearly "
        f"from 0 to optim.lr={shown(optim.get('lr'))}, and {reached}; set {fix}"
    )


@dataclass(frozen=True)
class Schedule:
    """How far each SLURM attempt of the run gets. verl saves a checkpoint every save_freq-th step, inside the step and
    before its validation (trainer/ppo/ray_trainer.py fit, _save_checkpoint), and a requeued attempt resumes from the
    latest one (trainer.resume_mode=auto: _load_checkpoint finds it through latest_checkpointed_iteration.txt): what an
    attempt did after its last checkpoint is lost. So an attempt keeps whole save_freq blocks of steps, and the
    attempts a run needs are counted in them, never as its minutes over an attempt's."""

    total: int  # the steps verl runs (VerlSteps)
    step_s: float
    validation_s: float  # one of verl's validations (0: none)
    test_freq: int
    validations: int  # among the steps (VerlSteps.acts: every test_freq-th, and the last where the step count ends)
    save_freq: int  # <= 0: no checkpoint

    @classmethod
    def of(cls, predicted: PredictedTime, save_freq: int) -> Schedule:
        return cls(
            predicted.total_steps,
            predicted.step_s,
            predicted.validation_s,
            predicted.test_freq,
            predicted.validations,
            save_freq,
        )

    def validations_after(self, start: int) -> int:
        """Validations at steps test_freq's multiples up to `start` (those an attempt resumed after `start` skips)."""
        return start // self.test_freq if self.validation_s and self.test_freq > 0 else 0

    def to_checkpoint_s(self, start: int, step: int) -> float:
        """Seconds from resuming after step `start` to step `step`'s checkpoint (its own validation comes after)."""
        among = verl_validations(step, self.test_freq, False) - self.validations_after(start)
        return (step - start) * self.step_s + among * self.validation_s

    def to_end_s(self, start: int) -> float:
        """Seconds from resuming after step `start` to the run's end, its last validation included."""
        among = self.validations - self.validations_after(start)
        return (self.total - start) * self.step_s + among * self.validation_s

    def reach(self, start: int, attempt_min: float) -> int:
        """The step an attempt that resumes after step `start` keeps: the run's last where it ends within
        `attempt_min`, else its last checkpoint within them (`start`: none, and the attempt is lost)."""
        if self.to_end_s(start) <= attempt_min * 60:
            return self.total
        kept = start
        if self.save_freq > 0:
            step = (start // self.save_freq + 1) * self.save_freq
            while step <= self.total and self.to_checkpoint_s(start, step) <= attempt_min * 60:
                kept, step = step, step + self.save_freq
        return kept

    def attempts(self, attempt_min: float, start: int = 0) -> int | None:
        """The attempts of `attempt_min` training minutes the run needs, resuming after step `start`; None where an
        attempt keeps no step (one step, or the steps to the first checkpoint, outlast it): every requeue would start
        over, and no number of requeues finishes it."""
        done, attempts = start, 1
        while (reached := self.reach(done, attempt_min)) < self.total:
            if reached == done:
                return None
            done, attempts = reached, attempts + 1
        if self.to_end_s(done) > attempt_min * 60:
            # the last attempt saved the last step and ran out in its validation: verl resumed there trains one batch
            # more (trainer/ppo/ray_trainer.py fit: global_steps = total + 1 is a last step), saves and validates
            return attempts + 1 if self.step_s + self.validation_s <= attempt_min * 60 else None
        return attempts

    def with_total(self, total: int) -> Schedule:
        """The run cut to `total` steps by trainer.total_training_steps: verl validates at its last step too."""
        validations = every_and_last(total, self.test_freq) if self.validation_s else 0
        return replace(self, total=total, validations=validations)


def attempt_minutes(budget_min: float, before_training_min: float) -> int:
    """One attempt's training minutes under a budget: less the job's start-up and the validation before training."""
    return int(budget_min - STARTUP_MIN - before_training_min)


def least_budget(schedule: Schedule | RftTime, allowed: int | None, before_training_min: float) -> int:
    """The smallest mode.time_budget_min whose attempts finish the run (a GRPO run's, or algo=rft's stages) within
    `allowed` of them (None: in any number, each keeping a step at least)."""
    low = budget_reaching(before_training_min, 0)  # one training minute
    high = budget_reaching(before_training_min, schedule.to_end_s(0) / 60)  # the whole run in one attempt
    while low < high:
        middle = (low + high) // 2
        needed = schedule.attempts(attempt_minutes(middle, before_training_min))
        fits = needed is not None and (allowed is None or needed <= allowed)
        low, high = (low, middle) if fits else (middle + 1, high)
    return low


def most_steps(schedule: Schedule, allowed: int, attempt_min: int) -> int:
    """The most steps (trainer.total_training_steps) that `allowed` attempts of `attempt_min` minutes finish."""

    def finishes(total: int) -> bool:
        needed = schedule.with_total(total).attempts(attempt_min)
        return needed is not None and needed <= allowed

    return most_within(schedule.total, finishes)


def most_within(most: int, fits: Callable[[int], bool]) -> int:
    """The largest value from 1 to `most` that `fits` (0: none), where fitting is monotone: fewer steps, rows,
    samples or seconds per step take less time."""
    low, high = 0, most
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def predict_time(
    cfg: DictConfig, plan: Plan, train_rows: int | None, val_rows: int | None = None
) -> PredictedTime | None:
    """Steps from the rows and the batch (verl drops the last incomplete batch), and the wall time at the plan's
    step time (launch/steptime.py: the phases at the typical lengths, calibrated where runs of this shape were
    measured), with verl's validations: those among the steps, and the one before training that every attempt (a
    resumed one too) runs when trainer.val_before_train is set."""
    if plan.time is None or train_rows is None:
        return None
    verl = plan.verl
    trainer, data = verl["trainer"], verl["data"]
    batch = int(data["train_batch_size"])
    rows = rows_verl_trains(data, train_rows)
    steps = VerlSteps.of(trainer, rows // batch)
    total = steps.total
    step_s = plan.time.step_s
    validation = one_validation_s(cfg, plan, val_rows)
    test_freq = int(trainer.get("test_freq") or -1)
    validations = steps.acts(test_freq) if validation else 0
    before_training = validation / 60 if validation and trainer.get("val_before_train", True) else 0.0
    attempt_min = max(attempt_minutes(cfg.mode.time_budget_min, before_training), 1)
    train_min = (total * step_s + validations * validation) / 60
    save_freq = int(trainer.get("save_freq") or -1)
    checkpoints = steps.acts(save_freq) > 0
    schedule = Schedule(total, round(step_s, 1), round(validation, 1), test_freq, validations, save_freq)
    first_checkpoint = min(save_freq, total) if checkpoints else total
    first_checkpoint_s = spent_s(first_checkpoint, step_s, validation, test_freq, False) if checkpoints else None
    return PredictedTime(
        rows=rows,
        steps_per_epoch=steps.per_epoch,
        total_steps=total,
        step_s=round(step_s, 1),
        step_source=plan.time.source,
        wall_min=round(STARTUP_MIN + before_training + train_min, 1),
        time_limit_min=int(cfg.mode.time_budget_min),
        attempts=schedule.attempts(attempt_min) or 0,  # 0: no attempt keeps a step, the run never ends
        first_checkpoint_step=first_checkpoint,
        checkpoints=checkpoints,
        attempt_min=attempt_min,
        validation_s=round(validation, 1),
        validations=validations,
        validates_before_training=before_training > 0,
        test_freq=test_freq,
        first_checkpoint_min=round((first_checkpoint_s if first_checkpoint_s is not None else train_min * 60) / 60, 1),
    )


def time_spent(predicted: PredictedTime, steps: int, to_the_end: bool) -> str:
    """`steps` steps and their validations: `to_the_end`, the whole run's (its steps); else those before step
    `steps`'s checkpoint."""
    if to_the_end:
        validations = predicted.validations
    else:
        validations = verl_validations(steps, predicted.test_freq, False) if predicted.validation_s else 0
    spent = f"{steps} steps x {predicted.step_s:g} s"
    return spent + (f" + {validations} validation(s) x {predicted.validation_s:g} s" if validations else "")


def no_time_to_train(cfg: DictConfig, before_training_min: float, enough_budget_min: int) -> str | None:
    """The budget ends within the job's start-up (and the validation verl runs before training): `enough_budget_min`
    is the mode.time_budget_min the fix names."""
    if attempt_minutes(cfg.mode.time_budget_min, before_training_min) >= 1:
        return None
    validating = f" and {before_training_min:.1f} min of validation before training" if before_training_min else ""
    return (
        f"mode.time_budget_min={cfg.mode.time_budget_min} leaves no time to train: the job's start-up takes "
        f"{STARTUP_MIN} min{validating}; set mode.time_budget_min={enough_budget_min} or more"
    )


def judge_budget_without_rows(cfg: DictConfig, plan: Plan, findings: Findings) -> None:
    """Where the training rows were not read here (launch.skip_checks=[data], remote files), the steps, attempts
    and first checkpoint cannot be counted; a budget that ends before the first step still can."""
    if cfg.cluster.name != "slurm" or plan.time is None:
        return
    validates_first = validates(cfg) and bool(cfg.trainer.get("val_before_train", True))
    # a validation's length needs the validation rows: one step's stands in for it, a floor
    before_training = plan.time.step_s / 60 if validates_first else 0.0
    problem = no_time_to_train(cfg, before_training, budget_reaching(before_training, plan.time.step_s / 60))
    if problem:
        findings.problems.append(("time", problem))
    else:
        findings.notes.append(
            "time: the training rows were not read here, so the steps, attempts and first checkpoint against "
            f"mode.time_budget_min={cfg.mode.time_budget_min} are not checked (one step is predicted to take "
            f"{plan.time.step_s:.0f} s)"
        )


def budget_ceiling(cfg: DictConfig, facts: Facts) -> int | None:
    """The largest mode.time_budget_min the partition takes: its MaxTime less cluster.time_margin_min, which --time
    adds (launch/plan.py make_resources; launch/validate.py refuses more). None: no limit known."""
    partition = facts.partition
    if partition is None or partition.max_time_min is None:
        return None
    return partition.max_time_min - int(cfg.cluster.get("time_margin_min", 0))


def longest_step_s(schedule: Schedule, allowed: int, attempt_min: int) -> int:
    """The longest step (whole seconds) with which `allowed` attempts of `attempt_min` minutes finish the run, the
    validations as they are: what more GPUs or shorter lengths must bring the step down to."""

    def finishes(step_s: int) -> bool:
        needed = replace(schedule, step_s=float(step_s)).attempts(attempt_min)
        return needed is not None and needed <= allowed

    return most_within(int(schedule.step_s), finishes)


def attempt_text(cfg: DictConfig, predicted: PredictedTime) -> str:
    attempt = f"{cfg.mode.time_budget_min} min budget - {STARTUP_MIN} min start-up"
    if predicted.validates_before_training:
        attempt += f" - {predicted.validation_s / 60:.1f} min validation before training"
    return attempt + f" = {predicted.attempt_min} min"


def budget_fixes(
    cfg: DictConfig, schedule: Schedule, allowed: int, before_training: float, ceiling: int | None
) -> list[str]:
    """The budgets that finish the run: the least within the attempts cluster.max_requeues allows and, where the
    partition's limit is below it, the step time that limit needs (more GPUs or shorter lengths). Counted in whole
    steps per attempt, to each attempt's last checkpoint (Schedule)."""
    budget = least_budget(schedule, allowed, before_training)
    if ceiling is None or budget <= ceiling:
        return [f"a larger budget (mode.time_budget_min={budget})"]
    attempt_min = attempt_minutes(ceiling, before_training)
    fastest = longest_step_s(schedule, allowed, attempt_min) if attempt_min >= 1 else 0
    step = f"a step of at most {fastest} s, now {schedule.step_s:g} s" if fastest >= 1 else "a shorter step"
    return [
        f"{step} (more GPUs or shorter lengths: mode.time_budget_min={budget} would pass the partition's limit, which "
        f"takes mode.time_budget_min<={ceiling} with cluster.time_margin_min={cfg.cluster.get('time_margin_min', 0)})"
    ]


def judge_time(
    cfg: DictConfig, predicted: PredictedTime | None, findings: Findings, save_freq: int, ceiling: int | None = None
) -> None:
    """Only SLURM has a time limit: the run must end within the attempts cluster.max_requeues allows, each attempt
    keeping the steps to its last checkpoint (Schedule), or every requeue starts over. One that comes within the
    step-time model's error of the attempt's end is said, not refused. `save_freq`: the plan's trainer.save_freq;
    `ceiling`: the largest budget the partition takes (budget_ceiling). Every fix named is one that finishes the run."""
    if predicted is None or cfg.cluster.name != "slurm":
        return
    step_s, attempt_min = predicted.step_s, predicted.attempt_min
    allowed = 1 + int(cfg.cluster.max_requeues)
    schedule = Schedule.of(predicted, save_freq)
    before_training = predicted.validation_s / 60 if predicted.validates_before_training else 0.0
    problem = no_time_to_train(cfg, before_training, least_budget(schedule, allowed, before_training))
    if problem:  # the attempt ends before training starts
        findings.problems.append(("time", problem))
        return
    first_min = predicted.first_checkpoint_min or predicted.first_checkpoint_step * step_s / 60
    # the save_freq a fix names: in time with steps as much slower as the model may err, where a step is that short
    safe = steps_within(attempt_min / (1 + STEP_TIME_MARGIN), step_s, predicted.validation_s, predicted.test_freq)
    fitting = safe or steps_within(attempt_min, step_s, predicted.validation_s, predicted.test_freq)
    first = time_spent(predicted, predicted.first_checkpoint_step, not predicted.checkpoints)
    attempt = attempt_text(cfg, predicted)
    needs = f"{predicted.attempts} attempts" if predicted.attempts else "more than one attempt"
    resume = str(cfg.trainer.get("resume_mode") or "auto")
    if fitting < 1 and predicted.attempts != 1:  # no attempt keeps a step, whatever its save_freq
        fixes = budget_fixes(cfg, schedule, allowed, before_training, ceiling)
        least = least_budget(schedule, None, before_training)  # attempts that keep a step each, requeued enough
        needed = schedule.attempts(attempt_minutes(least, before_training)) or 0
        if needed > allowed and (ceiling is None or least <= ceiling):
            fixes.append(f"mode.time_budget_min={least} with more requeues (cluster.max_requeues={needed - 1})")
        findings.problems.append(
            (
                "time",
                f"one step takes {step_s:g} s = {step_s / 60:.0f} min, more than one attempt ({attempt}): no attempt "
                f"would reach a checkpoint, every requeue would start over, and neither more requeues nor fewer steps "
                f"would finish the run; choose {' or '.join(fixes)}",
            )
        )
    elif predicted.attempts != 1 and resume != "auto":  # verl resumes from the latest checkpoint only under auto
        restart = "from step 0" if resume == "disable" else "from trainer.resume_from_path again"
        findings.problems.append(
            (
                "time",
                f"trainer.resume_mode={resume} and the run needs {needs} of {attempt_min} min: "
                f"verl would start every requeued attempt {restart}, not from its last checkpoint; write "
                f"trainer.resume_mode=auto",
            )
        )
    elif predicted.attempts != 1 and not predicted.checkpoints:
        fix = finishing_save_freq(schedule, allowed, attempt_min, fitting) or fitting
        findings.problems.append(
            (
                "time",
                f"trainer.save_freq={save_freq} saves no checkpoint, and the run needs {needs} of {attempt_min} "
                f"min: every requeue would start over; set trainer.save_freq={fix}"
                + then_attempts(cfg, replace(schedule, save_freq=fix), predicted, before_training, ceiling),
            )
        )
    elif first_min > attempt_min:
        fix = finishing_save_freq(schedule, allowed, attempt_min, fitting) or fitting
        findings.problems.append(
            (
                "time",
                f"the first checkpoint comes after {first} = {first_min:.0f} min, beyond one attempt ({attempt}): "
                f"every requeue would start over; set trainer.save_freq={fix}"
                + then_attempts(cfg, replace(schedule, save_freq=fix), predicted, before_training, ceiling),
            )
        )
    else:
        judge_attempts(cfg, schedule, predicted, findings, ceiling)
        if first_min * (1 + STEP_TIME_MARGIN) > attempt_min and safe >= 1:
            what = "the first checkpoint" if predicted.checkpoints else "the run's end (it saves no checkpoint)"
            findings.notes.append(
                f"{what} comes after {first} = {first_min:.0f} min of one attempt's {attempt_min} min ({attempt}): "
                f"steps {100 * (attempt_min / first_min - 1):.0f} % slower than predicted (the model's error on "
                f"published runs is up to {100 * STEP_TIME_MARGIN:.0f} %) would end the attempt before it, and the "
                f"requeued one would start over; trainer.save_freq={safe} saves in time"
            )


def finishing_save_freq(schedule: Schedule, allowed: int, attempt_min: int, most: int) -> int | None:
    """The largest trainer.save_freq up to `most` (the steps that come in time) with which the run also finishes
    within `allowed` attempts (None: none): an attempt keeps whole save_freq blocks, so a save_freq of 3 keeps 3 of
    the 5 steps an attempt holds, where 1 keeps all 5."""
    for save_freq in range(most, 0, -1):
        needed = replace(schedule, save_freq=save_freq).attempts(attempt_min)
        if needed is not None and needed <= allowed:
            return save_freq
    return None


def then_attempts(
    cfg: DictConfig, fixed: Schedule, predicted: PredictedTime, before_training: float, ceiling: int | None
) -> str:
    """After a save_freq fix: nothing where the run then finishes within the attempts allowed, else what it then
    needs too."""
    allowed = 1 + int(cfg.cluster.max_requeues)
    needed = fixed.attempts(predicted.attempt_min)
    if needed is not None and needed <= allowed:
        return ""
    fixes = attempts_fixes(cfg, fixed, predicted, needed, before_training, ceiling)
    return (
        f"; with it the run needs {needed or 'more'} attempts and cluster.max_requeues={cfg.cluster.max_requeues} "
        f"allows 1 + {allowed - 1}: also choose {', '.join(fixes[:-1])}{' or ' if len(fixes) > 1 else ''}{fixes[-1]}"
    )


def attempts_fixes(
    cfg: DictConfig,
    schedule: Schedule,
    predicted: PredictedTime,
    needed: int | None,
    before_training: float,
    ceiling: int | None,
) -> list[str]:
    """Fewer steps, a larger budget, more requeues: each one that alone finishes the run (never more requeues where no
    attempt keeps a step, nor steps no attempt finishes)."""
    allowed, attempt_min = 1 + int(cfg.cluster.max_requeues), predicted.attempt_min
    fitting_steps = most_steps(schedule, allowed, attempt_min)
    steps_fix = f"trainer.total_training_steps={fitting_steps}" if fitting_steps >= 1 else ""
    if cfg.trainer.get("total_training_steps") is None and fitting_steps >= predicted.steps_per_epoch >= 1:
        steps_fix = f"trainer.total_epochs={fitting_steps // predicted.steps_per_epoch} or {steps_fix}"
    fixes = [f"fewer steps ({steps_fix})"] if steps_fix else []
    fixes += budget_fixes(cfg, schedule, allowed, before_training, ceiling)
    return fixes + ([f"more requeues (cluster.max_requeues={needed - 1})"] if needed is not None else [])


def judge_attempts(
    cfg: DictConfig, schedule: Schedule, predicted: PredictedTime, findings: Findings, ceiling: int | None
) -> None:
    """A job is requeued at most cluster.max_requeues times (launch/slurm.py): a run that needs more attempts stops
    unfinished, after days in the queue. The fix names the numbers that fit."""
    allowed = 1 + int(cfg.cluster.max_requeues)
    needed = predicted.attempts
    if needed <= allowed:
        return
    before_training = predicted.validation_s / 60 if predicted.validates_before_training else 0.0
    train_min = schedule.to_end_s(0) / 60
    kept = schedule.reach(0, predicted.attempt_min)
    fixes = attempts_fixes(cfg, schedule, predicted, needed, before_training, ceiling)
    findings.problems.append(
        (
            "time",
            f"the run needs {needed} attempts of {predicted.attempt_min} min "
            f"({time_spent(predicted, predicted.total_steps, True)} = {train_min:.0f} min; an attempt keeps only the "
            f"steps to its last checkpoint: the first {kept}, with trainer.save_freq={schedule.save_freq}) but "
            f"cluster.max_requeues={cfg.cluster.max_requeues} allows 1 + {allowed - 1}: the job would stop "
            f"unfinished; choose {', '.join(fixes[:-1])} or {fixes[-1]}",
        )
    )


# --- algo=rft's time ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RftTime:
    """algo=rft's two long stages, timed from what the plan knows (it runs no PPO step: plan.time is None). Stage 1
    is verl's main_generation_server, which sends every prompt rft.oversample requests and writes its output only at
    the end: a requeued job starts it over (algos/rft/pipeline.py reruns an unfinished stage), so it must end within
    one attempt. Stage 3 is verl's SFT trainer, which resumes from its latest checkpoint (sft_trainer_ray.py, its
    trainer.resume_mode auto): its attempts are counted like a GRPO run's (Schedule), the first after stage 1."""

    generation_s: float  # stage 1: launch/steptime.py's rollout model (generate_s) for rows x rft.oversample samples
    sft: Schedule  # stage 3: at most rows x rft.k samples, the PPO update's model at rft.sft's batch

    def to_end_s(self, start: int) -> float:
        """Seconds of both stages, stage 3 resumed after step `start`."""
        return self.generation_s + self.sft.to_end_s(start)

    def attempts(self, attempt_min: int) -> int | None:
        """The attempts of `attempt_min` minutes both stages need; None where stage 1 outlasts one, or no attempt
        keeps a step of stage 3."""
        first_sft_min = attempt_min - self.generation_s / 60
        if first_sft_min < 0:
            return None
        done = self.sft.reach(0, first_sft_min)
        more = self.sft.attempts(attempt_min, start=done) if done < self.sft.total else 0
        return None if more is None else 1 + more


def rft_time(cfg: DictConfig, plan: Plan, rows: int, oversample: int, sft_config: Mapping[str, Any]) -> RftTime:
    """Stage 1 for `rows` prompts x `oversample`, stage 3 on the most samples the filter keeps (rft.k per prompt),
    both at the typical lengths, on the run's GPUs and knobs (stage 3 follows the PPO actor's unless rft.sft sets
    them: algos/rft/sft.py FOLLOWED)."""
    arch, knobs, card = Architecture.from_llm(plan.llm), Knobs.from_verl(plan.verl), Card.of(cfg.gpu)
    typical = typical_lengths(cfg)
    lengths = Lengths(float(typical.prompt_tokens), float(typical.response_tokens), typical.source)
    generation_s = generate_s(arch, knobs, card, rows * oversample, lengths)[0] if rows else 0.0
    data, trainer = sft_config["data"], sft_config["trainer"]
    batch = int(data["train_batch_size"])
    per_epoch = rows * int(cfg.rft.k) // batch  # verl's SFT dataloader drops the last incomplete batch
    steps = per_epoch * int(trainer["total_epochs"])
    if trainer.get("total_training_steps") is not None:  # verl's SFT trainer stops at it, or at its epochs' end
        steps = min(steps, int(trainer["total_training_steps"]))
    sequence = lengths.prompt_tokens + lengths.response_tokens
    step_s = update_s(arch, knobs, card, batch * sequence, sequence, 1, 1)
    save_freq = trainer.get("save_freq")
    save_freq = per_epoch if save_freq == "after_each_epoch" else int(save_freq or -1)
    return RftTime(generation_s, Schedule(steps, round(step_s, 1), 0.0, -1, 0, save_freq))


def judge_rft_time(
    cfg: DictConfig, plan: Plan, train_rows: int | None, findings: Findings, ceiling: int | None = None
) -> None:
    """algo=rft's prediction, said in the plan with what it covers; on SLURM, judged against the budget and the
    requeues: stage 1 within one attempt, both stages within the attempts allowed. Each fix named finishes the run;
    a budget only up to the partition's limit (`ceiling`: budget_ceiling)."""
    if cfg.algo.name != "rft" or train_rows is None or plan.llm.get("known") is False:
        return
    rows = rows_verl_trains(plan.verl["data"], train_rows)
    oversample, k = int(cfg.rft.oversample), int(cfg.rft.k)
    sft_config = planned_sft_config(plan.verl, OmegaConf.to_container(cfg.rft.sft, resolve=True))  # type: ignore[arg-type]
    predicted = rft_time(cfg, plan, rows, oversample, sft_config)
    sft = predicted.sft
    generation_min, sft_min = predicted.generation_s / 60, sft.to_end_s(0) / 60
    findings.notes.append(
        f"time (algo=rft; predicted, never measured for RFT): stage 1 generates {rows} prompts x "
        f"rft.oversample={oversample} = {rows * oversample} samples in ~{generation_min:.0f} min (the PPO rollout's "
        f"model, launch/steptime.py, at {typical_lengths(cfg).source}); stage 3 fine-tunes at most {rows * k} "
        f"samples (rft.k={k} per prompt) in {sft.total} step(s) x ~{sft.step_s:g} s = {sft_min:.0f} min (the PPO "
        f"update's model at rft.sft.data.train_batch_size={sft_config['data']['train_batch_size']}); the start-up "
        f"of each stage's engine and the filter's scoring are not counted"
    )
    if cfg.cluster.name != "slurm":
        return
    allowed = 1 + int(cfg.cluster.max_requeues)
    attempt_min = attempt_minutes(cfg.mode.time_budget_min, 0)
    needed = predicted.attempts(attempt_min)
    if needed is not None and needed <= allowed:
        findings.notes += rft_time_margins(cfg, plan, rows, predicted, sft_config, attempt_min, ceiling)
        return

    def finishes(rows: int = rows, oversample: int = oversample) -> bool:
        attempts = rft_time(cfg, plan, rows, oversample, sft_config).attempts(attempt_min)
        return attempts is not None and attempts <= allowed

    rows_that_fit = most_within(rows, lambda value: finishes(rows=value))
    samples_that_fit = most_within(oversample, lambda value: finishes(oversample=value))
    budget = least_budget(predicted, allowed, 0)
    fixes = [f"mode.time_budget_min={budget}"] if ceiling is None or budget <= ceiling else []
    fixes += [f"data.train_max_samples={rows_that_fit}"] if rows_that_fit >= 1 else []
    # rft.k samples are kept of rft.oversample: fewer is refused (algos/rft/validate.py)
    fixes += [f"rft.oversample={samples_that_fit}"] if samples_that_fit >= k else []
    if generation_min > attempt_min:
        said = (
            f"algo=rft's stage 1 (verl's main_generation_server, {rows} prompts x rft.oversample={oversample}) is "
            f"predicted to take {generation_min:.1f} min, beyond one attempt ({cfg.mode.time_budget_min} min budget - "
            f"{STARTUP_MIN} min start-up = {attempt_min} min): the server writes its output only at the end, so every "
            f"requeue would start it over until cluster.max_requeues={cfg.cluster.max_requeues} runs out"
        )
    else:
        said = (
            f"algo=rft's stages are predicted to need {needed or 'more'} attempts of {attempt_min} min (stage 1 "
            f"{generation_min:.0f} min, then stage 3's {sft.total} steps x {sft.step_s:g} s, kept at its checkpoints "
            f"every rft.sft.trainer.save_freq={sft.save_freq} steps) but cluster.max_requeues="
            f"{cfg.cluster.max_requeues} allows 1 + {allowed - 1}: the job would stop unfinished"
        )
        if needed is not None:
            fixes.append(f"cluster.max_requeues={needed - 1}")
    if fixes:
        findings.problems.append(("time", f"{said}; set {', '.join(fixes[:-1])}{' or ' * (len(fixes) > 1)}{fixes[-1]}"))
    else:  # the partition takes no budget that finishes it, and fewer rows or samples fit none
        findings.problems.append(
            (
                "time",
                f"{said}; mode.time_budget_min={budget} would finish it, beyond the partition's limit "
                f"(mode.time_budget_min<={ceiling}): use more GPUs or shorter lengths",
            )
        )


def percent(fraction: float) -> str:
    """A share as the plan says it: whole percents, a decimal below 10 % (a margin of 0.3 % is not 0 %)."""
    return f"{100 * fraction:.0f} %" if fraction >= 0.1 else f"{100 * fraction:.1f} %"


def rft_time_margins(
    cfg: DictConfig,
    plan: Plan,
    rows: int,
    predicted: RftTime,
    sft_config: Mapping[str, Any],
    attempt_min: int,
    ceiling: int | None,
) -> list[str]:
    """What GRPO's time check says of a first checkpoint within the step-time model's error of an attempt's end
    (judge_time), said of algo=rft's stages that fit: stage 1 (all of it lost to a requeue) and stage 3's checkpoint
    blocks in an attempt of their own, each with what keeps it in time."""
    oversample, k = int(cfg.rft.oversample), int(cfg.rft.k)
    margin = 1 + STEP_TIME_MARGIN
    error = f"(the model's error on published runs is up to {100 * STEP_TIME_MARGIN:.0f} %)"
    attempt = f"({cfg.mode.time_budget_min} min budget - {STARTUP_MIN} min start-up = {attempt_min} min)"
    said = []
    generation_min = predicted.generation_s / 60
    if generation_min * margin > attempt_min:

        def in_time(rows: int = rows, oversample: int = oversample) -> bool:
            return rft_time(cfg, plan, rows, oversample, sft_config).generation_s / 60 * margin <= attempt_min

        budget = budget_reaching(0, generation_min * margin)
        fixes = [f"mode.time_budget_min={budget}"] if ceiling is None or budget <= ceiling else []
        rows_in_time = most_within(rows, lambda value: in_time(rows=value))
        fixes += [f"data.train_max_samples={rows_in_time}"] if rows_in_time >= 1 else []
        samples_in_time = most_within(oversample, lambda value: in_time(oversample=value))
        fixes += [f"rft.oversample={samples_in_time}"] if samples_in_time >= k else []
        keeps = f"; {', '.join(fixes[:-1])}{' or ' * (len(fixes) > 1)}{fixes[-1]} keeps it in time" if fixes else ""
        said.append(
            f"algo=rft's stage 1 ends after ~{generation_min:.0f} min of one attempt's {attempt_min} min {attempt}: "
            f"generation {percent(attempt_min / generation_min - 1)} slower than predicted {error} would end "
            f"the attempt before it, and every requeue would start it over{keeps}"
        )
    sft = predicted.sft
    block = min(sft.save_freq, sft.total) if sft.save_freq > 0 else sft.total
    block_min = sft.to_checkpoint_s(0, block) / 60
    safe = math.floor(attempt_min * 60 / (margin * sft.step_s)) if sft.step_s else 0
    if block_min <= attempt_min < block_min * margin and 1 <= safe < block:  # beyond an attempt: refused above
        what = f"its checkpoints come every {block} steps" if sft.save_freq > 0 else f"it saves none in {block} steps"
        said.append(
            f"algo=rft's stage 3 resumes from its checkpoints, and {what} x ~{sft.step_s:g} s = {block_min:.0f} min "
            f"of one attempt's {attempt_min} min {attempt}: steps {percent(attempt_min / block_min - 1)} slower "
            f"than predicted {error} would end each attempt before its next checkpoint, and every requeue would redo "
            f"the same steps; rft.sft.trainer.save_freq={safe} saves in time"
        )
    return said


# --- files verl opens in the job ------------------------------------------------------------------------------------

# Python files verl 0.9.1 imports by path (utils/import_utils.py load_module): the reward function, a dataset class, a
# reward manager of source importlib. "pkg://a.b" names a module verl imports by name and "file://" is stripped; any
# other path is opened as written. (The legacy root custom_reward_function, which verl 0.9.1's main_ppo never reads, is
# refused: choices.check_legacy_reward_keys.)
MODULE_FILES = (
    "reward.custom_reward_function.path",
    "data.custom_cls.path",
    "reward.reward_manager.module.path",
)
# Files verl's rollout workers open when the agent loop (or its router) starts, after the job got its nodes and loaded
# the model: verl 0.9.1 (utils/import_utils.py resolve_config_path) takes an absolute path as it is and a relative one
# against the worker's working directory, then verl's project root (an editable install) and verl's package.
ROLLOUT_FILES = (
    "actor_rollout_ref.rollout.multi_turn.tool_config_path",
    "actor_rollout_ref.rollout.multi_turn.function_tool_path",
    "actor_rollout_ref.rollout.agent.agent_loop_config_path",
    "actor_rollout_ref.rollout.router_config_path",
)


@dataclass(frozen=True)
class JobDirectory:
    """Where the job opens a relative path. verl opens these files in Ray workers (its TaskRunner, its agent-loop and
    reward workers), and verl 0.9.1 asks Ray for no working_dir of its own (trainer/constants_ppo.py), so a worker
    starts where the node's `ray start` ran: the code snapshot, which the job's first line enters (cluster=ray: the
    job's working_dir; a container: its workdir), else the directory rlaunch was started from (sbatch's default)."""

    path: str
    code_dir: str | None  # the snapshot, read at the checkout files it will copy until it is written
    said: str

    @classmethod
    def of(cls, plan: Plan) -> JobDirectory:
        workdir = (plan.container or {}).get("workdir")
        if workdir and workdir != plan.code_dir:
            return cls(str(workdir), None, f"the container's workdir {workdir}")
        if plan.code_dir:
            return cls(plan.code_dir, plan.code_dir, "the code snapshot (the checkout's tracked files)")
        return cls(str(Path.cwd()), None, f"{Path.cwd()}, where rlaunch was started")

    def readable(self, relative: Path) -> Path:
        """Where this machine reads the file the job will open at `relative`."""
        inside = f"{self.path}/{relative}"
        return Path(snapshot.at_checkout(inside, self.code_dir) if self.code_dir else inside)

    def holds(self, relative: Path) -> bool:
        return self.readable(relative).is_file()


def file_problem(verl: dict[str, Any], key: str, job: JobDirectory, verl_roots: tuple[Path, ...] = ()) -> str | None:
    """A file verl opens in the job that will not be there. `verl_roots`: where verl looks after the worker's working
    directory."""
    path = select(verl, key)
    if not path or str(path).startswith("pkg://"):
        return None
    written = Path(str(path).removeprefix("file://"))
    if written.is_absolute():
        return None if written.is_file() else f"{key} '{path}' does not exist: verl opens it in the job; fix the path"
    if found_in_the_job(str(path), job, verl_roots) is not None:
        return None
    where = job.said + (", then verl's own package" if verl_roots else "")
    if written.is_file():
        fix = f"write {key}={written.resolve()}"
        return f"{key}={path} is relative, and verl opens it in the job from {where}, where it is not: {fix}"
    return f"{key} '{path}' does not exist (verl opens it in the job from {where}): fix the path"


# the key naming what verl takes out of each module file (utils/import_utils.py load_extern_object: getattr on the
# module, AttributeError "... not found in ..." in the job); the reward manager's only for its source importlib
MODULE_OBJECTS = {
    "reward.custom_reward_function.path": "reward.custom_reward_function.name",
    "data.custom_cls.path": "data.custom_cls.name",
    "reward.reward_manager.module.path": "reward.reward_manager.name",
}


def module_names(source: str) -> set[str] | None:
    """The names a Python file defines at its top level (inside top-level if/try/with blocks too); None where they
    cannot be known without running it (`from x import *`, a module __getattr__)."""
    names: set[str] = set()
    pending = list(ast.parse(source).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(alias.name == "*" for alias in node.names):
                return None
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.If) and is_main_guard(node.test):
            pending += node.orelse  # its body runs only as a script: verl imports the module
        elif isinstance(node, ast.If | ast.Try | ast.With):
            pending += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            pending += [item for handler in getattr(node, "handlers", []) for item in handler.body]
    return None if "__getattr__" in names else names


def is_main_guard(test: ast.expr) -> bool:
    """`if __name__ == "__main__":`"""
    return (
        isinstance(test, ast.Compare)
        and getattr(test.left, "id", "") == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def module_file(path: str, job: JobDirectory) -> Path | None:
    """The file a module path names, where file_problem found it (an absolute path, or under the job's directory);
    None where it is missing."""
    return found_in_the_job(path, job)


def found_in_the_job(path: str, job: JobDirectory, verl_roots: tuple[Path, ...] = ()) -> Path | None:
    """Where this machine reads the file the job opens at `path`: as written where absolute, else under the job's
    directory, then `verl_roots` in order (verl's resolve_config_path); None where it is missing."""
    written = Path(path.removeprefix("file://"))
    if written.is_absolute():
        return written if written.is_file() else None
    places = [job.readable(written), *(root / written for root in verl_roots)]
    return next((place for place in places if place.is_file()), None)


def object_problem(verl: dict[str, Any], key: str, job: JobDirectory, search: Sequence[str] = ()) -> str | None:
    """The function or class verl takes from a module file it will find: a name the file does not define, or a file
    Python cannot parse, fails the job as verl imports it."""
    name_key = MODULE_OBJECTS[key]
    path, name = select(verl, key), select(verl, name_key)
    if not path or not name or str(path).startswith("pkg://"):
        return None
    if key == "reward.reward_manager.module.path" and select(verl, "reward.reward_manager.source") != "importlib":
        return None
    found = module_file(str(path), job)
    if found is None:
        return None  # file_problem says where it is missing
    unloadable = source_problem(f"{key}={path}", found, [job.path, *search], LOADING_FAILS, f"fix {key}")
    if unloadable:
        return unloadable
    names = module_names(found.read_text(errors="replace"))
    if names is None or str(name) in names:
        return None
    defined = sorted(n for n in names if not n.startswith("_") and n[:1].islower() == str(name)[:1].islower())
    listed = f" (it defines {', '.join(defined[:8])})" if defined else ""
    return (
        f"{name_key}={name}: {path} defines no {name}{listed}; verl 0.9.1 would fail in the job as it loads it "
        f"(AttributeError): set {name_key} to the function or class it has"
    )


# how verl fails on a module file it loads by path (utils/import_utils.py load_module)
LOADING_FAILS = "verl fails as it loads the file (Error loading module from module_path=...)"


def source_problem(named: str, found: Path, search: Sequence[str], fails: str, fix: str) -> str | None:
    """A Python file the job runs that does not parse, or imports a top-level module the job's Python lacks (read
    with ast, never run here). `named` starts the line; `fails` says how the job fails; `fix` ends it."""
    source = found.read_text(errors="replace")
    try:
        ast.parse(source)
    except SyntaxError as error:
        return f"{named} does not parse ({error.msg}, line {error.lineno}): verl imports it in the job; fix it"
    missing = unimportable_imports(source, found.parent, search)
    if not missing:
        return None
    return (
        f"{named} imports {', '.join(missing)}, which the job's Python ({sys.executable}) does not have: {fails}; "
        f"install {'them' if len(missing) > 1 else 'it'} in the job's environment, or {fix}"
    )


TOOL_CONFIG = "actor_rollout_ref.rollout.multi_turn.tool_config_path"
FUNCTION_TOOLS = "actor_rollout_ref.rollout.multi_turn.function_tool_path"
# verl's AgentLoopWorker loads every tool as it starts (experimental/agent_loop/agent_loop.py load_all_tools), after
# the job got its nodes and loaded the model
AGENT_LOOP_FAILS = "verl fails as its agent loop starts, after the job got its nodes and loaded the model"


def tool_problems(
    verl: dict[str, Any], job: JobDirectory, verl_roots: tuple[Path, ...], search: list[str] | None
) -> list[str]:
    """The tools a tool config names, as verl 0.9.1 loads them (tools/tool_registry.py initialize_tools_from_config):
    the file's `tools` list, each entry's config.type a ToolType (native alone: verl removed its MCP tools), and its
    class_name a module.Class that get_tool_class imports with find_spec + module_from_spec (a missing module is
    AttributeError on None) and getattr. `search`: the job's directory and PYTHONPATH; None where the job's Python is
    not this one (a container), which leaves the modules to the job."""
    path = select(verl, TOOL_CONFIG)
    found = found_in_the_job(str(path), job, verl_roots) if path else None
    if found is None:
        return []  # none, or file_problem says where it is missing
    named = f"{TOOL_CONFIG}={path}"
    try:
        tools = OmegaConf.to_container(OmegaConf.load(found), resolve=False)
    except Exception as error:  # a YAML error names line and column on its first line
        return [f"{named}: not a config OmegaConf reads ({str(error).splitlines()[0]}): {AGENT_LOOP_FAILS}; fix it"]
    entries = tools.get("tools") if isinstance(tools, dict) else None
    if not isinstance(entries, list):
        return [f"{named} has no `tools:` list, which verl reads: {AGENT_LOOP_FAILS}; write one"]
    problems = [tool_problem(tool, f"{named}: tools[{index}]", search) for index, tool in enumerate(entries)]
    return [problem for problem in problems if problem]


def tool_problem(tool: Any, named: str, search: list[str] | None) -> str | None:
    """One entry of a tool config (tool_problems)."""
    config = tool.get("config") if isinstance(tool, dict) else None
    class_name = tool.get("class_name") if isinstance(tool, dict) else None
    kind = config.get("type") if isinstance(config, dict) else None
    if kind != "native":
        return (
            f"{named} ({class_name}) has config.type {kind!r}: verl 0.9.1 loads native tools alone (tools/"
            f"tool_registry.py ToolType; MCP tools were removed): {AGENT_LOOP_FAILS} (ValueError); set its "
            "config.type: native for a BaseTool class of yours, or drop the tool"
        )
    if not isinstance(class_name, str) or not re.fullmatch(r"[\w.]+\.\w+", class_name):
        return f"{named}.class_name {class_name!r} is not module.Class, which verl imports: {AGENT_LOOP_FAILS}; fix it"
    if search is None:
        return None
    module, _, name = class_name.rpartition(".")
    spec = module_in_the_job(module, *search)
    if spec is None:
        return (
            f"{named}.class_name {class_name}: the job's Python has no module {module}{modules_beside(module, search)}"
            f": {AGENT_LOOP_FAILS} (tools/tool_registry.py get_tool_class: AttributeError); "
            "write the tool as a BaseTool class in a module of your own (in the checkout or on cluster.env.PYTHONPATH)"
            " and name it in class_name, install the package that has it, or drop the tool"
        )
    if not spec.origin or not spec.origin.endswith(".py"):
        return None  # an extension module or a namespace package: left to the job
    found = Path(spec.origin)
    unloadable = source_problem(f"{named}.class_name {class_name} ({found})", found, search, AGENT_LOOP_FAILS, "fix it")
    if unloadable:
        return unloadable
    names = module_names(found.read_text(errors="replace"))
    if names is None or name in names:
        return None
    classes = sorted(n for n in names if n[:1].isupper())
    listed = f" (it defines {', '.join(classes[:8])})" if classes else ""
    return (
        f"{named}.class_name {class_name}: {found} defines no {name}{listed}; {AGENT_LOOP_FAILS} (AttributeError): "
        "name the class it has"
    )


def modules_beside(module: str, search: Sequence[str]) -> str:
    """`(its package P holds a, b)`: what the package a missing module was looked for in does hold, where it exists
    (verl 0.9.1's verl.tools, for the tools verl's examples name)."""
    import pkgutil

    package = module.rpartition(".")[0]
    spec = module_in_the_job(package, *search) if package else None
    if spec is None or not spec.submodule_search_locations:
        return ""
    held = sorted(info.name for info in pkgutil.iter_modules(list(spec.submodule_search_locations)))
    return f" (its package {package} holds {', '.join(held[:12]) or 'no module'})"


def function_tools_problem(
    verl: dict[str, Any], job: JobDirectory, verl_roots: tuple[Path, ...], search: list[str] | None
) -> str | None:
    """verl runs a function_tool_path file as its agent loop starts (tools/function_tool.py
    load_function_tools_from_path: spec_from_file_location + exec_module), so it fails on a module the file imports
    that the job's Python lacks. `search` as tool_problems's."""
    path = select(verl, FUNCTION_TOOLS)
    found = found_in_the_job(str(path), job, verl_roots) if path else None
    if found is None or search is None:
        return None
    return source_problem(f"{FUNCTION_TOOLS}={path}", found, search, AGENT_LOOP_FAILS, "fix the file")


REWARD_FUNCTIONS = ("reward.custom_reward_function", "custom_reward_function")


def reward_kwargs_problem(verl: dict[str, Any], root: str, job: JobDirectory) -> str | None:
    """verl merges custom_reward_function.reward_kwargs into every call of the function (trainer/ppo/reward.py
    get_custom_reward_fn): a function whose signature takes neither those names nor **kwargs fails with TypeError at
    the first reward, after a whole rollout. algo=guru_baseline sets GURU's (procs, timeout_s, ...) for its own
    scorer; a pasted verl-style compute_score takes none of them. Read from the file's source: a function the file
    imports from elsewhere is left to the job."""
    kwargs, path, name = (select(verl, f"{root}.{key}") for key in ("reward_kwargs", "path", "name"))
    if not kwargs or not path or not name or str(path).startswith("pkg://"):
        return None
    found = module_file(str(path), job)
    try:
        tree = ast.parse(found.read_text(errors="replace")) if found is not None else None
    except SyntaxError:
        return None  # object_problem says so
    function = next(
        (node for node in (tree.body if tree else []) if isinstance(node, ast.FunctionDef) and node.name == name),
        None,
    )
    if function is None or function.args.kwarg is not None:
        return None
    takes = {arg.arg for arg in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)}
    unknown = [str(key) for key in kwargs if str(key) not in takes]
    if not unknown:
        return None
    listed = ", ".join(unknown[:4]) + (f" (and {len(unknown) - 4} more)" if len(unknown) > 4 else "")
    return (
        f"{root}.reward_kwargs sets {listed}, which {name}() in {path} does not take: verl passes "
        f"reward_kwargs to every call, so the first reward would fail (TypeError) after a whole rollout; add **kwargs "
        f"to its signature, or set {root}.reward_kwargs={{}} (algo=guru_baseline sets them for rlaunch's own scorer)"
    )


def reward_settings_problems(verl: dict[str, Any], root: str) -> list[str]:
    """rlaunch's own scorer takes only the settings RewardSettings has, each in its range: an unknown key raises at
    every reward call, a time or size of 0 makes every sample an error, sandbox_uid=0 runs model code as root. Asked
    of RewardSettings itself (rewards/settings.py), which owns the field list."""
    from launch.schema import project_path

    kwargs, path = select(verl, f"{root}.reward_kwargs"), select(verl, f"{root}.path")
    if not kwargs or not path or Path(str(path)).resolve() != Path(project_path("rewards/verl_entry.py")).resolve():
        return []
    from rewards.settings import RewardSettings

    return RewardSettings.problems(kwargs, f"{root}.reward_kwargs")


def judge_files(plan: Plan, findings: Findings) -> None:
    """The files the job's verl opens by path, and what it takes out of each module. Before a submission writes the
    code snapshot, a path into it is read at the checkout file it will copy (an untracked reward file keeps its
    snapshot path: missing, as in the job)."""
    verl = snapshot.at_checkout(plan.verl, plan.code_dir) if plan.code_dir else plan.verl
    job, package = JobDirectory.of(plan), verl_package_dir()
    search = [] if plan.container else job_pythonpath(plan)
    problems = [file_problem(verl, key, job) or object_problem(verl, key, job, search) for key in MODULE_FILES]
    roots = (package.parent, package)
    problems += [file_problem(verl, key, job, roots) for key in ROLLOUT_FILES]
    python_here = None if plan.container else [job.path, *search]
    problems += [*tool_problems(verl, job, roots, python_here), function_tools_problem(verl, job, roots, python_here)]
    problems += [resume_checkpoint_problem(verl), checkpoint_dir_problem(verl)]
    problems.append(output_dir_problem(verl, "trainer.rollout_data_dir", "after the first step's rollout"))
    if validates(plan.verl):
        problems.append(output_dir_problem(verl, "trainer.validation_data_dir", "at the first validation"))
    problems += [reward_kwargs_problem(verl, root, job) for root in REWARD_FUNCTIONS]
    problems += [problem for root in REWARD_FUNCTIONS for problem in reward_settings_problems(verl, root)]
    shadowing, shadowed = shadowed_packages(plan)
    findings.problems += [("files", problem) for problem in [*problems, *shadowing] if problem is not None]
    findings.notes += shadowed


def critic_checks_left_to_the_job(verl: dict[str, Any]) -> list[str]:
    """verl builds a critic's config from its model's files (launch/validate.py run_verl_validation): without them
    here, verl's own critic checks (its batch sizes, loss aggregation, optimizer) run only in the job."""
    path = str(verl["critic"]["model"]["path"])
    if not trains_critic(verl) or model_file_here(path, ("config.json",)):
        return []
    return [
        f"verl's own critic checks were left to the job: the critic's model ({path}) has no config.json here; "
        "rlaunch's own checked its batch arithmetic and token budgets"
    ]


def nearest_existing(directory: Path) -> Path | None:
    """The directory itself where it exists, else its nearest parent that does (the one os.makedirs writes in)."""
    return next((parent for parent in (directory, *directory.parents) if parent.exists()), None)


def output_dir_problem(verl: dict[str, Any], key: str, when: str) -> str | None:
    """A directory verl's trainer makes and writes to `when` (os.makedirs, then files: trainer_base.py
    _log_rollout_data, _dump_generations), which it cannot make there: under a file, in a directory this user may
    not write, on a read-only filesystem or one with no storage (/proc, /sys: root may "write" there, and fails)."""
    value = select(verl, key)
    if not value:
        return None
    existing = nearest_existing(Path(str(value)).expanduser())
    if existing is None:
        return None
    if not existing.is_dir():
        why = f"lies under {existing}, a file"
    else:
        stat = os.statvfs(existing)
        writable = os.access(existing, os.W_OK) and not stat.f_flag & os.ST_RDONLY and stat.f_blocks > 0
        if writable:
            return None
        why = f"cannot be made in {existing} (not writable here)"
    return f"{key}={value} {why}: verl makes it and writes to it {when}, and would fail there; choose a directory"


def checkpoint_dir_problem(verl: dict[str, Any]) -> str | None:
    """trainer.default_local_dir under a file: verl's checkpoint manager makes its global_step_<N> folders there
    (os.makedirs) at the first save, after save_freq steps, and fails (NotADirectoryError)."""
    trainer = verl["trainer"]
    if int(trainer.get("save_freq") or -1) <= 0:
        return None
    directory = Path(str(trainer["default_local_dir"])).expanduser()
    existing = nearest_existing(directory)
    if existing is None or existing.is_dir():
        return None
    return (
        f"trainer.default_local_dir={directory} lies under {existing}, a file: verl's first checkpoint save "
        f"(after trainer.save_freq={trainer['save_freq']} steps) cannot make its folder there; choose a directory"
    )


# one rank's shard of verl's FSDP checkpoint, named by the world size that wrote it (fsdp_checkpoint_manager.py)
SHARD_FILE = r"model_world_size_(?P<world>\d+)_rank_\d+\.pt"


def resume_checkpoint_problem(verl: dict[str, Any]) -> str | None:
    """resume_mode=resume_path: the checkpoint verl loads as the trainer starts (trainer_base.py _load_checkpoint:
    <path>/actor through the checkpoint manager). verl's FSDP checkpoint is one file per rank, named by the world
    size that wrote it (fsdp_checkpoint_manager.py: model_world_size_<W>_rank_<r>.pt): it loads on W ranks only."""
    trainer = verl["trainer"]
    path = trainer.get("resume_from_path")
    if trainer.get("resume_mode") != "resume_path" or not isinstance(path, str):
        return None
    key = f"trainer.resume_from_path={path}"
    if path.startswith("~"):
        expanded = Path(path).expanduser()
        return f"{key}: verl does not expand ~ (it joins the path to the job's working directory); write {expanded}"
    folder = Path(path)
    if not folder.is_absolute():  # verl joins it to the job's working directory: the code snapshot rlaunch starts in
        return (
            f"{key} is relative: verl joins it to the job's working directory (the code snapshot), not the one you "
            f"run rlaunch in; write it absolute (e.g. {os.path.abspath(path)})"
        )
    if not folder.is_dir():
        return f"{key} does not exist: verl loads its actor/ as the trainer starts; fix the path"
    actor = folder / "actor"
    if not actor.is_dir():
        return (
            f"{key} holds no actor/ folder, which verl loads as the trainer starts: point it at a global_step_<N> "
            "folder verl saved"
        )
    actor_config = verl["actor_rollout_ref"]["actor"]
    if actor_config.get("strategy") not in ("fsdp", "fsdp2"):
        return None  # Megatron's distributed checkpoint reshards on load
    saved = {int(match["world"]) for file in actor.iterdir() if (match := re.fullmatch(SHARD_FILE, file.name))}
    gpus = int(trainer["n_gpus_per_node"]) * int(trainer["nnodes"])
    if saved and gpus not in saved:
        written = sorted(saved)[0]
        return (
            f"{key} was saved by {written} ranks (actor/model_world_size_{written}_rank_*.pt) and this run has "
            f"{gpus} GPUs: verl's FSDP checkpoint loads only on the world size that wrote it; run on {written} GPUs "
            f"(trainer.nnodes x trainer.n_gpus_per_node), or {start_from_merged(str(actor))}"
        )
    return None


def start_from_merged(actor: str) -> str:
    """The way out of a checkpoint of another world size: verl's merger makes a Hugging Face model of it."""
    return (
        f"merge it (python -m verl.model_merger merge --backend fsdp --local_dir {actor} --target_dir <dir>) and start "
        "from <dir> (actor_rollout_ref.model.path=<dir>, trainer.resume_mode=disable)"
    )


# --- disk ----------------------------------------------------------------------------------------------------------

# verl 0.9.1's checkpoint.save_contents default (actor and critic): each rank's model and optimizer shards, and the
# scheduler and RNG state ("extra", a few KiB)
VERL_SAVE_CONTENTS = ("model", "optimizer", "extra")


def role_checkpoint_bytes(arch: Architecture, section: dict[str, Any], lora_rank: int, dtype_bytes: int) -> float:
    """One role's save, as verl's FSDP checkpoint manager writes it (utils/checkpoint/fsdp_checkpoint_manager.py):
    every rank its shard of the model state (parameters in the model dtype FSDP keeps, a LoRA adapter in fp32) and
    of AdamW's two fp32 moments of what trains; rank 0 alone a bf16 `hf_model` when save_contents lists it."""
    contents = set((section.get("checkpoint") or {}).get("save_contents") or VERL_SAVE_CONTENTS)
    trainable = trainable_params(arch, lora_rank)
    total = 0.0
    if "model" in contents:
        total += arch.params * dtype_bytes + (trainable * 4 if lora_rank > 0 else 0)
    if "optimizer" in contents:
        total += trainable * 8
    if "hf_model" in contents:
        total += arch.params * 2
    return total


def checkpoint_gib(plan: Plan) -> float:
    """One save of the run, every role that saves (the actor; the critic where verl trains one). Ranks that hold the
    same shard (HSDP: actor.fsdp_config.fsdp_size below the GPUs) each write their own copy."""
    arch, knobs = Architecture.from_llm(plan.llm), Knobs.from_verl(plan.verl)
    copies = max(1, knobs.n_gpus // knobs.shard_group)
    actor = plan.verl["actor_rollout_ref"]["actor"]
    saved = copies * role_checkpoint_bytes(arch, actor, knobs.lora_rank, knobs.model_dtype_bytes)
    if trains_critic(plan.verl):
        saved += copies * role_checkpoint_bytes(
            arch, plan.verl["critic"], knobs.critic_lora_rank, knobs.critic_model_dtype_bytes
        )
    return round(saved / GIB, 3)


def checkpoint_saves(total_steps: int, save_freq: int) -> int:
    """verl saves every save_freq steps and at the last step (trainer/ppo/ray_trainer.py fit), in a run the step
    count ends (VerlSteps.acts counts one its epochs end)."""
    return every_and_last(total_steps, save_freq)


def checkpoints_kept(saves: int, keep: int | None, attempts: int) -> int:
    """The most checkpoints on disk at once. verl's retention (max_actor_ckpt_to_keep) counts only what its own process
    saved: a requeued attempt starts an empty list, so the `keep` an earlier attempt left stay while it saves its own
    (the job removes older ones before verl starts: launch/job.py prune_earlier_attempts). keep=1 removes the old one
    only after the new is written; keep>=2 makes room before saving. null keeps every save."""
    if not keep or keep <= 0 or saves == 0:
        return saves
    return min(saves, keep * min(attempts, 2) + int(keep == 1))


def fitting_keep(disk: CheckpointDisk) -> int:
    """The largest max_actor_ckpt_to_keep whose checkpoints fit in the free space (0: not even one)."""
    keep = 0
    while keep < disk.saves and disk.free_gib is not None:
        kept = checkpoints_kept(disk.saves, keep + 1, disk.attempts)
        if kept * disk.one_gib > disk.free_gib:
            break
        keep += 1
    return keep


def measure_disk(plan: Plan, facts: Facts, predicted: PredictedTime | None) -> CheckpointDisk | None:
    """The checkpoints' footprint against the free space of trainer.default_local_dir's filesystem as planning saw
    it (facts.checkpoint_disk): a SLURM job writes to the shared filesystem the run directory is on, a local run to
    this machine's; a Ray cluster's disks are not measured from here."""
    trainer = plan.verl["trainer"]
    save_freq = int(trainer.get("save_freq") or -1)
    if predicted is None or save_freq <= 0:
        return None
    saves = VerlSteps.of(trainer, predicted.steps_per_epoch).acts(save_freq)
    if saves == 0:  # a save_freq beyond the steps the epochs allow
        return None
    keep = trainer.get("max_actor_ckpt_to_keep")
    space = facts.checkpoint_disk
    # only SLURM requeues; a run no attempt of which keeps a step (attempts 0) is requeued until the requeues run out
    attempts = (predicted.attempts or 1 + plan.cluster_settings.max_requeues) if plan.cluster == "slurm" else 1
    return CheckpointDisk(
        directory=str(trainer["default_local_dir"]),
        probed=space.probed if space is not None else "",
        one_gib=checkpoint_gib(plan),
        saves=saves,
        save_freq=save_freq,
        kept=checkpoints_kept(saves, int(keep) if keep is not None else None, attempts),
        free_gib=space.free_gib if space is not None else None,
        filesystem=space.filesystem if space is not None else 0,
        attempts=attempts,
    )


def disk_fix(disk: CheckpointDisk, free_gib: float, runs: int = 1) -> str:
    keep = fitting_keep(replace(disk, free_gib=free_gib / runs))
    elsewhere = "launch.runs_dir (or trainer.default_local_dir) on a larger filesystem"
    if keep == 0:
        least = checkpoints_kept(disk.saves, 1, disk.attempts)
        which = ["the one being written", "the latest", "the one a requeued attempt resumed from"][:least]
        return (
            f"even trainer.max_actor_ckpt_to_keep=1 keeps up to {least} x {gib_text(disk.one_gib)} at once "
            f"({', '.join(reversed(which))}): free space there, or set {elsewhere}"
        )
    return (
        f"set trainer.max_actor_ckpt_to_keep={keep} (verl keeps the latest {keep}; a requeued job resumes from the "
        f"latest), a larger trainer.save_freq, or {elsewhere}"
    )


def judge_disk(disk: CheckpointDisk | None, findings: Findings) -> None:
    if disk is None or disk.free_gib is None or disk.needed_gib <= disk.free_gib:
        return
    findings.problems.append(
        (
            "disk",
            f"verl's checkpoints would fill {disk.probed}: at most {disk.kept} on disk at once x "
            f"{gib_text(disk.one_gib)} = {gib_text(disk.needed_gib)}, and {gib_text(disk.free_gib)} are free "
            f"({failing_save(disk, disk.free_gib)}); {disk_fix(disk, disk.free_gib)}",
        )
    )


def failing_save(disk: CheckpointDisk, free_gib: float) -> str:
    """What verl does instead: a save fails mid-write once the filesystem is full (that checkpoint is lost)."""
    fitting = int(free_gib // disk.one_gib) if disk.one_gib > 0 else disk.kept
    if disk.kept < disk.saves:  # retention removes some: the count on disk, not the save's number, decides
        return f"verl's save fails with the disk full once {fitting + 1} are on it"
    at = "the last step" if fitting + 1 == disk.saves else f"step {(fitting + 1) * disk.save_freq}"
    return f"verl's save number {fitting + 1}, at {at}, would fail with the disk full"


def sweep_disk_problem(plans: list[Plan]) -> str | None:
    """The runs of a sweep whose checkpoints share one filesystem share its free space: each may fit alone and all
    of them not."""
    by_filesystem: dict[int, list[Plan]] = {}
    for plan in plans:
        readiness = plan.readiness
        if readiness is not None and readiness.disk is not None and readiness.disk.free_gib is not None:
            by_filesystem.setdefault(readiness.disk.filesystem, []).append(plan)
    for sharing in by_filesystem.values():
        disks = [plan.readiness.disk for plan in sharing if plan.readiness and plan.readiness.disk]
        needed, free = sum(disk.needed_gib for disk in disks), disks[0].free_gib or 0.0
        if len(disks) < 2 or needed <= free:
            continue
        largest = max(sharing, key=lambda plan: plan.readiness.disk.needed_gib if plan.readiness.disk else 0.0)
        fix = disk_fix(largest.readiness.disk, free, len(disks))
        return (
            f"the sweep's {len(disks)} runs' checkpoints would fill {disks[0].probed}: {gib_text(needed)} at most on "
            f"disk at once, and {gib_text(free)} are free; for {largest.job_name}: {fix}"
        )
    return None


# --- verdict -------------------------------------------------------------------------------------------------------


def executes(cfg: DictConfig, plan: Plan) -> bool:
    """A run that queues or starts something; dry runs and plan-only runs show problems instead of refusing."""
    return str(cfg.launch.dry_run).lower() == "false" and plan.execution != "plan-only"


def judge(
    cfg: DictConfig, plan: Plan, facts: Facts, report: DataReport, repairs: list[str], information: Sequence[str] = ()
) -> Plan:
    """The readiness of one planned job, recorded in the plan (its problems refuse the run in `refuse`).
    `information`: notes that are no warning (prepare's resolved paths); the plan text shows them as notes."""
    findings = Findings(notes=list(report.notes))
    judge_model(cfg, plan, facts, findings)
    judge_data(cfg, report, findings, as_written(plan.overrides))
    judge_files(plan, findings)
    findings.notes += critic_checks_left_to_the_job(plan.verl)
    predicted = predict_time(cfg, plan, report.rows("data.train_files"), report.rows("data.val_files"))
    trainer = plan.verl["trainer"]
    judge_time(cfg, predicted, findings, int(trainer.get("save_freq") or -1), budget_ceiling(cfg, facts))
    judge_rft_time(cfg, plan, report.rows("data.train_files"), findings, budget_ceiling(cfg, facts))
    steps_left_out = VerlSteps.of(trainer, predicted.steps_per_epoch).note(trainer) if predicted is not None else None
    if steps_left_out:
        findings.notes.append(steps_left_out)
    if plan.driver == "ppo":
        findings.notes += mini_batches_over_the_batch(plan.verl)
        limit = trainer.get("total_training_steps")
        steps = predicted.total_steps if predicted is not None else int(limit) if limit is not None else 0
        warmup = warmup_covers_the_run(plan.verl, steps, at_most=predicted is None)
        findings.notes += [warmup] if warmup else []
    if predicted is None and report.rows("data.train_files") is None:
        judge_budget_without_rows(cfg, plan, findings)
    disk = measure_disk(plan, facts, predicted) if "disk" not in skipped(cfg) else None
    judge_disk(disk, findings)
    off = skipped(cfg)
    active = [(check, problem) for check, problem in findings.problems if check not in off]
    readiness = Readiness(
        problems=tuple(ReadinessProblem(check, problem) for check, problem in active),
        skipped=tuple(off),
        notes=(*information, *findings.notes),
        data=tuple(DataRead(file.key, file.path, file.rows, file.sources) for file in report.files),
        time=predicted,
        model_source=plan.llm["source"],
        disk=disk,
    )
    warnings = [*plan.warnings, *repairs, *(f"not ready: {problem}" for _, problem in active), *findings.notes]
    return replace(plan, readiness=readiness, warnings=warnings)


def refuse(plans: list[Plan]) -> None:
    """For runs that execute: the first job's first problem, as one line ending with the switch that turns its check
    off. (Called after the preflight's own refusal: a misfit's message carries the memory arithmetic.)"""
    for plan in plans:
        problems = plan.readiness.problems if plan.readiness is not None else ()
        if problems:
            first = problems[0]
            more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
            job = f"job {plan.job_name}: " if len(plans) > 1 else ""  # which of the sweep's jobs to change
            raise UserError(
                f"{job}{first.problem}{more} [check '{first.check}': launch.skip_checks=[{first.check}] turns it off]"
            )
    problem = sweep_disk_problem(plans)
    if problem:
        raise UserError(f"{problem} [check 'disk': launch.skip_checks=[disk] turns it off]")
