"""The command line helps: rlaunch's own --help (groups, our keys one line each, examples), --info, the dev cluster
script's --help, dry runs with cluster=slurm where no SLURM answers, and refusals that leave nothing behind."""

from __future__ import annotations

import dataclasses
import itertools
import re
import subprocess
from pathlib import Path
from typing import get_args

import pytest
from conftest import PROJECT, compose_config, run_cli, run_here

from launch.choices import OUR_GROUPS
from launch.cli_help import GROUP_COLUMN, KEY_COLUMN, PIPED_WIDTH, SECTIONS, field_docs, section
from launch.errors import UserError
from launch.schema import ContainerSettings, LaunchSettings, choices_of
from launch.validate import check_launch_settings


def test_help_lists_our_groups_keys_and_examples_not_the_config_dump(tmp_path: Path):
    result = run_cli("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "gpu=a100_40|a100_80|a40|a6000|[auto]|b200|h100|h20|h200|h800|l40s|rtx6000ada" in out
    assert "algo=[guru_baseline]|mtl_pcgrad|rft" in out
    for group in ("mode=", "llm=", "dataset=", "cluster=[auto]|local|ray|slurm", "backend=[fsdp]|megatron"):
        assert group in out, group
    lines = out.splitlines()
    for root, cls in SECTIONS.items():
        for key, doc in field_docs(cls).items():
            at = next((i for i, line in enumerate(lines) if line.strip().startswith(f"{root}.{key}=")), None)
            # a root the template does not pull in: conf/hydra/help/rlaunch.yaml needs its ${rlaunch_help:keys,<root>}
            assert at is not None, f"{root}.{key} is missing from --help"
            # the key's line and the lines its description wraps onto: all of the description, never cut
            block = [lines[at], *itertools.takewhile(lambda line: line.startswith(" " * KEY_COLUMN), lines[at + 1 :])]
            assert doc and " ".join(" ".join(block).split()).endswith(doc), f"{root}.{key}: its comment, whole"
            assert all(len(line) <= PIPED_WIDTH for line in block[1:]), block
    assert "..." not in out.split("== rlaunch's own keys")[1].split("== Examples")[0]
    assert "== Examples ==" in out and "launch.dry_run=true" in out
    assert "--cfg,-c" in out  # Hydra's flags
    assert "actor_rollout_ref:" not in out, "--help must not dump the composed config"
    assert len(out.splitlines()) < 200  # the composed config alone is thousands of lines
    assert not any(tmp_path.iterdir()), "--help writes nothing"


def test_help_wraps_to_the_terminal_and_names_every_readiness_check(tmp_path: Path):
    result = run_cli("--help", cwd=tmp_path, env={"COLUMNS": "150"})
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  launch.skip_checks="))
    assert 100 < len(lines[at]) <= 150 and lines[at + 1].startswith(" " * KEY_COLUMN)
    names = ", ".join(choices_of(LaunchSettings, "skip_checks"))
    assert " ".join(" ".join(lines[at : at + 2]).split()).endswith(names)


def test_help_marks_the_options_in_use(tmp_path: Path):
    result = run_cli("--help", "gpu=h100", "cluster.array_parallelism=4", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "gpu=a100_40|a100_80|a40|a6000|auto|b200|[h100]|h20|h200" in result.stdout
    assert re.search(r"cluster\.array_parallelism=4 +at most", result.stdout)


def test_info_works_with_the_overrides_rlaunch_adds(tmp_path: Path):
    result = run_cli("--info", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Defaults List" in result.stdout and "RlaunchSlurmLauncher" in result.stdout
    searchpath = run_cli("--info", "searchpath", "gpu=a40", cwd=tmp_path)
    assert searchpath.returncode == 0, searchpath.stderr[-2000:]
    assert re.search(r"file://\S+/verl/trainer/config", searchpath.stdout), searchpath.stdout


def test_dev_cluster_script_prints_its_usage():
    for flag in ("--help", "-h"):
        result = subprocess.run(
            ["bash", str(PROJECT / "scripts" / "dev_cluster.sh"), flag], capture_output=True, text=True
        )
        assert result.returncode == 0 and "usage:" in result.stdout and "--max-array-size" in result.stdout
    wrong = subprocess.run(
        ["bash", str(PROJECT / "scripts" / "dev_cluster.sh"), "up", "--bogus"], capture_output=True, text=True
    )
    assert wrong.returncode == 2 and "--help" in wrong.stderr


def test_slurm_dry_run_without_slurm_renders_scripts_and_says_what_is_unknown(tmp_path: Path):
    """run_cli drops SLURM_CONF: no controller answers here, as on a laptop."""
    args = ["cluster=slurm", f"cluster.shared_dir={tmp_path}", "gpu=a40,h100", "cluster.array_parallelism=2"]
    result = run_cli(*args, "launch.dry_run=true", "-m", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("#SBATCH --gres=gpu:8") == 2  # one array per shape, each script shown
    assert (
        "no SLURM answers here (sinfo): the partition's limits, GPU type and MaxArraySize are UNKNOWN" in result.stdout
    )
    assert "--partition" not in result.stdout

    refused = run_cli("cluster=slurm", f"cluster.shared_dir={tmp_path / 'real'}", cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.startswith("rlaunch: error: cluster=slurm but no SLURM answers here (sinfo)")
    assert "launch.dry_run=true" in refused.stderr and not (tmp_path / "real").exists()


def test_a_rejected_invocation_leaves_nothing_behind(tmp_path: Path):
    for args in (["data.train_batch_size=0"], ["data.train_batch_size=0,512", "-m"], ["gpu=a50"]):
        result = run_here(*args, cwd=tmp_path)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
        assert not any(tmp_path.iterdir()), f"{args} left {[str(p) for p in tmp_path.rglob('*')]}"


def test_each_key_with_choices_names_them_in_its_help_line_and_its_refusal():
    """The Literal a schema field names is the one list of its values: validation reads it (choices_of), and the
    field's help comment must not drift from it."""
    for root, cls in [*SECTIONS.items(), ("cluster.container", ContainerSettings)]:
        docs = field_docs(cls)
        for item in dataclasses.fields(cls):
            if "choices" in item.metadata:
                for value in get_args(item.metadata["choices"]):
                    assert value in docs[item.name], f"{root}.{item.name}: its comment omits '{value}'"
    for name in ("dry_run", "preflight", "wandb_mode"):
        allowed = ", ".join(choices_of(LaunchSettings, name))
        with pytest.raises(UserError, match=f"launch.{name}=bogus is not one of {allowed}$"):
            check_launch_settings(compose_config(f"launch.{name}=bogus"))


def piped_sections(monkeypatch: pytest.MonkeyPatch, *overrides: str) -> dict[str, str]:
    """Every section cli_help gives the help template, as a pipe gets it (no terminal: PIPED_WIDTH)."""
    monkeypatch.setenv("COLUMNS", str(PIPED_WIDTH))
    cfg = compose_config(*overrides)
    texts = {f"group {group}": section("group", group, _root_=cfg) for group in OUR_GROUPS}
    texts |= {f"keys {root}": section("keys", root, _root_=cfg) for root in SECTIONS}
    return texts | {"flags": section("flags", _root_=cfg)}


@pytest.mark.parametrize("algo", ["guru_baseline", "rft"])
def test_every_line_the_help_sections_give_fits_100_columns_piped(monkeypatch: pytest.MonkeyPatch, algo: str):
    """A long group (llm's 15 options) continues on further lines after a '|', a long value after a ',', Hydra's
    flags at their own indent; nothing is cut (a '$' is doubled for Hydra's string.Template)."""
    for name, text in piped_sections(monkeypatch, f"algo={algo}").items():
        text = text.replace("$$", "$")
        start = GROUP_COLUMN if name.startswith("group") else 0
        for number, line in enumerate(text.splitlines()):
            assert len(line) + (start if number == 0 else 0) <= PIPED_WIDTH, f"{name}: {line!r}"
    llm = piped_sections(monkeypatch)["group llm"]
    assert len(llm.splitlines()) > 1
    options = sorted(path.stem for path in (PROJECT / "conf" / "llm").glob("*.yaml"))
    assert "".join(line.strip() for line in llm.splitlines()) == "llm=" + "|".join(options)
    flags = piped_sections(monkeypatch)["flags"]
    assert "https://hydra.cc/docs/1.2/tutorials/basic/running_your_app/tab_completion#zsh-instructions" in flags
    assert "--multirun,-m : Run multiple jobs" in flags


def test_help_shows_structured_values_as_they_are_typed_on_the_command_line(tmp_path: Path):
    """Hydra's override syntax, never Python's repr ({'runtime': None, ...})."""
    result = run_cli("--help", "algo=rft", "+cluster.env.NCCL_DEBUG=INFO", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "cluster.container={runtime:null,image:null,mounts:[],workdir:null,env:{},python:'python'}" in out
    assert "cluster.env={NCCL_DEBUG:'INFO'}" in out and "launch.skip_checks=[]" in out
    keys = out.split("== rlaunch's own keys")[1].split("== Examples")[0]
    assert not re.search(r"\{'|\bNone\b|\bTrue\b|\bFalse\b", keys), keys


@pytest.mark.parametrize("args", [(), ("algo=rft",)])
def test_piped_help_keeps_every_line_to_100_columns(tmp_path: Path, args: tuple[str, ...]):
    """The template's own text too (conf/hydra/help/rlaunch.yaml), and Hydra's flags through ${rlaunch_help:flags}."""
    result = run_cli("--help", *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert [line for line in result.stdout.splitlines() if len(line) > PIPED_WIDTH] == []
