"""Provides Row: one configuration's costs, a row of compare and suggest's
answer (`search.compare` makes them; `search.notes.unchanged` and
`search.notes.offloads` judge them, so it lives apart from the search that
makes it), and `row_of` an analysis."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from remat_tui.core.model import Analysis
from remat_tui.core.setup.config import Config

if TYPE_CHECKING:  # the records' modules import JAX: `remat-tui --help` imports none
    from remat_tui.core.trace.effects import Effect
    from remat_tui.core.xla.compile.compiled import Compiled
    from remat_tui.core.xla.estimates.step_time import StepTime
    from remat_tui.core.xla.run.measure import Measured
    from remat_tui.core.xla.verify.runs import Verification


class CostSource(StrEnum):
    """What a row's `cost` is: its step run on the device, the step-time
    estimate (compiled for a chip the table knows), or its recompute FLOPs.
    A string in the JSON."""

    MEASURED = "measured"
    ESTIMATE = "estimate"
    FLOPS = "flops"

    @property
    def unit(self) -> str:
        """What the cost is counted in: "seconds" (measured or estimated) or
        "flops" (compiled for a chip the table does not know, there is no
        estimate)."""
        return "flops" if self is CostSource.FLOPS else "seconds"


@dataclass
class Row:
    """One configuration's costs: a row of compare, and suggest's answer.

    Attributes:
        config: the configuration (outer policy, site overrides, device).
        python: the code to paste.
        device_bytes: residual bytes on the device, one device's (Contract
            17: what one device holds of each residual; its whole size where
            its aval carries no sharding).
        host_bytes: residual bytes offloaded to the host, one device's.
        global_device_bytes: `device_bytes` in global array sizes where
            residuals are sharded over a mesh; None: as device_bytes
            (nothing is split).
        global_host_bytes: `host_bytes` likewise.
        recompute_flops: forward work the backward pass does again.
        forward_flops: the forward pass's FLOPs.
        saved_bytes: residual bytes beyond the arguments.
        compiled: XLA's numbers when compiled, else None (`Compiled`, without
            `made`: its `to_dict()` only in the JSON).
        time: the step-time estimate when compiled (`StepTime`).
        measured: the step run on the device (`Measured`).
        pareto: on the Pareto front (★): no other row needs no more memory at
            no more cost, and less of one.
        notes: sentences on what the row changes, or why it is not worth it.
        error: why its compile failed (other than running out of memory),
            or, for a row JAX refused to trace (`refused`), why.
        refused: JAX (or the user's code) refused to trace this
            configuration: the row has no numbers, only its `error`, and is
            never an answer (a complex value under everything_saveable, say).
        offload_slower: its offload is slower than recomputing instead.
        offload_without_host: it offloads where the device's compile has no
            host memory: the offloaded bytes stay in device memory.
        effects: the program's calls back to Python and whether this
            configuration's backward pass runs each again
            (`trace.effects.Effect`s, issue 43); a row that runs
            one again has a note saying so.
    """

    config: Config
    python: str
    device_bytes: int
    host_bytes: int
    recompute_flops: int
    forward_flops: int
    residuals: tuple[str, ...]  # JAX's texts, for diff
    saved_bytes: int = 0  # residual bytes beyond the arguments (those are held anyway)
    # The global array sizes where residuals are sharded over a mesh; None:
    # the same as the per-device figures.
    global_device_bytes: int | None = None
    global_host_bytes: int | None = None
    # How many devices the arguments sharded automatically are placed over
    # (Analysis.auto_sharded_devices): its bytes are then global array sizes.
    auto_sharded_devices: int = 1
    # The backward pass's work besides recomputation: the same for every
    # configuration of a target, so counted once (`step_flops`); None until
    # a step time is wanted.
    transpose_flops: int | None = None
    compiled: Compiled | None = None
    time: StepTime | None = (
        None  # the step-time estimate (`xla.estimates.step_time`), once compiled
    )
    measured: Measured | None = None  # its step run on the device (`xla.run.measure`), on request
    pareto: bool = False
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # its compile failed (other than running out of memory)
    refused: bool = False  # its trace failed: no numbers, only `error` (refused_row)
    offload_slower: bool = False  # its offload costs more time than the recompute it saves
    offload_without_host: bool = False  # no host memory to offload to: the bytes stay on device
    program: str | None = None  # its compiled program's key (`xla.compile.service`)
    # With verify: its step run against the code as written's (Contract 18),
    # a `Verification`; a row whose gradients differ is never an answer.
    gradients: Verification | None = None
    # The calls back to Python and which this configuration runs again (issue 43).
    effects: list[Effect] = field(default_factory=list)

    @property
    def weighed_bytes(self) -> int:
        """The bytes the Pareto front and suggest weigh, one device's
        (Contract 17): the compiled peak per device when known (for a
        compile that did not fit, what XLA said it needed), else the residual
        bytes one device holds (the offloaded ones too where the device has
        no host memory for them: all of them, a bound)."""
        if self.compiled and self.compiled.peak_bytes:
            return self.compiled.peak_bytes
        return self.device_bytes + (self.host_bytes if self.offload_without_host else 0)

    @property
    def sharded(self) -> bool:
        """Whether its residuals are sharded: its global figures differ."""
        return self.global_device_bytes is not None or self.global_host_bytes is not None

    @property
    def device_bytes_per_device(self) -> int:
        """`device_bytes` (its name before every figure was one device's)."""
        return self.device_bytes

    @property
    def cost_source(self) -> CostSource:
        """What `cost` is: measured (the step run on the device), estimate
        (the roofline, once compiled on a chip the table knows) or flops
        (the recompute FLOPs)."""
        if self.measured and self.measured.min_seconds is not None:
            return CostSource.MEASURED
        return CostSource.ESTIMATE if self.time else CostSource.FLOPS

    @property
    def cost_unit(self) -> str:
        """What `cost` is counted in: "seconds" (measured or estimated) or "flops"."""
        return self.cost_source.unit

    @property
    def cost(self) -> tuple:
        """What ranks rows: the measured step time, else the estimated one,
        else the recompute FLOPs (`cost_source`); host bytes break ties."""
        if self.measured and self.measured.min_seconds is not None:  # cost_source "measured"
            return (self.measured.min_seconds, self.host_bytes)
        if self.time:  # "estimate"
            return (self.time.seconds, self.host_bytes)
        return (self.recompute_flops, self.host_bytes)

    @property
    def estimated_cost(self) -> tuple:
        """`cost` before any run: the estimated step time, else the recompute
        FLOPs. What suggest's ordered search prunes with (its bounds are the
        estimate's)."""
        return (self.time.seconds if self.time else self.recompute_flops, self.host_bytes)

    @property
    def measure_failed(self) -> bool:
        """Its step raised when run (not for want of memory): bad input."""
        return bool(self.measured and self.measured.error and self.measured.fits)

    @property
    def gradients_differ(self) -> bool:
        """Verified, its gradients differ from the code as written's."""
        return self.gradients is not None and self.gradients.verdict == "differ"

    @property
    def reruns_callbacks(self) -> list[str]:
        """The calls back to Python its backward pass runs again (`pure_callback
        at model.py:39`): recomputed, a call reading Python state gives another
        value, and the gradients move."""
        return [f"{e.kind} at {e.where}" for e in self.effects if e.reruns]

    @property
    def step_flops(self) -> int | None:
        """The whole step's FLOPs: forward, transposition and recompute."""
        if self.transpose_flops is None:
            return None
        return self.forward_flops + self.transpose_flops + self.recompute_flops

    @property
    def fits(self) -> bool:
        """Whether it fits the device: compiled and XLA took it (and, when run,
        it did not run out of memory), or not compiled."""
        return (
            self.error is None
            and (self.compiled is None or self.compiled.fits)
            and (self.measured is None or self.measured.fits)
        )

    @property
    def failure(self) -> str | None:
        """Why it has no answer, in one line: what JAX said when it refused to
        trace it, or the last line of its compile's error; None when neither
        failed."""
        if self.error is None:
            return None
        if self.refused:
            return self.error.splitlines()[0].rsplit(" failed: ", 1)[-1].strip()
        return self.error.splitlines()[-1].strip()

    @property
    def recompute_share(self) -> float | None:
        return self.recompute_flops / self.forward_flops if self.forward_flops else None

    def to_dict(self) -> dict:
        return {
            "policy": self.config.policy,
            "sites": {str(k): v for k, v in self.config.sites},
            "python": self.python,
            "device_bytes": self.device_bytes,
            "device_bytes_per_device": self.device_bytes,
            "host_bytes": self.host_bytes,
            "global_device_bytes": _or(self.global_device_bytes, self.device_bytes),
            "global_host_bytes": _or(self.global_host_bytes, self.host_bytes),
            "auto_sharded_devices": self.auto_sharded_devices,
            "recompute_flops": self.recompute_flops,
            "forward_flops": self.forward_flops,
            "compiled": None if self.compiled is None else self.compiled.to_dict(),
            "time": None if self.time is None else self.time.to_dict(),
            "measured": None if self.measured is None else self.measured.to_dict(),
            "cost_source": self.cost_source,
            "pareto": self.pareto,
            "notes": list(self.notes),
            "error": self.error,
            "refused": self.refused,
            "offload_slower": self.offload_slower,
            "offload_without_host": self.offload_without_host,
            "saved_bytes": self.saved_bytes,
            "structure": _structure_dict(self.config),
            "gradients": None if self.gradients is None else self.gradients.to_dict(),
            "effects": [e.to_dict() for e in self.effects],
        }


def row_of(a: Analysis, compiled: Compiled | None = None) -> Row:
    flops, t = a.flops, a.totals
    return Row(
        config=a.config,
        python=a.python,
        device_bytes=t.device_bytes,
        host_bytes=t.host_bytes,
        recompute_flops=flops["recompute"],
        forward_flops=flops["forward"],
        residuals=tuple(r.text for r in a.residuals),
        saved_bytes=t.bytes_excluding_arguments,
        global_device_bytes=_unless(t.global_device_bytes, t.device_bytes),
        global_host_bytes=_unless(t.global_host_bytes, t.host_bytes),
        auto_sharded_devices=a.auto_sharded_devices,
        compiled=compiled,
        effects=list(a.effects),
    )


def refused_row(config: Config, error: str) -> Row:
    """The row of a configuration JAX refused to trace: its error and no
    numbers (Contract 16: a candidate that fails is a row, and the search
    answers from the rest)."""
    return Row(
        config=config,
        python="",
        device_bytes=0,
        host_bytes=0,
        recompute_flops=0,
        forward_flops=0,
        residuals=(),
        error=error,
        refused=True,
    )


def _structure_dict(config: Config) -> dict | None:
    return config.structure.to_dict() if config.structure is not None else None


def _unless(global_bytes: int, per_device: int) -> int | None:
    """A global figure where it differs from one device's, else None."""
    return None if global_bytes == per_device else global_bytes


def _or(global_bytes: int | None, per_device: int) -> int:
    return per_device if global_bytes is None else global_bytes
