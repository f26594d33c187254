"""The status forecast's ETA (launch/report/forecast.py) in a unit that says something: 'ETA 0.0 h' for a run with
minutes left said nothing."""

from __future__ import annotations

import pytest

from launch.report.forecast import Forecast


@pytest.mark.parametrize(
    "eta_h, shown", [(5.25, "ETA 5.2 h"), (1.0, "ETA 1.0 h"), (0.4, "ETA 24 min"), (40 / 3600, "ETA 40 s")]
)
def test_the_eta_is_in_hours_from_an_hour_on_then_minutes_then_seconds(eta_h: float, shown: str):
    ahead = Forecast(
        step=9,
        total_steps=10,
        measured_step_s=40.0,
        planned_step_s=40.0,
        eta_h=eta_h,
        attempts_needed=None,
        attempts_allowed=4,
        first_checkpoint_step=None,
        first_checkpoint_min=None,
        attempt_min=None,
    )
    [line] = ahead.lines()
    assert f"; {shown}" in line
