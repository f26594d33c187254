"""Values from verl's own example scripts that verl 0.9.1 accepts at start-up and then fails on in the job, or runs
other than the script means: refused before anything is queued, one line naming the key, the value and the fix
(a probe pasting verl's examples found them planned as fine).

- LoRA's rank under the other engine's key: `model.lora.rank` (Megatron's) under FSDP, `model.lora_rank` (FSDP's)
  under Megatron (examples/grpo_trainer/run_qwen2-7b_math_megatron_lora.sh writes `lora.rank`).
- DAPO's overlong buffer longer than `max_resp_len`, or on without it (verl's DAPO reward manager asserts both).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Result

LORA_FSDP_SCRIPT = ("algo=verl", "actor_rollout_ref.model.lora.rank=64", "launch.dry_run=true")


def refused(result: Result) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_megatrons_lora_key_under_fsdp_is_refused_naming_fsdps(cli, tmp_path: Path):
    line = refused(cli(*LORA_FSDP_SCRIPT))
    assert "actor_rollout_ref.model.lora.rank=64" in line and "fsdp engine reads" in line
    assert "write actor_rollout_ref.model.lora_rank=64" in line and "no adapter" in line
    assert not list(tmp_path.rglob("plan.json"))


def test_fsdps_lora_key_under_megatron_is_refused_naming_megatrons(cli):
    line = refused(cli("algo=verl", "backend=megatron", "actor_rollout_ref.model.lora_rank=16", "launch.dry_run=true"))
    assert "actor_rollout_ref.model.lora_rank=16" in line and "megatron engine reads" in line
    assert "write actor_rollout_ref.model.lora.rank=16" in line


@pytest.mark.parametrize(
    "args",
    [
        ("actor_rollout_ref.model.lora_rank=64",),  # FSDP's own key: planned as LoRA
        ("actor_rollout_ref.model.lora.rank=64", "actor_rollout_ref.model.lora_rank=64"),  # both: the engine's is set
    ],
)
def test_the_engines_own_lora_key_plans(cli, args: tuple[str, ...]):
    result = cli("algo=verl", *args, "launch.dry_run=true")
    assert result.returncode == 0, result.stderr[-2000:]


DAPO = ("algo=verl", "reward.reward_manager.name=dapo", "launch.dry_run=true", "data.max_response_length=8192")
BUFFER = "+reward.reward_kwargs.overlong_buffer_cfg"


def test_an_overlong_buffer_longer_than_max_resp_len_is_refused(cli):
    line = refused(
        cli(
            *DAPO,
            f"{BUFFER}={{enable:true,len:9000,penalty_factor:1.0,log:false}}",
            "+reward.reward_kwargs.max_resp_len=8192",
        )
    )
    assert "overlong_buffer_cfg.len=9000 is longer than reward.reward_kwargs.max_resp_len=8192" in line
    assert "asserts" in line


def test_an_overlong_buffer_on_without_max_resp_len_is_refused_with_the_response_length(cli):
    line = refused(cli(*DAPO, f"{BUFFER}={{enable:true,len:4096,penalty_factor:1.0,log:false}}"))
    assert "enable=true without reward.reward_kwargs.max_resp_len" in line
    assert "+reward.reward_kwargs.max_resp_len=8192" in line


def test_dapos_recipe_buffer_plans(cli):
    result = cli(
        *DAPO,
        f"{BUFFER}={{enable:true,len:4096,penalty_factor:1.0,log:false}}",
        "+reward.reward_kwargs.max_resp_len=8192",
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_verl_08s_reward_loop_switch_is_dropped_not_respelt(cli):
    """reward_model.use_reward_loop was verl 0.8's switch (verl's examples still set it); a loose spelling match had
    offered reward_loop_source, a different setting. A near miss still gets its spelling."""
    line = refused(cli("algo=verl", "reward_model.use_reward_loop=True", "launch.dry_run=true"))
    assert line.endswith("drop it") and "did you mean" not in line
    line = refused(cli("algo=verl", "reward_model.reward_loop_sorce=x", "launch.dry_run=true"))
    assert "(did you mean 'reward_loop_source'?)" in line
