"""The shape of the code: dependencies point one way (launch -> algos, rewards; never back) and no module imports
itself in a circle, counting imports inside functions (README.md#layout)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from conftest import PROJECT

PACKAGES = ("launch", "rewards", "algos", "hydra_plugins")


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (PROJECT / package).rglob("*.py"):
            name = ".".join(path.relative_to(PROJECT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def imported_names(path: Path) -> set[str]:
    """Every absolute import the file runs, wherever it stands (module level or inside a function; not the ones
    for type checkers alone): `from a import b` names a.b, which `import_graph` reads as the module a.b where there
    is one, else as a."""
    tree = ast.parse(path.read_text())
    typing_only = {  # `if TYPE_CHECKING:` blocks never run
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for inner in ast.walk(statement)
    }
    names = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = {owner(name) for name in imported_names(path)}
        graph[module] = {target for target in targets if target and target != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle_among_the_projects_modules():
    graph = import_graph()
    assert "launch.job" in graph and "algos.rft.validate" in graph  # the walk saw the tree
    assert cycles(graph) == [], "modules that import each other (directly or round a circle)"


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# Wrong-way edges inside the launcher: a module (or every module under a package) never imports another (or anything
# under it), counting imports inside functions. The checks never reach for the job's Ray client, the preflight never
# for the checks, the job's Ray client never for the reports, the reports never for the launcher's entry point; the
# failure classifier needs only the plan as it was written, never the code that composed it.
NEVER = (
    ("launch.validate", "launch.ray_submit"),
    ("launch.validate", "launch.ray_status"),
    ("launch.preflight", "launch.validate"),
    ("launch.ray_submit", "launch.report"),
    ("launch.ray_entry", "launch.report"),
    ("launch.report", "launch.run"),
    ("launch.report.failures", "launch.run"),
    ("launch.report.failures", "launch.plan"),
    ("launch.report.failures", "launch.preflight"),
)
# The edges that break a NEVER row today, each with the import that makes it: what is left to move. Take an entry
# off when its import goes (the test below says so); never add one.
KNOWN_WRONG_WAY: dict[tuple[str, str], str] = {}


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def wrong_way_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {
        (module, target)
        for importer, imported in NEVER
        for module, targets in graph.items()
        if within(module, importer)
        for target in targets
        if within(target, imported)
    }


def test_no_module_imports_the_wrong_way():
    found = wrong_way_edges(import_graph())
    assert found - set(KNOWN_WRONG_WAY) == set(), "imports against a NEVER row: turn them round, or move the code"
    assert set(KNOWN_WRONG_WAY) - found == set(), "these imports are gone: take them off KNOWN_WRONG_WAY"


def test_the_wrong_way_finder_reads_packages_whole_and_names_exactly():
    graph = {
        "launch.report.failures.logs": {"launch.run", "launch.rundir"},  # launch.rundir is not under launch.run
        "launch.ray_submit": {"launch.report.metrics"},
        "launch.rundir": {"launch.plan"},
    }
    assert wrong_way_edges(graph) == {
        ("launch.report.failures.logs", "launch.run"),
        ("launch.ray_submit", "launch.report.metrics"),
    }


def test_rewards_and_algos_never_import_the_launcher():
    offenders = {
        module: sorted(name for name in imported_names(path) if name.split(".")[0] == "launch")
        for module, path in project_modules().items()
        if module.split(".")[0] in ("rewards", "algos")
    }
    assert {module: names for module, names in offenders.items() if names} == {}


BLOCK_LAUNCH = """
import importlib, pkgutil, sys

class NoLauncher:
    def find_spec(self, name, path=None, target=None):
        if name == "launch" or name.startswith("launch."):
            raise ImportError(f"{name}: the launcher is not importable here")
        return None

sys.meta_path.insert(0, NoLauncher())
imported = []
for package in ("rewards", "algos"):
    root = importlib.import_module(package)
    imported.append(package)
    for module in pkgutil.walk_packages(root.__path__, package + "."):
        importlib.import_module(module.name)
        imported.append(module.name)
import rewards
from algos.tasks import task_of
assert rewards.domain_of("openai/gsm8k") == task_of("openai/gsm8k", {}) == "math"
print(" ".join(imported))
"""


def test_rewards_and_algos_import_where_the_launcher_cannot_be_imported():
    result = subprocess.run(
        [sys.executable, "-c", BLOCK_LAUNCH], cwd=PROJECT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    imported = result.stdout.split()
    assert {"rewards.scorer", "rewards.sources", "algos.tasks", "algos.rft.validate", "algos.verl_pcgrad"} <= set(
        imported
    )


# "Runs on: the login node", "Runs anywhere (...)", "Runs inside the job": each launch/ docstring says where it runs
RUNS_WHERE = re.compile(r"\bRuns (on|in|inside|anywhere|wherever)\b")
DOCSTRING_HEAD = 12  # lines: what the module owns comes first, where it runs right after


def test_every_module_says_where_it_runs_in_its_docstring():
    missing = []
    for module, path in sorted(project_modules().items()):
        if module.split(".")[0] not in ("launch", "algos", "rewards"):
            continue
        head = (ast.get_docstring(ast.parse(path.read_text())) or "").splitlines()[:DOCSTRING_HEAD]
        if not any(RUNS_WHERE.search(line) for line in head):
            missing.append(str(path.relative_to(PROJECT)))
    assert not missing, f"say where these run ('Runs on: ...') in the docstring's first lines: {', '.join(missing)}"
