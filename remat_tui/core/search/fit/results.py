"""Provides what fit (`search.fit.batches`) finds, as values: a Probe per batch
tried, a FitRow per configuration, the Fit of a whole search (Contract 10's
JSON), and FitProgress, what it says while it searches.

A row's batch is the largest that fits the budget; its step time is the
measured one where it was run (`--measure`), else the roofline estimate
(`xla.estimates.step_time`); examples per second = batch / step time, and rows
rank by it, the best marked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from remat_tui.core.display import Displayable
from remat_tui.core.search.rows import CostSource
from remat_tui.core.setup.config import Config
from remat_tui.core.xla.compile.compiled import Compiled

if TYPE_CHECKING:
    from remat_tui.core.search.exact.certificate import Certificate
    from remat_tui.core.search.suggest.verified import Failed
    from remat_tui.core.xla.estimates.step_time import StepTime
    from remat_tui.core.xla.run.measure import Measured
    from remat_tui.core.xla.verify.runs import Verification


@dataclass
class Probe:
    """One batch compiled under one configuration."""

    batch: int
    fits: bool  # XLA took it and its peak is within the budget
    compiled: Compiled
    how: str  # `xla.compile.shared`: compiled now, the same program's, or cached
    time: StepTime | None = None  # the step-time estimate at this batch, where it fits

    @property
    def peak_bytes(self) -> int | None:
        """The compiled peak; for a compile XLA refused, what it said it needed."""
        if self.compiled.fits:
            return self.compiled.peak_bytes
        return self.compiled.needed_bytes

    @property
    def examples_per_second(self) -> float | None:
        if not self.fits or not self.time or not self.time.seconds:
            return None
        return self.batch / self.time.seconds

    def to_dict(self) -> dict:
        return {
            "batch": self.batch,
            "fits": self.fits,
            "peak_bytes": self.peak_bytes,
            "step_seconds": self.time.seconds if self.time else None,
            "examples_per_second": self.examples_per_second,
            "how": self.how,
        }


@dataclass
class FitRow:
    """One configuration's largest batch within the budget.

    Attributes:
        config: the configuration (outer policy, site overrides, device).
        policy: the outer policy as the user wrote it (a candidate's spec).
        probes: every batch tried, in order (`Probe`: batch, fits, the compile).
        batch: the largest batch found to fit; 0 when not even the smallest does.
        not_fit: the smallest batch tried that does not fit, or None.
        capped: `batch` is the largest allowed: more may fit.
        complete: the search closed its bracket (False: stopped, or `error`).
        python: the code to paste, for a row that fits.
        measured: the step run on the device at `batch` (`Measured`).
        error: why a compile failed (other than running out of memory).
        best: the most examples per second.
        notes: sentences, such as why a row was not measured.
    """

    config: Config
    policy: str  # as the user wrote it (after --policy), or the candidate's spec
    probes: list[Probe] = field(default_factory=list)
    batch: int = 0  # the largest batch found to fit; 0: not even the smallest does
    not_fit: int | None = None  # the smallest batch tried that does not fit
    capped: bool = False  # the batch is the largest allowed (max_batch): more may fit
    complete: bool = False  # the bracket closed (False: cancelled, or a compile failed)
    python: str = ""  # the code to paste, for a row that fits
    measured: Measured | None = None  # its step run on the device at its batch (measure=True)
    error: str | None = None  # a compile failed otherwise than for memory
    best: bool = False
    notes: list[str] = field(default_factory=list)
    search: Certificate | None = (
        None  # fit --optimize: the exact search's certificate at this batch
    )
    # fit --optimize with verify (Contract 18): the answer's verification
    # (a `Verification`), and the answers dropped at this batch.
    gradients: Verification | None = None
    verify_failed: list[Failed] = field(default_factory=list)

    @property
    def at(self) -> Probe | None:
        """The probe at the row's batch (None for batch 0)."""
        return next((p for p in self.probes if p.batch == self.batch and p.fits), None)

    @property
    def smallest_failing(self) -> Probe | None:
        return next((p for p in self.probes if p.batch == self.not_fit), None)

    @property
    def peak_bytes(self) -> int | None:
        return self.at.compiled.peak_bytes if self.at else None

    @property
    def needed_bytes(self) -> int | None:
        """For a row where nothing fits: the smallest batch's peak (or what XLA
        said it needed)."""
        if self.batch or self.smallest_failing is None:
            return None
        return self.smallest_failing.peak_bytes

    @property
    def time(self) -> StepTime | None:
        return self.at.time if self.at else None

    @property
    def cost_source(self) -> CostSource | None:
        """What the step time is: measured (run on the device) or estimate
        (the roofline); None where there is neither."""
        if self.measured and self.measured.min_seconds is not None:
            return CostSource.MEASURED
        return CostSource.ESTIMATE if self.time else None

    @property
    def step_seconds(self) -> float | None:
        if self.measured and self.measured.min_seconds is not None:  # cost_source "measured"
            return self.measured.min_seconds
        return self.time.seconds if self.time else None

    @property
    def examples_per_second(self) -> float | None:
        seconds = self.step_seconds
        return self.batch / seconds if self.batch and seconds else None

    def to_dict(self) -> dict:
        at = self.at
        return {
            "policy": self.policy,
            "spec": self.config.policy,
            "sites": {str(k): v for k, v in self.config.sites},
            "structure": None if self.config.structure is None else self.config.structure.to_dict(),
            "python": self.python,
            "batch": self.batch,
            "peak_bytes": self.peak_bytes,
            "step_seconds": self.step_seconds,
            "examples_per_second": self.examples_per_second,
            "cost_source": self.cost_source,
            "best": self.best,
            "needed_bytes": self.needed_bytes,
            "not_fit_batch": self.not_fit,
            "capped": self.capped,
            "complete": self.complete,
            "compiled": at.compiled.to_dict() if at else None,
            "time": None if self.time is None else self.time.to_dict(),
            "measured": None if self.measured is None else self.measured.to_dict(),
            "probes": [p.to_dict() for p in sorted(self.probes, key=lambda p: p.batch)],
            "error": self.error,
            "notes": list(self.notes),
            "search": None if self.search is None else self.search.to_dict(),
            "gradients": None if self.gradients is None else self.gradients.to_dict(),
            "verify_failed": [f.to_dict() for f in self.verify_failed],
        }


def rank(rows: list[FitRow]) -> list[FitRow]:
    """Rows by examples per second, most first (rows without a step time by
    batch after them, rows where nothing fits last), the first that fits
    marked best."""
    ordered = sorted(
        rows,
        key=lambda r: (not r.batch, r.examples_per_second is None, -(r.examples_per_second or 0),
                       -r.batch),
    )  # fmt: skip
    for i, row in enumerate(ordered):
        row.best = i == 0 and row.batch > 0
    return ordered


@dataclass
class Fit(Displayable):
    """What `fit` returns: the largest batch per configuration, best first.

    Attributes:
        target_file: the target's file, or None.
        target_name: the target's name.
        device: `{"platform", "id", "description"}` (and a topology's name and chips).
        budget: the budget in bytes, per device.
        multiple: batches were tried in steps of this many.
        max_batch: the largest batch allowed, or None.
        example_batch: the `batch` parameter's default, where each search
            started (None: it has none; the search started at `multiple`).
        rows: one `FitRow` per configuration, by examples per second.
        compiles: programs XLA compiled for the search (the CLI's `compiles:`
            line counts these and, with --measure, each row's run).
        reused: programs answered without compiling: the same program
            compiled before (for another configuration or batch, or by an
            earlier command: the compile cache).
        stored: of `reused`, those the compile cache on disk answered.
        seconds: how long the search took.
        cancelled: it was stopped; `rows` are those found so far.
        optimized: `fit --optimize`: a row per batch tried, each with the
            best decisions at that batch (the exact search), not one per
            configuration.
    """

    target_file: str | None
    target_name: str
    device: dict
    budget: int
    multiple: int
    max_batch: int | None
    example_batch: int | None
    rows: list[FitRow]
    compiles: int  # XLA compiles the search ran (measuring adds one per row run)
    reused: int  # programs answered by the same program compiled before
    seconds: float
    cancelled: bool = False
    stored: int = 0  # of `reused`, those the compile cache on disk answered
    optimized: bool = False  # --optimize: a row per batch, its best decisions

    @property
    def best(self) -> FitRow | None:
        return next((r for r in self.rows if r.best), None)

    def to_dict(self) -> dict:
        return {
            "schema": 1,
            "target": {"file": self.target_file, "name": self.target_name},
            "device": dict(self.device),
            "budget_bytes": self.budget,
            "multiple": self.multiple,
            "max_batch": self.max_batch,
            "example_batch": self.example_batch,
            "rows": [r.to_dict() for r in self.rows],
            "compiles": self.compiles,
            "reused": self.reused,
            "stored": self.stored,
            "probes": sum(len(r.probes) for r in self.rows),
            "seconds": self.seconds,
            "cancelled": self.cancelled,
            "optimized": self.optimized,
        }


@dataclass(frozen=True)
class FitProgress:
    """Where one configuration's search stands: what it is trying now (None
    once its bracket closed), between the largest batch known to fit and the
    smallest known not to; with `optimized`, where fit --optimize's batches
    stand, every decision searched at each."""

    index: int  # the configuration's place among `total`
    total: int
    policy: str
    config: Config
    fits: int  # 0: none known to fit yet
    not_fit: int | None
    trying: int | None
    compiles: int  # so far, in the whole search
    reused: int
    # fit --optimize: `index` counts the exact searches made so far (one per
    # batch), `total` is 0 (how many more the bracket takes is not known)
    optimized: bool = False
