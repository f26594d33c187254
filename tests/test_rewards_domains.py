"""logic, simulation, table and stem rewards through the real pipeline; stem against a local HTTP server that
plays the verifier model (the model itself cannot run here)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

import rewards
from rewards.domains import stem

SETTINGS = {"procs": 2}
ZEBRA = {"header": ["House", "Name", "Pet"], "rows": [["1", "Alice", "cat"], ["2", "Bob", "dog"]]}


def answer(text: str) -> str:
    return f"<think>draft <answer>wrong</answer></think>Done.\n<answer>{text}</answer>"


# (data_source, response, ground truth, expected score)
CASES = [
    # zebra: fraction of correct cells
    ("logic__zebra_puzzle_dataset", answer(json.dumps(ZEBRA)), ZEBRA, 1.0),
    ("logic__zebra_puzzle_dataset", answer('{"rows": [["1", "alice", "Cat"], ["2", "Bob", "fish"]]}'), ZEBRA, 5 / 6),
    ("logic__zebra_puzzle_dataset", answer("Alice owns the cat"), json.dumps(ZEBRA), 0.0),
    ("logic__zebra_puzzle", "<answer>" + json.dumps(ZEBRA), ZEBRA, 0.0),  # never closed: no answer
    # ordering: list match, numpy ground truth as parquet hands it over
    ("logic__ordering_puzzle_dataset", answer("['Robin', 'owl', 'Hawk']"), np.array(["robin", "owl", "hawk"]), 1.0),
    ("logic__ordering_puzzle_dataset", answer("[robin, owl, hawk]"), ["robin", "owl", "hawk"], 1.0),
    ("logic__ordering_puzzle_dataset", answer("['owl', 'robin', 'hawk']"), ["robin", "owl", "hawk"], 0.0),
    # graph questions
    ("logic__graph_logical_dataset", answer("B"), "b", 1.0),
    ("logic__graph_logical_dataset", answer("12"), "12.0", 1.0),
    ("logic__graph_logical_dataset", answer("C"), "B", 0.0),
    # ARC grids: exact match
    ("logic__arcagi1", answer("[[1, 2], [3, 4]]"), [[1, 2], [3, 4]], 1.0),
    ("logic__barc", answer("The grid:\n[[1, 2],\n [3, 4]]"), np.array([[1, 2], [3, 4]]), 1.0),
    ("logic__arcagi2", answer("[[1, 2], [3, 5]]"), [[1, 2], [3, 4]], 0.0),
    ("logic__arcagi1", answer("[[1, 2]]"), [[1, 2], [3, 4]], 0.0),
    # simulation (CodeIO): JSON equality after normalization
    (
        "simulation__codeio",
        '```json\n{"output": {"result": 42, "ok": "true"}}\n```',
        '"output": {"result": 42, "ok": true}',
        1.0,
    ),
    ("simulation__codeio", 'I think it is {"output": [1, 2, 3]} overall.', '{"output": [1, 2, 3]}', 1.0),
    ("simulation__codeio", '```json\n{"input": {"n": "[1, 2]"}}\n```', '"input": {"n": [1, 2]}', 1.0),
    ("simulation__codeio", '```json\n{"output": {"result": 41}}\n```', '"output": {"result": 42}', 0.0),
    ("simulation__codeio", "no json here", '"output": 1', 0.0),
    # table: numeric tolerance and a|b|c set answers
    ("table__hitab", "\\boxed{1,234.5}", "1234.5", 1.0),
    ("table__hitab", "\\boxed{33.33\\%}", "33.3", 1.0),
    ("table__hitab", "\\boxed{33.4}", "33", 0.0),
    ("table__multihier", "\\boxed{\\text{Canada}}", "canada", 1.0),
    ("table__multihier", "\\boxed{b | a|c}", "a|b|c", 1.0),
    ("table__multihier", "\\boxed{a|b}", "a|b|c", 0.0),
    ("table__hitab", "<think>\\boxed{7}</think>\\boxed{8}", "7", 0.0),
]


def test_structured_domains_positive_and_negative():
    results = rewards.score_batch(
        [{"data_source": d, "solution_str": s, "ground_truth": g} for d, s, g, _ in CASES], **SETTINGS
    )
    wrong = [
        (d, s, want, got)
        for (d, s, _, want), got in zip(CASES, results, strict=True)
        if abs(got["score"] - want) > 1e-9 or got["error"]
    ]
    assert not wrong, wrong
    assert all(set(result) == set(rewards.RESULT_KEYS) for result in results)
    for (d, _, _, want), got in zip(CASES, results, strict=True):
        assert got["acc"] is (want == 1.0), d


def test_set_answers_report_the_matched_fraction():
    result = rewards.compute_score("table__hitab", "\\boxed{a|x}", "a|b", **SETTINGS)
    assert result["score"] == 0.0 and result["passed"] == 0.5


@pytest.mark.parametrize("data_source", ["math__x", "table__hitab", "logic__graph_logical", "simulation__codeio"])
def test_a_null_ground_truth_is_an_error_never_the_text_none(data_source: str):
    """A parquet null was once the string "None": `\\boxed{None}` scored 1.0 and any other answer a judged 0.0."""
    for truth in (None, [None], np.array([None], dtype=object)):
        result = rewards.compute_score(data_source, "\\boxed{None} <answer>None</answer>", truth, **SETTINGS)
        assert result["errored"] == 1.0 and result["score"] == 0.0, (truth, result)
        assert result["error"].startswith("no ground truth"), result


def test_an_unknown_logic_dataset_is_a_clear_error():
    with pytest.raises(ValueError, match="no logic reward for data_source 'logic__sudoku'.*zebra"):
        rewards.compute_score("logic__sudoku", "<answer>1</answer>", "1", **SETTINGS)


# --- stem: a local server plays the verifier model ---


class Judge(BaseHTTPRequestHandler):
    """Grades by comparing the reference and the student answer in the prompt; the behaviour can be switched."""

    mode = "grade"
    failures_left = 0
    active = 0
    peak = 0
    requests = 0
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        with cls.lock:
            cls.requests += 1
            cls.active += 1
            cls.peak = max(cls.peak, cls.active)
            failing = cls.failures_left > 0
            cls.failures_left -= 1
        busy = True
        try:
            time.sleep(0.2)
            if cls.mode == "slow":
                time.sleep(3)
            # the request is answered from here on: it leaves the count before the client can read the answer and
            # send its next one (counted after the write, that next request could meet this one still counted)
            with cls.lock:
                cls.active -= 1
                busy = False
            if failing:
                self.send_error(503)
                return
            if cls.mode == "bad-request":
                self.send_error(400)
                return
            prompt = body["messages"][0]["content"]
            reference = prompt.split("Reference answer:\n", 1)[1].split("\n", 1)[0].strip()
            student = prompt.split("Student answer:\n", 1)[1].split("\n", 1)[0].strip()
            grade = "CORRECT" if reference.replace(" ", "") == student.replace(" ", "") else "INCORRECT"
            text = "I think so." if cls.mode == "no-grade" else f"Reasoning...\n<Final Grade>: {grade}"
            reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first (the timeout case)
        finally:
            if busy:
                with cls.lock:
                    cls.active -= 1

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def judge_url() -> Iterator[str]:
    Judge.mode, Judge.failures_left, Judge.peak, Judge.requests = "grade", 0, 0, 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Judge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def stem_items(n: int, right: bool = True) -> list[dict]:
    return [
        {
            "data_source": "stem__web",
            "solution_str": f"<think>\\boxed{{0}}</think> so \\boxed{{{i if right else i + 1} m/s}}",
            "ground_truth": f"{i} m/s",
            "extra_info": {"question": f"How fast is object {i}?"},
        }
        for i in range(n)
    ]


def test_stem_judge_grades_concurrency_limited(judge_url):
    settings = {**SETTINGS, "stem_judge_url": judge_url, "stem_judge_model": "verifier", "stem_judge_concurrency": 3}
    results = rewards.score_batch(stem_items(8) + stem_items(4, right=False), **settings)
    assert [r["score"] for r in results] == [1.0] * 8 + [0.0] * 4
    assert all(r["error"] == "" for r in results)
    assert Judge.peak == 3  # 12 requests, never more than 3 at once
    no_box = rewards.compute_score("stem__web", "It is 3 m/s.", "3 m/s", {"question": "q"}, **settings)
    assert no_box["score"] == 0.0 and no_box["error"] == ""  # judged without asking: nothing to judge


def test_stem_judge_retries_server_errors(judge_url):
    Judge.failures_left = 2
    settings = {
        **SETTINGS,
        "stem_judge_url": judge_url + "/v1",
        "stem_judge_model": "verifier",
        "stem_judge_retries": 2,
    }
    result = rewards.compute_score(**stem_items(1)[0], **settings)
    assert result["score"] == 1.0 and Judge.requests == 3


@pytest.mark.parametrize(
    ("mode", "settings", "error"),
    [
        ("grade", {"stem_judge_url": "http://127.0.0.1:9", "stem_judge_retries": 1}, "judge unreachable at"),
        ("slow", {"stem_judge_timeout_s": 1, "stem_judge_retries": 0}, "judge unreachable at"),
        ("bad-request", {"stem_judge_retries": 3}, "HTTP 400"),
        ("no-grade", {}, "judge reply has no final grade"),
        ("grade", {"stem_judge_url": None}, "judge unreachable: set reward.custom_reward_function"),
    ],
)
def test_stem_judge_failures_are_reported_not_zeroed(judge_url, mode, settings, error):
    Judge.mode = mode
    full = {**SETTINGS, "stem_judge_url": judge_url, "stem_judge_model": "verifier", **settings}
    result = rewards.compute_score(**stem_items(1)[0], **full)
    assert error in result["error"] and result["errored"] == 1.0 and result["score"] == 0.0
    if mode == "bad-request":
        assert Judge.requests == 1  # a 4xx is not retried


def test_judge_endpoint_forms():
    assert stem.endpoint("http://h:8000") == "http://h:8000/v1/chat/completions"
    assert stem.endpoint("http://h:8000/v1/") == "http://h:8000/v1/chat/completions"
    assert stem.endpoint("http://h/x/chat/completions") == "http://h/x/chat/completions"
