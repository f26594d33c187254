"""Readiness on what a read-only probe of verl's examples and bad inputs found: refusals verl would not make, and
problems verl meets in the job that the login node can see (launch/readiness.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from test_readiness import dry_run, hf_cache, submission, tiny_run  # noqa: F401 (hf_cache: an autouse fixture)
from tiny_assets import guru_rows, make_tiny_model

from launch.errors import UserError


def test_a_reward_model_scores_any_data_source_without_a_reward_function(tmp_path: Path):
    """verl 0.9.1 without a reward function of the run's own scores with the reward model alone when it is on
    (reward_loop.py compute_score): default_compute_score, which knows only its own data sources, is never called."""
    overrides = [*tiny_run(tmp_path), "algo=verl", "algorithm.adv_estimator=grpo"]
    pd.DataFrame(guru_rows(["my_company/qa"], 8, "train")).to_parquet(tmp_path / "data" / "train.parquet")
    with pytest.raises(UserError, match=r"data_source my_company/qa in .* is not one verl.s default reward scores"):
        submission(tmp_path, *overrides)
    model = next(o for o in overrides if o.startswith("actor_rollout_ref.model.path=")).partition("=")[2]
    rm = [
        "reward.reward_model.enable=true",
        f"reward.reward_model.model_path={model}",
        "reward.reward_model.rollout.name=vllm",
    ]
    plan = dry_run(tmp_path, *overrides, *rm)
    assert not [p for p in plan.readiness.problems if p.check == "data_sources"], plan.readiness.problems
    assert any("scores every response with the reward model alone" in note for note in plan.readiness.notes)


@pytest.mark.parametrize(
    ("override", "written"),
    [("data.train_files=''", r"data.train_files=''"), ("data.val_files=['']", r"data.val_files=\[''\]")],
)
def test_an_empty_data_path_is_said_to_be_empty_not_globbed_at_the_root(tmp_path: Path, override: str, written: str):
    """An unset shell variable (verl's run_qwen3moe-30b_megatron_96gb.sh: $aime24_test_path) leaves '': Path('') is
    the working directory, which was judged a directory and given a glob of / as its fix."""
    with pytest.raises(UserError, match=rf"^{written} holds an empty path .*: give the data file's path") as raised:
        dry_run(tmp_path, *tiny_run(tmp_path), override)
    assert "/*.parquet" not in str(raised.value)


def test_messages_without_a_role_are_one_line_naming_the_file_and_the_prompt_key(tmp_path: Path):
    """verl's chat template reads every message's role (jinja's UndefinedError in the job); the planner had died on
    the same error as it measured the prompts."""
    overrides = tiny_run(tmp_path)
    train = tmp_path / "data" / "train.parquet"
    rows = pd.read_parquet(train)
    rows["prompt"] = [[{"content": "What is 1 plus 1?"}]] * len(rows)
    rows.to_parquet(train)
    said = rf"data.train_files file {train}: in row 0 of its prompts \(data.prompt_key=prompt\) a message has no 'role'"
    with pytest.raises(UserError, match=said):
        submission(tmp_path, *overrides)
    assert any(re.search(said, warning) for warning in dry_run(tmp_path, *overrides).warnings)


@pytest.mark.parametrize("value", ["5", "abc"])
def test_chat_template_kwargs_that_are_no_mapping_are_one_line(tmp_path: Path, value: str):
    """verl spreads them into apply_chat_template (**kwargs); the planner had died on a TypeError measuring prompts."""
    said = rf"^data.apply_chat_template_kwargs={value}: must be a mapping .*\+data.apply_chat_template_kwargs.enable_"
    with pytest.raises(UserError, match=said):
        dry_run(tmp_path, *tiny_run(tmp_path), f"data.apply_chat_template_kwargs={value}")
    plan = dry_run(tmp_path, *tiny_run(tmp_path), "+data.apply_chat_template_kwargs.enable_thinking=false")
    assert plan.verl["data"]["apply_chat_template_kwargs"] == {"enable_thinking": False}


def test_a_validation_file_is_judged_by_what_verl_reads_of_it_when_it_never_validates(tmp_path: Path):
    """verl 0.9.1 loads the validation files whether or not it validates (trainer_base.py _init_dataloader), and
    reads their rows only as it validates, or their prompts as they load under data.filter_overlong_prompts: a
    missing prompt column is then as harmless as an unknown data_source, which was already accepted."""
    overrides = tiny_run(tmp_path)
    val = tmp_path / "data" / "val.parquet"
    pd.read_parquet(val).rename(columns={"prompt": "question"}).to_parquet(val)
    lacks = rf"data.val_files file {val} lacks verl's column\(s\) data.prompt_key 'prompt'"
    with pytest.raises(UserError, match=lacks):
        submission(tmp_path, *overrides)
    never = ["trainer.test_freq=-1", "trainer.val_before_train=false"]
    with pytest.raises(UserError, match=lacks):  # verl's filter templates every prompt as the files load
        submission(tmp_path, *overrides, *never, "data.filter_overlong_prompts=true")
    plan = submission(tmp_path, *overrides, *never, "data.filter_overlong_prompts=false")
    assert any(re.search(lacks + r".*: not refused", note) for note in plan.readiness.notes), plan.readiness.notes
    val.write_text("not parquet")  # the file itself verl loads as the trainer starts
    with pytest.raises(UserError, match=rf"data.val_files file {val} is not readable parquet"):
        submission(tmp_path, *overrides, *never, "data.filter_overlong_prompts=false")


def test_the_other_paths_verl_loads_a_model_from_are_judged_as_the_actors_is(tmp_path: Path):
    """The tokenizer, external_lib's modules, a LoRA adapter and the critic's model: verl's workers load them as
    they build the model (workers/config/model.py, engine/fsdp/transformer_impl.py), after the job got its GPUs."""
    overrides = tiny_run(tmp_path)
    model = next(o for o in overrides if o.startswith("actor_rollout_ref.model.path=")).partition("=")[2]
    missing = tmp_path / "nowhere"
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = [
        ("actor_rollout_ref.model.external_lib=no_module_xyz", r"external_lib=no_module_xyz: no module no_module_xyz"),
        (f"actor_rollout_ref.model.tokenizer_path={missing}", rf"tokenizer_path={missing} names nothing here"),
        (
            f"actor_rollout_ref.model.lora_adapter_path={missing}",
            rf"actor_rollout_ref.model.lora_adapter_path={missing} names nothing here",
        ),
        (f"actor_rollout_ref.model.lora_adapter_path={empty}", r"holds no adapter_config.json, which peft reads"),
    ]
    lora = ["actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.lora_alpha=16"]
    for override, said in refused:
        with pytest.raises(UserError, match=rf"{said}.*\[check 'model'"):
            submission(tmp_path, *overrides, *lora, override)
    submission(
        tmp_path,
        *overrides,
        "actor_rollout_ref.model.external_lib=json",
        f"actor_rollout_ref.model.lora_adapter_path={missing}",
    )  # LoRA off: verl loads no adapter
    (empty / "config.json").write_text((Path(model) / "config.json").read_text())
    for critic, said in (
        (missing, rf"critic.model.path={missing} names nothing here"),
        (empty, r"point critic.model.path at"),
    ):
        with pytest.raises(UserError, match=said):
            submission(tmp_path, *overrides, "algorithm.adv_estimator=gae", f"critic.model.path={critic}")
        submission(tmp_path, *overrides, "algorithm.adv_estimator=grpo", f"critic.model.path={critic}")  # no critic


@pytest.mark.parametrize("where", ["under_a_file", "proc"])
def test_a_rollout_data_dir_verl_cannot_make_is_refused(tmp_path: Path, where: str):
    """verl makes trainer.rollout_data_dir and dumps the rollouts there after the first step (trainer_base.py)."""
    if where == "proc" and not Path("/proc/self").exists():
        pytest.skip("no /proc here")
    directory = tmp_path / "a_file" / "rollouts" if where == "under_a_file" else Path("/proc/rlaunch_rollouts")
    (tmp_path / "a_file").write_text("")
    with pytest.raises(UserError, match=rf"trainer.rollout_data_dir={directory} .*verl makes it .*\[check 'files'"):
        submission(tmp_path, *tiny_run(tmp_path), f"trainer.rollout_data_dir={directory}")
    submission(tmp_path, *tiny_run(tmp_path), f"trainer.rollout_data_dir={tmp_path / 'rollouts'}")


def test_measuring_prompts_skips_a_row_the_chat_template_cannot_render(tmp_path: Path):
    """A row past read_data's sample may still lack a role: jinja's UndefinedError skips it as verl's filter does."""
    from launch.lengths import load_cached_tokenizer, measure_prompt_lengths

    model = make_tiny_model(tmp_path / "model")
    load_cached_tokenizer.cache_clear()
    rows = pd.DataFrame({"prompt": [[{"role": "user", "content": "1 plus 1?"}], [{"content": "no role"}]]})
    rows.to_json(tmp_path / "train.jsonl", orient="records", lines=True)  # parquet would give the role as None
    reads_role = "{% for m in messages %}{{ m.role + ': ' + m.content }}{% endfor %}"  # Undefined + str raises
    stats = measure_prompt_lengths([str(tmp_path / "train.jsonl")], str(model), chat_template=reads_role)
    assert stats is not None and stats.rows == 1
