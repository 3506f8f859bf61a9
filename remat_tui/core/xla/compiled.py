"""Provides `compile_costs` (Contract 6, "compiled"): what XLA says the step a
training loop runs needs on a device, for a target as configured.

The step is the loss and its gradient of the configured function (site
overrides and the outer policy, the function `analyze` traces:
configured.configured_function): `jax.vjp` applied to a cotangent of ones,
its output kept, which for a scalar loss is `jax.value_and_grad`, with
respect to the first argument or the target's `params=`; or, for a
target that trains, its whole training step (core/xla/lowering.py). It is
lowered with the example arguments' shapes (ShapeDtypeStructs: nothing is
allocated) and compiled for the chosen device, not run (core/xla/measure.py
runs it, when asked); `memory_analysis()` and `cost_analysis()` of the
executable are the numbers.

Where it compiles: an unsharded target for the chosen device alone (one chip
of a TPU topology); a target whose example arguments are sharded over several
devices (its args factory took `devices`, core/setup/loading.py) over those
devices, and the numbers are then per device. A deviceless TPU topology
(`tpu:v5e:2x2`, core/setup/devices.py) traces on a local CPU device and compiles
for its chips.

`peak_bytes` is the peak of the device's main memory (HBM; RAM on CPU), the
memory a budget is spent on. On CPU (and GPU) it is argument + output +
temp - alias, XLA's sizes of that memory's allocations (`peak_source`
"sum"). On TPU those sizes are not HBM's: JAX 0.10's libtpu leaves its
preallocated temporaries out of `temp_size_in_bytes` and JAX 0.12's counts
every memory's, VMEM included, and both count the temporaries' whole heap
(measured on bench/gpt_v5e.py's gpt_quick for v5e: a sum of 2.09 GB on JAX
0.10 and 2.31 GB on 0.12, against 1.65 GB of HBM live at its peak on both).
So a TPU compile always keeps XLA's dump, and `peak_bytes` is the most HBM
holds at one step of XLA's schedule (`peak_source` "live",
core/xla/memory.py); the sum stands only where the dump could not be read.
The backend's own `peak_memory_in_bytes` is kept beside it
(`backend_peak_bytes`): on TPU it is every memory at one moment, VMEM too
(measured: the example MLP's 389 KiB of HBM + 200 KiB of VMEM), never less
than HBM's peak; on CPU it leaves the temps out. With the memory breakdown
(`memory=True`) each other memory space has its own peak and buffers
(`memory["other_spaces"]`), and `spaces_note` says why, where the spaces do
not add up to the backend's figure within 1%.

A compile that runs out of the device's memory is a result, not an error
(Contract 8): `fits` is False, with the bytes XLA said it needed where its
message says. Any other failure raises RematError with XLA's message.

Compiling costs seconds to a minute, so results are cached per (target,
Config, device): at most CACHE_SIZE results, least recently used dropped.
Only the numbers are kept, never the executable, so an entry is a few
hundred bytes. A failed compile is cached too: the same code fails the same
way.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, NamedTuple

import jax
from jax.sharding import SingleDeviceSharding
from jax.tree_util import tree_flatten

from remat_tui.core.display import Displayable
from remat_tui.core.jaxcompat.hlo_text import has_loops
from remat_tui.core.lru import LRU
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import (
    device_label,
    device_set,
    resolve_device,
    trace_device,
)
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.trace.configured import check_cancelled
from remat_tui.core.xla.lowering import Lowered, lower
from remat_tui.core.xla.memory import compile_with_memory, memory_and_reason
from remat_tui.core.xla.peak_notes import spaces_note
from remat_tui.errors import RematError
from remat_tui.registry import Target

CACHE_SIZE = 256  # results kept (numbers only: no executable is held)
ERROR_LINES = 4  # lines of XLA's message a failed compile shows

# (id(target), Config, device, with the memory breakdown)
#   -> (target, its Compiled or the RematError it raised)
_cache = LRU(CACHE_SIZE)


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
            core/xla/differentiated.py); None for a train_step of one's own.
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
    # Contract 7, on request (`memory=True`): where the peak goes (core/xla/memory.py),
    # as its JSON; or why there is none.
    memory: dict | None = None
    memory_note: str | None = None
    made: tuple = field(default=(), repr=False, compare=False)  # core/xla/made.py; no JSON

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(replace(self, made=())).items() if k != "made"}


def compile_costs(
    target: Target,
    config: Config,
    cancelled: Callable[[], bool] | None = None,
    *,
    device=None,
    arguments: tuple[tuple, dict] | None = None,
    memory: bool = False,
    same_program: Callable[[jax.stages.Lowered], Compiled | None] | None = None,
) -> Compiled:
    """Compile the step of `target` (the loss and its gradient, or its training
    step) under `config` for its device (or
    `device`, a jax.Device, when given) and return XLA's numbers. `arguments`:
    (args, kwargs) already built from the target's factories, to reuse.
    `memory`: also read where the peak goes (Contract 7; XLA writes its record
    of the compile, which takes a little longer). `same_program(lowered)`,
    asked before compiling: a Compiled it knows for that very program (an
    identical program compiles to identical numbers: core/xla/programs.py),
    which then stands for this compile. A compile that fails raises
    RematError with XLA's message, trimmed."""
    dev = resolve_device(config.device) if device is None else device
    label = device_label(dev)
    # A result with the breakdown answers a request without it too.
    for wanted in (True,) if memory else (False, True):
        hit = _cache.get((id(target), config, label, wanted))
        if hit is not None and hit[0] is target:
            if isinstance(hit[1], RematError):
                raise RematError(hit[1].message)
            return hit[1]
    step = compile_step(
        target, config, cancelled, device=dev, arguments=arguments, memory=memory,
        same_program=same_program,
    )  # fmt: skip
    return step.result


class CompiledStep(NamedTuple):
    """One compile kept for running it (core/xla/measure.py): XLA's numbers,
    the executable (None when it did not fit the device), how to call it, and
    the flat arguments (as the target built them) and their placed shapes."""

    result: Compiled
    executable: Any
    lowered: Lowered
    leaves: list
    abstract: list


def compile_step(
    target: Target,
    config: Config,
    cancelled: Callable[[], bool] | None = None,
    *,
    device=None,
    arguments: tuple[tuple, dict] | None = None,
    memory: bool = False,
    same_program: Callable[[jax.stages.Lowered], Compiled | None] | None = None,
) -> CompiledStep:
    """`compile_costs` without its cache, keeping the executable: for a caller
    that runs it (None where `same_program` answered: nothing was compiled).
    Its numbers are cached for `compile_costs` all the same."""
    dev = resolve_device(config.device) if device is None else device
    label = device_label(dev)
    key = (id(target), config, label, memory)
    try:
        step = _compile(target, config, dev, label, cancelled, arguments, memory, same_program)
    except RematError as exc:
        _store(key, target, exc)
        raise
    _store(key, target, step.result)
    return step


def clear_cache() -> None:
    _cache.clear()


def _store(key, target, value) -> None:
    _cache.put(key, (target, value))


def _compile(
    target, config, dev, label, cancelled, arguments, memory=False, same_program=None
) -> CompiledStep:
    devices = device_set(dev)
    args, kwargs = arguments if arguments is not None else resolve_arguments(target, devices)
    leaves, in_tree = tree_flatten((args, kwargs))
    here = trace_device(dev)
    step = "train" if target.trains else "gradient"
    what = (
        f"{target.label}: compiling the {'training step' if step == 'train' else 'gradient'} "
        f"under {config.with_device(None).label()} for {label}"
    )
    abstract = [_abstract(x, dev, devices, what) for x in leaves]
    spanned = max(len({d for x in abstract for d in x.sharding.device_set}), 1)
    check_cancelled(cancelled)
    start = time.perf_counter()
    with jax.default_device(here):
        # Only the lowered module outlives _lower: the gradient's jaxpr (tens of
        # thousands of objects for a large unrolled model) is freed before XLA
        # compiles, so the full garbage collections that happen meanwhile (they
        # stop every thread, the app's UI too) do not walk it for the compile's
        # whole duration.
        step_lowered = lower(target, config, leaves, in_tree, here, abstract, what)
        lowered = step_lowered.lowered
        wrt = step_lowered.differentiated and step_lowered.differentiated.to_dict()
        known = same_program(lowered) if same_program is not None else None
        if known is not None:
            known = replace(known, step=step, differentiated=wrt)
            return CompiledStep(known, None, step_lowered, leaves, abstract)
        check_cancelled(cancelled)
        executable = None
        # TPU's peak is read from XLA's dump, so a TPU compile always keeps it.
        dumped = memory or dev.platform == "tpu"
        try:
            executable = compile_with_memory(lowered) if dumped else lowered.compile()
        except Exception as exc:
            message = str(exc)
            if not out_of_memory(message):
                raise RematError(f"{what} failed: XLA says:\n{trim_message(message)}") from None
            result = does_not_fit(message, label, spanned, time.perf_counter() - start)
        else:
            seconds = time.perf_counter() - start
            result = _read(executable, dev.platform, label, spanned, seconds, dumped, memory)
    result = replace(result, step=step, differentiated=wrt)
    return CompiledStep(result, executable, step_lowered, leaves, abstract)


def _read(executable, platform, label, spanned, seconds, dumped, memory) -> Compiled:
    """XLA's numbers for a compiled executable; on TPU the peak HBM holds over
    the schedule (from the dump); with `memory`, where the peak goes."""
    result = _numbers(executable.memory_analysis(), _costs(executable), label, spanned, seconds)
    result = replace(result, loops=has_loops(executable.as_text()))
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


def _abstract(leaf, dev, devices: list, what: str) -> jax.ShapeDtypeStruct:
    """The leaf's shape and dtype, placed on `dev`; a leaf sharded over several
    devices keeps its sharding (they must be among `devices`)."""
    aval = jax.typeof(leaf)
    sharding = getattr(leaf, "sharding", None)
    spans = getattr(sharding, "device_set", None) or set()
    if len(spans) > 1:
        if not spans <= set(devices):
            where = sorted({d.platform for d in spans})
            raise RematError(
                f"{what}: its example arguments are sharded over {', '.join(where)} "
                f"devices, not over {device_label(dev)}'s. Build them from the devices "
                "remat-tui passes: args=lambda devices: ... with "
                "jax.make_mesh(shape, names, devices=devices)."
            )
        placed = sharding
    else:
        memory_kind = getattr(sharding, "memory_kind", None)
        placed = SingleDeviceSharding(dev, memory_kind=memory_kind)
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, sharding=placed, weak_type=aval.weak_type)


def _costs(executable) -> dict:
    """XLA's cost analysis: {"flops", "bytes accessed", ...}, or {} where the
    backend has none."""
    try:
        costs = executable.cost_analysis()
    except Exception:  # a backend without cost analysis
        return {}
    if isinstance(costs, (list, tuple)):  # one dict per program in older JAX
        costs = costs[0] if costs else None
    return dict(costs or {})


def _numbers(stats, costs: dict, label: str, devices: int, seconds: float) -> Compiled:
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


def _number(value) -> float | None:
    return None if value is None else float(value)


_OOM = ("RESOURCE_EXHAUSTED", "Ran out of memory", "out of memory")
_SIZE = r"([\d.]+)\s*([KMGT]i?)?B?"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
# XLA's words for what a program needed and what the device has, as its TPU
# compiler prints them (checked against real messages in tests/test_compiled.py).
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
