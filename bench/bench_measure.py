"""What the measured mode costs: `compare(..., measure=True)` of five policies
of examples/mlp.py against doing the same by hand, side by side in one
process, alternately, and the ratio (issue 24's bar: at most 2x).

By hand, per policy: `jax.jit(jax.value_and_grad(jax.checkpoint(loss,
policy=...)))` lowered and compiled for the example's shapes, then run six
times on arrays of those shapes made with numpy (the first run a warm-up, as
measure's is).
Ours: one `remat_tui.compare(target, policies=FIVE, measure=True, runs=5)`
on a fresh target object (nothing cached): it also traces each configuration
for its residuals and FLOPs, reads XLA's record of each compile for where
the peak goes, and runs one warm-up and five timed runs of each.

    python bench/bench_measure.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import remat_tui

HERE = os.path.dirname(os.path.abspath(__file__))
MLP = os.path.join(os.path.dirname(HERE), "examples", "mlp.py")
sys.path.insert(0, HERE)
from bench_compare import FIVE  # noqa: E402  (the five built-ins, as compare's bench has them)


def by_hand(fn, args) -> float:
    start = time.perf_counter()
    # Arrays made on the host, as measure makes them (no program to compile).
    rng = np.random.default_rng(0)
    real = jax.tree.map(
        lambda x: jnp.asarray(0.1 * rng.standard_normal(x.shape, dtype=np.float32), x.dtype),
        args,
    )
    for spec in FIVE:
        f = (
            fn
            if spec == "as_written"
            else jax.checkpoint(fn, policy=getattr(jax.checkpoint_policies, spec))
        )
        step = jax.jit(jax.value_and_grad(f, argnums=tuple(range(len(args)))))
        executable = step.lower(*args).compile()
        for _ in range(6):
            jax.block_until_ready(executable(*real))
    return time.perf_counter() - start


def ours(target_fn, args) -> float:
    start = time.perf_counter()
    target = remat_tui.Target(fn=target_fn, name="loss", args=args)  # fresh: nothing cached
    remat_tui.compare(target, policies=FIVE, measure=True, runs=5)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    loss = remat_tui.load_targets(MLP)["loss"]
    args = loss.args() if callable(loss.args) else loss.args
    # One round of each first: imports, the CPU's measured rates, JAX's own caches.
    ours(loss.fn, args)
    by_hand(loss.fn, args)
    ratios = []
    for i in range(opts.repeat):
        # A function object of its own each round: neither side finds a compile cached.
        fn_a = lambda *a: loss.fn(*a)  # noqa: E731
        fn_b = lambda *a: loss.fn(*a)  # noqa: E731
        a = ours(fn_a, args)
        b = by_hand(fn_b, args)
        ratios.append(a / b)
        print(f"round {i + 1}: measure mode {a:.2f} s, by hand {b:.2f} s, ratio {a / b:.2f}")
    print(f"ratio (measure mode / by hand): median {statistics.median(ratios):.2f}, "
          f"max {max(ratios):.2f} (bar 2.0)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
