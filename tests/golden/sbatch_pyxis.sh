#!/bin/bash

# Parameters
#SBATCH --cpus-per-task=128
#SBATCH --error=/shared/alice/rlaunch/test-sweep/submitit/%j/%j_0_log.err
#SBATCH --gres=gpu:8
#SBATCH --job-name=rl-test-sweep-0
#SBATCH --mem=1000GB
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --output=/shared/alice/rlaunch/test-sweep/submitit/%j/%j_0_log.out
#SBATCH --partition=gpu
#SBATCH --requeue
#SBATCH --signal=USR2@120
#SBATCH --time=75
#SBATCH --wckey=submitit

# setup
cd /shared/alice/rlaunch/code/0123456789abcdef || { echo 'rlaunch: error: the code snapshot /shared/alice/rlaunch/code/0123456789abcdef is gone (cd failed): the job would not run the submitted code; resubmit (a new snapshot is written)' >&2; exit 1; }
export PYTHONPATH=/shared/alice/rlaunch/code/0123456789abcdef${PYTHONPATH:+:$PYTHONPATH}
export HF_HOME=/root/.cache/huggingface
export HF_HUB_OFFLINE=1
export TOKENIZERS_PARALLELISM=false

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output /shared/alice/rlaunch/test-sweep/submitit/%j/%j_%t_log.out --error /shared/alice/rlaunch/test-sweep/submitit/%j/%j_%t_log.err --container-image=docker://verlai/verl:vllm011.latest --container-mounts=/shared/alice/rlaunch:/shared/alice/rlaunch,/shared/hf:/root/.cache/huggingface --container-workdir=/shared/alice/rlaunch/code/0123456789abcdef --container-env=PYTHONPATH,HF_HOME python -u -m submitit.core._submit /shared/alice/rlaunch/test-sweep/submitit/%j
