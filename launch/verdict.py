"""The memory preflight's verdict on one job, typed: what launch/preflight.py decides and a plan carries.

Runs on: the login node (the preflight builds it; the plan, its text and the checks read it) and wherever a plan.json
is read back (the job, the report tools: doctor, compare, calibration, forecast). The one module that reads the
verdict's JSON by key: `Verdict.to_dict` writes the JSON plan.json has always held, key for key and in the same
order, and `Verdict.from_dict` reads it back; everything else reads attributes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from launch.memory import (
    FSDP_EDGE,
    OUTSIDE_TORCH_TERMS,
    Architecture,
    Edge,
    Knobs,
    Phase,
    Term,
    flops_per_token,
    predicted_mfu,
)

if TYPE_CHECKING:
    from launch.job_software import JobSoftware

GPU_COUNT_KEYS = frozenset({"trainer.nnodes", "trainer.n_gpus_per_node"})
# What "cheapest" means wherever a misfit's fix is named (the plan, the refusal, fit_table.py): Verdict.cheapest_fix
CHEAPEST = (
    "the run's own GPUs before more of them (more GPUs cost more than any offload); on them the least throughput "
    "lost (a smaller micro-batch before optimizer offload, before param offload, before a larger rollout TP); past "
    "them the fewest GPUs, with offload only where it makes them fewer; Megatron: the fastest predicted step"
)


@dataclass(frozen=True)
class PhasePeak:
    """One phase's predicted peak per GPU, as recorded (memory.Phase, rounded)."""

    peak_gib: float
    capacity_gib: float
    fits: bool
    terms: dict[str, float]  # term name -> GiB: what the peak sums
    notes: tuple[str, ...] = ()
    failure: str = ""  # a failure that is not about the sum (memory.Phase.hard_failure)

    @classmethod
    def of(cls, phase: Phase) -> PhasePeak:
        return cls.from_dict(phase.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {
            "peak_gib": self.peak_gib,
            "capacity_gib": self.capacity_gib,
            "fits": self.fits,
            "terms": dict(self.terms),
            "notes": list(self.notes),
            **({"failure": self.failure} if self.failure else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PhasePeak:
        return cls(
            peak_gib=data["peak_gib"],
            capacity_gib=data["capacity_gib"],
            fits=data["fits"],
            terms=dict(data.get("terms") or {}),
            notes=tuple(data.get("notes") or ()),
            failure=data.get("failure", ""),
        )


@dataclass(frozen=True)
class Predicted:
    """Throughput at the judged knobs."""

    mfu: float
    tokens_per_s_per_gpu: int
    train_tokens_per_micro_batch: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Predicted:
        return cls(**known_fields(cls, data))

    @classmethod
    def at(cls, arch: Architecture, knobs: Knobs, bf16_tflops: float) -> Predicted:
        """The preflight's MFU curve at these knobs, as tokens per second on a card of `bf16_tflops`."""
        mfu = predicted_mfu(knobs)
        return cls(
            mfu=round(mfu, 3),
            tokens_per_s_per_gpu=round(mfu * bf16_tflops * 1e12 / flops_per_token(arch, knobs.sequence)),
            train_tokens_per_micro_batch=knobs.train_tokens,
        )


@dataclass(frozen=True)
class Typical:
    """The peaks when every sequence has the typical lengths (launch/lengths.py): what a run usually sees."""

    prompt_tokens: int
    response_tokens: int
    sequence_tokens: int
    source: str  # where the lengths came from
    peaks_gib: dict[str, float]  # phase -> peak
    fits: bool

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "peaks_gib": dict(self.peaks_gib)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Typical:
        return cls(**known_fields(cls, data))


@dataclass(frozen=True)
class FixReport:
    """One single fix of a misfit with the peaks it gives."""

    fix: str  # what it does, in words
    overrides: dict[str, Any]  # verl key -> typed value
    peaks_gib: dict[str, float]
    fits: bool
    you_set: tuple[str, ...] = ()  # the fix's keys the user set on the command line (fix never changes them)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fix": self.fix,
            "overrides": dict(self.overrides),
            "peaks_gib": dict(self.peaks_gib),
            "fits": self.fits,
            **({"you_set": list(self.you_set)} if self.you_set else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FixReport:
        return cls(
            fix=data["fix"],
            overrides=dict(data["overrides"]),
            peaks_gib=dict(data["peaks_gib"]),
            fits=data["fits"],
            you_set=tuple(data.get("you_set") or ()),
        )


@dataclass(frozen=True)
class SameGpuChange:
    """A change that fits the run on its own GPUs (offload and/or a larger rollout TP)."""

    change: str  # e.g. "param+optimizer offload and rollout TP 4"
    overrides: tuple[str, ...]  # key=value, as Hydra reads them
    host_ram_gib_per_node: float

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "overrides": list(self.overrides)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SameGpuChange:
        return cls(data["change"], tuple(data["overrides"]), data["host_ram_gib_per_node"])


@dataclass(frozen=True)
class GpuCount:
    """The smallest GPU count that fits (with the smallest rollout TP from the run's own that fits)."""

    gpus: int
    rollout_tp: int
    overrides: tuple[str, ...]  # key=value, as Hydra reads them
    host_ram_gib_per_node: float | None = None  # said for the count that fits with the states offloaded

    def to_dict(self) -> dict[str, Any]:
        host = {} if self.host_ram_gib_per_node is None else {"host_ram_gib_per_node": self.host_ram_gib_per_node}
        return {"gpus": self.gpus, "rollout_tp": self.rollout_tp, "overrides": list(self.overrides), **host}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GpuCount:
        return cls(data["gpus"], data["rollout_tp"], tuple(data["overrides"]), data.get("host_ram_gib_per_node"))


@dataclass(frozen=True)
class FittingChange:
    """The cheapest change that makes a misfit fit, searched (preflight.fitting_change)."""

    on_your_gpus: SameGpuChange | None
    gpus_needed: GpuCount | None  # at today's knobs
    gpus_needed_offloaded: GpuCount | None  # fewer GPUs with the states in host RAM, when nothing fits the run's
    summary: str  # it all in one line

    def to_dict(self) -> dict[str, Any]:
        offloaded = self.gpus_needed_offloaded
        return {
            "on_your_gpus": self.on_your_gpus.to_dict() if self.on_your_gpus is not None else None,
            "gpus_needed": self.gpus_needed.to_dict() if self.gpus_needed is not None else None,
            **({"gpus_needed_offloaded": offloaded.to_dict()} if offloaded is not None else {}),
            "summary": self.summary,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FittingChange:
        mine, needed, offloaded = (data.get(key) for key in ("on_your_gpus", "gpus_needed", "gpus_needed_offloaded"))
        return cls(
            on_your_gpus=SameGpuChange.from_dict(mine) if mine is not None else None,
            gpus_needed=GpuCount.from_dict(needed) if needed is not None else None,
            gpus_needed_offloaded=GpuCount.from_dict(offloaded) if offloaded is not None else None,
            summary=data.get("summary", ""),
        )

    @property
    def searched_count(self) -> GpuCount | None:
        """The GPU count to name: with offload where that needs fewer, else as it is."""
        return self.gpus_needed_offloaded or self.gpus_needed


@dataclass(frozen=True)
class JobSoftwareNotes:
    """What the job's software changes in the estimate (launch/job_software.py), with its lines for the plan."""

    software: JobSoftware
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return self.software.to_dict() | {"notes": list(self.notes)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobSoftwareNotes:
        # here, not at the top: job_software reads the config schema (Hydra), which the readers of a plan.json
        # (rundir, in the job and the report tools) need not import
        from launch.job_software import JobSoftware

        return cls(JobSoftware(**known_fields(JobSoftware, data)), tuple(data.get("notes") or ()))

    def shown(self, megatron: bool) -> tuple[str, ...]:
        """The notes that apply to the backend (JobSoftware.lines): a Megatron job's plan without FSDP's log-prob
        line, also where its plan.json recorded it."""
        inapplicable = set(self.software.lines()) - set(self.software.lines(megatron))
        return tuple(note for note in self.notes if note not in inapplicable)


@dataclass(frozen=True)
class Before:
    """The verdict on the config as the user wrote it, before the policy (fix, tune) changed it."""

    fits: bool
    predicted: Predicted

    def to_dict(self) -> dict[str, Any]:
        return {"fits": self.fits, "predicted": self.predicted.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Before:
        return cls(data["fits"], Predicted.from_dict(data["predicted"]))


@dataclass(frozen=True)
class Verdict:
    """The preflight's verdict on one job: each phase's peak against the card, and for a misfit its fixes and the
    change that fits. The parts a misfit adds (fixes .. fits_with) are empty when it fits; `changed` and `before`
    when the policy changed nothing."""

    fits: bool
    misfit: str | None  # the first phase that does not fit
    phases: dict[str, PhasePeak]  # in the estimate's order
    arithmetic: tuple[str, ...]  # per phase, its sum against the capacity
    host_ram_gib_per_node: float
    predicted: Predicted
    policy: str  # launch.preflight
    # what holds the host RAM per node (memory.host_ram_terms), each term's note the setting that shrinks it
    host_ram: tuple[Term, ...] = ()
    fixes: tuple[FixReport, ...] = ()  # every single fix, cheapest first
    first_fitting_fixes: tuple[str, ...] = ()  # the first cumulative set that fits, as key=value (advice)
    unfixable_without_your_keys: bool = False  # every set that fits changes a key the user set
    fits_with: FittingChange | None = None
    typical: Typical | None = None
    job_software: JobSoftwareNotes | None = None
    knobs: Knobs | None = None  # what was judged: the report's what-ifs start there (None: not this launcher's)
    not_counted: tuple[str, ...] = ()  # what the estimate does not model exactly
    changed: dict[str, str] = field(default_factory=dict)  # verl key -> value (as Hydra reads it) the policy set
    before: Before | None = None  # set when `changed` is
    # the phases within the estimate's band around the card (memory.Edge: FSDP's, or Megatron's), too close to call
    # (the gate warns on them instead of refusing); backend=megatron: where that estimate is rougher than FSDP's
    at_the_edge: tuple[str, ...] = ()
    rough: tuple[str, ...] = ()
    beyond: str = ""  # a misfit the search found no fix for: the knobs beyond the search, for this run ("": generic)

    @classmethod
    def of(
        cls,
        phases: list[Phase],
        host_ram: tuple[Term, ...],
        predicted: Predicted,
        policy: str,
        edge: Edge = FSDP_EDGE,
        **parts: Any,
    ) -> Verdict:
        """The verdict on these phases' peaks: fits when every phase does, the first that does not its misfit, and
        the phases within `edge` of the card (the estimator's own band) too close to call."""
        return cls(
            fits=all(phase.fits for phase in phases),
            misfit=next((phase.name for phase in phases if not phase.fits), None),
            phases={phase.name: PhasePeak.of(phase) for phase in phases},
            arithmetic=tuple(phase.arithmetic() for phase in phases),
            host_ram_gib_per_node=round(sum(term.gib for term in host_ram), 1),
            host_ram=tuple(Term(term.name, round(term.gib, 1), term.note) for term in host_ram),
            predicted=predicted,
            policy=policy,
            at_the_edge=tuple(edge.phases_at(phases)),
            **parts,
        )

    @property
    def capacity_gib(self) -> float:
        """The card's usable memory: every phase is judged against the same."""
        return next(iter(self.phases.values())).capacity_gib

    @property
    def peaks_gib(self) -> dict[str, float]:
        return {name: phase.peak_gib for name, phase in self.phases.items()}

    @property
    def too_close_to_call(self) -> bool:
        """A misfit only in phases within the estimate's margin of the card: not a refusal, a warning."""
        missing = [name for name, phase in self.phases.items() if not phase.fits]
        return bool(missing) and set(missing) <= set(self.at_the_edge)

    @property
    def megatron(self) -> bool:
        """backend=megatron's verdict: only Megatron's estimate says where it is rough."""
        return bool(self.rough)

    @property
    def cheapest_fix(self) -> tuple[str, ...]:
        """The cheapest change that fits a misfit clear of the estimate's band, as key=value (CHEAPEST says the
        order), chosen among what the preflight searched, never searched again: on the run's own GPUs its minimal set
        (`first_fitting_fixes`: cheapest first in lost throughput until it fits, then every fix the others do not
        need dropped; `fits_with.on_your_gpus` names the same) or the offload or rollout TP that fits them
        (`fits_with`); past them the fewest GPUs, the minimal set at its count where that is as few as `fits_with`'s
        count (as the run is or with offload). launch.preflight=fix applies this set where it changes no key the user
        set. Megatron's search ranks its own by the predicted step time."""
        chain, found = self.first_fitting_fixes, self.fits_with
        if self.megatron or found is None or (chain and self.gpus_of(chain) is None):
            return chain
        if found.on_your_gpus is not None:
            return found.on_your_gpus.overrides
        searched = found.searched_count
        if searched is None:
            return chain
        fewer = self.gpus_of(chain) if chain else None
        return chain if fewer is not None and fewer <= searched.gpus else searched.overrides

    def gpus_of(self, overrides: tuple[str, ...]) -> int | None:
        """The GPUs a fix runs on, where it changes their count (None: the run's own; also where the recorded knobs
        do not say how many the run has)."""
        given = dict(override.split("=", 1) for override in overrides)
        if self.knobs is None or not GPU_COUNT_KEYS & given.keys():
            return None
        per_node = int(given.get("trainer.n_gpus_per_node", self.knobs.gpus_per_node))
        nodes = int(given.get("trainer.nnodes", max(1, self.knobs.n_gpus // self.knobs.gpus_per_node)))
        return nodes * per_node

    @property
    def misfit_arithmetic(self) -> str:
        """The sum of the first phase that does not fit ("" when all do)."""
        return self.arithmetic[list(self.phases).index(self.misfit)] if self.misfit is not None else ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON plan.json holds (and always held): a misfit's parts only for a misfit, `changed` and `before`
        only where the policy changed the config."""
        record: dict[str, Any] = {
            "fits": self.fits,
            "misfit": self.misfit,
            "phases": {name: phase.to_dict() for name, phase in self.phases.items()},
            "arithmetic": list(self.arithmetic),
            "host_ram_gib_per_node": self.host_ram_gib_per_node,
            "host_ram": [asdict(term) for term in self.host_ram],
            "predicted": self.predicted.to_dict(),
            "policy": self.policy,
        }
        if not self.fits:
            record["fixes"] = [fix.to_dict() for fix in self.fixes]
            record["first_fitting_fixes"] = list(self.first_fitting_fixes)
            if self.unfixable_without_your_keys:
                record["unfixable_without_your_keys"] = True
            record["fits_with"] = self.fits_with.to_dict() if self.fits_with is not None else None
        if self.typical is not None:
            record["typical"] = self.typical.to_dict()
        if self.job_software is not None:
            record["job_software"] = self.job_software.to_dict()
        if self.knobs is not None:
            record["knobs"] = asdict(self.knobs)
        record["not_counted"] = list(self.not_counted)
        if self.before is not None:
            record["changed"] = dict(self.changed)
            record["before"] = self.before.to_dict()
        if self.rough or self.at_the_edge:  # an FSDP verdict clear of the card: its plan.json stays as it was
            record["at_the_edge"] = list(self.at_the_edge)
        if self.rough:
            record["rough"] = list(self.rough)
        return record

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """to_dict's inverse. Parts an older plan.json lacks are left empty; knobs that are not this launcher's
        (a field missing) are None, so nothing starts from knobs it would have to guess."""
        fits_with, typical, software, before = (
            data.get(key) for key in ("fits_with", "typical", "job_software", "before")
        )
        return cls(
            fits=data["fits"],
            misfit=data.get("misfit"),
            phases={name: PhasePeak.from_dict(phase) for name, phase in data["phases"].items()},
            arithmetic=tuple(data["arithmetic"]),
            host_ram_gib_per_node=data["host_ram_gib_per_node"],
            host_ram=tuple(Term(**term) for term in data.get("host_ram") or ()),
            predicted=Predicted.from_dict(data["predicted"]),
            policy=data["policy"],
            fixes=tuple(FixReport.from_dict(fix) for fix in data.get("fixes") or ()),
            first_fitting_fixes=tuple(data.get("first_fitting_fixes") or ()),
            unfixable_without_your_keys=bool(data.get("unfixable_without_your_keys")),
            fits_with=FittingChange.from_dict(fits_with) if fits_with else None,
            typical=Typical.from_dict(typical) if typical else None,
            job_software=JobSoftwareNotes.from_dict(software) if software else None,
            knobs=recorded_knobs(data.get("knobs")),
            not_counted=tuple(data.get("not_counted") or ()),
            changed=dict(data.get("changed") or {}),
            before=Before.from_dict(before) if before else None,
            at_the_edge=tuple(data.get("at_the_edge") or ()),
            rough=tuple(data.get("rough") or ()),
        )


def known_fields(record: type, data: dict[str, Any]) -> dict[str, Any]:
    """The keys of `data` that are fields of `record` (a plan.json written by a newer rlaunch still reads)."""
    names = {item.name for item in fields(record)}
    return {key: value for key, value in data.items() if key in names}


def recorded_knobs(recorded: Any) -> Knobs | None:
    """The knobs plan.json recorded, or None where it recorded none or knobs of another launcher (a field this one
    requires is missing)."""
    if not isinstance(recorded, dict):
        return None
    try:
        return Knobs(**known_fields(Knobs, recorded))
    except TypeError:
        return None


TRAINER_PHASES = ("training", "log-prob")  # the preflight's phases that run in verl's trainer processes


def predicted_torch_peaks(phases: dict[str, PhasePeak]) -> dict[str, float]:
    """The preflight's trainer-process phases (training, log-prob) as torch's counters see them, i.e. without the
    terms outside torch (CUDA context, NCCL buffers); vLLM's reservation is not in the counters verl reports
    either."""
    return {
        name: phases[name].peak_gib - sum(phases[name].terms.get(term, 0.0) for term in OUTSIDE_TORCH_TERMS)
        for name in TRAINER_PHASES
        if name in phases
    }
