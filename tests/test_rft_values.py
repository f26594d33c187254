"""algo=rft's values as a user gives them: the preflight judges the phases RFT runs (stage 1's engine, stage 3's SFT
update at stage 3's own batch sizes), every rft.* value is typed and ranged with a one-line refusal that names the
key the user set, and rft.* under another algo is refused instead of ignored."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Result, compose_config, cpu_facts
from omegaconf import OmegaConf, open_dict

from launch import preflight
from launch.errors import UserError
from launch.plan import make_plan
from launch.ranges import SFT_RANGES, Range, check_ranges
from launch.verdict import Verdict


def judged(*overrides: str) -> tuple[Verdict, dict[str, Any]]:
    """The preflight of one planned job, as launch/run.py judges it: the verdict and the keys its policy sets."""
    cfg = compose_config(*overrides)
    plan = make_plan(cfg, cpu_facts(), list(overrides), Path("/tmp"), "python")
    return preflight.judge(cfg, plan.verl, plan.llm, plan.overrides, {})


# --- the preflight judges what RFT runs ------------------------------------------------------------------------------


def test_rft_is_judged_on_its_generation_and_its_sft_update_only_whatever_ppo_keys_say():
    """RFT generates (verl's generation server: the engine alone) and fine-tunes (verl's SFT trainer): no log-prob
    pass, no critic under adv_estimator=gae, no reference model under use_kl_loss, no engine weights in host RAM."""
    plain, _ = judged("algo=rft", "gpu=a100_80")
    ppo_keys, _ = judged(
        "algo=rft", "gpu=a100_80", "algorithm.adv_estimator=gae", "actor_rollout_ref.actor.use_kl_loss=true"
    )
    for verdict in (plain, ppo_keys):
        assert list(verdict.phases) == ["training", "rollout"]
        terms = {term for phase in verdict.phases.values() for term in phase.terms}
        assert not terms & {"critic state", "ref params", "actor state"}
        assert verdict.phases["rollout"].terms["resident trainer state"] == 0.0
    assert ppo_keys.peaks_gib == plain.peaks_gib and ppo_keys.host_ram_gib_per_node == plain.host_ram_gib_per_node
    assert ppo_keys.knobs is not None and not ppo_keys.knobs.critic and not ppo_keys.knobs.ref_model
    baseline, _ = judged("algo=guru_baseline", "gpu=a100_80")
    # the sleeping PPO engine keeps its weights in host RAM; RFT's standalone engine never sleeps
    assert plain.host_ram_gib_per_node < baseline.host_ram_gib_per_node


def test_rft_training_phase_takes_stage_3s_own_batch_sizes():
    """rft.sft.data.* (verl's SFT tree) size the update, not the PPO actor's mini-batch x rollout.n."""
    default, _ = judged("algo=rft", "gpu=a100_80")
    assert default.knobs is not None and default.knobs.mini_batch_sequences == 64  # conf/algo/rft.yaml: 64 samples
    # 8 samples a step over 8 GPUs: one 12288-token sample per micro-batch, below the profile's 16384 budget
    small, _ = judged("algo=rft", "gpu=a100_80", "rft.sft.data.train_batch_size=8")
    assert small.knobs is not None and small.knobs.mini_batch_sequences == 8
    assert small.phases["training"].peak_gib < default.phases["training"].peak_gib
    budget, _ = judged("algo=rft", "gpu=a100_80", "+rft.sft.data.max_token_len_per_gpu=49152")
    assert budget.knobs is not None and budget.knobs.train_tokens == 49152
    assert budget.phases["training"].peak_gib > default.phases["training"].peak_gib
    micro, _ = judged(
        "algo=rft", "gpu=a100_80", "+rft.sft.data.use_dynamic_bsz=false", "+rft.sft.data.micro_batch_size_per_gpu=3"
    )
    assert micro.knobs is not None and micro.knobs.train_tokens == 3 * (4096 + 8192)


def test_rft_fix_and_tune_set_stage_3s_keys_never_a_log_prob_one():
    """What fix and tune change must reach stage 3: its rft.sft keys. A knob the user set, on rft.sft or on the PPO
    actor key stage 3 follows, stays theirs."""
    _, tuned = judged("algo=rft", "gpu=a100_80", "launch.preflight=tune")
    assert "rft.sft.data.max_token_len_per_gpu" in tuned
    assert not any("log_prob" in key or key.startswith("actor_rollout_ref.actor.") for key in tuned)
    for theirs in (
        "+rft.sft.data.max_token_len_per_gpu=65536",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=65536",
    ):
        verdict, fixed = judged("algo=rft", "gpu=a40", theirs, "launch.preflight=fix")
        assert not verdict.fits and verdict.misfit == "training"
        assert "rft.sft.data.max_token_len_per_gpu=32768" in verdict.first_fitting_fixes  # the advice names it
        assert "rft.sft.data.max_token_len_per_gpu" not in fixed  # but fix never changes what they set
        assert not any(key.startswith("actor_rollout_ref.actor.") or "log_prob" in key for key in fixed)


def test_the_preflight_reads_stage_3s_config_and_refuses_one_that_does_not_compose_in_one_line():
    with pytest.raises(UserError) as caught:
        judged("algo=rft", "+rft.sft.data.no_such_key=1")
    assert str(caught.value).startswith("rft.sft.data.no_such_key does not compose over verl's sft_trainer_engine")
    assert "\n" not in str(caught.value)


# --- typed and ranged, naming the key the user set -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("rft.sft.data.train_batch_size=0", "rft.sft.data.train_batch_size=0: must be an integer >= 1"),
        ("rft.sft.optim.lr=-1", "rft.sft.optim.lr=-1: must be a number > 0 (verl's OptimizerConfig.lr is float)"),
        ("rft.sft.optim.lr=abc", "rft.sft.optim.lr=abc: must be a number > 0"),
        ("rft.sft.trainer.save_freq=0", "rft.sft.trainer.save_freq=0: must be -1 (never) or an integer >= 1 or "),
        ("rft.sft.trainer.total_epochs=0", "rft.sft.trainer.total_epochs=0: must be an integer >= 1"),
        ("+rft.sft.data.max_length=-5", "rft.sft.data.max_length=-5: must be an integer >= 1"),
        ("+rft.sft.model.lora_rank=-8", "rft.sft.model.lora_rank=-8: must be an integer >= 0"),
        ("+rft.sft.optim.betas=[0.9,2]", "rft.sft.optim.betas=[0.9,2]: must be two decay rates in [0, 1)"),
        ("+rft.sft.engine.param_offload=no", "rft.sft.engine.param_offload=no: must be true or false"),
        # the user's key, not the rollout key algo=rft derives from it (actor_rollout_ref.rollout.n / temperature)
        ("rft.oversample=0", "rft.oversample=0: must be an integer >= 1 (rlaunch's RftSettings.oversample is int)"),
        ("rft.temperature=-1", "rft.temperature=-1: must be a number >= 0"),
        ("rft.k=0", "rft.k=0: must be an integer >= 1"),
    ],
)
def test_a_bad_rft_value_is_refused_in_one_line_naming_the_key_set(
    cli: Callable[..., Result], tmp_path: Path, override: str, line: str
):
    result = cli("algo=rft", override, "launch.dry_run=true")
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rlaunch: error: {line}"), lines
    assert "actor_rollout_ref.rollout" not in lines[0]
    assert not any(tmp_path.iterdir()), "a refusal writes nothing"


@pytest.mark.parametrize(("key", "allowed"), list(SFT_RANGES.items()), ids=list(SFT_RANGES))
def test_every_key_of_the_sft_table_refuses_a_value_outside_and_a_word(key: str, allowed: Range):
    """The whole of stage 3's table, each key set on algo=rft's composed config as `+rft.sft.<key>=...` sets it."""
    composed = compose_config("algo=rft")
    check_ranges(composed)
    for value in (allowed.low if allowed.low_open else allowed.low - 1, "many"):
        cfg = copy.deepcopy(composed)
        with open_dict(cfg):
            OmegaConf.update(cfg, key, value, force_add=True)
        with pytest.raises(UserError, match=rf"^{re.escape(key)}={value}: must be "):
            check_ranges(cfg)


def test_an_sft_frequency_takes_verls_word_and_refuses_the_zero_verl_divides_by():
    """verl's SFT trainer reads save_freq=after_each_epoch as its epoch's step count, and 0 as a divisor."""
    check_ranges(compose_config("algo=rft", "rft.sft.trainer.save_freq=after_each_epoch"))
    with pytest.raises(UserError, match="global_step % 0"):
        check_ranges(compose_config("algo=rft", "rft.sft.trainer.test_freq=0"))


@pytest.mark.parametrize(
    ("override", "line"),
    [
        # stage 3's budget follows the actor's: the refusal names the key the user set, not rft.sft's
        (
            "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=1000",
            "actor_rollout_ref.actor.ppo_max_token_len_per_gpu (1000) cannot hold one sample of "
            "data.max_prompt_length + data.max_response_length (12288)",
        ),
        ("+rft.sft.data.max_length=20000", "cannot hold one sample of rft.sft.data.max_length (20000)"),
    ],
)
def test_a_stage_3_refusal_names_the_key_its_value_came_from(cli: Callable[..., Result], override: str, line: str):
    result = cli("algo=rft", "gpu=a100_80", override, "launch.dry_run=true")
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and line in lines[0], lines


def test_rft_plans_under_backend_megatron_its_sft_stage_on_verls_sft_defaults(cli: Callable[..., Result]):
    """A Megatron actor has no fsdp_config for stage 3 to follow (launch/auto.py drops the profile's FSDP knobs):
    stage 3's offload keeps verl's SFT default, and the refusal named rft.sft for a key nobody set."""
    result = cli("algo=rft", "gpu=a100_80", "backend=megatron", "launch.dry_run=json")
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads(result.stdout)
    assert "fsdp_config" not in plan["verl"]["actor_rollout_ref"]["actor"]
    assert list(plan["preflight"]["phases"]) == ["training", "rollout"]


def test_the_rft_plan_says_what_its_generation_stage_does(cli: Callable[..., Result]):
    """verl's generation server sends every prompt at once (no train_batch_size batches), and its engine generates
    alone: it never sleeps, so nothing of the PPO engine's host-RAM sleep applies. A Megatron actor's stage 3 is verl's
    FSDP SFT trainer: its log-prob line stays."""
    for backend in ("fsdp", "megatron"):
        result = cli("algo=rft", "gpu=a100_80", f"backend={backend}", "launch.dry_run=true")
        assert result.returncode == 0, result.stderr[-2000:]
        assert (
            "(every prompt at once: the engine batches them)" in result.stdout
            and "-prompt batches" not in result.stdout
        )
        assert "it generates alone and never sleeps (algo=rft)" in result.stdout and "asleep it" not in result.stdout
        assert "job software  pure-torch log-probs" in result.stdout


# --- rft.* only where it takes effect --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "written", "algo"),
    [
        (["algo=guru_baseline", "rft.oversample=4"], "rft.oversample=4", "guru_baseline"),
        (["rft.k=2"], "rft.k=2", "guru_baseline"),
        (["algo=mtl_pcgrad", "+rft.sft.optim.betas=[0.9,0.95]"], "+rft.sft.optim.betas=[0.9,0.95]", "mtl_pcgrad"),
        (["gpu=a40,h100", "rft.oversample=4", "-m"], "rft.oversample=4", "guru_baseline"),
    ],
)
def test_rft_keys_under_another_algo_are_refused_not_ignored(
    cli: Callable[..., Result], tmp_path: Path, args: list[str], written: str, algo: str
):
    result = cli(*args, "launch.dry_run=true")
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{written}: rft.* takes effect only with algo=rft" in lines[0], lines
    assert f"this run is algo={algo}: add algo=rft" in lines[0]
    assert not any(tmp_path.iterdir())


def test_a_sweep_with_algo_rft_takes_rft_keys_for_its_rft_jobs_alone(cli: Callable[..., Result]):
    refused = cli("algo=guru_baseline,mtl_pcgrad", "rft.oversample=32", "launch.dry_run=json", "-m")
    assert refused.returncode == 2 and "rft.* takes effect only with algo=rft" in refused.stderr
    result = cli("algo=guru_baseline,rft", "rft.oversample=32", "launch.dry_run=json", "-m")
    assert result.returncode == 0, result.stderr[-2000:]
    plans = {plan["driver"]: plan for plan in map(json.loads, result.stdout.splitlines())}
    assert plans.keys() == {"ppo", "rft"}
    assert plans["rft"]["verl"]["actor_rollout_ref"]["rollout"]["n"] == 32


def test_the_fit_table_of_an_rft_run_shows_no_log_prob_pass(capsys: pytest.CaptureFixture[str]):
    """RFT runs no log-prob pass: its table had died on the missing column (KeyError: 'log-prob')."""
    from launch import fit_table

    table = [row for row in fit_table.rows(["algo=rft"], (1,)) if row["gpu"] == "h100"]
    assert table and "log-prob" not in table[0]["peaks_gib"]
    fit_table.print_table(table, "algo=rft")
    row = next(line for line in capsys.readouterr().out.splitlines() if "h100" in line)
    assert [cell.strip() for cell in row.split("│")][4] == "-"
