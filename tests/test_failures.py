"""The failure classifier (launch/report/failures/) on real logs: the corpus under tests/data/failures/<kind>/
holds excerpts from public verl, vLLM, SGLang, Ray, NCCL and SLURM reports and from dev-cluster runs, noise included
(Ray's `(WorkerDict pid=...)` prefixes, tracebacks, submitit's lines), each with its source in its header."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_doctor import run_doctor

from launch.manifest import Manifest, ManifestRun
from launch.report import failures
from launch.report.metrics import read_run

CORPUS = Path(__file__).parent / "data" / "failures"
EXCERPTS = sorted(CORPUS.glob("*/*.log"))


def body(path: Path) -> str:
    """The excerpt without its header lines (# source: ..., # note: ...)."""
    lines = path.read_text().splitlines()
    return "\n".join(line for line in lines if not line.startswith(("# source:", "# note:")))


def test_every_kind_has_two_real_excerpts_with_their_source():
    per_kind = {kind: [path for path in EXCERPTS if path.parent.name == kind] for kind in failures.KINDS}
    assert {path.parent.name for path in EXCERPTS} <= set(failures.KINDS), "a corpus directory names no kind"
    assert {kind: len(paths) for kind, paths in per_kind.items() if len(paths) < 2} == {}
    for path in EXCERPTS:
        source = path.read_text().splitlines()[0]
        assert source.startswith("# source: https://github.com/") or source.startswith("# source: dev cluster run, ")


@pytest.mark.parametrize("path", EXCERPTS, ids=[f"{p.parent.name}/{p.stem}" for p in EXCERPTS])
def test_each_excerpt_is_classified_as_its_kind_with_evidence_from_the_log(path: Path):
    text = body(path)
    failure = failures.classify(text)
    assert failure.kind == path.parent.name, failure
    assert failure.evidence, "a classified failure shows the lines that prove it"
    for line in failure.evidence:
        assert line.removesuffix("...") in text, f"evidence not in the log: {line}"
        assert "verl exited with code" not in line  # rlaunch's own wrapper line is never the cause
    assert failure.fix


NODES = {
    "ray_start_failed/devcluster-head-not-up": "c1",
    "ray_start_failed/ray-22326-gcs-unreachable": "100.96.191.45",
    "ray_node_lost/ray-15128-missed-heartbeats": "10.4.4.107",
    "ray_node_lost/devcluster-raylet-killed": "c2",  # rlaunch's host name wins over Ray's ipv4:127.0.0.12
    "ray_node_lost/easyr1-324-owner-node-crashed": "172.21.160.9",
    "host_oom/wmpo-3-raylet-memory-pressure": "172.24.0.226",
    "host_oom/devcluster-exceeded-mem": "c1",
    "config_error/verl-4672-hfmodelconfig": "10.82.138.15",
}


@pytest.mark.parametrize(("name", "node"), NODES.items())
def test_the_node_the_evidence_names(name: str, node: str):
    assert failures.classify(body(CORPUS / f"{name}.log")).node == node


@pytest.mark.parametrize(
    ("line", "node"),
    [
        ("RuntimeError: ray start failed on node c2 (worker): ray.exceptions.AuthenticationError: Token auth", "c2"),
        ("RuntimeError: Ray did not come up within 60 s: node c2 never registered (head 127.0.0.11:20160)", "c2"),
    ],
)
def test_the_job_fail_fast_messages_are_ray_start_failed_naming_the_node(line: str, node: str):
    """The forms launch/job.py's fail-fast raises when a node's `ray start` exits or the head waits in vain."""
    failure = failures.classify("Traceback (most recent call last):\n" + line)
    assert (failure.kind, failure.node) == ("ray_start_failed", node)


def test_a_cuda_oom_reads_its_sizes_and_the_phase_its_traceback_was_in():
    text = body(CORPUS / "cuda_oom" / "verl-2828-entropy-logprob.log")
    failure = failures.with_plan_fix(failures.classify(text), None, text)
    assert failure.details == {
        "tried_gib": 13.91,
        "capacity_gib": 79.11,
        "free_gib": 8.85,
        "in_use_gib": 70.25,
        "torch_allocated_gib": 60.49,
        "phase": "log-prob",
    }
    old = failures.classify(body(CORPUS / "cuda_oom" / "pytorch-18853-old-format.log"))
    assert old.details == {"tried_gib": 1.0, "capacity_gib": 15.9, "free_gib": 0.97, "in_use_gib": 14.25}


def test_the_engine_oom_is_not_taken_for_the_trainers():
    """vLLM's worker OOM carries PyTorch's CUDA OOM text: the engine's own prefix decides."""
    failure = failures.classify(body(CORPUS / "engine_memory" / "vllm-backport-24-worker-oom.log"))
    assert failure.kind == "engine_memory"


def test_a_root_cause_wins_over_the_errors_it_causes():
    """An OOM'd rank makes the others' collectives time out and Ray report dead actors: the OOM is the cause."""
    oom = body(CORPUS / "cuda_oom" / "verl-2828-entropy-logprob.log")
    nccl = body(CORPUS / "nccl_timeout" / "vllm-6042-rayworker.log")
    dead = body(CORPUS / "unknown" / "verl-4921-worker-died.log")
    assert failures.classify("\n".join([nccl, oom, dead])).kind == "cuda_oom"
    assert failures.classify("\n".join([dead, nccl])).kind == "nccl_timeout"


def test_unknown_shows_the_last_real_error_never_rlaunchs_wrapper():
    text = body(CORPUS / "unknown" / "verl-4921-worker-died.log") + (
        '\nTraceback (most recent call last):\n  File "/x/launch/job.py", line 120, in run_head\n'
        "RuntimeError: verl exited with code 1 (run abc; its output is in this job's log)\n"
    )
    failure = failures.classify(text)
    assert failure.kind == "unknown"
    assert failure.evidence == [
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
    ]


SUBMITIT_START = (
    "submitit INFO (2026-11-22 19:50:{s:02d},000) - Starting with JobEnvironment(job_id=7_0, hostname={host}, "
    "local_rank=0(1), node=0(1), global_rank=0(1))"
)


def test_a_requeued_log_is_split_into_attempts_each_with_its_cause(tmp_path: Path):
    """Attempt 1 preempted (SLURM's own line), attempt 2 OOM'd: the log says both, in order."""
    first = SUBMITIT_START.format(s=1, host="c1") + "\n" + body(CORPUS / "preempted" / "gemmaker-242-slurmstepd.log")
    second = "\n".join(
        [
            SUBMITIT_START.format(s=40, host="c2"),
            body(CORPUS / "cuda_oom" / "verl-2828-entropy-logprob.log"),
            "submitit ERROR (2026-11-22 19:52:00,000) - Submitted job triggered an exception",
        ]
    )
    log = tmp_path / "7_0_log.err"
    log.write_text(first + "\n" + second + "\n")
    attempts = failures.attempts_in([log])
    assert [(a.number, a.host, a.ended) for a in attempts] == [(1, "c1", "interrupted"), (2, "c2", "failed")]
    found = [failures.classify(a.text, a.number, a.host) for a in attempts]
    assert [(f.kind, f.attempt) for f in found] == [("preempted", 1), ("cuda_oom", 2)]
    assert found[0].node == "cn119" and found[1].node == "c2"  # SLURM names the node; else the attempt's host
    assert failures.summary(found).startswith("preempted > cuda_oom: torch.OutOfMemoryError: CUDA out of memory")


def test_doctor_log_json_names_kind_evidence_and_fix():
    result = run_doctor("--log", str(CORPUS / "gpu_unavailable" / "verl-2515-desired-16.log"), "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    failure = json.loads(result.stdout)["failure"]
    assert failure["kind"] == "gpu_unavailable"
    assert failure["evidence"] == ["ValueError: Total available GPUs 8.0 is less than total desired GPUs 16"]
    assert "GPUs" in failure["fix"]


def test_doctor_log_text_and_a_missing_file():
    result = run_doctor("--log", str(CORPUS / "host_oom" / "flingbot-11-task-killed.log"))
    assert result.returncode == 0 and result.stdout.startswith("[host_oom] (node 192.168.0.107)"), result.stdout
    assert "evidence: ray.exceptions.OutOfMemoryError: Task was killed" in result.stdout
    missing = run_doctor("--log", "/nonexistent/job.err")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no such log file" in missing.stderr


# --- fixes from the run's plan ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> Path:
    """A real run directory (composed, planned, preflighted) on an A40 profile."""
    from metric_fixtures import make_plan_dir

    return make_plan_dir(tmp_path_factory.mktemp("failures") / "sweep", "guru_baseline", "a40")


def plan_fix(run_dir: Path, kind: str, name: str, steps_reached: dict[int, int] | None = None) -> failures.Failure:
    from dataclasses import replace

    from launch.report.doctor import failure_context, load_thresholds

    text = body(CORPUS / kind / f"{name}.log")
    context = failure_context(read_run(run_dir), load_thresholds())
    if steps_reached is not None:
        context = replace(context, steps_reached=steps_reached, checkpointed_step={1: 0})
    failure = failures.classify(text, attempt=1)
    return failures.with_plan_fix(failure, context, text)


def test_cuda_oom_fix_far_off_the_prediction_names_no_small_fix_as_the_cure(planned: Path):
    """84.2 GiB needed where the preflight predicted 12.4 for log-prob (6.8x): a fix that frees a GiB or two by the
    preflight's model was offered as the fix; the gap is past what any single fix of a model that far off covers."""
    predicted = read_run(planned).preflight_phases["log-prob"].peak_gib
    failure = plan_fix(planned, "cuda_oom", "verl-2828-entropy-logprob")
    needed = 70.25 + 13.91
    assert failure.fix.startswith("log-prob phase ran out of GPU memory")
    assert f"at least {needed:.1f} GiB where the preflight predicted {predicted:.1f} GiB for log-prob" in failure.fix
    assert f"({needed / predicted:.2f}x)" in failure.fix
    assert "no single preflight fix covers a gap that large" in failure.fix
    assert f"the preflight's prediction for log-prob was {needed - predicted:.1f} GiB short" in failure.fix
    assert "the biggest lever the preflight knows for log-prob: " in failure.fix and "next fix" not in failure.fix


OOM_IN_UPDATE = (
    "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_update_actor() (pid=4242, "
    "ip=10.0.0.6)\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU 3 has a total capacity of 79.19 GiB "
    "of which 2.10 GiB is free. Including non-PyTorch memory, this process has 77.08 GiB memory in use. Of the "
    "allocated memory 70.20 GiB is allocated by PyTorch, and 5.01 GiB is reserved by PyTorch but unallocated.\n"
)


def oom_with_fixes(run_dir: Path, fixes: list[tuple[str, float]]) -> failures.Failure:
    """The OOM above (2.54 GiB short: 4.64 asked, 2.10 free) against a prediction of 75 GiB for training (close),
    with these preflight fixes for training, cheapest first."""
    from launch.report.failures.fixes import PhaseFix

    context = failures.FixContext(
        plan=read_run(run_dir).local_plan,
        predicted_peaks_gib={"training": 75.0},
        phase_fixes={"training": [PhaseFix([override], saves) for override, saves in fixes]},
    )
    return failures.with_plan_fix(failures.classify(OOM_IN_UPDATE, attempt=1), context, OOM_IN_UPDATE)


def test_cuda_oom_fix_is_the_cheapest_that_frees_what_the_attempt_lacked(planned: Path):
    """The cheapest fix frees 2.0 GiB of the 2.54 the card lacked: the next one, which frees 6.0, is the fix."""
    nvls, halve = "cluster.env.NCCL_NVLS_ENABLE='0'", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192"
    failure = oom_with_fixes(planned, [(nvls, 2.0), (halve, 6.0)])
    assert failure.details["short_gib"] == 2.54
    assert f"the preflight's cheapest fix that frees the 2.5 GiB it lacked: {halve} (frees 6.0 GiB" in failure.fix
    assert nvls not in failure.fix


def test_cuda_oom_fix_says_when_no_single_fix_frees_what_the_attempt_lacked(planned: Path):
    nvls, offload = "cluster.env.NCCL_NVLS_ENABLE='0'", "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true"
    failure = oom_with_fixes(planned, [(nvls, 2.0), (offload, 0.5)])
    assert "no single preflight fix frees the 2.5 GiB it lacked" in failure.fix
    assert f"the biggest lever the preflight knows for training: {nvls} (frees 2.0 GiB" in failure.fix
    assert "launch.preflight=fix applies several together" in failure.fix


def test_engine_memory_fix_moves_the_engine_fraction_the_way_the_error_asks(planned: Path):
    fraction = read_run(planned).local_plan.verl["actor_rollout_ref"]["rollout"]["gpu_memory_utilization"]
    too_small = plan_fix(planned, "engine_memory", "vllm-10439-cache-blocks")
    assert f"gpu_memory_utilization={round(min(0.9, fraction + 0.1), 2)} (now {fraction})" in too_small.fix
    too_big = plan_fix(planned, "engine_memory", "vllm-backport-24-worker-oom")
    assert f"gpu_memory_utilization={round(max(0.1, fraction - 0.1), 2)} (now {fraction})" in too_big.fix


def test_host_oom_fix_raises_mem_from_the_plan(planned: Path):
    mem = read_run(planned).local_plan.resources.mem_gb
    assert (
        f"cluster.mem_gb={2 * mem} (now --mem={mem}G)" in plan_fix(planned, "host_oom", "flingbot-11-task-killed").fix
    )


def test_time_limit_fix_is_the_save_freq_that_fits(planned: Path):
    failure = plan_fix(planned, "time_limit", "zetta-671-slurmstepd", steps_reached={1: 7})
    save_freq = read_run(planned).local_plan.verl["trainer"]["save_freq"]
    if save_freq > 7:
        assert failure.fix.endswith("trainer.save_freq=3 saves 2x per attempt"), failure.fix
    none = plan_fix(planned, "time_limit", "zetta-671-slurmstepd", steps_reached={1: 0})
    assert "reached no training step" in none.fix


# --- a run directory: doctor, compare and status read the job's own logs ----------------------------------------------


def job_log_layout(run_dir: Path, job_id: str, err: str, out: str) -> None:
    """The files submitit and SLURM write for a job (<sweep>/submitit/<job>/<job>_<task>_log.{err,out}) and the
    manifest that points at them, as launch/slurm.py writes it."""
    folder = run_dir.parent / "submitit" / job_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{job_id}_0_log.err").write_text(err)
    (folder / f"{job_id}_0_log.out").write_text(out)
    logs = {"stderr": str(folder / f"{job_id}_0_log.err"), "stdout": str(folder / f"{job_id}_0_log.out")}
    Manifest("s", str(run_dir.parent), [ManifestRun(run_dir.name, str(run_dir), job_id=job_id, **logs)]).write()


def test_a_failed_run_without_metrics_gets_its_cause_in_doctor_and_compare(tmp_path: Path):
    from metric_fixtures import make_plan_dir

    from launch.report.compare import compare

    run_dir = make_plan_dir(tmp_path / "sweep", "guru_baseline", "a40")
    out = SUBMITIT_START.format(s=1, host="c1") + "\n"
    err = "\n".join(
        [
            body(CORPUS / "gpu_unavailable" / "verl-2515-desired-16.log"),
            "submitit ERROR (2026-11-22 19:50:09,000) - Submitted job triggered an exception",
            "Traceback (most recent call last):",
            '  File "/x/launch/job.py", line 120, in run_head',
            "RuntimeError: verl exited with code 1 (run x; its output is in this job's log)",
        ]
    )
    job_log_layout(run_dir, "9", err, out)
    result = run_doctor(str(run_dir))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "failed [gpu_unavailable] (attempt 1, node c1)" in result.stdout
    assert "no diagnosis" not in result.stdout
    diagnosis = (run_dir / "diagnosis.md").read_text()
    assert "## Attempt 1 failed: gpu_unavailable" in diagnosis and "Nothing holds" not in diagnosis
    report = compare(str(run_dir.parent), None, "rlaunch", None).read_text()
    assert "| FAILED (gpu_unavailable: ValueError: Total available GPUs 8.0 is…) |" in report
    assert "## Failed runs" in report and "fix: verl wanted 16 GPUs" in report
    assert failures.run_state(run_dir) == "FAILED"


def test_doctor_log_splits_a_real_requeued_jobs_stderr_with_its_stdout():
    """submitit's attempt starts are on stdout: --log on the stderr file reads its sibling and finds that only
    attempt 1 failed (preempted); attempt 2 completed."""
    job = Path(__file__).parent / "data" / "failure_jobs" / "preempted-then-completed"
    result = run_doctor("--log", str(job / "3_0_log.err"), "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(result.stdout)
    # the job completed: no failure of the job's, attempt 1's cause under attempts
    assert (record["outcome"], record["failure"]) == ("completed", None)
    [preempted] = record["attempts"]
    assert (preempted["kind"], preempted["attempt"]) == ("preempted", 1)
    assert preempted["node"] == "c1"  # slurmstepd-c1 names the node (submitit says hostname=vm)
    text = run_doctor("--log", str(job / "3_0_log.err")).stdout
    assert text.startswith("[preempted] (attempt 1, node c1)")
    assert text.rstrip().endswith(
        "then attempt 2 completed: the job's log ends with submitit's 'Job completed successfully'"
    )


def test_doctor_log_on_an_empty_log_or_one_with_no_end_yet_says_so(tmp_path: Path):
    """An empty log is no completed job; a log whose attempt started and has neither an error nor an end line is a
    job still running (or killed without a word), not an `unknown` failure."""
    empty = tmp_path / "7_0_log.err"
    empty.write_text("")
    assert doctor_log(empty) == "the log is empty: the job has not written to it yet, or this is not its log"
    assert json.loads(doctor_log(empty, "--json")) == {"outcome": "empty", "failure": None}
    running = tmp_path / "8_0_log.out"
    running.write_text(
        "submitit INFO (2026-11-20 10:00:01,101) - Starting with JobEnvironment(job_id=8, hostname=gpu-h04, "
        "local_rank=0(1), node=0(1), global_rank=0(1))\n"
        "rlaunch: Ray up on 1 node(s) 21.4 s after the job started (10.0.0.5:6379)\n"
        "step:1 - timing_s/gen:210.0 - timing_s/step:400.0\n"
    )
    assert doctor_log(running).startswith("no end yet: the log has no error and no submitit end line")
    assert json.loads(doctor_log(running, "--json")) == {"outcome": "running", "failure": None}
    # the same attempt with an error it stopped on, and still no end line: that error is the failure
    running.write_text(running.read_text() + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    record = json.loads(doctor_log(running, "--json"))
    assert (record["outcome"], record["failure"]["kind"]) == ("failed", "cuda_oom")


def doctor_log(path: Path, *flags: str) -> str:
    result = run_doctor("--log", str(path), *flags)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()
