"""How a verl entry point (a Hydra app) is started on a config file rlaunch dumped: the PPO driver (launch/plan.py)
and RFT's SFT trainer (algos/rft/sft.py) share it.

Runs on: the login node (plans record the command) and the job head (RFT builds its stage command there). Pure.
"""

from __future__ import annotations

from pathlib import Path


def hydra_entry_command(python: str, module: str, config_dir: Path, config_name: str, hydra_dir: str) -> list[str]:
    """`python -m <module>` on `config_dir/config_name.yaml`, its Hydra bookkeeping in `hydra_dir`."""
    return [
        python,
        "-m",
        module,
        f"--config-path={config_dir}",
        f"--config-name={config_name}",
        f"hydra.run.dir={hydra_dir}",
    ]
