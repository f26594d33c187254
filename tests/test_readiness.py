"""What would fail in the queue is found on the login node (launch/readiness.py): the model, the data, the time, and
verl's own config errors, on real parquet files and a real HF cache layout built by each test (no network)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from conftest import compose_config, run_cli, run_here
from tiny_assets import (
    guru_rows,
    hf_config,
    make_hub_snapshot,
    make_tiny_dataset,
    make_tiny_model,
    tiny_run_overrides,
)

from launch import readiness
from launch.errors import UserError, explain
from launch.facts import PartitionFacts, find_model, gather_facts, llm_options_like, model_family_name
from launch.memory import Knobs
from launch.render import render
from launch.run import plan_job
from launch.rundir import Plan
from launch.steptime import STEP_TIME_MARGIN

LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"
LLAMA_70B_CONFIG = hf_config(80, 8192, 64, 8, 28672, 128256)
TOKENIZER = json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {}, "merges": []}})
# the dev cluster's partition as sinfo reports it (tests/conftest.py::slurm_env starts that cluster)
DEBUG_PARTITION = PartitionFacts("debug", 128, 1006.0, 8, None, None, 2)


@pytest.fixture(autouse=True)
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test reads an HF cache of its own, never the developer's ~/.cache/huggingface."""
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return cache


def on_partition(model_path: str, cluster: str, partition: object, hub_cache: str, **_: object) -> object:
    """This machine's real facts, planned for as if from the dev cluster's login node (partition debug)."""
    return replace(gather_facts(str(model_path), "local", None, str(hub_cache)), partition=DEBUG_PARTITION)


def with_snapshot(model_path: str, cluster: str, partition: object, hub_cache: str, **_: object) -> object:
    """on_partition, with the checkout read for the code snapshot the job will run in (cluster.snapshot=true)."""
    facts = gather_facts(str(model_path), "local", None, str(hub_cache), snapshot=True)
    return replace(facts, partition=DEBUG_PARTITION)


def submission(tmp_path: Path, *overrides: str, gather=on_partition):
    """plan_job for `cluster=slurm` (no dry run): what `python launch/run.py cluster=slurm ...` does before sbatch."""
    cfg = compose_config("cluster=slurm", f"cluster.shared_dir={tmp_path}", *overrides)
    plan = plan_job(cfg, list(overrides), gather=gather)
    assert readiness.executes(cfg, plan)
    readiness.refuse([plan])  # as launch/run.py::dispatch does before it writes or submits anything
    return plan


def dry_run(tmp_path: Path, *overrides: str):
    cfg = compose_config("cluster=local", f"cluster.shared_dir={tmp_path}", "launch.dry_run=true", *overrides)
    return plan_job(cfg, list(overrides))


CHAT = [{"role": "user", "content": "What is 1 plus 1?"}]


def tiny_run(tmp_path: Path, domains: tuple[str, ...] = ("math", "logic"), per_source: int = 8) -> list[str]:
    """Overrides of a small, complete run: a local tiny model and GURU-shaped parquet files."""
    model = make_tiny_model(tmp_path / "model")
    train, val = make_tiny_dataset(tmp_path / "data", domains, per_source=per_source)
    return [*tiny_run_overrides(model, train, val), "data.max_response_length=256"]


# --- 1. the model is what actor_rollout_ref.model.path says ---------------------------------------------------------


def test_hub_id_takes_its_architecture_from_the_hf_cache(tmp_path: Path, hf_cache: Path):
    make_hub_snapshot(hf_cache, LLAMA_70B, {"config.json": LLAMA_70B_CONFIG})
    # the preflight judged the 70B, not Qwen2.5-7B: on 8 A100s nothing fits it, and the plan says how many would
    plan = dry_run(tmp_path, f"actor_rollout_ref.model.path={LLAMA_70B}")
    assert "as it is it needs 32 GPUs" in render(plan)
    assert (plan.llm["layers"], plan.llm["hidden"], plan.llm["vocab"]) == (80, 8192, 128256)
    assert plan.llm["source"] == f"HF cache {hf_cache}" and plan.llm["path"] == LLAMA_70B
    assert "Llama-3.1-70B-Instruct" in plan.llm["name"]
    assert not any("differs from llm=" in warning for warning in plan.warnings)  # the default llm= claims nothing
    # the preflight judged the 70B, not Qwen2.5-7B: 70B's AdamW states alone are 16 B x 70e9 / 8 GPUs = 130 GiB
    assert plan.preflight is not None and plan.preflight.fits is False


def test_hub_id_without_cache_uses_the_llm_option_with_that_path(tmp_path: Path):
    architecture, source = find_model("Qwen/Qwen2.5-72B-Instruct", [str(tmp_path / "empty")])
    assert source == "conf/llm/qwen2_5_72b.yaml" and architecture["layers"] == 80
    plan = dry_run(tmp_path, "gpu=h100", "actor_rollout_ref.model.path=Qwen/Qwen2.5-14B-Instruct")
    assert plan.llm["name"] == "qwen2_5_14b" and plan.llm["hidden"] == 5120
    assert plan.llm["source"] == "conf/llm/qwen2_5_14b.yaml"


def test_unknown_model_gets_no_verdict_in_a_dry_run_and_is_refused_at_submission(tmp_path: Path):
    plan = dry_run(tmp_path, f"actor_rollout_ref.model.path={LLAMA_70B}")
    assert plan.llm["known"] is False and plan.preflight is None
    assert "preflight     cannot judge" in render(plan)
    assert [problem.check for problem in plan.readiness.problems][0] == "model"
    with pytest.raises(UserError) as refused:
        submission(tmp_path, *tiny_run(tmp_path), f"actor_rollout_ref.model.path={LLAMA_70B}")
    message = str(refused.value)
    assert "cannot judge" in message and f"hf download {LLAMA_70B}" in message and "llm=" in message
    assert "\n" not in message


def test_an_unknown_variant_of_a_known_model_is_pointed_at_its_llm_option_never_given_it(tmp_path: Path):
    """Qwen/Qwen2.5-7B (base) is not Qwen/Qwen2.5-7B-Instruct's table (a base model's context may be longer): the
    plan cannot judge it, and both the plan and the refusal name llm=qwen2_5_7b as the way to say it is."""
    assert model_family_name("~/models/Qwen2.5-7B-Instruct/") == model_family_name("Qwen/Qwen2.5-7B") == "qwen2.5-7b"
    assert llm_options_like("Qwen/Qwen2.5-7B") == ["qwen2_5_7b"] and llm_options_like("org/Other-7B") == []
    plan = dry_run(tmp_path, "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B")
    assert plan.llm["known"] is False and plan.preflight is None and plan.time is None
    assert "(llm=qwen2_5_7b describes Qwen/Qwen2.5-7B-Instruct: the same model or a variant" in render(plan)
    with pytest.raises(UserError, match=r"pick the llm/ option of that model \(llm=...\) \(llm=qwen2_5_7b describes"):
        submission(tmp_path, *tiny_run(tmp_path), "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B")


def test_a_vision_language_model_is_pointed_at_its_language_models_option(tmp_path: Path):
    """verl's VLM examples (geo3k: Qwen/Qwen2.5-VL-3B-Instruct): the decoder is Qwen2.5-3B's; the plan offers its
    option for the decoder and says what it then leaves out."""
    plan = dry_run(tmp_path, "actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-3B-Instruct")
    assert plan.llm["known"] is False and plan.preflight is None
    said = "(llm=qwen2_5_3b describes Qwen/Qwen2.5-3B-Instruct, the language model of this vision-language model"
    assert said in render(plan) and "its vision encoder and image tokens are then not counted" in render(plan)


def test_verl_examples_default_model_has_its_llm_option(tmp_path: Path):
    """deepseek-ai/deepseek-llm-7b-chat, the model most of verl's example scripts train, is judged without a cache."""
    model = "actor_rollout_ref.model.path=deepseek-ai/deepseek-llm-7b-chat"
    plan = dry_run(tmp_path, model, "gpu=a100_80", "data.max_prompt_length=512", "data.max_response_length=1024")
    assert plan.llm["source"] == "conf/llm/deepseek_llm_7b.yaml" and plan.preflight is not None
    assert (plan.llm["layers"], plan.llm["kv_heads"], plan.llm["vocab"]) == (30, 32, 102400)


def test_a_model_directory_only_the_nodes_see_is_planned_with_skip_checks_model(tmp_path: Path):
    """A local path this machine cannot read is refused, naming launch.skip_checks=[model]; with it, the run is planned
    with the architecture llm= names, or with no verdict and no time forecast (another model's table would time
    another model) where none is named."""
    nodes_only = "/nodes/models/Qwen2.5-Math-7B"
    overrides = [o for o in tiny_run(tmp_path) if not o.startswith("actor_rollout_ref.model.path")]
    with pytest.raises(UserError, match=r"does not exist: .*launch\.skip_checks=\[model\], with llm=") as refused:
        submission(tmp_path, *overrides, f"actor_rollout_ref.model.path={nodes_only}")
    assert "\n" not in str(refused.value)
    skip = "launch.skip_checks=[model]"
    named = submission(tmp_path, *overrides, f"actor_rollout_ref.model.path={nodes_only}", skip, "llm=qwen2_5_0_5b")
    assert named.llm["layers"] == 24 and named.preflight is not None and named.time is not None
    assert named.llm["source"].startswith("conf/llm/qwen2_5_0_5b.yaml")
    unnamed = submission(tmp_path, *overrides, f"actor_rollout_ref.model.path={nodes_only}", skip)
    assert unnamed.llm["known"] is False and unnamed.preflight is None and unnamed.time is None
    assert "a local path not readable here" in unnamed.llm["source"]
    text = render(unnamed)
    assert "preflight     cannot judge" in text and "step time     cannot forecast it either" in text


def test_offline_job_needs_config_tokenizer_and_every_weight_shard_in_the_nodes_cache(tmp_path: Path, hf_cache: Path):
    """cluster=slurm sets HF_HUB_OFFLINE=1 for the job: what the cache lacks would fail on the node."""
    overrides = [*tiny_run(tmp_path)[:1], "llm=qwen2_5_0_5b", *tiny_run(tmp_path)[2:]]
    overrides = [o for o in overrides if not o.startswith("actor_rollout_ref.model.path")]
    repo = "Qwen/Qwen2.5-0.5B-Instruct"
    index = json.dumps(
        {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    )
    make_hub_snapshot(hf_cache, repo, {"config.json": hf_config(24, 896, 14, 2, 4864, 151936)})
    with pytest.raises(UserError, match=r"HF_HUB_OFFLINE=1 .* lacks a tokenizer .*, weights .* hf download Qwen/Qwen2"):
        submission(tmp_path, *overrides)
    make_hub_snapshot(
        hf_cache,
        repo,
        {"tokenizer.json": TOKENIZER, "model.safetensors.index.json": index, "model-00001-of-00002.safetensors": ""},
    )
    with pytest.raises(UserError, match=r"lacks model-00002-of-00002\.safetensors of Qwen/Qwen2\.5-0\.5B-Instruct"):
        submission(tmp_path, *overrides)
    make_hub_snapshot(hf_cache, repo, {"model-00002-of-00002.safetensors": ""})
    plan = submission(tmp_path, *overrides)
    assert plan.readiness.problems == () and plan.llm["source"] == f"HF cache {hf_cache}"
    # a cache only the nodes see: the check is switched off by name
    plan = submission(tmp_path, *overrides, "launch.skip_checks=[hub_cache]", "++cluster.env.HF_HUB_CACHE=/nodes")
    assert plan.readiness.skipped == ("hub_cache",)


# --- 2. data ---------------------------------------------------------------------------------------------------------


def test_good_tiny_run_is_ready(tmp_path: Path):
    plan = submission(tmp_path, *tiny_run(tmp_path))
    assert plan.readiness.problems == ()
    assert [file.rows for file in plan.readiness.data] == [16, 4]
    assert plan.readiness.data[0].data_sources == ("logic__zebra_puzzle", "math__deepscaler")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            # tiny_run sets data.train_files itself: the fix is that override, not dataset.root
            lambda train: train.unlink(),
            r"data.train_files file (\S+)train.parquet does not exist: data.train_files=\1train.parquet was set on "
            r"the command line: correct the path there, or drop it",
        ),
        (lambda train: train.write_text("not parquet"), r"is not readable parquet"),
        (
            lambda train: pd.DataFrame({"data_source": ["math__x"], "prompt": ["p"]}).to_parquet(train),
            r"lacks verl's column\(s\) reward_model \(it has data_source, prompt\)",
        ),
        (
            lambda train: pd.DataFrame(
                {"data_source": ["math__x"], "prompt": [CHAT], "reward_model": [{"style": "rule"}]}
            ).to_parquet(train),
            r"lacks verl's reward_model.ground_truth",
        ),
        # verl templates a list of messages; a plain string is dropped by its filter or fails its agent loop
        (
            lambda train: pd.DataFrame(
                {"data_source": ["math__x"], "prompt": ["p"], "reward_model": [{"ground_truth": "1"}]}
            ).to_parquet(train),
            r"its prompts \(prompt\) are plain text; verl 0.9.1 applies the chat template to a list of messages",
        ),
        # verl reads reward_model['ground_truth']: a JSON string in its place fails at the first reward
        (
            lambda train: pd.DataFrame(
                {"data_source": ["math__x"], "prompt": [CHAT], "reward_model": ['{"ground_truth": "1"}']}
            ).to_parquet(train),
            r"its reward_model column holds text; verl reads reward_model\['ground_truth'\]",
        ),
        (
            lambda train: pd.DataFrame(guru_rows(["math__x"], 8, "train")).iloc[:0].to_parquet(train),
            r"data.train_files hold no rows: verl trains 0 steps",
        ),
        # guru_baseline filters prompts longer than data.max_prompt_length (256): verl's filter would keep none
        (
            lambda train: pd.DataFrame(
                [
                    row | {"prompt": [{"role": "user", "content": "plus " * 400}]}
                    for row in guru_rows(["math__x"], 8, "t")
                ]
            ).to_parquet(train),
            r"8 of 8 prompts sampled from data.train_files are longer than data.max_prompt_length=256 tokens .*0 rows "
            r"remain, fewer than one batch \(8\), and verl trains 0 steps; raise data.max_prompt_length to \d+, or set "
            r"data.filter_overlong_prompts=false",
        ),
        (
            lambda train: pd.DataFrame(guru_rows(["math__x"], 6, "train")).to_parquet(train),
            r"hold 6 rows, fewer than one batch \(data.train_batch_size=8\).*at most 6",
        ),
        (
            lambda train: pd.DataFrame(guru_rows(["mystery/set", "math__x"], 8, "train")).to_parquet(train),
            r"data_source mystery/set in .* maps to no reward domain rlaunch scores \(codegen, logic, math",
        ),
        # a domain rlaunch scores, a dataset its reward refuses: the scorer's own refusal, before the queue
        (
            lambda train: pd.DataFrame(guru_rows(["logic__knights_knaves", "math__x"], 8, "train")).to_parquet(train),
            r"no logic reward for data_source 'logic__knights_knaves': the dataset name must contain one of zebra, "
            r"ordering, graph, arcagi, barc .*, in \S+train.parquet: the first reward would fail; rename",
        ),
        # a null ground truth: every one of those rows would be an error, never judged
        (
            lambda train: pd.DataFrame(
                [
                    row | {"reward_model": {"style": "rule", "ground_truth": None if i % 2 else "1"}}
                    for i, row in enumerate(guru_rows(["math__x"], 8, "t"))
                ]
            ).to_parquet(train),
            r"file \S+train.parquet: 4 of 8 rows have a null reward_model.ground_truth.*give every row its ground "
            r"truth",
        ),
        (
            lambda train: pd.DataFrame(
                [
                    row | {"reward_model": {"style": "rule", "ground_truth": None}}
                    for row in guru_rows(["math__x"], 8, "t")
                ]
            ).to_parquet(train),
            r"file \S+train.parquet: 8 of 8 rows have a null reward_model.ground_truth",
        ),
    ],
    ids=[
        "missing",
        "not-parquet",
        "no-reward_model",
        "no-ground_truth",
        "text-prompts",
        "text-reward_model",
        "no-rows",
        "overlong-prompts-filtered",
        "too-few-rows",
        "unknown-data_source",
        "unscorable-logic-data_source",
        "some-null-ground_truth",
        "null-ground_truth-column",
    ],
)
def test_bad_data_is_refused_at_submission_and_shown_in_a_dry_run(tmp_path: Path, change, message):
    overrides = tiny_run(tmp_path)
    change(tmp_path / "data" / "train.parquet")
    with pytest.raises(UserError, match=message):
        submission(tmp_path, *overrides)
    plan = dry_run(tmp_path, *overrides)
    assert any(re.search(message, warning) for warning in plan.warnings)


def test_data_files_are_read_as_verl_reads_them_by_their_suffix(tmp_path: Path):
    """verl 0.9.1's RLHFDataset reads *.parquet, and *.json / *.jsonl with datasets' json loader; any other name (a
    directory, an upper-case suffix) raises 'Unsupported file format' as the trainer starts."""
    overrides = tiny_run(tmp_path)
    train = tmp_path / "data" / "train.parquet"
    rows = pd.read_parquet(train)
    as_lines, as_array = tmp_path / "data" / "train.jsonl", tmp_path / "data" / "train.json"
    rows.to_json(as_lines, orient="records", lines=True)
    rows.to_json(as_array, orient="records")
    for json_file in (as_lines, as_array):
        plan = submission(tmp_path, *overrides, f"data.train_files={json_file}")
        read = [file for file in plan.readiness.data if file.key == "data.train_files"]
        assert read[0].rows == len(rows) and read[0].data_sources == ("logic__zebra_puzzle", "math__deepscaler"), read
    upper = train.with_suffix(".PARQUET")
    upper.write_bytes(train.read_bytes())
    with pytest.raises(UserError, match=r"verl 0.9.1 reads only files named \*.parquet, \*.json or \*.jsonl"):
        submission(tmp_path, *overrides, f"data.train_files={upper}")
    with pytest.raises(UserError, match=r"is a directory, which verl cannot read: name its files, or a glob"):
        submission(tmp_path, *overrides, f"data.train_files={tmp_path / 'data'}")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.train_files=null", r"data.train_files names no file: verl 0.9.1 builds its train dataset"),
        ("data.val_files=[]", r"data.val_files names no file: verl 0.9.1 builds its validation dataset"),
    ],
)
def test_no_data_file_is_refused(tmp_path: Path, override: str, message: str):
    with pytest.raises(UserError, match=message):
        submission(tmp_path, *tiny_run(tmp_path), override)


def test_validation_files_verl_never_scores_are_not_judged_by_their_data_sources(tmp_path: Path):
    overrides = tiny_run(tmp_path)
    val = tmp_path / "data" / "val.parquet"
    pd.DataFrame(guru_rows(["mystery/set"], 8, "test")).to_parquet(val)
    with pytest.raises(UserError, match=r"data_source mystery/set in \S+val.parquet maps to no reward domain"):
        submission(tmp_path, *overrides)
    submission(tmp_path, *overrides, "trainer.test_freq=-1", "trainer.val_before_train=false")
    empty = tmp_path / "data" / "empty.parquet"
    pd.DataFrame(guru_rows(["math__x"], 8, "test")).iloc[:0].to_parquet(empty)
    with pytest.raises(UserError, match=r"data.val_files hold no rows: verl 0.9.1 builds its validation loader"):
        submission(tmp_path, *overrides, f"data.val_files={empty}")


def test_paths_under_home_are_expanded_as_verl_does_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    overrides = tiny_run(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    home_paths = ["actor_rollout_ref.model.path='~/model'", "data.train_files='~/data/train.parquet'"]
    plan = submission(tmp_path, *overrides, *home_paths)
    assert plan.verl["actor_rollout_ref"]["model"]["path"] == str(tmp_path / "model")
    assert plan.verl["data"]["train_files"] == [str(tmp_path / "data" / "train.parquet")]
    said = f"resolved data.train_files: ~/data/train.parquet -> {tmp_path}/data/train.parquet"
    assert said in plan.readiness.notes and said not in plan.warnings  # information, not a warning


def test_reward_fn_key_is_said_to_be_inert_and_the_data_source_column_is_read(tmp_path: Path):
    """verl 0.9.1's reward managers (experimental/reward_loop) read the data_source column by name."""
    overrides = tiny_run(tmp_path)
    plan = submission(tmp_path, *overrides, "data.reward_fn_key=ability")
    assert any("data.reward_fn_key=ability is not read by verl 0.9.1's reward managers" in w for w in plan.warnings)
    train = tmp_path / "data" / "train.parquet"
    pd.read_parquet(train).rename(columns={"data_source": "source"}).to_parquet(train)
    with pytest.raises(UserError, match=r"lacks verl's column\(s\) data_source \(it has source"):
        submission(tmp_path, *overrides, "data.reward_fn_key=source")


@pytest.mark.parametrize(
    ("config_json", "message"),
    [
        ('{"num_hidden_layers": 2,', r"config.json of actor_rollout_ref.model.path=\S+\) is not valid JSON"),
        ("[]", r"holds a JSON list, not an object"),
        ("{}", r"num_hidden_layers is missing \(a decoder's config.json states it\)"),
        (None, r"num_hidden_layers is '2', not a positive integer"),
    ],
)
def test_a_broken_config_json_is_one_line(tmp_path: Path, config_json: str | None, message: str):
    overrides = tiny_run(tmp_path)
    config = tmp_path / "model" / "config.json"
    if config_json is None:
        config_json = json.dumps(json.loads(config.read_text()) | {"num_hidden_layers": "2"})
    config.write_text(config_json)
    with pytest.raises(UserError, match=message):
        submission(tmp_path, *overrides)
    with pytest.raises(UserError, match=message):  # bad input: refused in a dry run too
        dry_run(tmp_path, *overrides)


def test_files_verl_opens_later_are_judged_where_they_would_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A model directory without its tokenizer (transformers builds an empty one: every prompt []), a relative resume
    path (verl joins it to the job's working directory, the code snapshot), checkpoints under a file (the first save
    fails)."""
    overrides = tiny_run(tmp_path)
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tmp_path / "model" / name, bare / name)
    with pytest.raises(UserError, match=r"bare has no tokenizer \(tokenizer_config.json or tokenizer.json\)"):
        submission(tmp_path, *overrides, f"actor_rollout_ref.model.path={bare}")
    submission(
        tmp_path,
        *overrides,
        f"actor_rollout_ref.model.path={bare}",
        f"actor_rollout_ref.model.tokenizer_path={tmp_path / 'model'}",
    )
    monkeypatch.chdir(tmp_path)
    relative = ["trainer.resume_mode=resume_path", "trainer.resume_from_path=ckpt/global_step_10"]
    with pytest.raises(UserError, match=rf"is relative: verl joins it .* \(e.g. {tmp_path}/ckpt/global_step_10\)"):
        submission(tmp_path, *overrides, *relative)
    under_file = [f"trainer.default_local_dir={tmp_path / 'data' / 'train.parquet' / 'ckpt'}", "trainer.save_freq=1"]
    with pytest.raises(UserError, match=r"lies under \S+train.parquet, a file: verl's first checkpoint save"):
        submission(tmp_path, *overrides, *under_file)


def test_a_model_directory_without_its_weights_is_refused(tmp_path: Path):
    """verl's workers build the actor (and reference) with from_pretrained from the model's directory: with no weight
    file, or an index naming a shard the directory lacks, that raises OSError in the job. A Megatron actor reading a
    dist checkpoint (use_dist_checkpointing) loads no HF weights, so its directory needs none."""
    overrides = tiny_run(tmp_path)
    model = tmp_path / "model"
    complete = submission(tmp_path, *overrides)
    (model / "model.safetensors").rename(tmp_path / "weights.safetensors")
    lacks = r"model lacks weights \(model.safetensors or pytorch_model.bin or model.safetensors.index.json or "
    with pytest.raises(UserError, match=lacks + r".*copy the model's weight files there"):
        submission(tmp_path, *overrides)
    # in a sweep, the line names the job to change
    cfg = compose_config("cluster=slurm", f"cluster.shared_dir={tmp_path}", *overrides)
    bare = replace(plan_job(cfg, list(overrides), gather=on_partition), job_name="h100,lr=2e-06")
    with pytest.raises(UserError, match=r"^job h100,lr=2e-06: \S+model lacks weights"):
        readiness.refuse([complete, bare])
    index = {
        "weight_map": {
            "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
            "lm_head.weight": "model-00002-of-00002.safetensors",
        }
    }
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "weights.safetensors").rename(model / "model-00001-of-00002.safetensors")
    with pytest.raises(UserError, match=r"model lacks model-00002-of-00002.safetensors, which verl's workers load"):
        submission(tmp_path, *overrides)
    plan = dry_run(tmp_path, *overrides)  # a dry run shows it
    assert any("lacks model-00002-of-00002.safetensors" in warning for warning in plan.warnings)
    (model / "model.safetensors.index.json").write_text("{not json")
    with pytest.raises(UserError, match=r"model lacks model.safetensors.index.json \(not a valid weight index\)"):
        submission(tmp_path, *overrides)
    assert readiness.local_weights_problem(str(model), {"use_dist_checkpointing": True}) is None
    assert "lacks" in (readiness.local_weights_problem(str(model), {"use_dist_checkpointing": False}) or "")


def test_a_reward_function_that_takes_none_of_the_reward_kwargs_is_refused_and_an_empty_dict_replaces_them(
    tmp_path: Path,
):
    """verl merges custom_reward_function.reward_kwargs into every call; algo=guru_baseline sets GURU's for rlaunch's
    own scorer. A verl-style compute_score pasted under it would fail at the first reward (TypeError), after a whole
    rollout. `reward_kwargs={}` on the command line replaces GURU's (Hydra would have merged it), as algo=verl has
    none; a signature with **kwargs takes them."""
    overrides = tiny_run(tmp_path)
    scorer = tmp_path / "my_reward.py"
    scorer.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.0\n")
    mine = [
        *overrides,
        f"reward.custom_reward_function.path={scorer}",
        "reward.custom_reward_function.name=compute_score",
    ]
    with pytest.raises(
        UserError, match=r"reward_kwargs sets procs, timeout_s, math_verify_timeout_s, cache_size \(and"
    ):
        submission(tmp_path, *mine)
    result = run_here(*mine, "reward.custom_reward_function.reward_kwargs={}", "launch.dry_run=json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads(result.stdout)
    assert plan["verl"]["reward"]["custom_reward_function"]["reward_kwargs"] == {}
    assert not [w for w in plan["warnings"] if "does not take" in w]
    assert "replaces what algo=guru_baseline set there" in result.stderr
    scorer.write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n  return 0\n"
    )
    submission(tmp_path, *mine)


def test_chat_prompts_for_a_base_models_tokenizer_without_a_chat_template_are_refused(tmp_path: Path):
    """verl applies the chat template to every prompt: with none (a base model's tokenizer), its dataset filter drops
    every prompt and its agent loop fails. A custom_chat_template is what verl sets on the tokenizer."""
    overrides = tiny_run(tmp_path)
    config = tmp_path / "model" / "tokenizer_config.json"
    config.write_text(json.dumps({k: v for k, v in json.loads(config.read_text()).items() if k != "chat_template"}))
    for name in ("chat_template.jinja", "chat_template.json"):
        (tmp_path / "model" / name).unlink(missing_ok=True)
    message = r"the prompts in data.train_files are chat messages, and the tokenizer of \S+ has no chat template"
    with pytest.raises(UserError, match=message + r".*set actor_rollout_ref.model.custom_chat_template"):
        submission(tmp_path, *overrides)
    template = '{% for m in messages %}{{ m["content"] }}{% endfor %}'
    plan = dry_run(tmp_path, *overrides, f"actor_rollout_ref.model.custom_chat_template='{template}'")
    assert not any(re.search(message, warning) for warning in plan.warnings)
    assert "prompt: measured" in render(plan)  # the prompts were tokenized through that template


def test_own_reward_function_takes_any_data_source_and_remote_files_pass_with_a_note(tmp_path: Path):
    overrides = tiny_run(tmp_path)
    pd.DataFrame(guru_rows(["mystery/set"], 8, "train")).to_parquet(tmp_path / "data" / "train.parquet")
    reward = tmp_path / "my_reward.py"
    # **kwargs: guru_baseline passes its reward_kwargs to every call (a signature without them fails: refused below)
    reward.write_text("def compute_score(data_source, solution_str, ground_truth, **kwargs):\n    return 0.0\n")
    plan = submission(tmp_path, *overrides, f"reward.custom_reward_function.path={reward}")
    assert plan.readiness.problems == ()
    make_tiny_dataset(tmp_path / "data", ["math"], per_source=8)
    plan = submission(tmp_path, *overrides, "data.val_files=hdfs://namenode/guru/test.parquet")
    assert any("hdfs://namenode/guru/test.parquet is remote: not checked" in note for note in plan.readiness.notes)


FILE_KEYS = [
    # verl's agent loop opens them on its rollout workers, after the job got its nodes (verl's multi-turn examples)
    "actor_rollout_ref.rollout.multi_turn.tool_config_path",
    "actor_rollout_ref.rollout.agent.agent_loop_config_path",
    "reward.custom_reward_function.path",  # imported when verl's trainer starts
    "data.custom_cls.path",  # a dataset class, imported when verl builds its data
]


def test_files_verl_opens_in_the_job_are_refused_when_missing_and_the_check_turns_off(tmp_path: Path):
    """A path that only the compute nodes see (a node-local scratch) is the user's to vouch for: launch.skip_checks."""
    missing = {key: f"{tmp_path}/scratch/{n}.yaml" for n, key in enumerate(FILE_KEYS)}
    overrides = [*tiny_run(tmp_path), *(f"{key}={path}" for key, path in missing.items())]
    with pytest.raises(
        UserError, match=r"^\S+ '\S+/scratch/\d.yaml' does not exist.* \(and 3 more problem\(s\)\) \[check 'files'"
    ):
        submission(tmp_path, *overrides)
    warnings = dry_run(tmp_path, *overrides).warnings
    for key, path in missing.items():
        assert any(w.startswith(f"not ready: {key} '{path}' does not exist") for w in warnings), (key, warnings)
    plan = submission(tmp_path, *overrides, "launch.skip_checks=[files]")
    assert plan.readiness.problems == () and plan.readiness.skipped == ("files",)


def test_a_relative_file_is_checked_where_the_jobs_ray_workers_open_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """verl opens these files in Ray workers, which start where the node's `ray start` ran: on SLURM the code snapshot
    (the job's first line enters it), so a relative path is read against the checkout's tracked files, not against
    where rlaunch was started; a cluster=local run starts Ray here. verl's rollout files also fall back on verl's
    package; its Python files have no fallback."""
    key, reward = "actor_rollout_ref.rollout.multi_turn.tool_config_path", "reward.custom_reward_function.path"
    overrides = tiny_run(tmp_path)
    (tmp_path / "tools.yaml").write_text("tools: []\n")
    (tmp_path / "my_reward.py").write_text("def compute_score(*args, **kwargs):\n    return 0.0\n")
    monkeypatch.chdir(tmp_path)
    for name, file in ((key, "tools.yaml"), (reward, "my_reward.py")):
        fix = re.escape(f"where it is not: write {name}={tmp_path / file} [check 'files'")
        with pytest.raises(UserError, match=rf"^{re.escape(name)}={file} is relative, .*the code snapshot.*{fix}"):
            submission(tmp_path, *overrides, f"{name}={file}", gather=with_snapshot)
        # without a snapshot the job (sbatch's default working directory) starts where rlaunch did
        assert submission(tmp_path, *overrides, f"{name}={file}").readiness.problems == ()
        local = dry_run(tmp_path, *overrides, f"{name}={file}")  # cluster=local: Ray starts where rlaunch did
        assert local.readiness.problems == (), local.readiness.problems
    verl_own = "trainer/config/_generated_ppo_trainer.yaml"  # in verl's package, where verl looks last
    tracked = "rewards/verl_entry.py"  # in the snapshot, wherever rlaunch was started from
    for fine in (
        f"{key}={tmp_path / 'tools.yaml'}",
        # another rollout file, opened the same way: a tool config's tools are checked too (test_readiness_49_tools)
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={verl_own}",
        f"{reward}={tracked}",
        f"{reward}=file://{tmp_path}/my_reward.py",  # verl's other two forms
        f"{reward}=pkg://rewards.verl_entry",
    ):
        assert submission(tmp_path, *overrides, fine, gather=with_snapshot).readiness.problems == (), fine
    with pytest.raises(UserError, match=rf"{re.escape(reward)} 'rewards/nope.py' does not exist \(verl opens it in"):
        submission(tmp_path, *overrides, f"{reward}=rewards/nope.py", gather=with_snapshot)


def test_the_function_verl_takes_from_a_reward_file_must_be_in_it(tmp_path: Path):
    """verl imports the file in the job and takes reward.custom_reward_function.name out of it (AttributeError when it
    is not there); a file Python cannot parse fails the same way. Read with ast, never imported at planning."""
    reward = "reward.custom_reward_function"
    overrides = tiny_run(tmp_path)
    my_reward = tmp_path / "my_reward.py"
    my_reward.write_text(
        "import math\ntry:\n    from fast import score\nexcept ImportError:\n    def score(*a):\n        return 0.0\n"
        "def compute_score(*args, **kwargs):\n    return 0.0\nclass Judge:\n    pass\n"
    )
    for name in ("compute_score", "score", "Judge"):
        plan = submission(tmp_path, *overrides, f"{reward}.path={my_reward}", f"{reward}.name={name}")
        assert plan.readiness.problems == (), name
    fix = re.escape(f"{reward}.name=my_score: {my_reward} defines no my_score (it defines compute_score, math, score)")
    with pytest.raises(UserError, match=rf"^{fix}; verl 0\.9\.1 would fail in the job .*\[check 'files'"):
        submission(tmp_path, *overrides, f"{reward}.path={my_reward}", f"{reward}.name=my_score")
    broken = tmp_path / "broken.py"
    broken.write_text("def compute_score(:\n")
    with pytest.raises(UserError, match=r"broken.py does not parse \(.*line 1\): verl imports it in the job"):
        submission(tmp_path, *overrides, f"{reward}.path={broken}", f"{reward}.name=compute_score")
    script = tmp_path / "script.py"  # defined only when run as a script: verl imports the module
    script.write_text('if __name__ == "__main__":\n    def compute_score(*a):\n        return 0.0\n')
    with pytest.raises(UserError, match=r"script.py defines no compute_score"):
        submission(tmp_path, *overrides, f"{reward}.path={script}", f"{reward}.name=compute_score")
    starred = tmp_path / "starred.py"
    starred.write_text("from my_rewards import *\n")  # what it defines is known only by running it
    (tmp_path / "my_rewards.py").write_text("def anything(*a):\n    return 0.0\n")  # beside it: the import resolves
    plan = submission(tmp_path, *overrides, f"{reward}.path={starred}", f"{reward}.name=anything")
    assert plan.readiness.problems == ()


def test_pcgrad_task_count_comes_from_the_data(tmp_path: Path):
    cfg = compose_config("cluster=local", f"cluster.shared_dir={tmp_path}", "algo=mtl_pcgrad", *tiny_run(tmp_path))
    assert len(cfg.dataset.domains) == 6  # what dataset=guru says
    plan = plan_job(cfg, [])
    assert list(cfg.dataset.domains) == ["logic", "math"]
    assert plan.preflight is not None
    assert Knobs.from_verl(plan.verl, pcgrad_tasks=len(cfg.dataset.domains)).pcgrad_tasks == 2


def test_guru_files_are_globbed_and_the_plan_records_the_list(tmp_path: Path):
    """A copy named the way Reasoning360's own scripts name GURU files still works."""
    root = tmp_path / "guru"
    names = ["logic__barc_3.4k_l1e-5_h0.9_1.6k_sampled_1.6k", "math__combined_54.4k"]
    for name in names:
        make_tiny_dataset(tmp_path / "staging" / name, ["math"], per_source=8)
        (root / "train").mkdir(parents=True, exist_ok=True)
        (tmp_path / "staging" / name / "train.parquet").rename(root / "train" / f"{name}.parquet")
    (root / "test").mkdir()
    (tmp_path / "staging" / names[0] / "val.parquet").rename(root / "test" / "math__math_500.parquet")
    plan = dry_run(tmp_path, "dataset=guru", f"dataset.root={root}")
    assert plan.verl["data"]["train_files"] == [str(root / "train" / f"{name}.parquet") for name in sorted(names)]
    assert plan.verl["data"]["val_files"] == [str(root / "test" / "math__math_500.parquet")]
    assert any("train/*.parquet -> 2 file(s)" in note for note in plan.readiness.notes)  # a note, not a warning
    assert not any("train/*.parquet -> 2 file(s)" in warning for warning in plan.warnings)


def test_relative_data_and_model_paths_name_what_was_read_here_since_verl_reads_them_in_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """verl builds its datasets and loads its model in Ray workers, which start where `ray start` ran (the code
    snapshot): a relative path read here would not be found there. It becomes the absolute path, said and listed."""
    keys = ("data.train_files", "data.val_files", "actor_rollout_ref.model.path")
    overrides = [o for o in tiny_run(tmp_path) if not o.startswith(keys)]
    monkeypatch.chdir(tmp_path)
    overrides += ["actor_rollout_ref.model.path=model"]  # a local directory, as launch/facts.py reads it
    overrides += ["data.train_files=data/train.parquet", "data.val_files=[data/val*.parquet]"]
    plan = submission(tmp_path, *overrides, gather=with_snapshot)
    assert plan.readiness.problems == ()
    data = plan.verl["data"]
    assert (data["train_files"], data["val_files"]) == (
        [f"{tmp_path}/data/train.parquet"],
        [f"{tmp_path}/data/val.parquet"],
    )
    said = f"resolved data.train_files: data/train.parquet -> {tmp_path}/data/train.parquet"
    assert said in plan.readiness.notes and said not in plan.warnings  # information, not a warning
    assert plan.verl["actor_rollout_ref"]["model"]["path"] == f"{tmp_path}/model"
    changes = {change.key: change.by for change in plan.changed_from_verl}
    assert {changes[key] for key in keys} == {"rlaunch: local paths"}
    # a relative path that names nothing here is left as written, for the data check to refuse
    missing = submission(tmp_path, *overrides[:-2], "data.train_files=nope.parquet", "launch.skip_checks=[data]")
    assert missing.verl["data"]["train_files"] == "nope.parquet"


def test_missing_data_in_a_dry_run_is_a_warning_not_a_refusal(tmp_path: Path):
    plan = dry_run(tmp_path, "dataset.root=/nonexistent")
    said = "matches no file: set dataset.root=<your copy> (now /nonexistent), or RLAUNCH_DATA_DIR to the directory"
    assert any(said in warning for warning in plan.warnings), plan.warnings


# --- 3. time ---------------------------------------------------------------------------------------------------------


def test_plan_shows_steps_wall_time_and_attempts(tmp_path: Path):
    plan = submission(
        tmp_path, *tiny_run(tmp_path, per_source=40), "trainer.total_training_steps=null", "trainer.total_epochs=3"
    )
    time = plan.predicted_time
    assert time is not None and (time.rows, time.steps_per_epoch, time.total_steps) == (80, 10, 30)
    # the plan's step time: its four phases at the typical lengths (launch/steptime.py)
    assert plan.time is not None and set(plan.time.phases_s) == {"generate", "log_prob", "update", "other"}
    assert time.step_s == plan.time.step_s == pytest.approx(sum(plan.time.phases_s.values()), abs=0.3)
    assert time.attempts == 1 and time.time_limit_min == 60
    # quick_test validates every 5 steps and at the last (verl's fit loop), not before training
    assert (time.validations, time.validates_before_training, time.test_freq) == (6, False, 5) and time.validation_s > 0
    assert time.wall_min == pytest.approx(
        readiness.STARTUP_MIN + (30 * time.step_s + 6 * time.validation_s) / 60, abs=0.2
    )
    assert f"30 steps (10/epoch) x {time.step_s} s + 6 validation(s) x {time.validation_s:g} s + start-up" in render(
        plan
    )
    assert f"= {plan.time.step_s:g} s (model), at " in render(plan)
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))).predicted_time == time  # as plan.json reads back


def test_first_checkpoint_beyond_one_attempt_is_refused_naming_the_save_freq_that_fits(tmp_path: Path):
    # a 3B model on one A40 with 12k-token sequences: minutes per step; quick_test gives 60 - 10 = 50 min
    overrides = [*tiny_run(tmp_path, per_source=400), "llm=qwen2_5_3b", "data.max_response_length=8192"]
    overrides = [o for o in overrides if not o.startswith("actor_rollout_ref.model.path")]
    overrides += ["trainer.total_training_steps=null", "trainer.total_epochs=2"]
    # 200 steps of ~9 min and their validations need ~43 attempts: requeues enough, so that only the checkpoint is wrong
    overrides += ["cluster.max_requeues=60", "trainer.save_freq=100", "launch.skip_checks=[hub_cache]"]
    overrides.insert(0, "launch.preflight=warn")  # it needs 2 A40s for memory: this test is about its time
    plan = dry_run(tmp_path, *overrides)
    time = plan.predicted_time
    assert time is not None
    # a save_freq whose checkpoint still comes in time with steps as much slower as the step-time model may err, and
    # which also finishes the run within the 61 attempts allowed (an attempt keeps only what it saved)
    safe = readiness.steps_within(50 / (1 + STEP_TIME_MARGIN), time.step_s, time.validation_s, 5)
    assert 1 <= safe < int(50 * 60 // time.step_s) < 100, time
    fitting = readiness.finishing_save_freq(readiness.Schedule.of(time, 100), 61, time.attempt_min, safe)
    assert fitting is not None and 1 <= fitting <= safe
    with pytest.raises(
        UserError, match=rf"first checkpoint comes after 100 steps x .* set trainer.save_freq={fitting}"
    ):
        submission(tmp_path, *overrides)
    assert submission(tmp_path, *overrides[:-2], f"trainer.save_freq={fitting}", "launch.skip_checks=[hub_cache]")


def test_image_rows_for_a_text_only_model_are_refused_and_a_multimodal_processor_lets_them_pass(tmp_path: Path):
    """verl's dataset asserts "processor is needed to process multimodal data" at the first row with images, and
    verl's hf_processor gives None for a model directory without a processor's files."""
    overrides = tiny_run(tmp_path)
    train = next(o.split("=", 1)[1] for o in overrides if o.startswith("data.train_files="))
    rows = pd.read_parquet(train)
    rows["images"] = [[{"bytes": b"png", "path": None}]] * len(rows)
    rows.to_parquet(train)
    refused = dry_run(tmp_path, *overrides)
    (said,) = [w for w in refused.warnings if "multimodal" in w]
    assert "has multimodal columns (images) but" in said and "processor is needed to process multimodal data" in said
    model = next(o.split("=", 1)[1] for o in overrides if o.startswith("actor_rollout_ref.model.path="))
    (Path(model) / "preprocessor_config.json").write_text('{"processor_class": "Qwen2VLProcessor"}')
    assert not [w for w in dry_run(tmp_path, *overrides).warnings if "multimodal" in w]


def test_a_budget_that_ends_before_training_starts_is_refused_with_one_that_does_not(tmp_path: Path):
    """A --time below the job's start-up: the attempt would end before its first step, and every requeue again; the
    plan had shown it as attempts of 1 minute."""
    overrides = [*tiny_run(tmp_path), "mode.time_budget_min=4"]
    with pytest.raises(
        UserError,
        match=r"time_budget_min=4 leaves no time to train: .* start-up takes 10 min; set mode.time_budget_min=\d+",
    ) as refused:
        submission(tmp_path, *overrides)
    enough = re.search(r"time_budget_min=(\d+) or more", str(refused.value))
    assert enough is not None
    assert submission(tmp_path, *overrides, f"mode.time_budget_min={enough.group(1)}")


def test_with_the_training_rows_unread_a_budget_that_ends_before_the_first_step_is_still_refused(tmp_path: Path):
    """launch.skip_checks=[data] on files the login node cannot read: no rows, so no steps or checkpoint to count,
    but a --time inside the job's start-up still kills every attempt before its first step."""
    overrides = [o for o in tiny_run(tmp_path) if not o.startswith("data.train_files")]
    overrides += ["data.train_files=/nodes-only/train.parquet", "launch.skip_checks=[data]"]
    with pytest.raises(UserError, match=r"time_budget_min=3 leaves no time to train: .* set mode.time_budget_min=1\d"):
        submission(tmp_path, *overrides, "mode.time_budget_min=3", "cluster.signal_delay_s=60")
    enough = submission(tmp_path, *overrides, "mode.time_budget_min=30")
    (said,) = [w for w in enough.warnings if w.startswith("time: the training rows were not read here")]
    assert "mode.time_budget_min=30 are not checked" in said


def test_a_requeue_signal_due_before_the_job_starts_is_refused(tmp_path: Path):
    """--signal=USR2@120 under --time=2: SLURM signals at once, and every attempt is requeued before its first step
    (three attempts of 15 s each, then given up, on the dev cluster)."""
    overrides = [
        *tiny_run(tmp_path),
        "mode.time_budget_min=2",
        "cluster.time_margin_min=0",
        "launch.skip_checks=[time]",
    ]
    with pytest.raises(
        UserError, match=r"^cluster.signal_delay_s=120: SLURM would send the requeue signal 120 s before --time=2 min"
    ):
        submission(tmp_path, *overrides)


def test_a_checkpoint_within_the_step_time_models_error_of_the_attempts_end_is_said_with_one_that_is_not(
    tmp_path: Path,
):
    """Not refused (it fits as predicted), but a step 10 % slower would lose the attempt: the plan says so, naming
    the save_freq that still saves in time at the model's error; with it, nothing is said."""
    overrides = [*tiny_run(tmp_path, per_source=400), "llm=qwen2_5_3b", "data.max_response_length=8192"]
    overrides = [o for o in overrides if not o.startswith("actor_rollout_ref.model.path")]
    overrides += ["launch.preflight=warn", "trainer.total_training_steps=null", "launch.skip_checks=[hub_cache]"]
    time = dry_run(tmp_path, *overrides).predicted_time
    assert time is not None
    fits = readiness.steps_within(time.attempt_min, time.step_s, time.validation_s, time.test_freq)
    safe = readiness.steps_within(time.attempt_min / 1.35, time.step_s, time.validation_s, time.test_freq)
    assert 1 <= safe < fits, time
    close = submission(tmp_path, *overrides, "cluster.max_requeues=60", f"trainer.save_freq={fits}")
    said = [w for w in close.warnings if w.startswith("the first checkpoint comes after")]
    assert len(said) == 1 and said[0].endswith(f"trainer.save_freq={safe} saves in time"), close.warnings
    assert f"comes after {fits} steps x {time.step_s:g} s" in said[0] and "up to 35 %" in said[0]
    clear = submission(tmp_path, *overrides, "cluster.max_requeues=60", f"trainer.save_freq={safe}")
    assert not [w for w in clear.warnings if "saves in time" in w]
    # a run without checkpoints that ends as close to its limit: its end is what the requeue would lose
    steps = readiness.steps_within(time.attempt_min, time.step_s, time.validation_s, time.test_freq, to_the_end=True)
    ends = submission(tmp_path, *overrides, f"trainer.total_training_steps={steps}", "trainer.save_freq=-1")
    assert any(w.startswith("the run's end (it saves no checkpoint) comes after") for w in ends.warnings)


# --- 4. metrics stay on ----------------------------------------------------------------------------------------------


def test_pasted_logger_without_file_gets_file_back(tmp_path: Path):
    plan = dry_run(tmp_path, *tiny_run(tmp_path), "trainer.logger=['console','wandb']")
    assert plan.verl["trainer"]["logger"] == ["console", "wandb", "file"]
    assert any("has no 'file': added it" in warning for warning in plan.warnings)


# --- 5. verl's own errors become ours --------------------------------------------------------------------------------


def test_verl_instantiation_error_is_one_line_exit_2(tmp_path: Path):
    """Reasoning360's scripts set rollout.mode=sync; verl 0.9.1 raises inside Hydra's instantiate (75 lines)."""
    result = run_here("gpu=a100_80", "cluster=local", "actor_rollout_ref.rollout.mode=sync", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        "rlaunch: error: verl rejects the config: Rollout mode 'sync' has been removed. Please set "
        "`actor_rollout_ref.rollout.mode=async` or remove the mode setting entirely."
    ]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "+actor_rollout_ref.rollout.multi_turn.enable=False",
            "+actor_rollout_ref.rollout.multi_turn.enable adds a new key, but verl's config already has "
            "actor_rollout_ref.rollout.multi_turn.enable: drop the +",
        ),
        ("reward_model.overlong_buffer.len=4096", "reward_model.overlong_buffer.len is a key of Reasoning360's DAPO"),
    ],
)
def test_compose_errors_name_the_fix(override: str, message: str):
    with pytest.raises(Exception) as error:
        compose_config(override)
    assert message in explain(error.value)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("reward_model.reward_manager=async_dapo", "reward_model.reward_manager=async_dapo is Reasoning360's verl"),
        ("+reward_model.overlong_buffer.enable=True", "reward_model.overlong_buffer.enable is a key of Reasoning360"),
        # the type comes from verl's own RolloutConfig, the range from launch/ranges.py
        ("actor_rollout_ref.rollout.n=0", "must be an integer >= 1 (verl's RolloutConfig.n is int)"),
        ("trainer.default_local_dir=/path/to/checkpoint/", "trainer.default_local_dir is a placeholder"),
        ("actor_rollout_ref.model.path=/path/to/model", "model path '/path/to/model' does not exist"),
        ("launch.skip_checks=[dat]", "launch.skip_checks names unknown check(s) dat: choose from model, hub_cache"),
    ],
)
def test_fork_keys_bad_n_and_placeholders_are_refused(tmp_path: Path, override: str, message: str):
    with pytest.raises(UserError, match=re.escape(message)):
        dry_run(tmp_path, override)


# --- 8. big models on too few GPUs -----------------------------------------------------------------------------------


def test_profile_knowledge_comes_before_tp_arithmetic(tmp_path: Path):
    with pytest.raises(UserError, match=r"qwen2_5_32b needs at least 16 a40 GPUs .* trainer.n_gpus_per_node=8 "):
        dry_run(tmp_path, "llm=qwen2_5_32b", "gpu=a40", "trainer.n_gpus_per_node=1")
    # 16 nodes with rollout TP 8: the engine's weights shrink with TP, the states and the batch with the GPUs
    with pytest.raises(
        UserError, match=r"qwen2_5_72b needs at least 128 a40 GPUs .*rollout.tensor_model_parallel_size=8"
    ):
        dry_run(tmp_path, "llm=qwen2_5_72b", "gpu=a40", "trainer.n_gpus_per_node=1")


@pytest.mark.parametrize(
    "knob", ["actor_rollout_ref.model.lora_rank=32", "actor_rollout_ref.actor.fsdp_config.param_offload=true"]
)
def test_the_gpu_count_is_searched_for_the_run_as_it_is(tmp_path: Path, knob: str):
    """The preflight searches what fits (no table): full fine-tuning of 72B needs 32 H100s with its states offloaded
    (64 without); verl's own 72B LoRA example runs on one node of 8 H100s (examples/tuning/70b), and a LoRA or
    offloaded run under launch.preflight=warn is planned on its 8."""
    base = [
        "llm=qwen2_5_72b",
        "gpu=h100",
        "trainer.n_gpus_per_node=8",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=8",
    ]
    with pytest.raises(UserError, match=r"qwen2_5_72b needs at least 32 h100 GPUs .* as it is it needs 64 GPUs"):
        submission(tmp_path, *base, "launch.skip_checks=[hub_cache]")
    assert "as it is it needs 64 GPUs" in render(dry_run(tmp_path, *base))  # a dry run shows it and refuses nothing
    plan = dry_run(tmp_path, *base, knob, "launch.preflight=warn")
    assert plan.preflight is not None and plan.resources.nodes * plan.resources.gpus_per_node == 8


# --- acceptance: verl's own example, pasted ---------------------------------------------------------------------------

# examples/grpo_trainer/run_qwen2-7b_math.sh of verl (0.9.x), its overrides as the script passes them, with the
# test's own files in place of $HOME/data
VERL_EXAMPLE = """algorithm.adv_estimator=grpo data.train_files={train} data.val_files={val} data.train_batch_size=1024
data.max_prompt_length=1024 data.max_response_length=1024 data.filter_overlong_prompts=True data.truncation='error'
actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct actor_rollout_ref.actor.optim.lr=1e-6
actor_rollout_ref.model.use_remove_padding=True actor_rollout_ref.actor.ppo_mini_batch_size=256
actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 actor_rollout_ref.actor.use_kl_loss=True
actor_rollout_ref.actor.kl_loss_coef=0.001 actor_rollout_ref.actor.kl_loss_type=low_var_kl
actor_rollout_ref.actor.entropy_coeff=0 actor_rollout_ref.model.enable_gradient_checkpointing=True
actor_rollout_ref.actor.fsdp_config.param_offload=False actor_rollout_ref.actor.fsdp_config.optimizer_offload=False
actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 actor_rollout_ref.rollout.tensor_model_parallel_size=2
actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.gpu_memory_utilization=0.6 actor_rollout_ref.rollout.n=5
actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16 actor_rollout_ref.ref.fsdp_config.param_offload=True
algorithm.use_kl_in_reward=False trainer.critic_warmup=0 trainer.logger=['console','wandb']
trainer.project_name='verl_grpo_example_gsm8k_math' trainer.experiment_name='qwen2_7b_function_rm'
trainer.n_gpus_per_node=8 trainer.nnodes=1 trainer.save_freq=20 trainer.test_freq=5 trainer.total_epochs=15"""


def test_verl_example_script_plans_with_the_model_it_names(tmp_path: Path, hf_cache: Path):
    make_hub_snapshot(hf_cache, "Qwen/Qwen2-7B-Instruct", {"config.json": hf_config(28, 3584, 28, 4, 18944, 152064)})
    files = {}
    for name, source in (("gsm8k", "openai/gsm8k"), ("math", "DigitalLearningGmbH/MATH-lighteval")):
        for split, rows in (("train", 1100), ("test", 50)):
            path = tmp_path / name / f"{split}.parquet"
            path.parent.mkdir(exist_ok=True)
            pd.DataFrame(guru_rows([source], rows, split)).to_parquet(path)
            files.setdefault(split, []).append(str(path))
    pasted = VERL_EXAMPLE.format(train=f"[{','.join(files['train'])}]", val=f"[{','.join(files['test'])}]").split()
    result = run_here(*pasted, "launch.dry_run=json", cwd=tmp_path, env={"HF_HUB_CACHE": str(hf_cache)})
    assert result.returncode == 0, result.stderr[-3000:]
    plan = json.loads(result.stdout)
    assert plan["llm"]["path"] == "Qwen/Qwen2-7B-Instruct" and plan["llm"]["source"] == f"HF cache {hf_cache}"
    assert (plan["llm"]["layers"], plan["llm"]["hidden"]) == (28, 3584)
    assert plan["verl"]["trainer"]["logger"] == ["console", "wandb", "file"]
    # the disk check depends on this machine's free space: its arithmetic is what is held here
    assert [p for p in plan["readiness"]["problems"] if p["check"] != "disk"] == []
    assert plan["readiness"]["time"]["steps_per_epoch"] == 2 and plan["readiness"]["time"]["total_steps"] == 30
    disk = plan["readiness"]["disk"]  # save_freq=20 of 30 steps: steps 20 and 30; verl keeps both (null)
    assert (disk["saves"], disk["kept"]) == (2, 2) and disk["probed"] and disk["free_gib"] is not None
    params = 28 * (2 * 3584 * 3584 + 2 * 3584 * 512 + 3 * 3584 * 18944) + 2 * 152064 * 3584  # within 1 %: no biases
    assert disk["one_gib"] == pytest.approx(params * (4 + 8) / 1024**3, rel=0.01)  # fp32 weights + AdamW's 2 moments


# --- acceptance: the dev cluster -------------------------------------------------------------------------------------


def accounted(job_id: str, env: dict[str, str]) -> set[str]:
    out = subprocess.run(
        ["sacct", "-n", "-X", "-j", job_id, "-o", "JobID"], env={**os.environ, **env}, capture_output=True, text=True
    )
    return set(out.stdout.split())


def squeue(env: dict[str, str]) -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], env={**os.environ, **env}, capture_output=True, text=True)
    return set(out.stdout.split())


def test_dev_cluster_refuses_bad_data_and_queues_a_good_tiny_run(slurm_env, tmp_path: Path, hf_cache: Path):
    good = [*tiny_run(tmp_path), "cluster=slurm", f"cluster.shared_dir={tmp_path}"]
    env = {**slurm_env, "HF_HUB_CACHE": str(hf_cache)}
    before = squeue(slurm_env)
    missing = run_cli(*good, "data.train_files=/nonexistent/train.parquet", cwd=tmp_path, env=env)
    assert missing.returncode == 2 and "/nonexistent/train.parquet does not exist" in missing.stderr, missing.stderr
    pd.DataFrame(guru_rows(["mystery__set"], 8, "train")).to_parquet(tmp_path / "mystery.parquet")
    unknown = run_cli(*good, f"data.train_files={tmp_path / 'mystery.parquet'}", cwd=tmp_path, env=env)
    assert unknown.returncode == 2 and "data_source mystery__set" in unknown.stderr, unknown.stderr
    assert squeue(slurm_env) <= before, "nothing queued"
    queued = run_cli(*good, cwd=tmp_path, env=env)
    assert queued.returncode == 0, queued.stderr[-3000:]
    job_id = queued.stdout.split("queued")[1].split(":")[1].split()[0]
    # slurmdbd learns of a job a moment after sbatch answered: the queue, or the accounting once it has ended
    deadline = time.monotonic() + 60
    while job_id.split("_")[0] not in {known.split("_")[0] for known in squeue(slurm_env) | accounted(job_id, env)}:
        assert time.monotonic() < deadline, "the good run reached SLURM"
        time.sleep(1)
    subprocess.run(["scancel", job_id], env={**os.environ, **slurm_env}, check=False)


def test_make_run_on_a_login_node_plans_and_prints_the_submit_command(slurm_env, tmp_path: Path):
    before = squeue(slurm_env)
    result = run_cli("llm=qwen2_5_0_5b", cwd=tmp_path, env={**slurm_env, "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "to submit: python launch/run.py llm=qwen2_5_0_5b cluster=slurm" in result.stderr
    assert "rlaunch plan" in result.stdout and "sbatch script (not submitted: dry run)" in result.stdout
    assert squeue(slurm_env) <= before


def test_a_mini_batch_splits_over_data_parallel_ranks_not_gpus_with_ulysses(tmp_path: Path):
    """verl splits a mini-batch over world / ulysses_sequence_parallel_size ranks (FSDP engine's
    get_data_parallel_size) and asserts each rank's share divides by the micro-batch: verl's 14B LoRA example (2 GPUs,
    SP 2, 480 sequences, micro-batch 96) is sound; without SP the same numbers are not."""
    lora = [
        "llm=qwen2_5_14b",
        "gpu=h100",
        "trainer.n_gpus_per_node=2",
        "data.train_batch_size=96",
        "actor_rollout_ref.actor.ppo_mini_batch_size=96",
        "actor_rollout_ref.rollout.n=5",
        "actor_rollout_ref.model.lora_rank=32",
        "actor_rollout_ref.actor.use_dynamic_bsz=false",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=96",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "launch.preflight=warn",
    ]
    assert dry_run(tmp_path, *lora, "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2").run_id
    with pytest.raises(UserError, match=r"each GPU's share of a mini-batch \(480 / 2 = 240 sequences\)"):
        dry_run(tmp_path, *lora, "actor_rollout_ref.actor.ulysses_sequence_parallel_size=1")
    with pytest.raises(UserError, match=r"ulysses_sequence_parallel_size \(4\) does not divide 2 GPUs"):
        dry_run(tmp_path, *lora, "actor_rollout_ref.actor.ulysses_sequence_parallel_size=4")


def test_the_global_micro_batch_older_verl_scripts_set_is_translated_not_passed_on(tmp_path: Path):
    """verl's examples/tuning scripts set actor.ppo_micro_batch_size (global, divided by the data-parallel ranks in
    older verl); verl 0.9.1's engine workers read only the *_per_gpu key, and refuse both set at once."""
    static = ["gpu=h100", "trainer.n_gpus_per_node=8", "actor_rollout_ref.actor.use_dynamic_bsz=false"]
    sp = "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"
    with pytest.raises(
        UserError, match=re.escape("set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=44 (176 / 4")
    ):
        dry_run(tmp_path, *static, sp, "actor_rollout_ref.actor.ppo_micro_batch_size=176")
    with pytest.raises(UserError, match=re.escape("rollout.log_prob_micro_batch_size_per_gpu=8 (64 / 8 data-parallel")):
        dry_run(tmp_path, *static, "actor_rollout_ref.rollout.log_prob_micro_batch_size=64")


def test_verl_default_reward_scores_its_own_data_sources_and_refuses_others(tmp_path: Path):
    """algo=verl keeps verl's default reward, which raises NotImplementedError for a data_source it does not know:
    refused before the queue, with the way out; its own sources (read from verl's source) pass."""
    overrides = [*tiny_run(tmp_path), "algo=verl", "algorithm.adv_estimator=grpo"]
    refused = r"data_source logic__\w+, math__\w+ in .* is not one verl.s default reward scores"
    with pytest.raises(UserError, match=refused):
        submission(tmp_path, *overrides)
    pd.DataFrame(guru_rows(["openai/gsm8k", "aime2024"], 8, "train")).to_parquet(tmp_path / "data" / "train.parquet")
    pd.DataFrame(guru_rows(["openai/gsm8k"], 8, "test")).to_parquet(tmp_path / "data" / "val.parquet")
    plan = submission(tmp_path, *overrides)
    assert not [p for p in plan.readiness.problems if p.check == "data_sources"]


def test_a_critic_starts_from_the_actors_model_instead_of_verls_placeholder(tmp_path: Path):
    """verl's default estimator (gae) trains a critic whose default path is a placeholder verl's own check rejects."""
    overrides = [*tiny_run(tmp_path), "algo=verl", "mode=quick_test"]
    plan = dry_run(tmp_path, *overrides)
    actor = plan.verl["actor_rollout_ref"]["model"]["path"]
    assert plan.verl["algorithm"]["adv_estimator"] == "gae" and plan.verl["critic"]["model"]["path"] == actor
    assert any("the critic starts from the actor's model" in warning for warning in plan.warnings)
    listed = {change.key: change.by for change in plan.changed_from_verl}
    assert listed["critic.model.path"] == "rlaunch: critic from the actor"
    grpo = dry_run(tmp_path, *overrides, "algorithm.adv_estimator=grpo")  # no critic: verl's value stays
    assert grpo.verl["critic"]["model"]["path"] == "~/models/deepseek-llm-7b-chat"


def test_rft_is_not_refused_for_fewer_rows_than_data_train_batch_size(tmp_path: Path):
    """algo=rft's first stage is verl's main_generation_server: it generates for every row and never reads
    data.train_batch_size, so fewer rows than a batch is no reason to refuse (algo=guru_baseline's is:
    test_bad_data_is_refused_at_submission_and_shown_in_a_dry_run[too-few-rows])."""
    overrides = [*tiny_run(tmp_path, per_source=2), "data.train_batch_size=8"]
    plan = dry_run(tmp_path, "algo=rft", *overrides)
    assert not any("fewer than one batch" in warning for warning in plan.warnings), plan.warnings
    assert any("fewer than one batch" in warning for warning in dry_run(tmp_path, *overrides).warnings)
