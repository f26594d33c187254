"""Typed records travel typed: the preflight's verdict (launch/verdict.py), readiness's record (launch/rundir.py
Readiness: problems, data read, the time check) and a sweep's manifest (launch/manifest.py: its runs and arrays) are
read by attribute everywhere but in the module that owns their JSON; each writes the JSON plan.json has always held
and reads it back; every key=value goes through the one quoter."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path

import pytest
from conftest import PROJECT, compose_config, cpu_facts
from test_preflight import RESIDENT, SEED_A40

from launch import preflight, verdict
from launch.job_software import JobSoftware
from launch.manifest import ManifestArray, ManifestRun
from launch.overrides import as_override, as_overrides
from launch.plan import make_plan
from launch.rundir import DataRead, Plan, PredictedTime, Readiness, ReadinessProblem
from launch.verdict import Verdict


@dataclass(frozen=True)
class Record:
    """A record read by string key somewhere: `roots` match the expressions that hold it (a read on anything whose
    source names one, e.g. `(plan.preflight or {})`), `keys` are its JSON keys. A name assigned from such a read holds
    a part of it (found = verdict.get("fits_with")), and so does a loop variable over one."""

    name: str
    owners: frozenset[str]  # the modules that read its JSON by key (paths under the project)
    roots: re.Pattern[str]
    keys: frozenset[str]


def field_names(*records: type) -> frozenset[str]:
    return frozenset(item.name for record in records for item in fields(record))


VERDICT_PARTS = [
    value for value in vars(verdict).values() if is_dataclass(value) and value.__module__ == verdict.__name__
]
RECORDS = (
    Record(
        "verdict",
        frozenset({"launch/verdict.py"}),
        re.compile(r"\b(verdict|preflight|phases?|fits_with|typical)\b"),
        field_names(*VERDICT_PARTS, JobSoftware),
    ),
    Record(
        "readiness",
        frozenset({"launch/rundir.py"}),
        re.compile(r"\breadiness\b"),
        field_names(Readiness, ReadinessProblem, DataRead, PredictedTime),
    ),
    Record(
        "manifest",
        frozenset({"launch/manifest.py"}),
        re.compile(r"\b(manifest|runs|arrays?|entry|record|submitted)\b|\brun\b(?!\.)"),
        field_names(ManifestRun, ManifestArray) - {"name"},
    ),
)
# String-key reads in modules that are not this file's to change, each with its key: what is left to turn into
# attribute reads. Take an entry off when its read goes (the test below says so); never add one.
KNOWN_STRING_READS: set[tuple[str, str, str]] = set()


def read_key(node: ast.AST) -> tuple[ast.expr, str] | None:
    """(receiver, key) of `x["key"]` (a load) or `x.get("key", ...)`."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return node.value, key.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        key = node.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return node.func.value, key.value
    return None


def bindings(scope: ast.AST) -> list[tuple[list[str], ast.AST]]:
    """(names bound, the expression they are bound from) in a scope: assignments, loops and comprehensions."""
    found = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.append(([n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)], node.value))
        elif isinstance(node, ast.For | ast.comprehension):
            found.append(([n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)], node.iter))
    return found


def scope_reads(scope: ast.AST, record: Record) -> set[tuple[int, str]]:
    """(line, key) of the record's string-key reads in one function (or a module's top level)."""
    holders: set[str] = set()  # names bound to the record or a part of it

    def holds(expression: ast.AST) -> bool:
        names = {node.id for node in ast.walk(expression) if isinstance(node, ast.Name)}
        return bool(record.roots.search(ast.unparse(expression))) or bool(names & holders)

    def flagged(expression: ast.AST) -> list[tuple[int, str]]:
        return [
            (node.lineno, found[1])
            for node in ast.walk(expression)
            if (found := read_key(node)) is not None and found[1] in record.keys and holds(found[0])
        ]

    changed = True
    while changed:  # a part of a part (mine = found.get("on_your_gpus")) holds the record too
        changed = False
        for names, value in bindings(scope):
            takes = flagged(value) or {node.id for node in ast.walk(value) if isinstance(node, ast.Name)} & holders
            if takes and not set(names) <= holders:
                holders.update(names)
                changed = True
    return set(flagged(scope))


def string_reads(source: str, record: Record) -> list[tuple[int, str]]:
    """(line, key) of every read of the record by string key in `source`, function by function."""
    tree = ast.parse(source)
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    top_level = ast.Module(body=[node for node in tree.body if not isinstance(node, definitions)], type_ignores=[])
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    return sorted(set().union(*(scope_reads(scope, record) for scope in [top_level, *functions])))


def launch_reads() -> set[tuple[str, str, str]]:
    found = set()
    for path in sorted((PROJECT / "launch").rglob("*.py")):
        relative = str(path.relative_to(PROJECT))
        for record in RECORDS:
            if relative not in record.owners:
                found |= {(relative, record.name, key) for _, key in string_reads(path.read_text(), record)}
    return found


def test_no_module_reads_a_typed_record_by_string_key_outside_its_owner():
    found = launch_reads()
    assert found - KNOWN_STRING_READS == set(), "read these by attribute (launch/verdict.py, rundir.Readiness)"
    assert KNOWN_STRING_READS - found == set(), "these reads are gone: take them off KNOWN_STRING_READS"


# the reads the finder must see: the verdict and readiness's time as render, validate, the doctor, the fit table and
# the forecast read them while they travelled as dicts
OLD_READS = """
def render_preflight(verdict):
    predicted = verdict["predicted"]
    lines = [f"{predicted['mfu']:.0%} {verdict['policy']}"]
    usual = verdict.get("typical")
    peaks = usual["peaks_gib"]
    for fix in verdict.get("fixes", []):
        lines.append(fix["fits"])

def gpu_count_refusal(plan):
    verdict = plan.preflight
    found = verdict.get("fits_with") or {}
    needed = found.get("gpus_needed_offloaded") or found.get("gpus_needed")
    return needed["overrides"]

def planned_knobs(run):
    return (run.local_plan.preflight or {}).get("knobs")

def row(verdict):
    return {name: phase["peak_gib"] for name, phase in verdict["phases"].items()}

def forecast(plan):
    timing = (plan.readiness or {}).get("time") or {}
    return timing.get("total_steps"), timing.get("attempt_min")

def render_readiness(readiness):
    files = readiness["data"]
    return [file["rows"] for file in files]

def refuse(plan):
    problems = (plan.readiness or {}).get("problems") or []
    return problems[0]["check"]

def status(manifest):
    for run in manifest.runs:
        print(run["job_id"], run.get("array_job_id"), progress(run["run_dir"]))
    arrays = ", ".join(f"{array['job_id']} ({array['tasks']})" for array in manifest.arrays)

def job_logs(entry):
    return Path(entry["stderr"]).parent
"""
# dicts that are not the records: a file list, verl's config, a metric history
UNRELATED_READS = """
def batch(plan):
    rollout = plan.verl["actor_rollout_ref"]["rollout"]
    return rollout["n"], plan.worker_env["WANDB_MODE"]

def trend(history, step):
    return history[step]["response_length/mean"], {"fits": 1}["fits"]
"""


def test_the_string_read_finder_sees_the_old_dict_reads_and_leaves_other_dicts_alone():
    verdict_reads = sorted(key for _, key in string_reads(OLD_READS, RECORDS[0]))
    assert verdict_reads == sorted(
        ["predicted", "mfu", "policy", "typical", "peaks_gib", "fixes", "fits", "fits_with"]
        + ["gpus_needed_offloaded", "gpus_needed", "overrides", "knobs", "phases", "peak_gib"]
    )
    readiness_reads = sorted(key for _, key in string_reads(OLD_READS, RECORDS[1]))
    assert readiness_reads == ["attempt_min", "check", "data", "problems", "rows", "time", "total_steps"]
    manifest_reads = sorted(key for _, key in string_reads(OLD_READS, RECORDS[2]))
    assert manifest_reads == ["array_job_id", "job_id", "job_id", "run_dir", "stderr", "tasks"]
    assert all(string_reads(UNRELATED_READS, record) == [] for record in RECORDS)


# --- the verdict's JSON ----------------------------------------------------------------------------------------------

SEED_MISFIT = (*SEED_A40, *RESIDENT, "actor_rollout_ref.rollout.gpu_memory_utilization=0.8")


def planned(*overrides: str) -> Plan:
    """A plan as run.plan_job makes it: settled by the policy first, then planned with its verdict."""
    from launch.compose_once import full_resolution

    cfg = compose_config(*overrides)
    settled, resolved = preflight.settle(cfg, full_resolution(cfg), cpu_facts(), list(overrides), full_resolution)
    return make_plan(cfg, cpu_facts(), list(overrides), Path("/tmp"), "python", resolved=resolved, verdict=settled)


@pytest.mark.parametrize(
    "overrides",
    [
        ("gpu=a100_80",),  # fits
        SEED_MISFIT,  # a misfit with fixes, one of them a key the user set, and what fits
        ("gpu=a40", "launch.preflight=tune"),  # changed, and what it was before
        ("gpu=a40", "actor_rollout_ref.rollout.gpu_memory_utilization=0.1", "launch.preflight=fix"),  # no KV room
    ],
)
def test_the_verdict_reads_back_from_plan_json_as_it_was_written(overrides):
    plan = planned(*overrides)
    assert plan.preflight is not None
    written = json.loads(json.dumps(plan.to_dict()))
    assert Plan.from_dict(written) == plan
    assert Verdict.from_dict(written["preflight"]).to_dict() == written["preflight"]


def test_the_verdict_json_keeps_its_keys_in_order_and_a_misfits_parts_only_for_a_misfit():
    fits = planned("gpu=a100_80").preflight
    misfit = planned(*SEED_MISFIT).preflight
    tuned = planned("gpu=a40", "launch.preflight=tune").preflight
    assert fits is not None and misfit is not None and tuned is not None
    head = ["fits", "misfit", "phases", "arithmetic", "host_ram_gib_per_node", "host_ram", "predicted", "policy"]
    tail = ["typical", "job_software", "knobs", "not_counted"]
    assert list(fits.to_dict()) == head + tail
    misfit_parts = ["fixes", "first_fitting_fixes", "unfixable_without_your_keys", "fits_with"]
    assert list(misfit.to_dict()) == head + misfit_parts + tail
    assert list(tuned.to_dict()) == head + tail + ["changed", "before"]
    assert list(misfit.to_dict()["fits_with"]) == ["on_your_gpus", "gpus_needed", "summary"]


def test_an_older_plan_json_without_the_later_parts_still_reads():
    written = planned("gpu=a100_80").to_dict()["preflight"]
    for later in ("typical", "job_software", "knobs", "not_counted", "host_ram"):
        del written[later]
    old = Verdict.from_dict(written)
    assert old.typical is None and old.knobs is None and old.not_counted == () and old.host_ram == ()
    written["knobs"] = {"n_gpus": 8}  # another launcher's knobs: none rather than guessed ones
    assert Verdict.from_dict(written).knobs is None


# --- the quoter ----------------------------------------------------------------------------------------------------


def test_the_preflights_overrides_read_back_as_hydra_reads_them():
    """Booleans as Hydra writes them (`true`, where f-strings once wrote `True`), numbers as they are, strings
    quoted."""
    assert as_overrides({"a.b": True, "c": 0.35, "d": 4, "e": "x,y"}) == ["a.b=true", "c=0.35", "d=4", "e='x,y'"]
    assert as_override("trainer.val_before_train", False) == "trainer.val_before_train=false"
    misfit = planned(*SEED_MISFIT).preflight
    assert misfit is not None and misfit.fits_with is not None and misfit.fits_with.on_your_gpus is not None
    written = [*misfit.first_fitting_fixes, *misfit.fits_with.on_your_gpus.overrides]
    written += [override for fix in misfit.fixes for override in as_overrides(fix.overrides)]
    assert "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true" in written
    assert not [override for override in written if override.endswith(("=True", "=False"))]


def test_readiness_reads_back_from_plan_json_as_it_was_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A SLURM plan whose data exists and whose model no cache holds: its problems, the data read and the time check
    travel typed through plan.json, and refuse() names the first problem's check."""
    from test_readiness import on_partition
    from tiny_assets import make_tiny_dataset

    from launch.readiness import refuse
    from launch.run import plan_job
    from launch.rundir import load_plan, save_plan

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache: the model is missing from it
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    train, val = make_tiny_dataset(tmp_path / "guru", ("math", "logic"), per_source=8)
    overrides = [
        "cluster=slurm",
        f"cluster.shared_dir={tmp_path}",
        f"data.train_files={train}",
        f"data.val_files={val}",
    ]
    plan = plan_job(compose_config(*overrides), overrides, gather=on_partition)
    assert plan.readiness is not None and [file.rows for file in plan.readiness.data] == [16, 4]
    assert plan.readiness.data[0].data_sources and plan.readiness.time is not None
    assert plan.predicted_time == plan.readiness.time
    Path(plan.run_dir).mkdir(parents=True)
    save_plan(plan)
    assert load_plan(plan.run_dir).readiness == plan.readiness
    first = plan.readiness.problems[0]
    with pytest.raises(
        Exception, match=rf"\[check '{first.check}': launch.skip_checks=\[{first.check}\] turns it off\]"
    ):
        refuse([plan])
