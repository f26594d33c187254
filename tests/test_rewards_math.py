"""math rewards through the real pipeline: extraction, the process pool, real math-verify (gold first)."""

from __future__ import annotations

import threading

import pytest

import rewards
from rewards import extract

SETTINGS = {"procs": 2}
M = "math__deepscaler"
G = "openai/gsm8k"

# (data_source, response, ground truth, right?)
CASES = [
    # fractions
    (M, "So \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}", True),
    (M, "\\boxed{1/2}", "\\frac{1}{2}", True),
    (M, "\\boxed{0.5}", "\\frac12", True),
    (M, "\\boxed{\\dfrac{3}{4}}", "0.75", True),
    (M, "\\boxed{-\\frac{1}{2}}", "-0.5", True),
    (M, "\\boxed{\\frac{2}{3}}", "\\frac{1}{3}", False),
    (M, "\\boxed{0.33}", "\\frac{1}{3}", False),
    # radicals
    (M, "\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{1}{\\sqrt{2}}", True),
    (M, "\\boxed{2\\sqrt{3}}", "\\sqrt{12}", True),
    (M, "\\boxed{3\\sqrt{2}}", "\\sqrt{18}", True),
    (M, "\\boxed{\\sqrt{3}}", "\\sqrt{2}", False),
    # intervals
    (M, "\\boxed{(1, 2]}", "(1,2]", True),
    (M, "\\boxed{(-\\infty, 3)}", "(-\\infty,3)", True),
    (M, "\\boxed{(0,1) \\cup (2, \\infty)}", "(0,1)\\cup(2,\\infty)", True),
    (M, "\\boxed{[1, 2]}", "(1,2]", False),
    # sets
    (M, "\\boxed{\\{3, 1, 2\\}}", "\\{1,2,3\\}", True),
    (M, "\\boxed{\\{1, 2\\}}", "\\{1,2,3\\}", False),
    # units
    (M, "\\boxed{5 \\text{ cm}}", "5", True),
    (M, "\\boxed{12\\text{ meters}}", "12", True),
    (M, "\\boxed{6 \\text{ cm}}", "5", False),
    # percentages
    (M, "\\boxed{25\\%}", "25", True),
    (M, "\\boxed{25\\%}", "25\\%", True),
    (M, "\\boxed{30\\%}", "25", False),
    # LaTeX variants
    (M, "\\boxed{\\left(1, 2\\right)}", "(1,2)", True),
    (M, "\\boxed{\\pi}", "\\pi", True),
    (M, "\\boxed{3.14}", "\\pi", False),
    (M, "\\boxed{x^2+2x+1}", "(x+1)^2", True),
    (M, "\\boxed{\\tfrac{5}{2}}", "2.5", True),
    (M, "\\boxed{10^{3}}", "1000", True),
    (M, "\\fbox{7}", "7", True),
    (M, "The answer is $\\boxed 7$.", "7", True),
    (M, "\\boxed{x = 3}", "3", True),
    (M, "\\boxed{\\frac{3}{2}}", "\\dfrac{2}{3}", False),
    (M, "\\boxed{\\begin{pmatrix}1\\\\2\\end{pmatrix}}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", True),
    (M, "\\boxed{1} wait, no: \\boxed{2}", "2", True),
    (M, "The result follows. \\boxed{\\frac{7}{2}}", "\\boxed{3.5}", True),
    # thinking blocks with decoy boxes: only the part after </think> counts
    (M, "<think>maybe \\boxed{3}? no.</think> Final: \\boxed{5}", "5", True),
    (M, "<think>it is \\boxed{5}</think> Final: \\boxed{3}", "5", False),
    (M, "<think>it is \\boxed{5} and I keep thinking", "5", False),
    (M, "<think>\\boxed{5}</think> I am done.", "5", False),
    # Answer: lines and gsm8k's ####
    (M, "We add them.\nAnswer: 42", "42", True),
    (M, "**Final Answer:** $\\frac{1}{2}$", "0.5", True),
    (M, "Answer: 41", "42", False),
    (G, "3 + 4 = 7 apples ... #### 1,000", "1000", True),
    (G, "#### 72", "73", False),
    (M, "I do not know how to finish this.", "4", False),
]


def test_math_cases_positive_and_negative():
    assert sum(1 for case in CASES if case[3]) >= 15 and sum(1 for case in CASES if not case[3]) >= 15
    results = rewards.score_batch(
        [{"data_source": d, "solution_str": s, "ground_truth": g} for d, s, g, _ in CASES], **SETTINGS
    )
    wrong = [
        (response, gold, right, result)
        for (_, response, gold, right), result in zip(CASES, results, strict=True)
        if result["acc"] is not right or result["error"] or result["score"] != float(right)
    ]
    assert not wrong, wrong
    assert all(set(result) == set(rewards.RESULT_KEYS) for result in results)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("<think>\\boxed{1}</think>\\boxed{\\frac{a}{b}}", "\\frac{a}{b}"),
        ("\\boxed{\\{1,2\\}}", "\\{1,2\\}"),
        ("no box\nFinal answer: **7**.", "7"),
        ("<think>open", None),
        ("\\boxed{unclosed", None),
    ],
)
def test_final_answer_extraction(text, answer):
    assert extract.final_answer(text) == answer


def test_repeated_pairs_are_graded_once():
    scorer = rewards.scorer(**SETTINGS)
    before = scorer.stats.copy()
    rollouts = ["\\boxed{\\frac{5}{8}}"] * 9 + ["\\boxed{0.625}"] * 4 + ["\\boxed{0.6}"] * 3
    items = [
        {"data_source": M, "solution_str": f"step {i}: {r}", "ground_truth": "5/8"} for i, r in enumerate(rollouts)
    ]
    results = rewards.score_batch(items, **SETTINGS)
    assert [r["acc"] for r in results] == [True] * 13 + [False] * 3
    assert scorer.stats["graded"] - before["graded"] == 3  # three distinct answers
    assert scorer.stats["repeats"] - before["repeats"] == 13


def test_a_hanging_grade_is_a_counted_error_and_never_stalls_the_batch():
    """9^(9^(9^9)) makes sympy compute a huge power in C, where no signal gets through: only the process-level
    timeout ends it. The error is reported, the neighbour in the same batch is graded normally."""
    settings = {**SETTINGS, "timeout_s": 3}
    scorer = rewards.scorer(**settings)
    items = [
        {"data_source": M, "solution_str": "\\boxed{9^{9^{9^{9}}}}", "ground_truth": "1"},
        {"data_source": M, "solution_str": "\\boxed{1}", "ground_truth": "1"},
    ]
    hung, fine = rewards.score_batch(items, **settings)
    assert hung["error"].startswith("timeout") and hung["errored"] == 1.0 and hung["score"] == 0.0
    assert fine == {"score": 1.0, "acc": True, "passed": 1.0, "error": "", "errored": 0.0}
    assert scorer.stats["errors/timeout after 3s"] >= 1
    # an error is not remembered: the same pair is tried again (and times out again), never served as "wrong"
    again = rewards.compute_score(M, "\\boxed{9^{9^{9^{9}}}}", "1", **settings)
    assert again["error"].startswith("timeout")


def test_math_verify_fails_in_threads_and_our_scoring_does_not():
    """Why the pool exists: math-verify's SIGALRM timeout raises in any non-main thread (verl 0.9.1 runs sync reward
    functions in one). Our compute_score from a thread still grades correctly."""
    from math_verify import parse

    seen: dict[str, object] = {}

    def in_thread() -> None:
        try:
            parse("$\\frac{1}{2}$")
        except ValueError as exc:
            seen["math_verify"] = exc
        seen["ours"] = rewards.compute_score(M, "\\boxed{0.5}", "\\frac{1}{2}", **SETTINGS)

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert isinstance(seen.get("math_verify"), ValueError)
    assert seen["ours"]["acc"] is True and seen["ours"]["error"] == ""


def test_unknown_data_source_is_a_clear_error_not_a_zero():
    with pytest.raises(ValueError, match=r"no reward for data_source 'poetry__haiku'.*codegen, logic, math"):
        rewards.compute_score("poetry__haiku", "\\boxed{1}", "1", **SETTINGS)
    with pytest.raises(ValueError, match=r"unknown reward setting\(s\) colour.*valid: cache_size"):
        rewards.compute_score(M, "\\boxed{1}", "1", colour="blue")
