"""Provides `measure` (Contract 9): a configuration's compiled step run on the
local device it was compiled for, and timed.

The step is the one `xla.compile.costs` compiles (the gradient keeping the
loss, or the training step), compiled once here and run: one warm-up run,
then `runs` timed runs, each to the end of its results
(`block_until_ready`). A training step donates its parameters and optimizer
state and gets back new ones, which the next run takes, as a loop runs it.

Arguments: the target's example arrays where it gave arrays; for a
`jax.ShapeDtypeStruct`, an array of its shape, dtype and sharding, made on
the host: floats from a normal distribution (standard deviation 0.1),
integers and booleans zeros (safe indices). Dense programs run as fast
whatever the values; a program whose control flow depends on them runs as
these make it.

Where verify is asked too (`xla.run.shared_runs`'s `sharing`), the runs
take verify's inputs instead (its arguments, and draws seeded with its
seed), and the warm-up's outputs are kept as verify's run of this
configuration: it is compiled and run once for both.

The measured peak is the backend's `peak_bytes_in_use` (`memory_stats()`),
which the backend keeps once per process: a candidate whose peak stays below
one reached before in the process has no figure of its own, and says so. The
CPU backend keeps no memory statistics.

Before running, a candidate whose compiled peak exceeds the device's memory
is refused; one that runs out of memory anyway is a result too (`fits`
False, "did not fit when run"). A deviceless TPU topology has no device to
run on: `check_measurable` says so before anything is compiled.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from remat_tui.core.jaxcompat.program import callback_errors_unlogged, forget_failed_effects
from remat_tui.core.runtime.machine import available_ram
from remat_tui.core.setup.arguments import flatten_arguments
from remat_tui.core.setup.config import RUNS, Config
from remat_tui.core.setup.devices import device_label, resolve_device, topology_of
from remat_tui.core.trace.configured import Cancelled, check_cancelled
from remat_tui.core.units import human_bytes
from remat_tui.core.xla.compile.compiled import Compiled, out_of_memory, trim_message
from remat_tui.core.xla.compile.costs import CompiledStep, compile_step
from remat_tui.core.xla.run import shared_runs
from remat_tui.errors import RematError
from remat_tui.registry import Target

Fill = Callable[[Any, Any], jax.Array]  # (example leaf, sharding) -> an array
FILL_STD = 0.1  # the spread of the normal values a ShapeDtypeStruct is filled with


@dataclass(frozen=True)
class Measured:
    """What running one compiled step took on its device: `Row.measured` and
    `FitRow.measured`; `Analysis.measured` is its `to_dict()`.

    Attributes:
        runs: timed runs done, after one warm-up.
        min_seconds: the fastest run, or None when it was not run or failed.
        median_seconds: the median run, likewise.
        peak_bytes: the backend's peak memory while it ran, where it can tell
            (not on the CPU); else None.
        peak_note: why there is no peak figure.
        fits: False when it was refused (its compiled peak exceeds the
            device's memory) or ran out of memory when run.
        error: why it has no times, or None.
    """

    runs: int  # timed runs done (after one warm-up)
    min_seconds: float | None
    median_seconds: float | None
    peak_bytes: int | None  # the backend's peak while it ran, where it can tell
    peak_note: str | None = None  # why there is no peak figure
    fits: bool = True  # False: refused, or ran out of memory, before its runs were done
    error: str | None = None  # why it has no times

    @property
    def ok(self) -> bool:
        return self.error is None and self.min_seconds is not None

    def to_dict(self) -> dict:
        return asdict(self)


def check_measurable(device: str | jax.Device, runs: int) -> None:
    """Raise RematError when `device` (a label or jax.Device) cannot be run on,
    or `runs` is not a positive count: before anything is compiled."""
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise RematError(
            f"runs: {runs!r}: measuring needs at least one timed run (default {RUNS}); "
            "give a positive whole number."
        )
    dev = resolve_device(device)
    if topology_of(dev) is not None:
        raise RematError(
            f"{device_label(dev)} is a deviceless TPU topology: it compiles here but cannot "
            "run here, so it cannot be measured. Drop --measure to rank by the estimate, or "
            "measure on a machine with that TPU (--device tpu:0)."
        )


def measure(
    target: Target,
    config: Config,
    runs: int = RUNS,
    cancelled: Callable[[], bool] | None = None,
    *,
    device: jax.Device | None = None,
    arguments: tuple[tuple, dict] | None = None,
    memory: bool = True,
    run_if: Callable[[Compiled], bool] | None = None,
) -> tuple[Compiled, Measured | None]:
    """Compile `config`'s step for its device (or `device`) and run it: XLA's
    numbers, and what the runs took (None when `run_if` says the compile
    need not run: suggest runs only what fits its budget). A compile that
    fails raises RematError (as compile_answer does); a run that fails is the
    Measured's `error`."""
    dev = config.jax_device if device is None else device
    check_measurable(dev, runs)
    step = compile_step(target, config, cancelled, device=dev, arguments=arguments, memory=memory)
    compiled = step.result
    if step.executable is None:  # XLA refused it for want of memory
        return compiled, Measured(0, None, None, None, fits=False, error="did not fit the device")
    if run_if is not None and not run_if(compiled):
        return compiled, None
    capacity = device_memory(dev)
    if capacity is not None and compiled.peak_bytes > capacity:
        return compiled, Measured(
            0, None, None, None, fits=False,
            error=f"not run: its compiled peak, {human_bytes(compiled.peak_bytes)}, exceeds "
            f"the device's {human_bytes(capacity)}",
        )  # fmt: skip
    try:
        return compiled, _run(step, dev, runs, cancelled, _shared(target, config, step, dev))
    finally:
        del step  # the executable and the arguments go now, before the next candidate


def device_memory(dev: jax.Device) -> int | None:
    """Bytes the device can hold: the backend's limit where it reports one, the
    machine's available memory for the CPU, else None."""
    stats = _memory_stats(dev)
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    if dev.platform == "cpu":
        return available_ram()
    return None


def _memory_stats(dev: jax.Device) -> dict | None:
    try:
        return dev.memory_stats()
    except Exception:  # a backend without them
        return None


class _Shared(NamedTuple):
    """How a measure shares its first run with verify (`xla.run.shared_runs`):
    verify's inputs, and where that run's outputs are kept."""

    step: CompiledStep  # the step with verify's arguments as its leaves
    fill: Fill  # verify's generator, seeded
    keep: Callable[[Any], None]  # given the first run's outputs


def _shared(target: Target, config: Config, step: CompiledStep, dev: jax.Device) -> _Shared | None:
    """Where a verify shares this measure's runs: the step to run on verify's
    inputs, and how to keep its first run; None where none does, or where
    verify's arguments are not the shapes the step was compiled for (a
    target's `verify_args` of other shapes) or cannot be made: verify then
    runs its own."""
    seed = shared_runs.shared_seed()
    lowered = step.lowered
    if seed is None or lowered is None:
        return None
    try:
        args, kwargs = shared_runs.arguments(target, dev)
        leaves = flatten_arguments(target.fn, args, kwargs, target.label).leaves
    except RematError:  # verify says so itself; the measure stands without it
        return None
    if [_shape_dtype(x) for x in leaves] != [_shape_dtype(x) for x in step.leaves]:
        return None
    drawn = sum(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)
    wrt = lowered.differentiated
    label = device_label(dev)

    def keep(outputs: Any) -> None:
        nbytes = sum(x.nbytes for x in jax.tree.leaves(outputs))
        if not shared_runs.room_for(nbytes):  # verify compiles and runs it again
            return
        ran = shared_runs.Ran(
            target, jax.device_get(outputs), lowered.carried,
            None if wrt is None else tuple(wrt.leaves), len(leaves) - drawn, drawn, nbytes,
        )  # fmt: skip
        shared_runs.keep(target, config, label, seed, ran)

    return _Shared(step.with_leaves(leaves), filler(np.random.default_rng(seed)), keep)


def _shape_dtype(leaf: Any) -> tuple:
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return tuple(leaf.shape), jnp.dtype(leaf.dtype)
    return (), jnp.result_type(leaf)  # a Python scalar


def _run(
    step: CompiledStep,
    dev: jax.Device,
    runs: int,
    cancelled: Callable[[], bool] | None,
    shared: _Shared | None = None,
) -> Measured:
    lowered = step.lowered
    assert lowered is not None  # compile_step keeps how to call what it compiled
    before = _memory_stats(dev)
    try:
        if shared is None:
            inputs = step_inputs(step, _fill)
        else:  # verify's inputs, copied: a training step donates them
            inputs = step_inputs(shared.step, shared.fill, copy=True)
        times = []
        with callback_errors_unlogged():
            for i in range(runs + 1):  # the first is the warm-up
                check_cancelled(cancelled)
                start = time.perf_counter()
                outputs = step.executable(*inputs)
                jax.block_until_ready(outputs)
                if i:
                    times.append(time.perf_counter() - start)
                elif shared is not None:  # before the next run donates them
                    shared.keep(outputs)
                if lowered.carried:  # donated: the next step takes what this one gave
                    inputs = (*outputs[: lowered.carried], *inputs[lowered.carried :])
                del outputs
    except (RematError, Cancelled):
        raise
    except Exception as exc:
        forget_failed_effects()
        message = str(exc)
        if out_of_memory(message):
            return Measured(0, None, None, None, fits=False,
                            error=f"did not fit when run: {_first_line(message)}")  # fmt: skip
        return Measured(0, None, None, None, error=f"raised when run: {run_error(exc)}")
    peak, note = _peak(before, _memory_stats(dev), dev)
    return Measured(runs, min(times), statistics.median(times), peak, note)


def _first_line(message: str) -> str:
    return trim_message(message, lines=1).strip()


def run_error(exc: Exception) -> str:
    """What went wrong, in one line: for an error raised in the user's host
    callback (its traceback folded into XLA's message), that error's own
    last line; else XLA's first."""
    message = str(exc)
    if "Traceback (most recent call last)" in message:
        last = [line.strip() for line in message.splitlines() if line.strip()]
        return last[-1] if last else type(exc).__name__
    return f"{type(exc).__name__}: {_first_line(message)}"


def _peak(
    before: dict | None, after: dict | None, dev: jax.Device
) -> tuple[int | None, str | None]:
    if not after or "peak_bytes_in_use" not in after:
        return None, f"the {dev.platform} backend reports no memory statistics"
    earlier = int((before or {}).get("peak_bytes_in_use", 0))
    now = int(after["peak_bytes_in_use"])
    if now > earlier:
        return now, None
    return None, (
        f"it stayed below this process's earlier peak ({human_bytes(earlier)}), "
        "which the backend keeps, not one per step"
    )


def step_inputs(step: CompiledStep, fill: Fill, copy: bool = False) -> tuple:
    """The arguments to call `step`'s executable with: the target's example
    arrays placed as the step was compiled for, and for each
    ShapeDtypeStruct an array `fill` makes. `copy`: never the example's own
    buffer, which a training step donates (and so deletes) when run; a
    caller that runs the step again from the same examples (`xla.verify.runs`)
    asks for copies."""
    lowered = step.lowered
    assert lowered is not None  # compile_step keeps how to call what it compiled
    real = [
        _real(x, placed, fill, copy) for x, placed in zip(step.leaves, step.abstract, strict=True)
    ]
    return lowered.inputs(real, fill)


def _real(leaf: Any, placed: jax.ShapeDtypeStruct, fill: Fill, copy: bool) -> jax.Array:
    """The target's example array, placed as the step was compiled for; or,
    for a ShapeDtypeStruct, one made."""
    if isinstance(leaf, (jax.Array, np.ndarray, np.generic, int, float, bool, complex)):
        return jax.device_put(leaf, placed.sharding, may_alias=False if copy else None)
    return fill(placed, placed.sharding)


def filler(rng: np.random.Generator) -> Fill:
    """A fill: an array of an example's shape and dtype, placed as `sharding`
    says: normal values for floats (drawn from `rng`, in turn), zeros
    otherwise. Made by numpy on the host (a jitted random-number program
    would compile once per shape, which cost more than running the step)."""

    def fill(example: Any, sharding: Any) -> jax.Array:
        if isinstance(example, (jax.Array, np.ndarray, np.generic)):
            return jax.device_put(example, sharding)
        shape, dtype = tuple(example.shape), jnp.dtype(example.dtype)
        if jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.complexfloating):
            values = FILL_STD * rng.standard_normal(shape, dtype=np.float32)
        else:
            values = np.zeros(shape, np.int8)
        return jax.device_put(np.asarray(values, dtype=dtype), sharding)

    return fill


# Measuring fills from one generator for the whole process: only the values'
# shapes matter to a time (`xla.verify.runs` seeds one per run).
_fill = filler(np.random.default_rng(0))
