"""Provides `Compiled`, XLA's numbers for one compiled step (Contract 6's
"compiled", Contract 7's "memory"), and how they are read: from an
executable (`read`: memory_analysis, cost_analysis, and on TPU or on request
XLA's dump, for the peak HBM holds and where it goes), or from a compile XLA
refused for want of memory (`does_not_fit`). `xla.compile.costs` says what
is compiled; `xla.compile.service` is the one place that compiles it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from remat_tui.core.display import Displayable
from remat_tui.core.jaxcompat.collectives import count_collectives
from remat_tui.core.jaxcompat.hlo_text import has_loops
from remat_tui.core.xla.buffers.made import ForwardValue
from remat_tui.core.xla.buffers.memory import memory_and_reason
from remat_tui.core.xla.buffers.peak_notes import spaces_note

if TYPE_CHECKING:
    import jax

ERROR_LINES = 4  # lines of XLA's message a failed compile shows


@dataclass(frozen=True)
class Compiled(Displayable):
    """XLA's numbers for one compiled step (the gradient keeping the loss, or
    the training step), compiled for a device and never run: `Analysis.compiled`.
    Bytes are per device.

    Attributes:
        device: the device label it was compiled for: `"cpu:0"`, `"tpu:v5e:2x2"`.
        devices: how many devices the program spans: 1 unless the arguments
            are sharded.
        temp_bytes: XLA's temporaries in the device's main memory.
        argument_bytes: the inputs.
        output_bytes: what the step returns (the loss and the gradients of
            the differentiated arguments, or the new parameters and optimizer
            state and the loss).
        alias_bytes: outputs sharing an argument's buffer.
        generated_code_bytes: the executable.
        host_temp_bytes: temporaries in host memory (offloading).
        peak_bytes: the most the step needs at once in the device's main
            memory (HBM; RAM on CPU): argument + output + temp - alias, or
            on TPU the most HBM holds at one step of XLA's schedule.
        peak_source: `"sum"` or `"live"` (as above); for a compile that did
            not fit, `"needed"` (what XLA said) or `"unknown"`.
        flops: XLA's `cost_analysis` FLOPs (a loop body counted once), or None.
        seconds: how long lowering and compiling took.
        fits: False when XLA ran out of the device's memory compiling it.
        needed_bytes: what XLA said it needed, when it did not fit.
        available_bytes: what XLA said the device has, when it did not fit.
        error: XLA's first line, when it did not fit.
        step: `"train"` (the whole training step) or `"gradient"` (alone).
        differentiated: what the step differentiates, as its JSON
            (`positions`, `keywords`, `why`, `every_argument`:
            `xla.compile.differentiated`); None for a train_step of one's own.
        bytes_accessed: XLA's `cost_analysis` bytes accessed, or None.
        transcendentals: XLA's `cost_analysis` transcendentals, or None.
        loops: whether the program runs a while loop (XLA's counts then
            undercount it).
        backend_peak_bytes: XLA's own `peak_memory_in_bytes`, every memory
            space together (on TPU, HBM and VMEM).
        spaces_note: why the memory spaces do not add up to
            `backend_peak_bytes` within 1%, when they do not.
        memory: where the peak goes, as its JSON: the curve over XLA's
            schedule, the buffers live at the peak, the bytes by category and
            the other memory spaces; None without the breakdown.
        memory_note: why there is no breakdown, when there is none.
        collectives: the collectives one step runs and what one device sends
            for them (`jaxcompat.collectives`), as its JSON: `sent_bytes`,
            `count`, `kinds` (per kind: `count`, `operand_bytes`,
            `sent_bytes`), `exact`; None where XLA gave no program text.
    """

    device: str  # the device label: cpu:0, tpu:v5e:2x2
    devices: int  # devices the program spans: 1 unless the arguments are sharded
    temp_bytes: int
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    generated_code_bytes: int
    host_temp_bytes: int
    peak_bytes: int  # the main memory's: argument + output + temp - alias; live on TPU
    peak_source: str  # "sum"/"live": as above; "needed"/"unknown": a compile that did not fit
    flops: float | None  # XLA's cost_analysis (a loop body counted once)
    seconds: float  # lowering and compiling
    fits: bool = True  # False: XLA ran out of the device's memory compiling it
    needed_bytes: int | None = None  # what XLA said it needed, when it did not fit
    available_bytes: int | None = None  # what XLA said the device has, when it did not fit
    error: str | None = None  # XLA's first line, when it did not fit
    step: str = "gradient"  # "train": the whole training step; "gradient": the gradient alone
    differentiated: dict | None = None  # which arguments the step differentiates
    bytes_accessed: float | None = None  # XLA's cost_analysis (a loop body counted once)
    transcendentals: float | None = None  # XLA's cost_analysis (a loop body counted once)
    loops: bool = False  # the program runs a while loop: XLA's counts undercount it
    backend_peak_bytes: int | None = None  # XLA's peak_memory_in_bytes, all spaces
    spaces_note: str | None = None  # why the spaces do not add up to the backend's peak
    # Contract 7, on request (`memory=True`): where the peak goes (`xla.buffers.memory`),
    # as its JSON; or why there is none.
    memory: dict | None = None
    memory_note: str | None = None
    # The collectives one step runs, per device (`jaxcompat.collectives`).
    collectives: dict | None = None
    # What the forward work makes (`xla.buffers.made`), for naming the residuals
    # at the peak (`xla.fates.residuals`): kept with the numbers (`stored`), never
    # in the report's JSON.
    made: tuple[ForwardValue, ...] = field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict:
        """The report's JSON (Contract 6): the numbers, without `made`."""
        return {k: v for k, v in asdict(replace(self, made=())).items() if k != "made"}

    def stored(self) -> dict:
        """Everything, `made` included, as JSON: what the compile store and a
        worker process keep and send (`from_dict` reads it back)."""
        return {**self.to_dict(), "made": [_made_json(m) for m in self.made]}

    @classmethod
    def from_dict(cls, d: dict) -> Compiled:
        """The Compiled whose `to_dict()` or `stored()` is `d` (as a store or a
        worker gives it)."""
        made = tuple(_made_of(m) for m in d.get("made", ()))
        return cls(**{k: v for k, v in d.items() if k != "made"}, made=made)


def _made_json(made: ForwardValue) -> dict:
    """A ForwardValue record as JSON (its tuples become lists)."""
    return asdict(made)


def _made_of(d: dict) -> ForwardValue:
    """The ForwardValue record `_made_json` wrote: JSON's lists back to tuples."""
    return ForwardValue(**_tuples(d))


def _tuples(value: Any) -> Any:
    """JSON's lists as the tuples a ForwardValue record holds (frames, aliases, keys)."""
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def read(
    executable: jax.stages.Compiled,
    platform: str | None,
    label: str,
    spanned: int,
    seconds: float,
    dumped: bool,
    memory: bool,
) -> Compiled:
    """XLA's numbers for a compiled executable; on TPU the peak HBM holds over
    the schedule (from the dump); with `memory`, where the peak goes."""
    result = _numbers(executable.memory_analysis(), _costs(executable), label, spanned, seconds)
    text = executable.as_text()  # None where the backend gives none: no loops seen
    result = replace(
        result,
        loops=text is not None and has_loops(text),
        collectives=_collectives(text, spanned),
    )
    if not dumped:
        return result
    breakdown, why = memory_and_reason(executable, platform)
    if platform == "tpu" and breakdown is not None:
        result = replace(result, peak_bytes=breakdown.peak_bytes, peak_source="live")
    if not memory:
        return result
    if breakdown is None:
        return replace(result, memory_note=why)
    return replace(
        result,
        memory=breakdown.to_dict(),
        made=breakdown.made,
        memory_note=why,
        spaces_note=spaces_note(result.peak_bytes, result.backend_peak_bytes, breakdown),
    )


def _collectives(text: str | None, spanned: int) -> dict | None:
    """The collectives of the program's text, as JSON; None without text, or
    where the text is laid out in a way `jaxcompat.collectives` cannot
    read (the estimate then has no collective part, as before)."""
    if text is None:
        return None
    try:
        return count_collectives(text, spanned).to_dict()
    except Exception:  # XLA's text changed: no collective part rather than no answer
        return None


def _costs(executable: jax.stages.Compiled) -> dict:
    """XLA's cost analysis: {"flops", "bytes accessed", ...}, or {} where the
    backend has none."""
    try:
        costs = executable.cost_analysis()
    except Exception:  # a backend without cost analysis
        return {}
    if isinstance(costs, (list, tuple)):  # one dict per program in older JAX
        costs = costs[0] if costs else None
    return dict(costs or {})


def _numbers(stats: Any, costs: dict, label: str, devices: int, seconds: float) -> Compiled:
    def get(name: str) -> int:
        return int(getattr(stats, name, 0) or 0)

    argument, output = get("argument_size_in_bytes"), get("output_size_in_bytes")
    temp, alias = get("temp_size_in_bytes"), get("alias_size_in_bytes")
    # The backend's own peak is not the main memory's: CPU's leaves its temps
    # out (measured: arguments + outputs + 36 B, the same beside 29 MB or
    # 259 MB of temps), TPU's adds VMEM's. The sizes of the main memory's
    # allocations are what a budget is spent on.
    backend_peak = get("peak_memory_in_bytes")
    return Compiled(
        device=label,
        devices=devices,
        temp_bytes=temp,
        argument_bytes=argument,
        output_bytes=output,
        alias_bytes=alias,
        generated_code_bytes=get("generated_code_size_in_bytes"),
        host_temp_bytes=get("host_temp_size_in_bytes"),
        peak_bytes=argument + output + temp - alias,
        peak_source="sum",
        flops=_number(costs.get("flops")),
        seconds=seconds,
        bytes_accessed=_number(costs.get("bytes accessed")),
        transcendentals=_number(costs.get("transcendentals")),
        backend_peak_bytes=backend_peak or None,
    )


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


_OOM = ("RESOURCE_EXHAUSTED", "Ran out of memory", "out of memory")
_SIZE = r"([\d.]+)\s*([KMGT]i?)?B?"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
# XLA's words for what a program needed and what the device has, as its TPU
# compiler prints them (checked against real messages in tests/unit/test_compiled.py).
_NEEDED_OF_AVAILABLE = (
    re.compile(rf"required for [^(]*\({_SIZE}\) exceeds available [^(]*\({_SIZE}\)"),
    re.compile(rf"Used {_SIZE} of {_SIZE}"),
)


def out_of_memory(message: str) -> bool:
    """Whether XLA refused the program for want of device memory."""
    return any(marker in message for marker in _OOM)


def does_not_fit(message: str, label: str, devices: int, seconds: float) -> Compiled:
    """The result of a compile XLA refused for want of memory."""
    needed = available = None
    for pattern in _NEEDED_OF_AVAILABLE:
        if m := pattern.search(message):
            needed, available = _bytes(m[1], m[2]), _bytes(m[3], m[4])
            break
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    return Compiled(
        device=label,
        devices=devices,
        temp_bytes=0,
        argument_bytes=0,
        output_bytes=0,
        alias_bytes=0,
        generated_code_bytes=0,
        host_temp_bytes=0,
        peak_bytes=needed or 0,
        peak_source="needed" if needed else "unknown",
        flops=None,
        seconds=seconds,
        fits=False,
        needed_bytes=needed,
        available_bytes=available,
        error=first[:300],
    )


def _bytes(number: str, unit: str | None) -> int:
    return int(float(number) * _UNITS[(unit or "")[:1]])


def trim_message(text: str, lines: int = ERROR_LINES) -> str:
    """XLA's error, first meaningful lines: blank lines, libtpu's source
    location trace and Python's traceback noise dropped, long lines cut."""
    kept = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(("=== Source Location Trace", "*** Begin stack trace")):
            break
        if not line or line.startswith("For simplicity, JAX has removed"):
            continue
        kept.append(line if len(line) <= 300 else line[:297] + "...")
    more = len(kept) > lines
    kept = kept[:lines] + (["..."] if more else [])
    return "\n".join("  " + line for line in kept) or "  (no message)"
