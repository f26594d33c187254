"""rlaunch's Hydra launcher (hydra/launcher=rlaunch_slurm): Hydra discovers launchers only in this namespace."""
