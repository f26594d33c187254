"""algo=rft: the config (composition, mode scaling, plan-time validation with verl's own config code), stage 2 on
generated candidates with the real rewards, the stage chaining, and stages 1 and 3 launched for real on CPU up to
the check where verl stops without a GPU."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import PROJECT, compose_config, cpu_facts, require_or_skip
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf
from tiny_assets import make_tiny_model

from algos.rft import RftConfigError, generate, pipeline, pipeline_command, validate_rft
from algos.rft import filter as rft_filter
from algos.rft.sft import compose_sft_config
from launch.facts import read_model_config
from launch.plan import make_plan
from launch.run import write_run_dir
from launch.schema import RLAUNCH_ROOTS

MODES = {"quick_test": (1, 10), "standard": (1, None), "production": (3, None), "extended": (10, None)}
MATH, LOGIC = "math__deepscaler", "logic__graph_logical_dataset"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("rft") / "model")


def rft_overrides(model: Path, *extra: str) -> list[str]:
    return [
        "algo=rft",
        "gpu=a40",
        "mode=quick_test",
        "cluster=local",
        f"actor_rollout_ref.model.path={model}",
        "trainer.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "trainer.logger=[console]",
        *extra,
    ]


# ---------------------------------------------------------------------------------------------------------------------
# config


@pytest.mark.parametrize("mode", MODES)
def test_rft_composes_with_rollout_from_oversample_and_mode_reaching_sft_epochs_and_steps(mode: str):
    cfg = compose_config("algo=rft", f"mode={mode}", "rft.oversample=30")
    assert cfg.algo.name == "rft"
    assert cfg.actor_rollout_ref.rollout.n == 30 and cfg.actor_rollout_ref.rollout.temperature == 0.7
    epochs, steps = MODES[mode]
    assert cfg.rft.sft.trainer.total_epochs == epochs and cfg.rft.sft.trainer.total_training_steps == steps
    # the reward wiring and lengths are the baseline's: the same prompts, judged the same way
    baseline = compose_config("algo=guru_baseline", f"mode={mode}")
    assert cfg.reward == baseline.reward and cfg.data == baseline.data


def test_every_algo_has_an_inert_rft_root_that_verl_never_sees():
    cfg = compose_config("algo=guru_baseline")
    assert cfg.rft.oversample == 16 and cfg.rft.k == 4 and cfg.rft.sft == {}
    plan = make_plan(cfg, cpu_facts(), [], Path("/tmp"), sys.executable)
    assert "rft" not in plan.verl


def validate_composed(cfg) -> None:
    """As launch/validate.py calls it: verl's part of the composed config and the rft settings, as plain dicts."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    verl = {key: value for key, value in resolved.items() if key not in (*RLAUNCH_ROOTS, "hydra")}
    validate_rft(verl, resolved["rft"])


def test_validate_rft_accepts_the_shipped_config_inside_a_running_hydra_app(tiny_model: Path):
    cfg = compose_config(*rft_overrides(tiny_model))
    # launch/run.py calls validation from inside its Hydra app: composing verl's SFT tree must not disturb it
    with initialize_config_dir(config_dir=str(PROJECT / "conf"), version_base="1.3"):
        validate_composed(cfg)
        assert GlobalHydra.instance().is_initialized()
        assert compose("config", overrides=["algo=rft", "launch.sweep_id=x"]).algo.name == "rft"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["rft.k=20"], "rft.k=20 must be between 1 and rft.oversample (16)"),
        (["actor_rollout_ref.rollout.n=8"], "actor_rollout_ref.rollout.n=8 contradicts rft.oversample=16"),
        (["rft.temperature=0"], "rft.temperature=0 gives 16 identical samples"),
        # verl's RolloutConfig (what each rollout replica of the generation server builds)
        (
            ["actor_rollout_ref.rollout.mode=sync"],
            "verl rejects stage 1's rollout config: Rollout mode 'sync' has been removed.",
        ),
        (["actor_rollout_ref.rollout.tensor_model_parallel_size=2"], "no replica fits"),
        # composition over verl's sft_trainer_engine
        (["+rft.sft.data.no_such_key=1"], "rft.sft.data.no_such_key does not compose over verl's sft_trainer_engine"),
        (["+rft.sft.model.path=/elsewhere"], "rft.sft.model.path is set by rlaunch"),
        # verl's SFT dataclasses (SFTTrainer._build_config)
        (["+rft.sft.engine.strategy=bogus"], "verl rejects rft.sft.engine: strategy bogus not supported"),
        (["rft.sft.data.train_batch_size=3", "trainer.n_gpus_per_node=2"], "(3) does not split over 2 GPUs"),
        (
            ["+rft.sft.data.max_token_len_per_gpu=100"],
            "rft.sft.data.max_token_len_per_gpu (100) cannot hold one sample of data.max_prompt_length + "
            "data.max_response_length (12288)",
        ),
    ],
)
def test_validate_rft_refuses_in_one_line_naming_the_key(tiny_model: Path, overrides: list[str], message: str):
    cfg = compose_config(*rft_overrides(tiny_model, *overrides))
    with pytest.raises(RftConfigError) as caught:
        validate_composed(cfg)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_fixes_for_a_zero_temperature_paste(tiny_model: Path):
    """Each fix the refusal prints, pasted after rft.temperature=0 as written, is accepted (rft.oversample=1 alone was
    refused again: rft.k=4 must be between 1 and rft.oversample)."""
    with pytest.raises(RftConfigError) as caught:
        validate_composed(compose_config(*rft_overrides(tiny_model, "rft.temperature=0")))
    sample_once = str(caught.value).rsplit("with ", 1)[1].split()
    assert sample_once == ["rft.oversample=1", "rft.k=1"]
    validate_composed(compose_config(*rft_overrides(tiny_model, "rft.temperature=0", *sample_once)))
    raise_it = str(caught.value).split("(e.g. ", 1)[1].split(")", 1)[0]
    validate_composed(compose_config(*rft_overrides(tiny_model, "rft.temperature=0", raise_it)))


def test_sft_config_is_verls_tree_with_the_runs_hardware_knobs_and_rlaunchs_paths(tiny_model: Path, tmp_path: Path):
    cfg = compose_config(
        *rft_overrides(tiny_model, "gpu=a100_80", "trainer.n_gpus_per_node=8", "+rft.sft.optim.betas=[0.9,0.95]")
    )
    plan = make_plan(cfg, cpu_facts(model_config=read_model_config(str(tiny_model))), [], tmp_path, sys.executable)
    sft = compose_sft_config(plan.verl, _plain(cfg.rft.sft), tmp_path / "sft.parquet")
    assert sft["data"]["train_files"] == str(tmp_path / "sft.parquet")
    assert sft["model"]["path"] == str(tiny_model)
    assert (sft["trainer"]["nnodes"], sft["trainer"]["n_gpus_per_node"]) == (1, 8)
    assert (
        sft["trainer"]["default_local_dir"]
        == plan.verl["trainer"]["default_local_dir"]
        == f"{plan.run_dir}/checkpoints"
    )
    # the GPU profile's actor knobs (conf/gpu/a100_80.yaml), not a hardware knob of algo/
    assert sft["data"]["use_dynamic_bsz"] is True and sft["data"]["max_token_len_per_gpu"] == 16384
    assert sft["model"]["enable_gradient_checkpointing"] is True and sft["engine"]["param_offload"] is False
    assert sft["data"]["max_length"] == 4096 + 8192
    # the method (conf/algo/rft.yaml), mode's steps, and a user's override of verl's own key
    assert sft["optim"]["lr"] == 1e-5 and sft["optim"]["lr_scheduler_type"] == "cosine"
    assert sft["optim"]["betas"] == [0.9, 0.95]
    assert (sft["trainer"]["total_epochs"], sft["trainer"]["total_training_steps"]) == (1, 10)
    assert sft["checkpoint"]["load_contents"] == sft["checkpoint"]["save_contents"]  # resolved for verl


def _plain(node: object) -> object:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(node, resolve=True)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------------------
# a real run directory, with stage 1's output generated by the test


def prompt_rows() -> list[dict]:
    """Two math and two logic prompts in verl's RL parquet layout."""
    rows = []
    for index, truth in enumerate(["4", "6"]):
        rows.append(
            {
                "data_source": MATH,
                "prompt": [{"role": "user", "content": f"What is {index + 2} plus {index + 2}?"}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": truth},
                "extra_info": {"split": "train", "index": index},
            }
        )
    for index, truth in enumerate(["B", "C"]):
        rows.append(
            {
                "data_source": LOGIC,
                "prompt": [{"role": "user", "content": f"Which node comes first? ({index})"}],
                "ability": "logic",
                "reward_model": {"style": "rule", "ground_truth": truth},
                "extra_info": {"split": "train", "index": index},
            }
        )
    return rows


def boxed(value: str, words: str = "The answer is") -> str:
    return f"{words} \\boxed{{{value}}}"


def tagged(value: str, words: str = "Reasoning") -> str:
    return f"{words}. <answer>{value}</answer>"


# six samples per prompt, in prompt order (rft_prompt_id 0..3): correct, wrong, exact and whitespace duplicates
RESPONSES = [
    [boxed("4"), boxed("4"), boxed("4", "The  answer\nis"), boxed("5"), boxed("4", "So"), boxed("4", "Thus")],
    [boxed("7"), boxed("5"), "no idea", boxed("7"), boxed("8"), ""],
    [tagged("A"), tagged("B"), tagged("B"), tagged("C"), tagged("A", "Hmm"), tagged("D")],
    [
        tagged("C", "One"),
        tagged("C", "Two"),
        tagged("C", "Three"),
        tagged("C", "Four"),
        tagged("B"),
        tagged("C", "Five"),
    ],
]
EXPECTED_KEPT = {0: [0, 4], 1: [], 2: [1], 3: [0, 1]}  # sample indices kept per prompt with k=2


def make_run_dir(tmp_path: Path, model: Path, *extra: str) -> Path:
    """What `launch/run.py algo=rft ...` writes, through the real compose -> plan -> write_run_dir path."""
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    pd.DataFrame(prompt_rows()).to_parquet(data / "train.parquet")
    overrides = rft_overrides(
        model,
        f"cluster.shared_dir={tmp_path}",
        f"data.train_files={data / 'train.parquet'}",
        f"data.val_files={data / 'train.parquet'}",
        "data.max_prompt_length=128",
        "data.max_response_length=128",
        "rft.oversample=6",
        "rft.k=2",
        "rft.sft.data.train_batch_size=2",
        "reward.custom_reward_function.reward_kwargs.procs=2",
        *extra,
    )
    cfg = compose_config(*overrides)
    validate_composed(cfg)
    plan = make_plan(cfg, cpu_facts(model_config=read_model_config(str(model))), overrides, tmp_path, sys.executable)
    plan = dataclasses.replace(plan, driver_command=pipeline_command(sys.executable, Path(plan.run_dir)))
    write_run_dir(plan, cfg)
    return Path(plan.run_dir)


def generate_candidates(run_dir: Path) -> None:
    """Stage 1 as verl's generation server leaves it, with the test's responses, recorded as done."""
    run = pipeline.RunFiles.read(run_dir)
    stage = pipeline.plan_stages(run)[0]
    stage.prepare()
    counts = generate.write_prompts(run.verl, stage.output(generate.PROMPTS_FILE))
    prompts = pd.read_parquet(stage.output(generate.PROMPTS_FILE))
    prompts[generate.RESPONSES_COLUMN] = [RESPONSES[int(pid)] for pid in prompts[generate.PROMPT_ID]]
    prompts.to_parquet(stage.output(generate.CANDIDATES_FILE))
    stage.finish(counts)


def run_pipeline_process(run_dir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The job's driver as launch/job.py starts it: the plan's command, cwd = the run directory."""
    plan = json.loads((run_dir / "plan.json").read_text())
    environment = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | plan["worker_env"] | (env or {})
    return subprocess.run(
        [*plan["driver_command"], *args], cwd=run_dir, env=environment, capture_output=True, text=True, timeout=300
    )


# ---------------------------------------------------------------------------------------------------------------------
# stage 2 and the chaining


def test_filter_keeps_at_most_k_correct_distinct_samples_per_prompt_with_provenance(tmp_path: Path, tiny_model: Path):
    run_dir = make_run_dir(tmp_path, tiny_model)
    generate_candidates(run_dir)
    assert pipeline.run_pipeline(run_dir, through="filter") == ["filter"]

    filter_dir = run_dir / "rft" / "filter"
    kept = pd.read_parquet(filter_dir / rft_filter.SFT_FILE)
    assert list(kept.columns) == ["messages", "prompt_id", "sample_index", "score", "data_source"]
    by_prompt = {pid: sorted(group["sample_index"]) for pid, group in kept.groupby("prompt_id")}
    assert by_prompt == {pid: samples for pid, samples in EXPECTED_KEPT.items() if samples}
    assert (kept["score"] == 1.0).all()
    assert dict(kept.groupby("data_source").size()) == {MATH: 2, LOGIC: 3}
    first = kept.iloc[0]
    messages = [dict(message) for message in first["messages"]]
    assert messages == [
        {"role": "user", "content": "What is 2 plus 2?"},
        {"role": "assistant", "content": RESPONSES[0][0]},
    ]
    for _, group in kept.groupby("prompt_id"):  # distinct per prompt once whitespace is collapsed, at most k
        texts = [" ".join(messages[-1]["content"].split()) for messages in group["messages"]]
        assert len(texts) == len(set(texts)) <= 2

    stats = json.loads((filter_dir / rft_filter.STATS_FILE).read_text())
    assert stats["per_domain"]["math"] | {} == {
        "prompts": 2, "candidates": 12, "correct": 5, "errored": 0, "distinct_correct": 3, "kept": 2,
        "prompts_with_kept": 1, "correct_rate": 5 / 12, "kept_per_prompt": 1.0,
    }  # fmt: skip
    assert stats["per_domain"]["logic"]["kept"] == 3 and stats["per_domain"]["logic"]["correct"] == 7
    assert stats["per_domain"]["logic"]["distinct_correct"] == 6
    assert stats["kept_per_prompt_histogram"] == {"0": 1, "1": 1, "2": 2}
    assert stats["total"]["kept"] == 5 and stats["total"]["candidates"] == 24

    per_prompt = pd.read_parquet(filter_dir / rft_filter.PER_PROMPT_FILE)
    assert dict(zip(per_prompt.prompt_id, per_prompt.kept, strict=True)) == {0: 2, 1: 0, 2: 1, 3: 2}

    lines = (run_dir / "metrics" / "rft_filter.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    assert len(lines) == 1 and record["step"] == 0
    assert record["data"]["rft/kept/math"] == 2 and record["data"]["rft/kept/logic"] == 3
    assert record["data"]["rft/kept"] == 5 and record["data"]["rft/prompts_with_kept/math"] == 1


def test_filter_output_is_read_by_verls_sft_dataset(tmp_path: Path, tiny_model: Path):
    """verl's own SFT dataset class, on the composed config, reads stage 2's parquet: every kept sample becomes one
    training sequence whose loss covers the assistant's answer only."""
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.trainer.sft_trainer_ray import create_sft_dataset

    run_dir = make_run_dir(tmp_path, tiny_model)
    generate_candidates(run_dir)
    pipeline.run_pipeline(run_dir, through="filter")
    sft_config = OmegaConf.create(pipeline.plan_stages(pipeline.RunFiles.read(run_dir))[2].config)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    dataset = create_sft_dataset(sft_config.data.train_files, sft_config.data, tokenizer, None)
    assert len(dataset) == 5
    sample = dataset[0]
    answer_tokens = int(sample["loss_mask"].sum())
    assert 0 < answer_tokens < len(sample["input_ids"])  # pad_mode no_padding: one unpadded sequence


def test_stages_are_skipped_when_done_and_rerun_with_those_after_them_when_their_config_changes(
    tmp_path: Path, tiny_model: Path
):
    run_dir = make_run_dir(tmp_path, tiny_model)
    generate_candidates(run_dir)
    stages = pipeline.plan_stages(pipeline.RunFiles.read(run_dir))
    assert [stage.name for stage in pipeline.stages_to_run(stages)] == ["filter", "sft"]

    assert pipeline.run_pipeline(run_dir, through="filter") == ["filter"]
    done = run_dir / "rft" / "filter" / "done.json"
    first_finish = done.read_text()
    assert pipeline.run_pipeline(run_dir, through="filter") == []  # both done for this configuration: skipped
    assert done.read_text() == first_finish
    stages = pipeline.plan_stages(pipeline.RunFiles.read(run_dir))
    assert [stage.name for stage in pipeline.stages_to_run(stages)] == ["sft"]

    # a changed filter setting: stage 2 reruns (keeps one per prompt now), stage 1 stays, stage 3 is stale
    ours_path = run_dir / "rlaunch_config.yaml"
    ours = yaml.safe_load(ours_path.read_text())
    ours["rft"]["k"] = 1
    ours_path.write_text(yaml.safe_dump(ours))
    stages = pipeline.plan_stages(pipeline.RunFiles.read(run_dir))
    assert [stage.name for stage in pipeline.stages_to_run(stages)] == ["filter", "sft"]
    assert pipeline.run_pipeline(run_dir, through="filter") == ["filter"]
    assert len(pd.read_parquet(run_dir / "rft" / "filter" / rft_filter.SFT_FILE)) == 3

    # a changed SFT key leaves stages 1 and 2 done
    ours["rft"]["sft"]["optim"]["lr"] = 2e-5
    ours_path.write_text(yaml.safe_dump(ours))
    stages = pipeline.plan_stages(pipeline.RunFiles.read(run_dir))
    assert [stage.name for stage in pipeline.stages_to_run(stages)] == ["sft"]

    # a changed sampling setting (verl's own key) reruns everything from stage 1
    verl_path = run_dir / "verl_config.yaml"
    verl = yaml.safe_load(verl_path.read_text())
    verl["actor_rollout_ref"]["rollout"]["top_p"] = 0.9
    verl_path.write_text(yaml.safe_dump(verl, sort_keys=False))
    stages = pipeline.plan_stages(pipeline.RunFiles.read(run_dir))
    assert [stage.name for stage in pipeline.stages_to_run(stages)] == ["generate", "filter", "sft"]

    # the prompt file replaced: stage 1's inputs changed too
    verl["actor_rollout_ref"]["rollout"]["top_p"] = 1.0
    verl_path.write_text(yaml.safe_dump(verl, sort_keys=False))
    assert [stage.name for stage in pipeline.stages_to_run(pipeline.plan_stages(pipeline.RunFiles.read(run_dir)))] == [
        "sft"
    ]
    train = Path(verl["data"]["train_files"])
    pd.DataFrame(prompt_rows()[:2]).to_parquet(train)
    stages = pipeline.plan_stages(pipeline.RunFiles.read(run_dir))
    assert [stage.name for stage in pipeline.stages_to_run(stages)] == ["generate", "filter", "sft"]
    # starting a stage whose configuration changed clears what the old configuration left
    stages[0].prepare()
    assert not (run_dir / "rft" / "generate" / generate.CANDIDATES_FILE).exists()


# ---------------------------------------------------------------------------------------------------------------------
# stages 1 and 3 launched for real


def test_stage1_runs_verls_generation_server_which_stops_at_its_rollout_engine_check(tmp_path: Path, tiny_model: Path):
    """From a fresh run directory: the prompts are written, then verl.trainer.main_generation_server starts on the
    run's config (Ray up, prompts read) and stops where it loads the rollout engine: no vLLM (nor SGLang) on a CPU
    machine. With an engine installed it would next create its resource pool and hit verl's GPU check."""
    if importlib.util.find_spec("openai") is None:
        require_or_skip("verl's main_generation_server imports openai (vLLM and SGLang install it): pip install openai")
    run_dir = make_run_dir(tmp_path, tiny_model)
    result = run_pipeline_process(run_dir)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert (
        "ValueError: vllm version None not supported and SGLang also not Found. Currently supported vllm versions "
        "are 0.18.0+" in output
    ), output[-3000:]
    assert "verl/trainer/main_generation_server.py" in output  # raised inside verl's own entry point
    assert (
        "rlaunch rft: error: stage generate failed: verl.trainer.main_generation_server exited with code 1"
        in result.stderr
    )
    generate_dir = run_dir / "rft" / "generate"
    assert len(pd.read_parquet(generate_dir / generate.PROMPTS_FILE)) == 4
    assert not (generate_dir / "done.json").exists() and not (run_dir / "rft" / "filter").exists()


def test_stage3_after_a_real_filter_stops_at_verls_gpu_check(tmp_path: Path, tiny_model: Path):
    """Stage 1 done (generated candidates): the job's driver skips it, runs stage 2 for real, composes and writes
    stage 3's config, and stops at verl's resource check (ResourcePoolManager, the check verl's PPO trainer and
    generation server run) before verl's SFT trainer would wait for GPUs that Ray does not have."""
    run_dir = make_run_dir(tmp_path, tiny_model, "trainer.logger=[console,wandb,file]")
    generate_candidates(run_dir)
    result = run_pipeline_process(run_dir)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "rlaunch rft: stage generate: done for this configuration" in result.stdout
    assert "rlaunch rft: stage filter: kept 5 of 24 candidates" in result.stdout
    assert (
        "rlaunch rft: error: stage sft failed: ValueError: Total available GPUs 0 is less than total desired GPUs 1"
        in result.stderr
    ), output[-3000:]
    sft_config = yaml.safe_load((run_dir / "rft" / "sft" / "sft_config.yaml").read_text())
    assert sft_config["data"]["train_files"] == str(run_dir / "rft" / "filter" / rft_filter.SFT_FILE)
    assert (run_dir / "rft" / "filter" / "done.json").exists() and not (run_dir / "rft" / "sft" / "done.json").exists()
    # the filter's statistics also went to the run's W&B run (offline here: no credentials), under the run's id
    run_id = json.loads((run_dir / "plan.json").read_text())["run_id"]
    offline = list((run_dir / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb"))
    assert len(offline) == 1 and b"rft/kept/math" in offline[0].read_bytes()


def wait_for_gpu_node(address: str, head: subprocess.Popen, token: Path, timeout_s: float = 120) -> None:
    """`ray status` in a child process until the head lists its GPU: Ray fixes its auth mode when it is first
    imported, and this test process may have imported it earlier with another mode."""
    from launch import ray_cluster

    ray = str(Path(sys.executable).parent / "ray")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert head.poll() is None, "the Ray head exited"
        status = subprocess.run(
            [ray, "status", f"--address={address}"],
            env=ray_cluster.ray_environment(token),
            capture_output=True,
            text=True,
        )
        if status.returncode == 0 and "GPU" in status.stdout:
            return
        time.sleep(1)
    raise AssertionError(f"the Ray head at {address} did not come up within {timeout_s} s")


def test_stage3_on_a_ray_cluster_with_a_gpu_runs_verls_sft_trainer_to_its_nccl_stop(tmp_path: Path, tiny_model: Path):
    """A Ray head started the way the job starts it (launch/ray_cluster.py) that advertises one GPU (a logical Ray
    resource, as with the dev cluster's fake GRES), and the plan's command with the job's environment: verl's
    resource check passes and verl's SFT trainer itself runs on stage 2's output (its config dataclasses, the
    tokenizer, its dataset, the Ray worker group) until its TrainingWorker opens the NCCL process group."""
    from launch import ray_cluster

    run_dir = make_run_dir(tmp_path, tiny_model)
    generate_candidates(run_dir)
    # its own loopback address: Ray keeps 127.0.0.x other than 127.0.0.1, which it rewrites (docs/facts.md#ray)
    topology = ray_cluster.Topology(
        job_id=os.getpid(), nodes=("rft-test",), addresses=("127.0.0.31",), rank=0, cpus=16, gpus=1
    )
    topology = ray_cluster.with_free_ports(topology, 0)  # as the job does: another Ray may hold the pid's block
    token = ray_cluster.ensure_auth_token(tmp_path, None)
    head = ray_cluster.start_node(topology, 0, tmp_path / "ray_start.log", token)
    try:
        wait_for_gpu_node(topology.head_address, head.process, token)
        result = run_pipeline_process(
            run_dir, env={"RAY_ADDRESS": topology.head_address, **ray_cluster.auth_environment(token)}
        )
    finally:
        ray_cluster.stop_node(head.process)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "rlaunch rft: stage filter: kept 5 of 24 candidates" in result.stdout
    assert "RuntimeError: Distributed package doesn't have NCCL built in" in output, output[-3000:]
    assert "verl/workers/engine_workers.py" in output  # TrainingWorker.__init__, inside verl's SFT worker
    assert "rlaunch rft: error: stage sft failed: verl.trainer.sft_trainer_ray exited with code 1" in result.stderr
    assert not (run_dir / "rft" / "sft" / "done.json").exists()
