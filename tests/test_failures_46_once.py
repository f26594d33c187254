"""The four messages that both name a kind (signatures.SIGNATURES) and shape its fix (fixes.py) are written once, in
signatures.py: a change to one is a change to both."""

from __future__ import annotations

import pytest

from launch.report.failures import fixes, signatures


@pytest.mark.parametrize(
    "name, kind, said",
    [
        ("VLLM_NO_DEVICE", "gpu_unavailable", "RuntimeError: Failed to infer device type"),
        ("PARQUET_NO_MAGIC", "data_error", "ArrowInvalid: Parquet magic bytes not found in footer."),
        ("EMPTY_HEAD", "ray_start_failed", "ray start --address=:6379 --block"),
        ("HYDRA_OVERRIDE_GRAMMAR", "config_error", "See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for"),
    ],
)
def test_a_message_both_modules_read_is_one_pattern(name: str, kind: str, said: str):
    pattern = getattr(signatures, name)
    assert getattr(fixes, name) is pattern
    assert pattern.pattern in signatures.SIGNATURES[kind]
    assert pattern.search(said) and signatures.match_kind(kind, [said]) == [said]
