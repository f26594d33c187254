"""Submission speed on a real loopback SLURM cluster (scripts/dev_cluster.sh), ratios against baselines measured in
the same run:

(a) the submission stage alone (plans ready -> job ids back) for a 64-job sweep over 4 resource shapes, against the
    same 4 arrays submitted by raw `sbatch --array` from a shell;
(b) the whole command, interpreter start included, against hydra-submitit-launcher's time to return for the same
    64 jobs as 4 sequential launches (it cannot vary resources within one), each job a `sleep 30`.

Usage: python bench/submit.py [--jobs-per-shape 16]    (root; starts and stops its own cluster)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.common import commit_tag, dev_cluster  # noqa: E402

PREFIX = "/tmp/rlaunch-bench-slurm"
PORT_BASE = "18817"
# 4 shapes that differ in their resources: (gpu profile, GPUs per node)
SHAPES = [("a40", 8), ("a100_80", 8), ("h100", 8), ("a100_80", 4)]


def cancel_all(env: dict[str, str]) -> None:
    subprocess.run(["scancel", "--full", "-u", "root"], env=env, check=False)
    for _ in range(60):
        if not subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True).stdout.strip():
            return
        time.sleep(0.5)


def make_plans(per_shape: int, shared_dir: Path) -> list:
    from hydra import compose, initialize_config_dir

    from launch.facts import gather_facts
    from launch.plan import make_plan
    from launch.run import write_run_dir
    from launch.schema import register_schemas

    register_schemas()
    plans = []
    with initialize_config_dir(config_dir=str(PROJECT / "conf"), version_base="1.3"):
        for gpu, gpus_per_node in SHAPES:
            base = [
                f"gpu={gpu}",
                f"trainer.n_gpus_per_node={gpus_per_node}",
                "llm=qwen2_5_0_5b",
                "mode=quick_test",
                "cluster=slurm",
                f"cluster.shared_dir={shared_dir}",
                "launch.sweep_id=bench",
            ]
            cfg = compose("config", overrides=base)
            facts = gather_facts(str(cfg.actor_rollout_ref.model.path), "slurm", None)
            for seed in range(per_shape):
                overrides = [*base, f"data.seed={seed}"]
                cfg.data.seed = seed
                plan = make_plan(cfg, facts, overrides, working_dir=shared_dir, python=sys.executable)
                write_run_dir(plan, cfg)
                plans.append(plan)
    return plans


def bench_submission_stage(plans: list, env: dict[str, str]) -> tuple[float, float]:
    from launch import slurm

    started = time.perf_counter()
    manifest = slurm.submit(plans, max_requeues=3)
    ours = time.perf_counter() - started
    assert len(manifest.arrays) == len(SHAPES), manifest.arrays
    cancel_all(env)

    per_shape = len(plans) // len(SHAPES)
    lines = []
    for group in slurm.group_by_shape(plans):
        p = group.parameters
        lines.append(
            f"sbatch --parsable --array=0-{per_shape - 1} --nodes={p['nodes']} --ntasks-per-node=1 "
            f"--cpus-per-task={p['cpus_per_task']} --mem={p['mem']} --gres={p['gres']} --time={p['time']} "
            f"--partition={p['partition']} --output=/dev/null --wrap='sleep 30' >/dev/null"
        )
    started = time.perf_counter()
    subprocess.run(["bash", "-c", "\n".join(lines)], env=env, check=True)
    raw = time.perf_counter() - started
    cancel_all(env)
    return ours, raw


HYDRA_SLEEP_APP = """
import time
import hydra

@hydra.main(version_base="1.3", config_path=None, config_name=None)
def main(cfg):
    time.sleep(30)

if __name__ == "__main__":
    main()
"""


def bench_whole_command(per_shape: int, env: dict[str, str], workdir: Path) -> tuple[float, float]:
    seeds = f"range({per_shape})"
    command = [
        sys.executable,
        str(PROJECT / "launch" / "run.py"),
        "gpu=a40,a100_80,h100",
        f"data.seed={seeds}",
        "llm=qwen2_5_0_5b",
        "mode=quick_test",
        f"cluster.shared_dir={workdir}",
        "-m",
    ]
    started = time.perf_counter()
    subprocess.run(command, env=env, cwd=workdir, check=True, capture_output=True)
    # the 4th shape (4 GPUs per node) as a second sweep: still one command per shape family
    subprocess.run(
        [*command[:2], "gpu=a100_80", "trainer.n_gpus_per_node=4", *command[3:]],
        env=env,
        cwd=workdir,
        check=True,
        capture_output=True,
    )
    ours = time.perf_counter() - started
    cancel_all(env)

    app = workdir / "sleep_app.py"
    app.write_text(HYDRA_SLEEP_APP)
    started = time.perf_counter()
    for cpus in (1, 2, 3, 4):  # 4 sequential launches: one resource shape each (hydra#2874)
        subprocess.run(
            [
                sys.executable,
                str(app),
                "hydra/launcher=submitit_slurm",
                "hydra.launcher.partition=debug",
                f"hydra.launcher.cpus_per_task={cpus}",
                "hydra.launcher.timeout_min=5",
                "hydra.launcher.mem_gb=1",
                f"hydra.sweep.dir={workdir}/hsl-{cpus}",
                f"+seed={seeds}",
                "-m",
            ],
            env=env,
            cwd=workdir,
            check=True,
            capture_output=True,
        )
    hydra_submitit = time.perf_counter() - started
    cancel_all(env)
    return ours, hydra_submitit


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs-per-shape", type=int, default=16)
    args = parser.parse_args()
    with (
        dev_cluster(PREFIX, PORT_BASE, "-n", "2", "-g", "8", "--big") as env,
        tempfile.TemporaryDirectory(prefix="rl-bench-") as tmp,
    ):
        workdir = Path(tmp)
        jobs = args.jobs_per_shape * len(SHAPES)
        plans = make_plans(args.jobs_per_shape, workdir / "plans")
        ours, raw = bench_submission_stage(plans, env)
        print(
            f"[commit {commit_tag()}] (a) submission stage, {jobs} jobs in {len(SHAPES)} arrays: rlaunch {ours:.3f} s, "
            f"raw sbatch --array x{len(SHAPES)} {raw:.3f} s, ratio {ours / raw:.1f}x"
        )
        whole, hydra_submitit = bench_whole_command(args.jobs_per_shape, env, workdir)
        print(
            f"[commit {commit_tag()}] (b) whole command, {jobs} jobs: rlaunch returns after {whole:.1f} s (jobs still "
            f"queued); hydra-submitit-launcher, 4 sequential launches of sleep-30 jobs, returns after "
            f"{hydra_submitit:.1f} s (when its jobs end); ratio {whole / hydra_submitit:.2f}x"
        )


if __name__ == "__main__":
    main()
