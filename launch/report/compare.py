"""The sweep's runs side by side: python launch/report/compare.py <sweep dir | W&B group> [--out DIR] [--project P]

Runs on: any machine that sees the run directories (local metrics, the default), or any machine with W&B
credentials (a W&B group: the sweep id, which rlaunch uses as every run's group). Per run: the per-domain
validation reward and accuracy (final and best), throughput (tokens/s/GPU), MFU, time per step, and the measured
memory peak beside the preflight's prediction; per PCGrad run, the change in mean final reward against the GURU
baseline on the same GPU profile. Output: a terminal table (rich), <out>/report.md, and <out>/reward_<domain>.png
(each run's validation reward curve, baseline and PCGrad overlaid). Each run's diagnosis (launch/report/doctor.py) is
written next to it and linked from the report. Each run's state (what its scheduler says where it answers: SLURM's
sacct and squeue, as sweep.py status asks them, e.g. TIMEOUT, CANCELLED by 1000; Ray's job API for cluster=ray;
else COMPLETED / FAILED / RUNNING / REQUEUED from its job log, with a line saying so; W&B's run state for a W&B group)
carries the cause of its failed attempts, and the failed runs are listed with their evidence and fix
(launch/report/failures/).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launch.calibration import calibration_of
from launch.errors import UserError
from launch.report import doctor, failures
from launch.report.metrics import (
    MEMORY_ALLOCATED,
    MEMORY_RESERVED,
    MFU,
    THROUGHPUT,
    RunLabels,
    RunMetrics,
    read_run,
    run_dirs,
    step_s_over,
    validation_series,
)
from launch.rundir import warmup_steps
from launch.steptime import PHASES
from rewards.sources import domain_of

BASELINE_ALGO = "guru_baseline"


def domain_curves(run: RunMetrics, var: str) -> dict[str, list[tuple[int, float]]]:
    """domain -> [(step, value)]: the mean over the domain's data sources validated at that step."""
    by_domain: dict[str, dict[int, list[float]]] = {}
    for (source, name), points in validation_series(run.history).items():
        if name != var:
            continue
        for step, value in points:
            by_domain.setdefault(domain_of(source), {}).setdefault(step, []).append(value)
    return {
        domain: [(step, sum(values) / len(values)) for step, values in sorted(steps.items())]
        for domain, steps in sorted(by_domain.items())
    }


@dataclass
class DomainScore:
    final: float
    best: float
    best_step: int
    final_step: int  # 0: the only validation is verl's before training (val_before_train): the base model's score


def scores(curves: dict[str, list[tuple[int, float]]]) -> dict[str, DomainScore]:
    result = {}
    for domain, points in curves.items():
        best_step, best = max(points, key=lambda point: (point[1], -point[0]))
        result[domain] = DomainScore(final=points[-1][1], best=best, best_step=best_step, final_step=points[-1][0])
    return result


@dataclass
class RunSummary:
    run: RunMetrics
    label: str
    reward: dict[str, DomainScore]
    accuracy: dict[str, DomainScore]
    throughput: float | None
    mfu: float | None
    step_s: float | None
    peak_gib: float | None
    predicted_gib: float | None
    last_step: int | None
    diagnoses: list[str] = field(default_factory=list)
    diagnosis_file: Path | None = None
    reward_vs_baseline: float | None = None
    state: str | None = None  # the scheduler's (TIMEOUT, CANCELLED by 1000), else the log's; None when nothing says
    failed: list[failures.Failure] = field(default_factory=list)  # each failed or interrupted attempt's cause
    # calibration.json's figures for the run: the plan's seconds per phase against verl's measured ones
    step_time: dict[str, Any] | None = None
    speed_judged: bool = True  # the doctor had its min_steps steady steps (doctor.speed_unjudged)

    @property
    def doctor_verdict(self) -> str:
        """The doctor's column where it found nothing: healthy only where it could judge the run's speed too."""
        if self.diagnosis_file is None:
            return "—"
        return "healthy" if self.speed_judged else "too few steps"

    @property
    def state_cell(self) -> str:
        cause = failures.summary(self.failed, chars=40)
        return " ".join(part for part in (self.state or "—", cause and f"({cause})") if part)

    @property
    def mean_final_reward(self) -> float | None:
        finals = [score.final for score in self.reward.values()]
        return sum(finals) / len(finals) if finals else None

    @property
    def validated_before_training_only(self) -> bool:
        """Every domain's last validation is the one before training (step 0): its reward is the base model's."""
        return bool(self.reward) and all(score.final_step == 0 for score in self.reward.values())

    @property
    def final_reward_cell(self) -> str:
        shown = number(self.mean_final_reward, ".3f")
        return f"{shown} (step 0, before training)" if self.validated_before_training_only else shown


WANDB_STATES = {"finished": "COMPLETED", "crashed": "FAILED", "failed": "FAILED", "killed": "FAILED"}


def summarize(run: RunMetrics) -> RunSummary:
    peak = run.peak(MEMORY_RESERVED)
    wandb_state = run.wandb_state
    return RunSummary(
        run=run,
        label=run.label,
        reward=scores(domain_curves(run, "reward")),
        accuracy=scores(domain_curves(run, "acc")),
        # medians over the steady steps, as the doctor and the step-time table take them: one stalled step must not
        # move a run's s/step by its whole length; the step without its checkpoint saves (metrics.step_s_over)
        throughput=doctor.steady_median(run, THROUGHPUT),
        mfu=doctor.steady_median(run, MFU),
        step_s=step_s_over(run.history, doctor.steady(run)),
        peak_gib=peak if peak is not None else run.peak(MEMORY_ALLOCATED),
        predicted_gib=run.predicted_torch_peak_gib,
        last_step=max(run.history) if run.history else None,
        state=WANDB_STATES.get(wandb_state, str(wandb_state).upper()) if wandb_state else None,
        step_time=step_time_of(run),
    )


def step_time_of(run: RunMetrics) -> dict[str, Any] | None:
    """Predicted against measured per phase (launch/calibration.py); local runs only (W&B holds no plan)."""
    if run.plan is None or not run.history:
        return None
    # the steps calibration.json measures on (each attempt's first left out), as the overview's s/step
    measured = calibration_of(run.plan, run.history, max(len(run.attempts), 1), warmup_steps(run.run_dir))
    return measured["time"] if measured is not None else None


def step_time_rows(summaries: list[RunSummary]) -> tuple[list[str], list[list[str]]]:
    """One row per run: each phase's planned / measured seconds and the measurement as a multiple of the plan (a
    ratio reads both ways: a plan 17x short shows x17.3, where (plan - measured) / measured stops at -100 %)."""
    header = ["run", *PHASES, "step", "plan from"]

    def cell(time: dict[str, Any], phase: str) -> str:
        predicted, measured = time["predicted_s"].get(phase), time["measured_s"].get(phase)
        if measured is None:  # verl did not time it (no reference, no critic): no measurement, no ratio
            return f"{predicted:g} / not timed"
        shown = f"{predicted:g} / {measured:g}"
        return f"{shown} (x{measured / predicted:.3g})" if predicted else shown

    rows = [
        [s.label, *[cell(s.step_time, phase) for phase in (*PHASES, "step")], s.step_time["predicted_source"]]
        for s in summaries
        if s.step_time is not None
    ]
    return header, rows


def against_baseline(summaries: list[RunSummary]) -> None:
    """Each non-baseline run's mean final reward minus the baseline's on the same GPU profile (when there is one)."""
    # a reward validated only before training is the base model's, on either side: it says nothing of the algorithm
    baselines = {
        s.run.gpu: s.mean_final_reward
        for s in summaries
        if s.run.algo == BASELINE_ALGO and not s.validated_before_training_only
    }
    for summary in summaries:
        baseline = baselines.get(summary.run.gpu)
        trained = summary.mean_final_reward is not None and not summary.validated_before_training_only
        if summary.run.algo != BASELINE_ALGO and baseline is not None and trained:
            summary.reward_vs_baseline = summary.mean_final_reward - baseline  # type: ignore[operator]


def diagnose_local(summary: RunSummary, record: failures.JobRecord | None) -> None:
    """The run's state and the causes of its failed attempts, with what its scheduler says of it (`record`) where
    it answered."""
    summary.state = failures.run_state(summary.run.run_dir, record)
    if summary.state == failures.DRY_RUN_STATE:  # nothing ran: the doctor diagnoses nothing of it either
        return
    summary.failed = doctor.run_failures(summary.run, record=record)
    if not summary.run.history and not summary.failed:
        return
    diagnoses = doctor.diagnose(summary.run) if summary.run.history else []
    summary.diagnoses = [item.kind for item in diagnoses]
    summary.speed_judged = doctor.speed_unjudged(summary.run, doctor.load_thresholds()) is None
    summary.diagnosis_file = doctor.write_diagnosis(summary.run, diagnoses, summary.failed)


# --- sources ---------------------------------------------------------------------------------------------------------


def local_runs(sweep_dir: Path) -> list[RunMetrics]:
    found = run_dirs(sweep_dir)
    if not found:
        raise UserError(f"{sweep_dir} holds no run directory (with a plan.json): give <launch.runs_dir>/<sweep id>")
    return [read_run(run_dir) for run_dir in found]


def wandb_runs(group: str, project: str, entity: str | None) -> list[RunMetrics]:
    """The group's runs from the W&B API, in the same shape as local runs: the history from W&B, the plan's parts
    the report needs from the run's config (rlaunch's provenance) and tags."""
    import wandb

    api = wandb.Api()
    path = f"{entity or api.default_entity}/{project}"
    found = list(api.runs(path, filters={"group": group}))
    if not found:
        raise UserError(f"W&B has no run in group {group} of {path}: check --project/--entity or the sweep id")
    runs = []
    for remote in found:
        provenance: dict[str, Any] = remote.config.get("rlaunch") or {}
        history: dict[int, dict[str, Any]] = {}
        for row in remote.scan_history():
            step = row.get("_step")
            if step is not None:
                history.setdefault(int(step), {}).update({k: v for k, v in row.items() if not k.startswith("_")})
        job_name = str(provenance.get("job_name", remote.name))
        kept = RunLabels(
            run_id=remote.id,
            job_name=job_name,
            algo=remote.job_type or job_name,
            gpu=str(provenance.get("gpu_profile", "?")),
            # W&B keeps the verdict in brief (provenance.preflight_summary): peaks without their terms, so no
            # torch-visible peak to set beside the measured one
            preflight_phases={},
            wandb_state=remote.state,
        )
        runs.append(RunMetrics(Path(remote.id), None, dict(sorted(history.items())), remote=kept))
    return runs


def load_runs(target: str, project: str, entity: str | None) -> tuple[list[RunMetrics], bool]:
    """(runs, local?): a directory is read from disk; anything else is a W&B group, when W&B credentials exist."""
    from launch.facts import wandb_credentials

    path = Path(target)
    if path.is_dir():
        return local_runs(path), True
    if not wandb_credentials(os.environ):
        raise UserError(
            f"no such sweep directory: {target}; and without W&B credentials (WANDB_API_KEY or `wandb login`) it "
            "cannot be looked up as a W&B group either"
        )
    return wandb_runs(target, project, entity), False


# --- output ----------------------------------------------------------------------------------------------------------


def number(value: float | None, form: str) -> str:
    return "—" if value is None else format(value, form)


def memory_cell(summary: RunSummary) -> str:
    if summary.peak_gib is None:
        return "—"
    if summary.predicted_gib is None:
        return f"{summary.peak_gib:.1f}"
    # measured as a multiple of the prediction, as the step-time table says it (a percent read as a share misleads)
    return f"{summary.peak_gib:.1f} / {summary.predicted_gib:.1f} (x{summary.peak_gib / summary.predicted_gib:.3g})"


def overview_rows(summaries: list[RunSummary]) -> tuple[list[str], list[list[str]]]:
    header = [
        "run",
        "id",
        "state",
        "steps",
        "attempts",
        "tokens/s/GPU",
        "MFU",
        "s/step",
        "peak GiB / predicted",
        "mean final reward",
        "vs baseline",
        "doctor",
    ]
    rows = [
        [
            s.label,
            s.run.run_id,
            s.state_cell,
            number(s.last_step, "d"),
            str(len(s.run.attempts) or "—"),
            number(s.throughput, ".0f"),
            number(s.mfu, ".1%"),
            number(s.step_s, ".1f"),
            memory_cell(s),
            s.final_reward_cell,
            number(s.reward_vs_baseline, "+.3f"),
            ", ".join([*(f.kind for f in s.failed), *s.diagnoses]) or s.doctor_verdict,
        ]
        for s in summaries
    ]
    return header, rows


def domain_rows(summaries: list[RunSummary]) -> tuple[list[str], list[list[str]]]:
    """One row per domain, one column per run: reward final / best (step), accuracy final / best."""
    domains = sorted({domain for s in summaries for domain in s.reward} | {d for s in summaries for d in s.accuracy})
    header = ["domain", *[s.label for s in summaries]]

    def cell(summary: RunSummary, domain: str) -> str:
        reward, accuracy = summary.reward.get(domain), summary.accuracy.get(domain)
        parts = []
        if reward is not None:
            parts.append(f"reward {reward.final:.3f} / best {reward.best:.3f} @{reward.best_step}")
        if accuracy is not None:
            parts.append(f"acc {accuracy.final:.3f} / best {accuracy.best:.3f}")
        return "; ".join(parts) or "—"

    return header, [[domain, *[cell(s, domain) for s in summaries]] for domain in domains]


def failed_runs(summaries: list[RunSummary]) -> list[str]:
    """Each run with a failed or interrupted attempt: its state, then every attempt's cause, evidence and fix."""
    lines = []
    for summary in summaries:
        if summary.failed:
            lines.append(f"{summary.label} ({summary.run.run_id}): {summary.state or '—'}")
            lines += ["    " + line for failure in summary.failed for line in failures.render(failure)]
    return lines


# what the s/step column covers (metrics.step_s_over), under the table and in the report
STEP_S_COVERS = (
    "s/step is verl's timing_s/step less its checkpoint saves and rollout dumps, the statistic of the doctor, the "
    "status forecast and the step-time table's measured step"
)


def print_tables(summaries: list[RunSummary]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(160, Console().width))
    for title, caption, (header, rows) in (
        ("runs", STEP_S_COVERS, overview_rows(summaries)),
        ("validation per domain: final / best", None, domain_rows(summaries)),
        ("step time, seconds: planned / measured (x measured / planned)", None, step_time_rows(summaries)),
    ):
        if not rows:
            continue
        table = Table(title=title, caption=caption)
        # the run's label says what the sweep varies: its longest word (total_training_steps=20) is never cut to
        # 'total_trainin…', which would leave two runs looking the same but for their ids
        longest = max((len(word) for row in rows for word in row[0].split()), default=0)
        for index, column in enumerate(header):
            table.add_column(column, min_width=longest if index == 0 and header[0] == "run" else None)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    causes = failed_runs(summaries)
    if causes:
        console.print("failed runs", style="bold")
        console.print("\n".join(causes), markup=False, highlight=False)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown_report(
    title: str,
    summaries: list[RunSummary],
    plots: list[Path],
    out_dir: Path,
    silent: str | None = None,
    notes: Sequence[str] = (),
) -> str:
    header, rows = overview_rows(summaries)
    for summary, row in zip(summaries, rows, strict=True):
        if summary.diagnosis_file is not None:
            link = os.path.relpath(summary.diagnosis_file, out_dir)
            row[-1] = f"[{row[-1]}]({link})"
    parts = [
        f"# {title}",
        "",
        "Throughput, MFU and s/step are medians over the steady steps (the run's first and each attempt's first "
        f"left out); {STEP_S_COVERS}; peak "
        "memory is torch's reserved peak (perf/max_memory_reserved_gb) beside the preflight's predicted trainer "
        "peak without its terms outside torch (CUDA context, NCCL buffers). A resumed run's steps come from the "
        "attempt that reached them last.",
        "",
        *([f"{silent}: the states are the runs' own records.", ""] if silent else []),
        *[line for note in notes for line in (note, "")],
        markdown_table(header, rows),
        "",
        *(["## Failed runs", "", "```", *failed_runs(summaries), "```", ""] if failed_runs(summaries) else []),
        "## Validation per domain",
        "",
        markdown_table(*domain_rows(summaries)),
        "",
        *step_time_section(summaries, out_dir),
        "## Reward curves",
        "",
        *[f"![{plot.stem}]({os.path.relpath(plot, out_dir)})" for plot in plots],
    ]
    return "\n".join(parts) + "\n"


def step_time_section(summaries: list[RunSummary], out_dir: Path) -> list[str]:
    header, rows = step_time_rows(summaries)
    if not rows:
        return []
    plot = out_dir / "step_time.png"
    return [
        "## Step time: the plan against the measurement",
        "",
        "Seconds per phase, planned / measured (x the measurement as a multiple of the plan: x2 took twice the plan, "
        "x0.5 half); measured is the median over the steady steps (launch/calibration.py). "
        "`python launch/calibrate.py <sweep dir>` feeds them to the next plans.",
        "",
        markdown_table(header, rows),
        "",
        *([f"![step time]({os.path.relpath(plot, out_dir)})", ""] if plot.exists() else []),
    ]


def plot_step_times(summaries: list[RunSummary], out_dir: Path) -> list[Path]:
    """Predicted against measured seconds, one point per run and phase, on the diagonal where the plan was right."""
    points = [
        (phase, s.step_time["predicted_s"][phase], s.step_time["measured_s"][phase])
        for s in summaries
        if s.step_time is not None
        for phase in PHASES
        if s.step_time["measured_s"].get(phase)
    ]
    if not points:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5, 5))
    for index, phase in enumerate(PHASES):
        mine = [(p, m) for name, p, m in points if name == phase]
        if mine:
            predicted, measured = zip(*mine, strict=True)
            axes.scatter(predicted, measured, label=phase, color=plt.get_cmap("tab10")(index))
    top = max(max(p, m) for _, p, m in points) * 1.1
    axes.plot([0, top], [0, top], "k--", linewidth=0.8, label="plan = measured")
    axes.set(title="step time per phase", xlabel="planned (s)", ylabel="measured (s)", xlim=(0, top), ylim=(0, top))
    axes.legend(fontsize="small")
    figure.tight_layout()
    path = out_dir / "step_time.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return [path]


def plot_rewards(summaries: list[RunSummary], out_dir: Path) -> list[Path]:
    """One PNG per domain: every run's validation reward curve; colour per GPU profile, line style per algorithm,
    so baseline and PCGrad on the same card sit on top of each other."""
    import matplotlib

    matplotlib.use("Agg")  # no display on a login node
    import matplotlib.pyplot as plt

    gpus = sorted({s.run.gpu for s in summaries})
    algos = sorted({s.run.algo for s in summaries})
    colours = {gpu: plt.get_cmap("tab10")(index) for index, gpu in enumerate(gpus)}
    styles = {algo: ("-", "--", ":", "-.")[index % 4] for index, algo in enumerate(algos)}
    domains = sorted({domain for s in summaries for domain in s.reward})
    plots = []
    for domain in domains:
        figure, axes = plt.subplots(figsize=(6, 4))
        for summary in summaries:
            points = domain_curves(summary.run, "reward").get(domain)
            if points:
                steps, values = zip(*points, strict=True)
                axes.plot(
                    steps,
                    values,
                    styles[summary.run.algo],
                    color=colours[summary.run.gpu],
                    marker="o",
                    label=summary.label,
                )
        axes.set(title=f"{domain}: validation reward", xlabel="step", ylabel="reward (mean@n)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize="small")
        figure.tight_layout()
        path = out_dir / f"reward_{domain}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        plots.append(path)
    return plots


def dry_run_note(planned: list[RunSummary]) -> str:
    """What a run a dry run planned is: nothing of it ran, so it has no state, metrics or cause to show."""
    return (
        f"dry run: {len(planned)} run(s) marked {failures.DRY_RUN_STATE} were planned only, nothing was submitted "
        "(each plan is in <run dir>/plan.txt; submit without launch.dry_run to run them)"
    )


def report_dir(directory: Path, by_default: bool) -> Path:
    """The report's directory, made before anything is diagnosed or written (the doctor writes each run's
    diagnosis.md): one this user cannot make is said in one line, naming --out."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        given = "the default --out (<sweep dir>/report)" if by_default else "--out"
        raise UserError(
            f"{given} {directory}: cannot create it ({error.strerror}): give --out a directory you can write"
        ) from None
    return directory


def compare(target: str, out_dir: Path | None, project: str, entity: str | None) -> Path:
    runs, local = load_runs(target, project, entity)
    out_dir = report_dir(out_dir or (Path(target) / "report" if local else Path(f"report-{target}")), out_dir is None)
    summaries = [summarize(run) for run in runs]
    summaries.sort(key=lambda s: (s.run.gpu, s.run.algo != BASELINE_ALGO, s.label))
    against_baseline(summaries)
    said = failures.records_of(summary.run.run_dir for summary in summaries) if local else failures.JobRecords()
    if local:
        for summary in summaries:
            diagnose_local(summary, said.by_run.get(summary.run.run_id))
    plots = plot_rewards(summaries, out_dir)
    plot_step_times(summaries, out_dir)
    title = f"Sweep {Path(target).name if local else target}: {len(summaries)} runs"
    report = out_dir / "report.md"
    planned = [summary for summary in summaries if summary.state == failures.DRY_RUN_STATE]
    notes = [dry_run_note(planned)] if planned else []
    report.write_text(markdown_report(title, summaries, plots, out_dir, said.silent, notes))
    if said.silent:
        print(f"{said.silent}: the states are the runs' own records", flush=True)
    for note in notes:
        print(note, flush=True)
    print_tables(summaries)
    print(f"report: {report} ({len(plots)} plot(s))", flush=True)
    return report


def one_sweep_message(target: str, extra: list[str]) -> str:
    """compare given more than one target (two sweeps to put side by side), or an option it does not know."""
    options = [word for word in extra if word.startswith("-")]
    if options:
        return f"unknown option {' '.join(options)}: compare.py takes a sweep and --out, --project, --entity"
    given = ", ".join([target, *extra])
    return (
        f"compare.py takes one sweep (its directory, a run directory, or a W&B group), got {len(extra) + 1}: {given}: "
        "run it once per sweep, or to see runs of two sweeps in one table link their run directories (those holding "
        "plan.json) into one new directory and give that (its state column stays empty: the states need each sweep's "
        "manifest)"
    )


def main(argv: Sequence[str] | None = None) -> None:
    from launch.errors import exit_with_message  # the same one-line exit as the launcher's

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="python launch/report/compare.py")
    parser.add_argument("target", help="a sweep directory (<launch.runs_dir>/<sweep id>) or a W&B group (sweep id)")
    parser.add_argument("--out", type=Path, default=None, help="report directory (default: <sweep dir>/report)")
    parser.add_argument("--project", default="rlaunch", help="W&B project (trainer.project_name)")
    parser.add_argument("--entity", default=os.environ.get("WANDB_ENTITY"), help="W&B entity")
    args, extra = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    try:
        if extra:
            raise UserError(one_sweep_message(args.target, extra))
        compare(args.target, args.out, args.project, args.entity)
    except Exception as error:
        exit_with_message(error)


if __name__ == "__main__":
    main()
