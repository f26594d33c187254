"""The typed schema of the `rft` root: rejection-sampling fine-tuning (conf/algo/rft.yaml sets the values).

Runs on: the login node (compose time; launch/schema.py registers it) and the job head (the pipeline reads the
resolved values back from <run_dir>/rlaunch_config.yaml). Dataclasses and omegaconf only: launch/ imports this.
Every algo has an `rft` root with these defaults; only algo=rft runs the pipeline that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(kw_only=True)
class RftSettings:
    # stage 1 (generate): samples per prompt; conf/algo/rft.yaml sets actor_rollout_ref.rollout.n from it, because
    # verl's generation server reads rollout.n (docs/background.md#rft-sampling: 15-50)
    oversample: int = 16
    # stage 1 sampling temperature; rollout.temperature follows it (docs/background.md#rft-sampling: 0.7)
    temperature: float = 0.7
    # stage 2 (filter): at most this many correct, distinct samples per prompt go to fine-tuning
    k: int = 4
    # stage 3 (sft): keys of verl's sft_trainer_engine config (verl/trainer/config/sft_trainer_engine.yaml), named
    # as in that tree and composed over it (rft.sft.optim.lr=2e-5; +rft.sft.optim.betas=[0.9,0.95] for a key
    # conf/algo/rft.yaml does not set); the data files, model, GPU count and checkpoint directory come from the run
    sft: dict[str, Any] = field(default_factory=dict)


class RftConfigError(ValueError):
    """A setting of algo=rft that its stages would fail on; the message is one line naming the key and the fix."""
