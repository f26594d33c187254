"""Logs of `srun --label` (every task's line behind its task number, as users' own sbatch scripts often run it) read
as the same logs unlabelled; a missing script (`python: can't open file ...`) and a Hydra `_target_` it cannot import
are config errors whose fix names the path, the target and the missing module. Every message is the real one, made
by running this venv's Python, verl and hydra-core; the labels are srun's, as the dev cluster's srun wrote them
(right-aligned to the widest task number, SLURM's own lines unlabelled)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from launch.report import failures
from launch.report.doctor import classify_log
from launch.report.failures.signatures import unlabelled


def ran(*args: str, cwd: Path | None = None) -> str:
    """What this venv's Python printed for a command that failed: the log a job's task writes."""
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    assert done.returncode != 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def labelled(text: str, task: int = 0, width: int = 1) -> str:
    """`text` as srun --label writes a task's lines: its number right-aligned to `width`, then ': ' (an empty line
    keeps the label and its space)."""
    return "".join(f"{task:>{width}}: {line}\n" for line in text.splitlines())


def test_a_labelled_python_m_failure_reads_as_the_unlabelled_one(tmp_path: Path):
    log = ran("-m", "verl.trainer.no_such_main")
    # as the dev cluster's two-node `srun --label` wrote it: the script's own echo, both tasks, srun's summary lines
    srun = (
        "starting\n"
        + labelled(log, 1)
        + labelled(log, 0)
        + "srun: error: c2: task 1: Exited with exit code 1\nsrun: error: c1: task 0: Exited with exit code 1\n"
    )
    plain = failures.classify(log)
    read = failures.classify(srun)
    assert plain.kind == read.kind == "config_error"
    assert read.fix == plain.fix
    # the evidence as classify read it, without the label: the one-line cause reads the module first
    assert read.evidence == [f"{sys.executable}: No module named verl.trainer.no_such_main"]
    assert read.short() == "config_error: No module named verl.trainer.no_such_main"
    path = tmp_path / "slurm-7.out"
    path.write_text(srun)
    assert classify_log(path, False).splitlines()[-1] == "outcome: failed on config_error"


def test_a_labelled_reward_loader_failure_of_twelve_tasks_reads_as_the_unlabelled_one(tmp_path: Path):
    (tmp_path / "scorer.py").write_text("def other(data_source, solution_str, ground_truth):\n    pass\n")
    code = (
        "from omegaconf import OmegaConf\n"
        "from verl.trainer.ppo.reward import get_custom_reward_fn\n"
        f"reward = {{'custom_reward_function': {{'path': '{tmp_path / 'scorer.py'}', 'name': 'compute_score'}}}}\n"
        "get_custom_reward_fn(OmegaConf.create({**reward, 'reward': reward}))\n"
    )
    log = ran("-c", code)
    plain = failures.classify(log)
    read = failures.classify(labelled(log, 3, width=2) + "srun: error: c2: task 3: Exited with exit code 1\n")
    assert plain.kind == read.kind == "reward_error"
    said = f"reward_error: compute_score not found in {tmp_path / 'scorer.py'}"
    assert read.short(200) == plain.short(200) == said
    assert read.node == "c2"


def test_a_log_that_only_has_some_lines_starting_with_a_number_and_colon_is_left_as_it_is():
    log = "epoch 3\n12: 0.5 loss\nTraceback (most recent call last):\nValueError: bad value\nmore text\n"
    assert unlabelled(log) == log
    # a labelled log's empty lines keep their bare label; SLURM's own lines never carry one
    srun = " 0: a\n 0:\n10: b\nsrun: error: c1: task 10: Exited with exit code 1\n"
    assert unlabelled(srun) == "a\n\nb\nsrun: error: c1: task 10: Exited with exit code 1"


def test_a_missing_script_is_a_config_error_naming_its_path(tmp_path: Path):
    script = tmp_path / "gone" / "run.py"
    log = ran(str(script))
    assert f"can't open file '{script}': [Errno 2] No such file or directory" in log
    for text in (log, labelled(log) + "srun: error: c1: task 0: Exited with exit code 2\n"):
        failure = failures.classify(text)
        assert failure.kind == "config_error"
        assert failure.short(200) == f"config_error: script not found: {script}"
        assert f"the job's script {script} does not exist where the job ran ({sys.executable})" in failure.fix
        assert failure.details["script"] == str(script)


def hydra_log(tmp_path: Path, target: str, *, app: bool = False) -> str:
    """What hydra-core prints instantiating `target`: from a script's own call (the whole chain), or from a
    @hydra.main app (Hydra's short form, the config key after it)."""
    package = tmp_path / "pk"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "badimp.py").write_text("import not_installed_pkg_xyz\n\n\nclass Cls:\n    pass\n")
    if not app:
        call = f"from hydra.utils import instantiate\ninstantiate({{'_target_': '{target}'}})\n"
        return ran("-c", call, cwd=tmp_path)
    (tmp_path / "conf").mkdir(exist_ok=True)
    (tmp_path / "conf" / "config.yaml").write_text(f"reward:\n  _target_: {target}\n")
    (tmp_path / "app.py").write_text(
        "import hydra\nfrom hydra.utils import instantiate\n\n\n"
        "@hydra.main(version_base=None, config_path='conf', config_name='config')\n"
        "def main(cfg):\n    instantiate(cfg.reward)\n\n\nmain()\n"
    )
    return ran("app.py", f"hydra.run.dir={tmp_path / 'out'}", cwd=tmp_path)


def test_a_hydra_target_whose_module_imports_a_missing_one_names_both(tmp_path: Path):
    log = hydra_log(tmp_path, "pk.badimp.Cls")
    for text in (log, labelled(log)):
        failure = failures.classify(text)
        assert failure.kind == "config_error"
        assert failure.short() == "config_error: Hydra could not locate target 'pk.badimp.Cls'"
        assert failure.evidence[1] == "ModuleNotFoundError(\"No module named 'not_installed_pkg_xyz'\")"
        assert "its module imports not_installed_pkg_xyz, which is not installed in the job's Python" in failure.fix
        assert failure.details == {"target": "pk.badimp.Cls", "module": "not_installed_pkg_xyz"}


def test_a_hydra_target_missing_its_module_or_its_name_says_which(tmp_path: Path):
    missing_module = failures.classify(hydra_log(tmp_path, "my_rewards.scorer.Scorer"))
    assert missing_module.kind == "config_error"
    assert "the module my_rewards is not importable in the job's Python" in missing_module.fix
    missing_name = failures.classify(hydra_log(tmp_path, "pk.Missing"))
    assert missing_name.kind == "config_error"
    assert "Hydra could not locate the _target_ pk.Missing: pk has no Missing" in missing_name.fix


def test_a_hydra_app_s_short_form_names_the_target_and_its_config_key(tmp_path: Path):
    log = hydra_log(tmp_path, "pk.badimp.Cls", app=True)
    assert "Error locating target 'pk.badimp.Cls'" in log and "full_key: reward" in log
    failure = failures.classify(log)
    assert failure.kind == "config_error"
    assert failure.fix.startswith(
        "Hydra could not locate the _target_ pk.badimp.Cls (reward._target_): no module or object of that name"
    )
    assert "HYDRA_FULL_ERROR=1 shows the import error" in failure.fix
