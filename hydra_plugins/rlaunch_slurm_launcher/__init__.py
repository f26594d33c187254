"""rlaunch's Hydra launcher (hydra/launcher=rlaunch_slurm) and sweeper: Hydra discovers plugins only in this namespace.

Runs on: the login node (or wherever `python launch/run.py ... -m` runs), inside Hydra's multirun; both hand the
whole sweep to launch/run.py, whatever the cluster (slurm, ray or local).
"""
