"""The one-line form of a failure (status, compare's state column) shows the exception's own message, not Ray's header
or a frame above it (helper-41's probe, case c4raise: `reward_error: ray.exceptions.RayTaskError(ValueError)…`)."""

from __future__ import annotations

from test_failures_probe41_reward_paths import SCORER_RAISED

from launch.report import failures


def test_the_one_line_form_shows_the_exceptions_message_not_rays_header():
    failure = failures.classify(SCORER_RAISED)
    assert failure.short(80) == "reward_error: ValueError: probe reward cannot score math__deepscaler"
    assert failures.summary([failure]).startswith("reward_error: ValueError: probe reward")
