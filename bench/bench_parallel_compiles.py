"""Do XLA compiles in parallel threads help on this machine? Why fit
(core/search/fit/batches.py) compiles one batch after another.

Lowers distinct programs (one model at different batch sizes), compiles one to
warm up, then, side by side in one process: N compiles one after another, N
compiles in N threads, N one after another again. Prints each wall time and
the ratio threads / one-after-another (the mean of the two): below 1, threads
help.

    python bench/bench_parallel_compiles.py [--threads 2] [--tpu]

Default: a CPU MLP of checkpointed blocks (about a second a compile). --tpu:
bench/gpt_v5e.py's gpt_quick for a deviceless tpu:v5e:2x2 (20-70 s a compile).

Measured on this project's 2-core machine with other work running (load
4-6), two threads: CPU, 4 blocks, 0.61, 1.06 and 0.89 in three runs; 12 blocks
(15-20 s a compile) 0.85, and 1.47 and 1.12 in two earlier runs of the same
comparison; TPU v5e gpt_quick 1.71 (132.6 s in turn, 226.5 s in two threads).
From 1.6x faster to 1.7x slower: XLA already spreads one compile over the
cores, and what two threads gain depends on what else the cores are doing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_programs(count: int, layers: int) -> list:
    import jax
    import jax.numpy as jnp

    def f32(*shape):
        return jax.ShapeDtypeStruct(shape, jnp.float32)

    def block(x, w):
        for _ in range(6):
            x = jax.nn.gelu(x @ w) + jnp.sin(x)
        return x

    def loss(ws, x):
        for w in ws:
            x = jax.checkpoint(block)(x, w)
        return jnp.mean(x**2)

    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    return [step.lower([f32(256, 256)] * layers, f32(8 + b, 256)) for b in range(count)]


def tpu_programs(count: int) -> list:
    import jax
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding

    sys.path.insert(0, HERE)
    import gpt_v5e as g

    chip = topologies.get_topology_desc("v5e:2x2", platform="tpu").devices[0]
    placed = SingleDeviceSharding(chip)
    out = []
    for b in range(count):
        args = g.make_args(g.QUICK_LAYERS, g.QUICK_BATCH + b, g.QUICK_SEQ)()
        args = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=placed), args)
        step = jax.value_and_grad(g.make_gpt(g.AS_WRITTEN), argnums=(0, 1), allow_int=True)
        with jax.default_device(jax.devices("cpu")[0]):
            out.append(jax.jit(step).lower(*args))
    return out


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tpu", action="store_true", help="deviceless v5e compiles of gpt_quick")
    parser.add_argument("--layers", type=int, default=4, help="the CPU model's blocks")
    opts = parser.parse_args()
    n = opts.threads
    count = 3 * n + 1
    programs = tpu_programs(count) if opts.tpu else cpu_programs(count, opts.layers)
    print(f"warm-up compile: {timed(programs[0].compile):.1f} s", flush=True)
    first, together, last = programs[1 : n + 1], programs[n + 1 : 2 * n + 1], programs[2 * n + 1 :]

    def in_turn(batch):
        return lambda: [p.compile() for p in batch]

    def in_threads():
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda p: p.compile(), together))

    before = timed(in_turn(first))
    print(f"{n} in turn: {before:.1f} s", flush=True)
    threads = timed(in_threads)
    print(f"{n} in {n} threads: {threads:.1f} s", flush=True)
    after = timed(in_turn(last))
    print(f"{n} in turn again: {after:.1f} s", flush=True)
    print(f"threads / in turn: {threads / ((before + after) / 2):.2f} (below 1: threads help)")


if __name__ == "__main__":
    main()
