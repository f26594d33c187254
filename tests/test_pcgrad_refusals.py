"""A run that selects PCGrad and would run without it, or fail only at its first actor update, is refused before the
queue in one line naming key, value and fix (algos/pcgrad_checks.py, launch/validate.py::check_pcgrad)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import compose_config
from tiny_assets import make_tiny_dataset

from launch.errors import UserError
from launch.run import plan_job
from launch.steptime import PCGRAD_UPDATE_FACTOR


def data(tmp_path: Path, domains: tuple[str, ...] = ("math", "logic")) -> list[str]:
    train, val = make_tiny_dataset(tmp_path / "data", domains, per_source=64)
    return [f"data.train_files={train}", f"data.val_files={val}", "launch.skip_checks=[model,hub_cache]"]


def planned(tmp_path: Path, *overrides: str):
    given = ["algo=mtl_pcgrad", "gpu=h100", "data.train_batch_size=64", *data(tmp_path), *overrides]
    cfg = compose_config(f"launch.runs_dir={tmp_path / 'runs'}", "launch.dry_run=true", *given)
    return plan_job(cfg, given)


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("trainer.use_v1=false", "trainer.use_v1=false with algo=mtl_pcgrad: verl's legacy trainer never reads"),
        ("backend=megatron", "backend=megatron with algo=mtl_pcgrad: the PCGrad plug-in reads FSDP's"),
        ("algo.pcgrad.task_key=foo", "algo.pcgrad.task_key=foo: no such field in verl's batch (the train files'"),
    ],
)
def test_a_pcgrad_run_that_would_not_run_pcgrad_is_refused_before_the_queue(tmp_path: Path, override: str, says: str):
    with pytest.raises(UserError) as refused:
        planned(tmp_path, override)
    message = str(refused.value)
    assert message.startswith(says) and "\n" not in message


def test_a_task_key_that_is_a_column_of_the_data_plans(tmp_path: Path):
    assert planned(tmp_path, "algo.pcgrad.task_key=ability").verl["trainer"]["v1"]["trainer_mode"] == "mtl_pcgrad"


def test_the_task_key_fix_pastes(tmp_path: Path):
    with pytest.raises(UserError) as refused:
        planned(tmp_path, "algo.pcgrad.task_key=foo")
    fix = str(refused.value).rsplit("write ", 1)[1]
    assert planned(tmp_path, fix).verl["trainer"]["v1"]["trainer_mode"] == "mtl_pcgrad"


FOLD_ALL_INTO_MATH = ("+algo.pcgrad.task_map.logic=math",)


def test_the_preflight_counts_the_tasks_the_task_map_leaves(tmp_path: Path):
    """Two domains folded into one task: one buffer of the policy's size, not two (helper-35's six-domain case: 3.5 GiB
    of buffers, planned as 21.3)."""
    folded = planned(tmp_path, *FOLD_ALL_INTO_MATH).preflight
    apart = planned(tmp_path).preflight
    assert folded.knobs.pcgrad_tasks == 1 and apart.knobs.pcgrad_tasks == 2


def test_pcgrad_with_a_single_task_suggests_the_baseline(tmp_path: Path):
    warned = [line for line in planned(tmp_path, *FOLD_ALL_INTO_MATH).warnings if "single task" in line]
    assert len(warned) == 1 and "algo=guru_baseline" in warned[0]
    assert not [line for line in planned(tmp_path).warnings if "single task" in line]


def test_pcgrads_update_is_timed_at_its_measured_cost_and_says_so(tmp_path: Path):
    pcgrad = planned(tmp_path).time
    given = ["algo=guru_baseline", "gpu=h100", "data.train_batch_size=64", *data(tmp_path)]
    cfg = compose_config(f"launch.runs_dir={tmp_path / 'runs'}", "launch.dry_run=true", *given)
    baseline = plan_job(cfg, given).time
    assert pcgrad.phases_s["update"] == pytest.approx(baseline.phases_s["update"] * PCGRAD_UPDATE_FACTOR, abs=0.1)
    assert {phase: pcgrad.phases_s[phase] for phase in ("generate", "log_prob", "other")} == {
        phase: baseline.phases_s[phase] for phase in ("generate", "log_prob", "other")
    }
    assert "measured on 1 GPU" in pcgrad.sources["update"] and baseline.sources["update"] == "model"
