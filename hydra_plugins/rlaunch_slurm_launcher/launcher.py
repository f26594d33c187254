"""hydra/launcher=rlaunch_slurm: plans every job of a sweep, then hands the whole sweep to launch/run.py's dispatch,
which submits one SLURM job array per resource shape and returns without waiting for any job (cluster=local: runs
them here, one after the other). Each distinct combination of group choices is composed once (launch/overrides.py);
a large sweep's jobs are planned on every core (launch/cores.py).

Runs on: the login node. Hydra only loads launchers from the hydra_plugins namespace, so this thin class lives here;
everything it does is in launch/. Its config has no sbatch keys: hydra-submitit-launcher's `hydra.launcher.*` ones
(partition, timeout_min, mem_gb, ...) are rewritten to rlaunch's before Hydra composes (launch/auto.py).
"""

# no `from __future__ import annotations`: Hydra executes plugin modules outside sys.modules, where dataclasses
# cannot resolve string annotations.

from collections.abc import Sequence
from dataclasses import dataclass

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class RlaunchSlurmLauncherConf:
    _target_: str = "hydra_plugins.rlaunch_slurm_launcher.launcher.RlaunchSlurmLauncher"


ConfigStore.instance().store(
    group="hydra/launcher", name="rlaunch_slurm", node=RlaunchSlurmLauncherConf, provider="rlaunch"
)


class RlaunchSlurmLauncher(Launcher):
    def __init__(self) -> None:
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from launch.auto import whole_values_replace_the_profiles
        from launch.compose_once import ComposeOnce, detached_roots
        from launch.cores import in_order
        from launch.overrides import job_name, swept_keys
        from launch.plan import Plan
        from launch.run import dispatch, plan_job

        assert self.config is not None and self.hydra_context is not None
        setup_globals()
        # the sweep's own Hydra config, for whoever asks HydraConfig (a refusal removes the sweep's bookkeeping);
        # planning reads no job's Hydra node, so jobs do not replace it
        HydraConfig.instance().set_config(self.config)
        composer = ComposeOnce(self.hydra_context.config_loader, self.config)
        swept = swept_keys(job_overrides)

        def plan_one(overrides: Sequence[str]) -> tuple[Plan, DictConfig]:
            # a job's own gpu and algo choice: its layer's dict under a user's whole value is replaced, as a run
            # planned alone has it (launch/auto.py), where the sweep's command line had several choices
            overrides = whole_values_replace_the_profiles(list(overrides))
            with composer.job_config(overrides) as cfg:
                name = job_name(str(cfg.gpu.name), overrides, swept, composer.groups(overrides))
                plan = plan_job(cfg, list(overrides), name, resolve=composer.resolve)
                return plan, detached_roots(cfg)  # the working copy goes back to the next job

        jobs = in_order(plan_one, job_overrides)  # on every core for a large sweep (launch/cores.py)
        dispatch(jobs)
        return [
            JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED, _return_value=plan.run_id)
            for overrides, (plan, _) in zip(job_overrides, jobs, strict=True)
        ]
