"""codegen rewards in the real bubblewrap sandbox: GURU's test formats, and a hostile-code corpus run as root AND as
an unprivileged user (uid 65534), each case contained — scored 0 with no error — and the machine unaffected."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import PROJECT, require_or_skip

import rewards
from rewards import sandbox
from rewards.domains import codegen

CODE = {"procs": 2, "code_wall_s": 3.0, "code_cpu_s": 2, "code_memory_mb": 512, "code_disk_mb": 32}
NOBODY = 65534


@pytest.fixture(autouse=True)
def needs_bubblewrap() -> None:
    reason = sandbox.unavailable_reason(sandbox.Limits())
    if reason:
        require_or_skip(f"{reason} (Makefile: apt-get install bubblewrap)")


def sample(program: str, ground_truth: dict, fence: str = "python") -> dict:
    return {
        "data_source": "codegen__leetcode2k",
        "solution_str": f"<think>```python\nprint('draft')\n```</think>Here it is:\n```{fence}\n{program}\n```\n",
        "ground_truth": json.dumps(ground_truth),
    }


def stdio(*pairs: tuple[str, str]) -> dict:
    return {"inputs": [i for i, _ in pairs], "outputs": [o for _, o in pairs]}


DOUBLE = "n = int(input())\nprint(n * 2)"
# (program, ground truth, expected score, expected passed fraction)
CASES = [
    (DOUBLE, stdio(("2\n", "4\n"), ("21\n", "42\n")), 1.0, 1.0),
    (DOUBLE, stdio(("2\n", "4\n"), ("21\n", "43\n")), 0.0, 0.5),
    ("print(sum(map(int, input().split())) / 3)", stdio(("1 1 0\n", "0.6666667\n")), 1.0, 1.0),
    ("print('a  ')\nprint()\n", stdio(("", "a\n")), 1.0, 1.0),
    ("raise SystemExit(3)", stdio(("", "")), 0.0, 0.0),
    ("print(undefined)", stdio(("", "x")), 0.0, 0.0),
    ("while True:\n    pass", stdio(("", "x")), 0.0, 0.0),
    ("def add(a, b):\n    return a + b", {"functional": "assert add(1, 2) == 3\nassert add(-1, 1) == 0"}, 1.0, 1.0),
    ("def add(a, b):\n    return a - b", {"functional": "assert add(1, 2) == 3"}, 0.0, 0.0),
    # the exit(0) hack: leave with success before the asserts run
    ("import sys\ndef add(a, b):\n    return a - b\nsys.exit(0)", {"functional": "assert add(1, 2) == 3"}, 0.0, 0.0),
    # helper-35's hack: print the end marker read out of the program's own file, then leave before the asserts
    (
        "import os, re\nfor name in os.listdir('/program'):\n    found = re.findall(r'rlaunch-tests-done-[0-9a-f]+', "
        "open('/program/' + name).read())\n    print(*found, flush=True)\nos._exit(0)\ndef add(a, b):\n    return 0",
        {"functional": "assert add(1, 2) == 3\nassert add(-1, 1) == 0"},
        0.0,
        0.0,
    ),
    (
        "class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
        "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
        "                return [seen[target - x], i]\n            seen[x] = i",
        {"functional": "def check(f):\n    assert f([2, 7, 11, 15], 9) == [0, 1]\ncheck(Solution().twoSum)"},
        1.0,
        1.0,
    ),
]


def test_codegen_formats_positive_and_negative():
    results = rewards.score_batch([sample(p, gt) for p, gt, _, _ in CASES], **CODE)
    got = [(r["score"], r["passed"], r["error"]) for r in results]
    assert got == [(score, passed, "") for _, _, score, passed in CASES]


def test_codegen_without_code_or_with_bad_tests():
    no_code = {**sample(DOUBLE, stdio(("2\n", "4\n"))), "solution_str": "n*2, obviously"}
    bad_truth = {**sample(DOUBLE, {}), "ground_truth": "not json"}
    uneven = sample(DOUBLE, {"inputs": ["1"], "outputs": []})
    results = rewards.score_batch([no_code, bad_truth, uneven], **CODE)
    assert results[0]["score"] == 0.0 and results[0]["error"] == ""
    assert results[1]["error"] == "codegen ground truth is not JSON"
    assert "same, non-zero length" in results[2]["error"]


def test_no_sandbox_means_refused_never_unconfined(monkeypatch, tmp_path):
    marker = tmp_path / "ran-unconfined"
    limits = sandbox.Limits(uid=NOBODY - 1)  # not yet known to work in this process
    real_tool = sandbox._tool
    monkeypatch.setattr(sandbox, "_tool", lambda name: None if name == "bwrap" else real_tool(name))
    result = codegen.grade(f"open({str(marker)!r}, 'w').write('x')", json.dumps(stdio(("", ""))), limits, 1, 10)
    assert result["errored"] == 1.0 and result["score"] == 0.0
    assert (
        result["error"].startswith("sandbox unavailable: bwrap not found") and "never run unconfined" in result["error"]
    )
    assert not marker.exists()


# --- the hostile corpus ---


Corpus = list[tuple[str, dict, float]]


def hostile_corpus(nonce: str, port: int, key: str, secret_file: Path) -> tuple[Corpus, list[Path]]:
    """(name, sample, expected score) and the host paths an escape would create. Each hostile program prints what
    a successful escape would print, and that is its expected output: contained means score 0 and no error."""
    outside = [
        Path(f"/tmp/rlaunch-escape-{nonce}"),
        Path(f"/var/tmp/rlaunch-escape-{nonce}"),
        Path(f"/dev/shm/rlaunch-escape-{nonce}"),
        PROJECT / f"rlaunch-escape-{nonce}",
        Path(f"/root/rlaunch-escape-{nonce}"),
    ]
    programs = {
        "network": (
            f"import socket\nout = 'blocked'\nfor host, port in [('127.0.0.1', {port}), ('1.1.1.1', 53), "
            "('pypi.org', 443)]:\n    try:\n        socket.create_connection((host, port), timeout=2).close()\n"
            "        out = 'CONNECTED'\n    except OSError:\n        pass\nprint(out)",
            "CONNECTED",
        ),
        "fork bomb": (
            "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
            "alive",
        ),
        "memory bomb": ("blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))", "allocated"),
        "disk fill": (
            "i = 0\ntry:\n    while True:\n        with open(f'fill{i}', 'wb') as f:\n"
            "            f.write(b'0' * (4 << 20))\n        i += 1\nexcept OSError:\n    pass\nprint('filled', i)",
            "disk is endless",
        ),
        "write outside": (
            f"paths = {[str(p) for p in outside]!r}\nwrote = []\nfor path in paths:\n    try:\n"
            "        open(path, 'w').write('x')\n        wrote.append(path)\n    except OSError:\n        pass\n"
            "print('WROTE' if wrote else 'contained')",
            "WROTE",
        ),
        "read secrets": (
            "import glob, os, re\nfound = os.environ.get('RLAUNCH_FAKE_API_KEY', '')\n"
            f"sources = glob.glob('/proc/*/environ') + [{str(secret_file)!r}]\nfor path in sources:\n    try:\n"
            "        text = open(path, 'rb').read().decode(errors='replace')\n    except OSError:\n        continue\n"
            "    match = re.search(r'sk-rlaunch-fake-[0-9a-f]+', text)\n    found = found or (match.group(0) if match "
            "else '')\nprint(found or 'nothing')",
            key,
        ),
        "infinite loop": ("while True:\n    pass", "done"),
        "kill the parent": (
            "import os, signal\nfor pid in (os.getppid(), 1, -1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
            "    except OSError:\n        pass\nprint('parent killed')",
            "parent dead",
        ),
        "sleep past the timeout with children": (
            "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n"
            "        time.sleep(1000)\n        os._exit(0)\ntime.sleep(1000)",
            "woke up",
        ),
    }
    corpus = [(name, sample(program, stdio(("", out))), 0.0) for name, (program, out) in programs.items()]
    # an orphan left behind by a correct program: right answer, and the orphan dies with the sandbox
    orphan = (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1000)\n    os._exit(0)\nprint('done')"
    )
    corpus.append(("orphan after a right answer", sample(orphan, stdio(("", "done"))), 1.0))
    corpus.append(("control", sample(DOUBLE, stdio(("21\n", "42\n"))), 1.0))
    return corpus, outside


@pytest.fixture
def secret() -> Iterator[tuple[str, str, Path]]:
    """A fake API key, and a file on the host holding it."""
    nonce = uuid.uuid4().hex[:12]
    key = f"sk-rlaunch-fake-{nonce}"
    path = Path(f"/tmp/rlaunch-secret-{nonce}")
    path.write_text(key)
    path.chmod(0o644)  # readable by anyone on the host: only the sandbox's view keeps it out
    yield nonce, key, path
    path.unlink(missing_ok=True)


@pytest.fixture
def listener() -> Iterator[tuple[int, list[object]]]:
    """A TCP server on the host's loopback; a sandbox that reaches it shows up in `connections`."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    connections: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connections.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], connections
    stop.set()
    thread.join()
    server.close()


def sandbox_processes() -> list[str]:
    """Processes that belong to a sandbox (the program's path) or, when we are root, run as nobody (as root, only
    sandboxes and the unprivileged run do)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            uid = int(Path(f"/proc/{pid}/status").read_text().split("\nUid:", 1)[1].split()[0])
        except (OSError, IndexError, ValueError):
            continue
        if b"/program/main.py" in cmdline or (uid == NOBODY and os.geteuid() == 0):
            command = cmdline.replace(b"\0", b" ")[:80]
            found.append(f"{pid} uid={uid} {command!r}")
    return found


def assert_machine_unaffected(before: list[str], outside: list[Path], connections: list[object]) -> None:
    deadline = time.monotonic() + 10
    while (stray := sorted(set(sandbox_processes()) - set(before))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not stray, f"processes left behind: {stray}"
    # os.path.exists: a place the caller cannot even look into (/root for nobody) was not writable for it either
    assert not [p for p in outside if os.path.exists(p)], "a file was written outside the sandbox"
    assert connections == [], "a sandbox reached the host's loopback"


RUN_AS_NOBODY = """
import json, sys
import rewards
items, settings = json.load(sys.stdin)
results = rewards.score_batch(items, **settings)
scorer = rewards.scorer(**settings)
print(json.dumps({"results": results, "restarts": scorer.pool.restarts}))
"""


def world_usable(path: str) -> bool:
    """Every directory on the way and the file itself open to others (a venv under /root is not)."""
    real = Path(os.path.realpath(path))
    return all(os.stat(d).st_mode & 0o001 for d in real.parents) and bool(os.stat(real).st_mode & 0o001)


def readable_by_nobody(path: Path, scratch: Path) -> str:
    """`path` itself when uid 65534 can reach it, else a copy in a world-readable scratch folder: a fresh clone often
    sits under a private directory (mktemp -d, a home), which the unprivileged user cannot traverse."""
    if world_usable(str(path)):
        return str(path)
    copy = scratch / path.name
    shutil.copytree(path, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return str(copy)


@contextmanager
def interpreter_for_nobody() -> Iterator[tuple[str, str]]:
    """A Python uid 65534 can run, and the PYTHONPATH that gives it rewards/: the venv's own interpreter when others
    may run it, else the system's of the same version (Debian ships it). The corpus's scoring imports nothing beyond
    rewards and the standard library, so the venv's packages are added only where nobody can already read them."""
    candidates = (sys.executable, f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    python = next((p for p in candidates if os.path.exists(p) and world_usable(p)), None)
    if python is None:
        require_or_skip("no Python interpreter of this version that uid 65534 may run")
    scratch = Path(tempfile.mkdtemp(prefix="rlaunch-nobody-", dir="/tmp"))
    try:
        scratch.chmod(0o755)
        path = [str(Path(readable_by_nobody(PROJECT / "rewards", scratch)).parent)]
        packages = sysconfig.get_paths()["purelib"]
        if world_usable(packages):
            path.append(packages)
        yield str(python), os.pathsep.join(path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_corpus(corpus: Corpus, results: list[dict]) -> None:
    bad = [
        (name, result)
        for (name, _, score), result in zip(corpus, results, strict=True)
        if result["score"] != score or result["error"]
    ]
    assert not bad, f"not contained (or refused): {bad}"


def run_corpus_here(monkeypatch: pytest.MonkeyPatch, listener: tuple, secret: tuple, settings: dict) -> None:
    """The corpus scored by this process (whoever it runs as), then the machine checked."""
    port, connections = listener
    nonce, key, secret_file = secret
    # planted before the scoring processes start, so they (the sandboxes' parents) hold it
    monkeypatch.setenv("RLAUNCH_FAKE_API_KEY", key)
    before = sandbox_processes()
    corpus, outside = hostile_corpus(nonce, port, key, secret_file)
    results = rewards.score_batch([item for _, item, _ in corpus], **settings)
    check_corpus(corpus, results)
    assert rewards.scorer(**settings).pool.restarts == 0  # no scoring process was killed or crashed
    assert_machine_unaffected(before, outside, connections)


def test_hostile_corpus_contained_as_root(monkeypatch, listener, secret):
    if os.geteuid() != 0:
        require_or_skip("the root half of the hostile corpus needs root")
    run_corpus_here(monkeypatch, listener, secret, {**CODE, "code_procs": 24})  # its own scorer: fresh processes


def test_hostile_corpus_contained_as_unprivileged_user(monkeypatch, listener, secret):
    """Cluster users are not root: the scoring runs as uid 65534 here (or as the caller, when that is not root),
    and the sandbox then rests on user namespaces alone."""
    if os.geteuid() != 0:
        run_corpus_here(monkeypatch, listener, secret, {**CODE, "code_procs": 23})
        return
    port, connections = listener
    nonce, key, secret_file = secret
    before = sandbox_processes()
    corpus, outside = hostile_corpus(nonce, port, key, secret_file)
    with interpreter_for_nobody() as (python, path):
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "RLAUNCH_FAKE_API_KEY": key, "PYTHONPATH": path}
        run = subprocess.run(
            [python, "-c", RUN_AS_NOBODY],
            input=json.dumps([[item for _, item, _ in corpus], {**CODE, "code_procs": 24}]),
            capture_output=True,
            text=True,
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            env=env,
            cwd="/tmp",  # the checkout may be private to its owner
            timeout=120,
        )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    check_corpus(corpus, report["results"])
    assert report["restarts"] == 0
    assert_machine_unaffected(before, outside, connections)
