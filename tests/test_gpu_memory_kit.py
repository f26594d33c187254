"""The GPU calibration kit (bench/gpu_memory.py) at tiny sizes on CPU: its measurements, fit and report run end to
end, so the kit still works the day a GPU is at hand, and the log-prob paths it measures keep verl's memory shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PROJECT

from bench import gpu_memory


def run_tiny(kit: str, out: Path) -> str:
    """One of bench/'s GPU kits at tiny sizes on CPU, writing its report to `out`: its stdout."""
    result = subprocess.run(
        [sys.executable, str(PROJECT / "bench" / kit), "--cpu", "--tiny", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("kit") / "tiny.json"
    stdout = run_tiny("gpu_memory.py", out)
    assert "measured" in stdout and "predicted" in stdout and "fitted:" in stdout
    return json.loads(out.read_text())


def test_every_phase_is_measured_and_predicted(tiny_run: dict):
    phases = {(row["phase"], row["method"]) for row in tiny_run["rows"]}
    for method in ("torch", "fused"):
        assert {("logits", method), ("logits+backward", method), ("logprob", method)} <= phases
    trained = {row["checkpointing"] for row in tiny_run["rows"] if row["phase"] == "train"}
    assert trained == {True, False}
    assert all(row["measured_bytes"] > 0 and row["predicted_bytes"] > 0 for row in tiny_run["rows"])
    assert tiny_run["device"] == "cpu" and tiny_run["accuracy"]["rows"] == len(tiny_run["rows"])


def test_log_prob_paths_have_verls_memory_shape(tiny_run: dict):
    """bf16 logits + one saved log_softmax per row: ~4 B/token·vocab in training and the logits alone (~2) without
    grad, not the 16+ of an fp32 copy; fused chunks in fp32: ~12 per chunk token."""
    coefficients = tiny_run["fitted"]["logits_bytes_per_token_vocab"]
    assert 3.0 <= coefficients["torch"]["training"] <= 5.0
    assert coefficients["torch"]["forward"] <= 3.5
    assert 11.0 <= coefficients["fused"]["training"] <= 13.0


def test_fit_recovers_known_coefficients():
    """The kit's least squares on rows built from known per-token costs gives those costs back."""
    rows = []
    for hidden, intermediate in ((64, 176), (96, 384), (128, 352)):
        shape = gpu_memory.Shape(2, hidden, 4, 2, intermediate, 64, 2, 64)
        per_layer_token = 20.0 * hidden + 5.0 * intermediate
        terms = {"activations": per_layer_token * shape.tokens * shape.layers, "logits": 1000.0}
        rows.append(
            {
                "phase": "train",
                "fit": True,
                "checkpointing": False,
                "shape": shape.__dict__,
                "tokens": shape.tokens,
                "measured_bytes": terms["activations"] + terms["logits"],
                "predicted_terms": terms,
            }
        )
    assert gpu_memory.fit(rows)["layer_bytes_per_token"] == pytest.approx((20.0, 5.0), abs=0.01)


def test_recorded_gpu_run_is_the_kits_output():
    recorded = json.loads((Path(__file__).parent / "data" / "gpu_memory_h100.json").read_text())
    assert {"rows", "fitted", "accuracy", "margins", "device", "date", "torch"} <= set(recorded)
    assert recorded["margins"]["non_torch_gib"] > 0 and recorded["margins"]["total_gib"] > 70


def test_case_reproduction_runs_end_to_end_on_cpu(tmp_path: Path):
    """bench/gpu_cases.py (verl's one-GPU cases built as verl builds them) at a tiny size on CPU: each case in its
    own process, every micro-batch size (an update of two micro-batches and AdamW's step) and the log-prob pass run,
    the report is written."""
    out = tmp_path / "cases.json"
    run_tiny("gpu_cases.py", out)
    report = json.loads(out.read_text())
    assert [case["name"] for case in report["cases"]] == ["tiny LoRA", "tiny full"]  # LoRA, and full fine-tuning
    for case in report["cases"]:
        assert {"train", "train_half", "train_quarter", "logprob"} <= set(case)
        assert [case[label]["sequences"] for label in ("train", "train_half", "train_quarter")] == [4, 2, 1]
        assert not any("out_of_memory" in case[label] for label in ("train", "logprob"))


def test_the_one_gpu_cases_are_the_public_ones_and_were_measured_on_a_gpu():
    from bench import gpu_cases

    names = {case.name for case in gpu_cases.one_gpu_cases()}
    recorded = json.loads((Path(__file__).parent / "data" / "gpu_cases_h100.json").read_text())
    assert names == {case["name"] for case in recorded["cases"]} and len(names) >= 5
    assert recorded["device"].startswith("NVIDIA H100") and recorded["flash_cross_entropy"]


def test_largest_micro_batch_from_two_sizes():
    from bench.gpu_cases import largest_micro_batch

    result = {
        "train": {"sequences": 40, "out_of_memory": "CUDA out of memory"},
        "train_half": {"sequences": 20, "total_gib": 50.0},
        "train_quarter": {"sequences": 10, "total_gib": 30.0},
    }
    assert largest_micro_batch(result, 80.0) == 35  # 2 GiB per sequence from 30 GiB at 10
