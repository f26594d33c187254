"""likeness.py: the reading of a log no signature names. Its weights are the ones training on the spent corpora gives,
it is consulted only after every signature, and what it names is marked as a reading, never as a match."""

from __future__ import annotations

import numpy as np
import pytest

from bench.failures import CORPORA, SPENT, TRAINED_ON, load_corpus, signature_kind
from launch.report import failures
from launch.report.failures import likeness
from launch.report.failures.classify import LIKENESS_MIN_LINES

HELD_OUT_9 = {excerpt.path.stem: excerpt for excerpt in load_corpus(CORPORA["held-out-9"])}


def test_the_shipped_weights_are_what_training_on_the_spent_corpora_gives():
    excerpts = [excerpt for name in TRAINED_ON for excerpt in load_corpus(CORPORA[name])]
    trained = likeness.fit([e.text for e in excerpts], [e.kind for e in excerpts], {})
    shipped = likeness.shipped()
    assert shipped.kinds == trained.kinds and shipped.idf.keys() == trained.idf.keys()
    words = sorted(shipped.idf)
    assert np.allclose([shipped.weights[w] for w in words], [trained.weights[w] for w in words], atol=1e-3)
    assert np.allclose(shipped.bias, trained.bias, atol=1e-3)
    # what each trained-on excerpt reads as is the same with both (the file rounds weights to 4 decimals)
    assert [shipped.likeness(e.text).kind for e in excerpts] == [trained.likeness(e.text).kind for e in excerpts]


def test_no_set_is_trained_on_before_it_was_measured_blind():
    # a blind set joins TRAINED_ON only once spent: its first measurement is by weights that never saw it
    assert set(TRAINED_ON) == {"tuning", *SPENT}
    assert set(likeness.shipped().trained_on) == set(TRAINED_ON)
    assert set(CORPORA) - set(TRAINED_ON) == {name for name in CORPORA if name not in SPENT and name != "tuning"}
    counts = likeness.shipped().trained_on
    assert all(counts[name] == len(load_corpus(CORPORA[name])) for name in TRAINED_ON)


def test_a_log_no_signature_names_is_read_and_marked_as_read():
    # an LLM judge's OpenAI timeout under a reward call: no frame or message names reward code, so no signature
    log = HELD_OUT_9["deepeyes-27-llm-judge-openai-api-timeout"].text
    assert signature_kind(log) == "unknown"
    failure = failures.classify(log)
    assert failure.kind == "reward_error"
    assert failure.details["likeness"] >= likeness.THRESHOLD
    assert failure.short().startswith("reward_error?: ")
    assert failures.render(failure)[0] == "[reward_error?]"  # doctor --log and sweep.py logs show it as a reading
    assert failure.fix.startswith("no signature matched; the log's words read like the reward_error logs")
    assert failure.evidence and all(any(line.strip() in raw for raw in log.splitlines()) for line in failure.evidence)
    assert "APITimeoutError" in failure.evidence[-1]  # the error the log ends on stays in view


def test_a_signature_match_is_never_second_guessed():
    log = HELD_OUT_9["llm-training-7-slurm-rank4-allreduce-seq7487-stuck"].text
    failure = failures.classify(log)
    assert failure.kind == signature_kind(log) == "nccl_timeout" and "likeness" not in failure.details


def test_a_few_lines_are_judged_by_the_signatures_alone():
    # the same reward traceback's last lines: fewer than LIKENESS_MIN_LINES, too few words to weigh
    lines = [line for line in HELD_OUT_9["deepeyes-27-llm-judge-openai-api-timeout"].text.splitlines() if line.strip()]
    short = "\n".join(lines[-(LIKENESS_MIN_LINES - 1) :])
    assert likeness.likeness(short).kind == "reward_error"  # what the weights alone would say
    assert failures.classify(short).kind == "unknown"


def test_a_log_narrowed_to_a_choice_keeps_its_choice():
    # SLURM's cancel without a reason: scancel, a preemption or the batch script's end; sacct decides, not words
    log = "\n".join(
        [
            "Epoch 0:  41%|████      | 410/1000 [31:02<44:40,  4.54s/it, loss=0.412]",
            "saving checkpoint to /scratch/ckpt/last-v1.ckpt",
            "Epoch 0:  42%|████▏     | 420/1000 [31:47<43:54,  4.54s/it, loss=0.409]",
            "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
            "slurmstepd: error: *** STEP 81234.0 ON gpu-017 CANCELLED AT 2026-03-02T11:40:02 ***",
        ]
    )
    failure = failures.classify(log)
    assert failure.kind == "unknown" and "sacct -j 81234" in failure.fix


@pytest.mark.parametrize(
    "log",
    [
        # progress and info only: nothing failed that words could explain
        "\n".join(f"(TaskRunner pid=7) step:{step} - actor/pg_loss:0.01 - timing_s/gen:41.2" for step in range(12)),
        # an error line, but in nobody's words: no kind is clear enough
        "\n".join(["frobnicating the widget", "widget state: blue", "retrying", "retrying", "Error: widget says no"]),
    ],
    ids=["no-error-line", "no-clear-kind"],
)
def test_nothing_is_named_without_an_error_and_a_clear_reading(log: str):
    assert failures.classify(log).kind == "unknown"


def test_words_are_identifiers_and_their_parts():
    found = likeness.words("torch.OutOfMemoryError: CUDA out of memory (gpu_memory_utilization=0.6)")
    assert {"outofmemoryerror", "memory", "error", "gpu_memory_utilization", "utilization", "cuda"} <= found
    assert "0" not in found and "6" not in found
