"""Bad values a probe of verl's examples and misspellings found planned in silence or explained wrongly: each is still
refused, or still explained, the way tests/test_bad_values.py's table cannot say (a key that did move keeps the
moved-key explainer's answer)."""

from __future__ import annotations

from pathlib import Path


def test_a_legacy_reward_model_key_that_moved_is_still_named_where_verl_has_it(cli, tmp_path: Path):
    """reward_model.* keys verl 0.9.1 has under reward.* are moves (the moved-key explainer names the place); only
    the legacy reward worker's own switches are told to go."""
    result = cli("reward_model.sandbox_fusion.url=http://sandbox:8080", "launch.dry_run=true")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "write reward.sandbox_fusion.url=..." in line, line
