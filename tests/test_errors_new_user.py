"""Mistakes a new user makes first (a README walkthrough on a clean clone, helper-44), each one line that points at
what they meant: an option they began to type, verl's `model` group for rlaunch's `llm`, a verl key written by its
last name alone."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import Result


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("gpu=a100", "unknown gpu 'a100' (did you mean 'a100_40' or 'a100_80'?): choose one of"),
        ("mode=quicktest", "(did you mean 'quick_test'?): choose one of extended, production, quick_test, standard, "
         "verl (e.g. mode=quick_test)"),
        ("model=qwen2_5_7b", "model=qwen2_5_7b: the model group is llm (llm=<option>"),
        ("lr=1e-6", "unknown key 'lr': a verl key is written in full, e.g. actor_rollout_ref.actor.optim.lr"),
        ("n_gpus_per_node=4", "unknown key 'n_gpus_per_node': a verl key is written in full, e.g. "
         "trainer.n_gpus_per_node,"),
        ("--dry-run", "--dry-run: a dry run is an override here, not a flag: launch.dry_run=true"),
    ],
)  # fmt: skip
def test_a_first_mistake_is_one_line_pointing_at_what_was_meant(cli: Callable[..., Result], typed: str, said: str):
    result = cli(typed, "launch.dry_run=true")
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert said in line, line


def test_version_names_rlaunch_and_the_verl_it_plans_for(cli: Callable[..., Result]):
    """Hydra's --version had printed 'Hydra 1.3.8' alone (helper-44's walkthrough)."""
    result = cli("--version")
    assert result.returncode == 0 and result.stdout.startswith("rlaunch 0.1.0 (verl 0.9.1, hydra-core "), result
