"""Provides `measure`: the rates of the CPU remat-tui runs on, measured
with small jitted kernels, for the roofline estimate (`xla.estimates.chips` makes
them the CPU's row). No vendor figure describes the machine at hand, and on a
CPU the same cores do matrix products, elementwise work and transcendentals,
at very different rates:

- FLOP/s: a f32 1024x1024 matmul (2.1 GFLOP).
- Bandwidth: an in-place update of a 64 MiB f32 array, larger than most
  last-level caches (a CPU with more cache than that reads as faster than its
  memory), bytes read + written per second.
- Overhead: the time a jitted step of almost no work takes, start to end
  (dispatch, the runtime's own bookkeeping): what a step costs whatever it
  computes, and all a tiny one costs.
- Transcendentals/s: exp, log, tanh and sin of a 1 Mi-element f32 array, as
  many of them per second as XLA's cost analysis counts for the kernel. XLA's
  CPU expands each into a polynomial; their costs differ (here, sin took about
  eight times tanh's time), so a step computing mostly one of them runs faster
  or slower than this mix says.

How: each kernel runs once untimed (it compiles), then ROUNDS rounds run
every kernel once in turn (the overhead's step OVERHEAD_RUNS times, being a
few microseconds), and each figure is the kernel's fastest run. Interleaved,
a burst of other work on a shared machine slows one round of every kernel
instead of every run of one, and the fastest run is the one least disturbed.
On a loaded machine they are lower bounds on what the CPU can do. It takes
about a second on an idle 2-core machine, two or three on a loaded one: so it
is done once per machine and kept (`xla.estimates.calibration`), and an estimate
says which calibration it used. jax is imported only inside `measure`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jax

MATMUL_N = 1024
COPY_BYTES = 64 * 2**20
TRANSCENDENTAL_ELEMENTS = 2**20
ROUNDS = 15
OVERHEAD_RUNS = 10  # per round: a few microseconds each, more runs to find the undisturbed one

DESCRIPTION = (
    f"The fastest of {ROUNDS} interleaved rounds (each runs every kernel once in turn, "
    "so a burst of other work slows one round of each, not every run of one) of a jitted "
    f"f32 {MATMUL_N}x{MATMUL_N} matmul (FLOP/s), of an in-place update of a "
    f"{COPY_BYTES // 2**20} MiB f32 array (bytes read + written per second), of "
    "exp, log, tanh and sin of a f32 array (transcendentals per second, as XLA counts "
    "them), and of a jitted step of almost no work (the overhead every step pays). "
    "f32, not bf16; on a shared machine, lower bounds on what the CPU can do. "
    "Host and device are the same memory, so host bandwidth = memory bandwidth."
)


@dataclass(frozen=True)
class Rates:
    flops: float  # FLOP/s of a f32 matmul
    bandwidth: float  # bytes/s, read + written
    transcendentals: float  # transcendental functions/s, the mix above
    overhead: float  # seconds a step takes however little it computes


def measure() -> Rates:
    import jax
    import jax.numpy as jnp
    import numpy as np

    # Imported before JAX starts its backends: it keeps an installed libtpu quiet.
    import remat_tui.core.setup.devices  # noqa: F401

    # Inputs come from numpy: jnp's constructors would each compile a program.
    cpu = jax.devices("cpu")[0]
    n = MATMUL_N
    a = jax.device_put(np.full((n, n), 1.0 / n, dtype=np.float32), cpu)
    matmul = jax.jit(lambda a: a @ a)

    # Donated, so the output reuses the input's buffer: each run reads and
    # writes the array once, with no fresh (page-faulting) allocation to time.
    update = jax.jit(lambda x: x + 1.0, donate_argnums=0)
    x = jax.device_put(np.zeros(COPY_BYTES // 4, dtype=np.float32), cpu)

    # Values in (0.5, 1.5): every function's usual range, no special cases.
    y = jax.device_put(np.linspace(0.5, 1.5, TRANSCENDENTAL_ELEMENTS, dtype=np.float32), cpu)

    def mix(y: jax.Array) -> jax.Array:
        return jnp.exp(y) + jnp.log(y) + jnp.tanh(y) + jnp.sin(y)

    transcendental = jax.jit(mix)
    count = _transcendentals(transcendental.lower(y).compile())
    nothing = jax.jit(lambda t: t + 1.0)
    tiny = jax.device_put(np.zeros(1, dtype=np.float32), cpu)

    kernels = {
        "matmul": _Kernel(lambda _: matmul(a), a),
        "update": _Kernel(update, x),
        "transcendental": _Kernel(lambda _: transcendental(y), y),
        "overhead": _Kernel(nothing, tiny, runs=OVERHEAD_RUNS),
    }
    del x  # the update kernel holds the only reference: its buffer is donated each run
    for kernel in kernels.values():
        kernel.run(timed=False)
    for _ in range(ROUNDS):
        for kernel in kernels.values():
            kernel.run()
    best = {name: max(kernel.best, 1e-9) for name, kernel in kernels.items()}
    return Rates(
        flops=2.0 * n**3 / best["matmul"],
        bandwidth=2.0 * COPY_BYTES / best["update"],
        transcendentals=count / best["transcendental"],
        overhead=best["overhead"],
    )


def _transcendentals(executable: jax.stages.Compiled) -> float:
    """XLA's own count for the kernel (4 per element, where it says)."""
    costs = executable.cost_analysis()
    if isinstance(costs, (list, tuple)):
        costs = costs[0] if costs else {}
    counted = (costs or {}).get("transcendentals")
    return float(counted) if counted else 4.0 * TRANSCENDENTAL_ELEMENTS


class _Kernel:
    """`x = step(x)`, timed run by run: the fastest run so far is `best`."""

    def __init__(self, step: Callable[[Any], Any], x: Any, runs: int = 1):
        self.step, self.x, self.runs = step, x, runs
        self.best = float("inf")

    def run(self, timed: bool = True) -> None:
        for _ in range(self.runs):
            start = time.perf_counter()
            self.x = self.step(self.x)
            self.x.block_until_ready()
            if timed:
                self.best = min(self.best, time.perf_counter() - start)
