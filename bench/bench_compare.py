"""compare() of the five built-in policies against the sum of JAX's own floors
for them, side by side in one process (issue 7's budget: at most 0.5x).

Floor, per policy, on a fresh function object: a trace of the forward `vjp`
and of the backward pass, and printing both jaxprs (bench_analyze.floor).
Ours: one `remat_tui.compare(target, policies=[...five...])` on a fresh
function object. It prints no jaxpr, traces the primal program once, and
reads each row's recompute from the linear program `jax.vjp` returns instead
of tracing the backward pass where that is exact (core/trace/recomputation.py; on this
model it is for every row).

Also shown, to say where the time goes: the floors' printing alone, and
"bare", the forward and backward traces of each configuration built as
compare builds them (the primal program traced once): what every row cost
before the recompute was read from the linear program.

    python bench/bench_compare.py [--target unrolled] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

import jax

import remat_tui
from remat_tui.core.setup import loading, policies

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_analyze import fresh, trace_both  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIVE = [
    "as_written",
    "everything_saveable",
    "nothing_saveable",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
]


def floor_timed(f, args, kwargs) -> tuple[float, float]:
    """JAX's floor for one configuration: (seconds tracing both passes,
    seconds printing both jaxprs)."""
    start = time.perf_counter()
    closed, bwd, _ = trace_both(f, args, kwargs)
    traced = time.perf_counter() - start
    start = time.perf_counter()
    str(closed.jaxpr), str(bwd.jaxpr)
    return traced, time.perf_counter() - start


def bare_traces(fn, args, kwargs) -> None:
    """The forward vjp and backward traces of each of the five, nothing else:
    bench_analyze.trace_both of each configured function (the primal shared)."""
    from remat_tui.core.setup.arguments import flatten_arguments
    from remat_tui.core.setup.config import Config
    from remat_tui.core.trace.configured import configured_function

    target = remat_tui.Target(fn=fn, name="bare", args=args, kwargs=kwargs)
    flat = flatten_arguments(fn, args, kwargs, target.label)
    device = jax.devices()[0]
    for spec in FIVE:
        flat_fn, _, _ = configured_function(target, Config(spec), flat, device)
        trace_both(flat_fn, tuple(flat.leaves), {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="unrolled")
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    target = loading.load_targets(os.path.join(HERE, "..", "examples", "transformer.py"))[
        opts.target
    ]
    args, kwargs = loading.resolve_arguments(target)
    ours, floors, printing, bare = [], [], [], []
    for i in range(opts.repeat):
        gc.collect()
        start = time.perf_counter()
        fn = fresh(target.fn, policies.parse("as_written"), {})
        remat_tui.compare(fn, args=args, kwargs=kwargs, policies=FIVE)
        ours.append(time.perf_counter() - start)
        total = printed = 0.0
        for spec in FIVE:
            f = fresh(target.fn, policies.parse(spec), {})
            gc.collect()
            traced, printing_took = floor_timed(f, args, kwargs)
            total += traced + printing_took
            printed += printing_took
        floors.append(total)
        printing.append(printed)
        gc.collect()
        start = time.perf_counter()
        bare_traces(fresh(target.fn, policies.parse("as_written"), {}), args, kwargs)
        bare.append(time.perf_counter() - start)
        print(
            f"  round {i + 1}: compare {ours[-1]:.2f}s, floors {floors[-1]:.2f}s "
            f"(printing {printing[-1]:.2f}s), bare traces {bare[-1]:.2f}s",
            file=sys.stderr,
        )
    mo, mf = statistics.median(ours), statistics.median(floors)
    mp, mb = statistics.median(printing), statistics.median(bare)
    print(f"target {opts.target}, five built-ins, median of {opts.repeat}")
    print(f"  compare        {mo:.3f} s")
    print(f"  sum of floors  {mf:.3f} s  (printing the jaxprs: {mp:.3f} s)")
    print(f"  bare traces    {mb:.3f} s  (each row's forward and backward traces)")
    print(f"compare / floors = {mo / mf:.3f}  (budget 0.50)")
    print(
        f"bare traces / floors = {mb / mf:.3f}  (each row's two traces, as rows were made before)"
    )


if __name__ == "__main__":
    main()
