"""Containers for SLURM jobs: pyxis/enroot (`srun --container-image`) or apptainer (`apptainer exec --nv`).

Runs on: the login node (planning and rendering the sbatch script). The container wraps the job's one srun step, so
everything the step starts runs inside it: submitit's unpickling of the job, every node's `ray start` (its raylet and
workers), verl's driver. With pyxis, srun's `--container-*` options put each task in the image and the interpreter is
the image's; with apptainer, the interpreter submitit starts IS `apptainer exec ... <image> python`. The directory
rlaunch writes to (`launch.runs_dir`: run directories, submitit's folder, the code snapshot) is mounted at the same
path, and so is a site's Ray token file; the working directory is the code snapshot, which is also first on
PYTHONPATH (launch/snapshot.py), so the image's own copy of nothing shadows the submitted code. The image must hold
rlaunch's requirements (verl, submitit, hydra, ray: verl's image plus `pip install -e .` of this project, or a venv on
a mounted path named by `cluster.container.python`).
"""

from __future__ import annotations

import shlex
from typing import Any

from omegaconf import DictConfig, OmegaConf

from launch.errors import UserError
from launch.schema import ContainerSettings, choices_of

RUNTIMES = choices_of(ContainerSettings, "runtime")


def resolve(cfg: DictConfig, runs_dir: str, code_dir: str | None) -> dict[str, Any] | None:
    """cluster.container with what every job needs added (the runs directory and a site token file mounted, the
    snapshot as working directory); None without a container. Bad settings are refused with the fix."""
    settings = cfg.cluster.get("container")
    runtime = settings.get("runtime") if settings is not None else None
    if not runtime:
        return None
    if runtime not in RUNTIMES:
        raise UserError(
            f"cluster.container.runtime={runtime} is not known: choose one of {', '.join(RUNTIMES)} "
            "(or null for no container)"
        )
    if cfg.cluster.name != "slurm":
        raise UserError(
            f"cluster.container is for cluster=slurm (this run is cluster={cfg.cluster.name}): remove "
            "cluster.container.runtime, or run the image as the Ray cluster's own"
        )
    if not settings.get("image"):
        example = "docker://verlai/verl:<tag>" if runtime == "pyxis" else "/shared/images/verl.sif"
        raise UserError(f"cluster.container.image is not set: give the image, e.g. cluster.container.image={example}")
    mounts = [f"{runs_dir}:{runs_dir}"]
    token = cfg.cluster.get("ray_auth_token_file")
    if token:
        mounts.append(f"{token}:{token}:ro")
    mounts += [str(mount) for mount in settings.get("mounts") or [] if str(mount) not in mounts]
    env = OmegaConf.to_container(settings.get("env") or {}, resolve=True)
    return {
        "runtime": str(runtime),
        "image": str(settings.image),
        "mounts": mounts,
        "workdir": str(settings.get("workdir") or code_dir or runs_dir),
        "env": {str(key): str(value) for key, value in env.items()},
        "python": str(settings.get("python") or "python"),
    }


def srun_args(container: dict[str, Any] | None) -> list[str]:
    """pyxis: srun's options that start each task in the image. Host variables reach the container; the ones named
    in --container-env win over the image's own (the snapshot's PYTHONPATH, cluster.container.env)."""
    if container is None or container["runtime"] != "pyxis":
        return []
    forced = ["PYTHONPATH", *container["env"]]
    return [
        f"--container-image={container['image']}",
        f"--container-mounts={','.join(container['mounts'])}",
        f"--container-workdir={container['workdir']}",
        f"--container-env={','.join(forced)}",
    ]


def setup_lines(container: dict[str, Any] | None) -> list[str]:
    """pyxis passes the host's environment in: cluster.container.env is exported before srun."""
    if container is None or container["runtime"] != "pyxis":
        return []
    return [f"export {key}={shlex.quote(value)}" for key, value in container["env"].items()]


def python_command(container: dict[str, Any] | None, host_python: str) -> str:
    """The interpreter submitit's srun step starts (a shell word sequence)."""
    if container is None:
        return shlex.quote(host_python)
    if container["runtime"] == "pyxis":
        return shlex.quote(container["python"])
    words = ["apptainer", "exec", "--nv", "--pwd", container["workdir"]]
    for mount in container["mounts"]:
        words += ["--bind", mount]
    for key, value in container["env"].items():
        words += ["--env", f"{key}={value}"]
    return shlex.join([*words, container["image"], container["python"]])


def describe(container: dict[str, Any] | None) -> str | None:
    """One line for the readable plan."""
    if container is None:
        return None
    return (
        f"{container['runtime']} {container['image']} (workdir {container['workdir']}; mounts "
        f"{', '.join(container['mounts'])}): every node's Ray and verl's driver run inside it"
    )
