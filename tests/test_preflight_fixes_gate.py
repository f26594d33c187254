"""What a plan's headline and the gate say of verdicts: one too close to call is queued, and says so; a sweep with
several misfits is refused naming each of them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import compose_config, cpu_facts

from launch import preflight, render
from launch.errors import UserError
from launch.memory import Phase, Term
from launch.plan import make_plan
from launch.rundir import Plan
from launch.verdict import Predicted, Verdict


def verdict_at(training_gib: float, capacity: float = 79.1) -> Verdict:
    phases = [
        Phase(name, (Term("states", peak),), capacity) for name, peak in (("training", training_gib), ("rollout", 40.0))
    ]
    return Verdict.of(phases, (Term("offloaded", 100.0),), Predicted(0.3, 1000, 8192), "fail")


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    cfg = compose_config("gpu=h100")
    return make_plan(cfg, cpu_facts(), ["gpu=h100"], tmp_path_factory.mktemp("plan"), "python")


def test_a_verdict_too_close_to_call_says_so_in_the_headline(plan: Plan) -> None:
    """A misfit only within the estimate's band: the gate queues it with a warning, so the plan's headline says it is
    too close to call, not DOES NOT FIT (a pasted Megatron moonlight script's plan said "DOES NOT FIT" while the gate
    queued it)."""
    close = verdict_at(80.0)
    assert close.too_close_to_call
    head = render.render_preflight(close)[0]
    assert head.startswith("  preflight     TOO CLOSE TO CALL, queued (launch.preflight=fail)")
    assert "DOES NOT FIT" not in head
    assert preflight.gate([replace(plan, preflight=close)], "fail")[0].startswith("preflight cannot call ")
    clear = verdict_at(90.0)
    assert render.render_preflight(clear)[0].startswith("  preflight     DOES NOT FIT (launch.preflight=fail)")
    assert render.render_preflight(verdict_at(60.0))[0].startswith("  preflight     fits (launch.preflight=fail)")


def test_a_sweep_with_several_misfits_is_refused_naming_each(plan: Plan) -> None:
    """A sweep of four models on A40s refused naming the first misfit only; its other misfits came out one at a
    time, a submission each. The first line names each misfit and that nothing of the sweep was submitted; the first
    misfit's arithmetic follows."""
    jobs = [
        replace(plan, job_name="llm=small", preflight=verdict_at(60.0)),
        replace(plan, job_name="llm=big", preflight=verdict_at(90.0)),
        replace(plan, job_name="llm=close", preflight=verdict_at(80.0)),
        replace(plan, job_name="llm=bigger", preflight=verdict_at(120.0)),
    ]
    with pytest.raises(UserError) as refused:
        preflight.gate(jobs, "fail")
    first, *rest = str(refused.value).splitlines()
    assert first.startswith(
        "preflight refuses 2 of 4 jobs (llm=big, llm=bigger): nothing of the sweep was submitted"
    ), first
    assert "llm=small" not in first and "llm=close" not in first
    alone = render.refusal(jobs[1].preflight, "llm=big").splitlines()
    assert alone[0].removeprefix("preflight refuses ") in first and rest == alone[1:]
    # one misfit, alone or in a sweep: its refusal as it was
    with pytest.raises(UserError) as single:
        preflight.gate(jobs[:2], "fail")
    assert str(single.value) == render.refusal(jobs[1].preflight, "llm=big")
