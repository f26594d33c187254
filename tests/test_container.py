"""Containers (launch/container.py): the sbatch scripts for pyxis, apptainer and the host as golden files, and bad
settings.
Neither runtime can run on this machine (no enroot/pyxis plugin in Debian's SLURM, no apptainer package): the README
says how to try them on a site."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import compose_config, cpu_facts, run_cli

from launch import slurm
from launch.errors import UserError
from launch.facts import PartitionFacts
from launch.plan import make_plan
from launch.render import render
from launch.snapshot import CodeSnapshot

GOLDEN = Path(__file__).parent / "golden"
SITE = [
    "cluster=slurm",
    "cluster.shared_dir=/shared/alice",
    "cluster.setup=[]",  # the host venv's activation has no place in an image
    "gpu=a100_80",
    "mode=quick_test",
    "trainer.nnodes=2",
]
CONTAINERS = {
    "pyxis": [
        "cluster.container.runtime=pyxis",
        "cluster.container.image=docker://verlai/verl:vllm011.latest",
        "cluster.container.mounts=[/shared/hf:/root/.cache/huggingface]",
        "+cluster.container.env.HF_HOME=/root/.cache/huggingface",
    ],
    "apptainer": [
        "cluster.container.runtime=apptainer",
        "cluster.container.image=/shared/images/verl.sif",
        "cluster.container.mounts=[/shared/hf:/hf:ro]",
        "+cluster.container.env.HF_HOME=/hf",
        "cluster.container.python=/opt/venv/bin/python",
    ],
}


def site_plan(*overrides: str):
    facts = cpu_facts(
        code=CodeSnapshot("/home/alice/rlaunch", "0123456789abcdef", 1, 1),
        partition=PartitionFacts("gpu", 128, 1000.0, 8, None, None, 4),
        partitions=("gpu",),
    )
    cfg = compose_config(*SITE, *overrides)
    return make_plan(cfg, facts, [*SITE, *overrides], Path("/home/alice"), "/home/alice/rlaunch/.venv/bin/python")


# no container: the job runs on the host, from the code snapshot, in the venv its setup line activates
ON_THE_HOST = ["cluster.setup=['source /shared/alice/venvs/rlaunch/bin/activate']"]


@pytest.mark.parametrize("runtime", [*sorted(CONTAINERS), "host"])
def test_sbatch_script_matches_golden_file(runtime: str):
    """The whole script, as submitit will submit it. If a change is intended, delete the file (or run with
    RLAUNCH_REGOLD=1) and commit the new one."""
    plan = site_plan(*CONTAINERS.get(runtime, ON_THE_HOST))
    [(_, script)] = slurm.render_all([plan])
    script = script.replace(sys.executable, "<this python>")  # on the host, srun starts the submitting interpreter
    path = GOLDEN / f"sbatch_{runtime}.sh"
    if os.environ.get("RLAUNCH_REGOLD") or (not path.exists() and os.environ.get("CI") != "true"):
        path.write_text(script)
    assert path.exists(), f"{path.name} is missing: CI never writes a golden record (RLAUNCH_REGOLD=1 locally)"
    assert script == path.read_text(), f"sbatch script changed: if intended, delete {path.name} and re-run"


def test_every_process_of_the_job_runs_in_the_container():
    code_dir = "/shared/alice/rlaunch/code/0123456789abcdef"
    pyxis = site_plan(*CONTAINERS["pyxis"])
    [(_, script)] = slurm.render_all([pyxis])
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    # srun's single step (one task per node: Ray head or worker, and on rank 0 the driver) starts in the image
    assert "--container-image=docker://verlai/verl:vllm011.latest" in srun
    assert "--container-mounts=/shared/alice/rlaunch:/shared/alice/rlaunch,/shared/hf:/root/.cache/huggingface" in srun
    assert f"--container-workdir={code_dir}" in srun and "--container-env=PYTHONPATH,HF_HOME" in srun
    assert srun.endswith("python -u -m submitit.core._submit /shared/alice/rlaunch/test-sweep/submitit/%j")
    assert pyxis.driver_command[0] == "python"  # the driver is the image's interpreter, started inside the step
    assert "container     pyxis docker://verlai/verl:vllm011.latest" in render(pyxis)

    apptainer = site_plan(*CONTAINERS["apptainer"])
    [(_, script)] = slurm.render_all([apptainer])
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    assert (
        f"apptainer exec --nv --pwd {code_dir} --bind /shared/alice/rlaunch:/shared/alice/rlaunch "
        "--bind /shared/hf:/hf:ro --env HF_HOME=/hf /shared/images/verl.sif /opt/venv/bin/python -u -m "
        "submitit.core._submit" in srun
    )
    assert apptainer.driver_command[0] == "/opt/venv/bin/python"


def test_a_site_token_file_is_mounted_read_only():
    plan = site_plan(*CONTAINERS["apptainer"], "cluster.ray_auth_token_file=/etc/ray/token")
    assert "/etc/ray/token:/etc/ray/token:ro" in plan.container["mounts"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["cluster.container.runtime=docker"], "cluster.container.runtime=docker is not known: choose one of pyxis"),
        (["cluster.container.runtime=pyxis"], "cluster.container.image is not set: give the image, e.g."),
    ],
)
def test_bad_container_settings_are_refused_with_the_fix(overrides, message):
    with pytest.raises(UserError, match=message):
        site_plan(*overrides)


def test_container_on_a_local_run_is_refused_in_one_line(tmp_path: Path):
    result = run_cli(
        "cluster=local",
        "+cluster.container.runtime=apptainer",
        "+cluster.container.image=x.sif",
        "launch.dry_run=true",
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        "rlaunch: error: cluster.container is for cluster=slurm (this run is cluster=local): remove "
        "cluster.container.runtime, or run the image as the Ray cluster's own"
    ]


def test_node_lists_expand_as_slurm_does_in_an_image_without_scontrol(slurm_env):
    """Inside a container the job has no `scontrol`: its Python expansion of SLURM_JOB_NODELIST agrees with SLURM's."""
    import subprocess

    from launch.ray_cluster import expand_hostlist

    for nodelist in ("c[1-3,5-6],gpu-a[01-02],login1", "n[1-2]b[3-4]", "c1", "a[008-011]"):
        shown = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist],
            env={**os.environ, **slurm_env},
            capture_output=True,
            text=True,
            check=True,
        )
        assert expand_hostlist(nodelist) == shown.stdout.split()
