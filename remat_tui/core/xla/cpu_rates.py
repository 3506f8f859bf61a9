"""Provides `measure`: the rates of the CPU remat-tui runs on, measured once
with small jitted kernels, for the roofline estimate (core/xla/chips.py makes
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

Each figure is the fastest of REPEATS runs after one that compiles: the run
least disturbed by whatever else shares the CPU. On a shared machine they are
lower bounds on what the CPU can do. The whole measurement takes well under a
second. jax is imported only inside `measure`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

MATMUL_N = 1024
COPY_BYTES = 64 * 2**20
TRANSCENDENTAL_ELEMENTS = 2**20
REPEATS = 3
OVERHEAD_REPEATS = 20  # a few microseconds each: more runs to find the undisturbed one

DESCRIPTION = (
    f"Measured in this process: the fastest of {REPEATS} runs of a jitted f32 "
    f"{MATMUL_N}x{MATMUL_N} matmul (FLOP/s), of an in-place update of a "
    f"{COPY_BYTES // 2**20} MiB f32 array (bytes read + written per second) and of "
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

    # Inputs come from numpy: jnp's constructors would each compile a program.
    cpu = jax.devices("cpu")[0]
    n = MATMUL_N
    a = jax.device_put(np.full((n, n), 1.0 / n, dtype=np.float32), cpu)
    matmul = jax.jit(lambda a: a @ a)
    seconds, _ = _best_time(lambda _: matmul(a), a)
    flops = 2.0 * n**3 / seconds

    # Donated, so the output reuses the input's buffer: each run reads and
    # writes the array once, with no fresh (page-faulting) allocation to time.
    x = jax.device_put(np.zeros(COPY_BYTES // 4, dtype=np.float32), cpu)
    update = jax.jit(lambda x: x + 1.0, donate_argnums=0)
    seconds, x = _best_time(update, x)
    del x
    bandwidth = 2.0 * COPY_BYTES / seconds

    # Values in (0.5, 1.5): every function's usual range, no special cases.
    y = jax.device_put(np.linspace(0.5, 1.5, TRANSCENDENTAL_ELEMENTS, dtype=np.float32), cpu)

    def mix(y):
        return jnp.exp(y) + jnp.log(y) + jnp.tanh(y) + jnp.sin(y)

    transcendental = jax.jit(mix)
    count = _transcendentals(transcendental.lower(y).compile())
    seconds, _ = _best_time(lambda _: transcendental(y), y)

    tiny = jax.device_put(np.zeros(1, dtype=np.float32), cpu)
    nothing = jax.jit(lambda t: t + 1.0)
    overhead, _ = _best_time(nothing, tiny, repeats=OVERHEAD_REPEATS)
    return Rates(flops, bandwidth, count / seconds, overhead)


def _transcendentals(executable) -> float:
    """XLA's own count for the kernel (4 per element, where it says)."""
    costs = executable.cost_analysis()
    if isinstance(costs, (list, tuple)):
        costs = costs[0] if costs else {}
    counted = (costs or {}).get("transcendentals")
    return float(counted) if counted else 4.0 * TRANSCENDENTAL_ELEMENTS


def _best_time(step, x, repeats: int = REPEATS):
    """The fastest of `repeats` timed runs of `x = step(x)` (after one untimed
    run that compiles), and the last `x`."""
    x = step(x)
    x.block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        x = step(x)
        x.block_until_ready()
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9), x
