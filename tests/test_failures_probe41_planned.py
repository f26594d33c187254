"""Files that changed after the run was planned (helper-41's probe, cases c3cfg, c2trunc, c2del and c3rm): the fix
names the file the log names and, where plan.json's readiness record shows planning read it whole, says it changed
after planning: restore it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from metric_fixtures import make_plan_dir
from test_failures import SUBMITIT_START, job_log_layout

from launch.report import failures
from launch.rundir import DataRead, Readiness, load_plan

RAY_TASK = "ray::TaskRunnerV1.run() (pid=18528, ip=127.132.0.11, actor_id=dcc7fb6d198593a807f6a58902000000)"


def config_not_json(path: str) -> str:
    """c3cfg's job log: json's error, transformers' OSError, and Hydra's wrapper that only quotes it."""
    return "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.11/json/decoder.py", line 353, in raw_decode',
            "    obj, end = self.scan_once(s, idx)",
            "json.decoder.JSONDecodeError: Unterminated string starting at: line 15 column 5 (char 293)",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            RAY_TASK,
            '  File "/work/main/.venv/lib/python3.11/site-packages/transformers/configuration_utils.py", line 778, in '
            "_get_config_dict",
            "    raise OSError(f\"It looks like the config file at '{resolved_config_file}' is not a valid JSON "
            'file.")',
            f"OSError: It looks like the config file at '{path}' is not a valid JSON file.",
            "hydra.errors.InstantiationException: Error in call to target 'verl.workers.config.model.HFModelConfig':",
            f"OSError(\"It looks like the config file at '{path}' is not a valid JSON file.\")",
        ]
    )


def parquet_cut(path: str) -> str:
    """c2trunc's job log: pyarrow on a train file cut short."""
    return (
        f"(TaskRunnerV1 pid=10234) Failed to read schema from '{path}' with error ArrowInvalid: Parquet magic bytes "
        "not found in footer. Either the file is corrupted or this is not a parquet file.\n"
        f"ray.exceptions.RayTaskError(ArrowInvalid): {RAY_TASK}"
    )


def parquet_gone(path: str) -> str:
    """c2del's job log: datasets finding no train file."""
    return "\n".join(
        [
            f"ray.exceptions.RayTaskError(FileNotFoundError): {RAY_TASK}",
            '  File "/work/main/.venv/lib/python3.11/site-packages/datasets/load.py", line 1290, in '
            "load_dataset_builder",
            '  File "/work/main/.venv/lib/python3.11/site-packages/datasets/data_files.py", line 405, in '
            "resolve_pattern",
            "    raise FileNotFoundError(error_msg)",
            f"FileNotFoundError: Unable to find '{path}'",
        ]
    )


def model_dir_gone(path: str) -> str:
    """c3rm's job log: transformers handing the missing directory to the Hub as a repo id."""
    return (
        "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
        f"'namespace/repo_name': '{path}'. Use `repo_type` argument if needed."
    )


def planned_run(tmp_path: Path, err: str, readiness: Readiness) -> list[failures.Failure]:
    """The failures of a planned run whose job log is `err`, with plan.json's readiness record as planning wrote it."""
    run_dir = make_plan_dir(tmp_path / "sweep", "guru_baseline", "a40")
    ended = f"{err}\nsubmitit ERROR (2026-11-22 19:50:05,000) - Submitted job triggered an exception"
    job_log_layout(run_dir, "5", ended, SUBMITIT_START.format(s=1, host="c1"))
    plan = replace(load_plan(run_dir), readiness=readiness)
    return failures.run_failures(run_dir, failures.FixContext(plan=plan))


def test_a_model_config_that_is_not_json_is_named_with_where_json_stopped():
    failure = failures.classify(config_not_json("/tmp/h41/m3b/config.json"))
    assert failure.kind == "config_error"
    assert failure.evidence[0].endswith("JSONDecodeError: Unterminated string starting at: line 15 column 5 (char 293)")
    assert failure.fix.startswith(
        "the model's config file /tmp/h41/m3b/config.json is not valid JSON (Unterminated string starting at: line "
        "15 column 5 (char 293)): restore it"
    )
    assert failure.short(200).startswith("config_error: json.decoder.JSONDecodeError: Unterminated string")


def test_a_model_config_planning_read_whole_changed_after_planning(tmp_path: Path):
    config = tmp_path / "m3b" / "config.json"
    [failure] = planned_run(tmp_path, config_not_json(str(config)), Readiness(model_source=str(config)))
    assert failure.fix.startswith(f"the model's config file {config} is not valid JSON now: planning read the model's")
    assert "changed after the run was planned: restore it" in failure.fix
    assert "rlaunch runs the same checks" not in failure.fix


def test_a_cut_parquet_is_named_from_the_log_and_from_the_plan_with_its_key_and_rows(tmp_path: Path):
    train = tmp_path / "d2b" / "train.parquet"
    alone = failures.classify(parquet_cut(str(train)))
    assert alone.kind == "data_error"
    assert alone.fix.startswith(f"the data file {train} is not parquet (no magic bytes in its footer)")
    assert "find <data dir>" not in alone.fix
    train.parent.mkdir()
    train.write_bytes(b"PAR1 cut short")
    read = Readiness(data=(DataRead("data.train_files", str(train), 16),))
    [failure] = planned_run(tmp_path, parquet_cut(str(train)), read)
    assert failure.fix.startswith(
        f"the data file {train} (data.train_files) is not a whole parquet file now: planning read it whole (16 rows), "
        "so it changed after the run was planned: restore it"
    )


def test_a_data_file_planning_read_that_is_gone_says_so(tmp_path: Path):
    train = tmp_path / "d2" / "train.parquet"
    read = Readiness(data=(DataRead("data.train_files", str(train), 16),))
    [failure] = planned_run(tmp_path, parquet_gone(str(train)), read)
    assert failure.kind == "data_missing"
    assert failure.fix.startswith(f"the data file {train} (data.train_files) is gone: planning read it whole (16 rows)")


def test_a_local_model_directory_removed_after_planning_is_named_as_gone_not_as_uncached(tmp_path: Path):
    model = tmp_path / "m3a"
    [failure] = planned_run(tmp_path, model_dir_gone(str(model)), Readiness(model_source=f"{model}/config.json"))
    assert failure.kind == "model_not_cached"
    assert failure.fix.startswith(
        f"the model directory {model} (actor_rollout_ref.model.path) is gone: planning read {model}/config.json from "
        "it, so it was removed after the run was planned"
    )
