"""compare() of the five built-in policies against the sum of JAX's own floors
for them, side by side in one process (issue 7's budget: at most 0.5x).

Floor, per policy, on a fresh function object: a trace of the forward `vjp`
and of the backward pass, and printing both jaxprs (bench_analyze.floor).
Ours: one `remat_tui.compare(target, policies=[...five...])` on a fresh
function object, which needs no jaxpr text.

    python bench/bench_compare.py [--target unrolled] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

import remat_tui
from remat_tui.core import loading, policies

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_analyze import floor, fresh  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIVE = [
    "as_written",
    "everything_saveable",
    "nothing_saveable",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="unrolled")
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    target = loading.load_targets(os.path.join(HERE, "..", "examples", "transformer.py"))[
        opts.target
    ]
    args, kwargs = loading.resolve_arguments(target)
    ours, floors = [], []
    for i in range(opts.repeat):
        gc.collect()
        start = time.perf_counter()
        fn = fresh(target.fn, policies.parse("as_written"), {})
        remat_tui.compare(fn, args=args, kwargs=kwargs, policies=FIVE)
        ours.append(time.perf_counter() - start)
        total = 0.0
        for spec in FIVE:
            f = fresh(target.fn, policies.parse(spec), {})
            gc.collect()
            start = time.perf_counter()
            floor(f, args, kwargs)
            total += time.perf_counter() - start
        floors.append(total)
        print(
            f"  round {i + 1}: compare {ours[-1]:.2f}s, floors {floors[-1]:.2f}s",
            file=sys.stderr,
        )
    mo, mf = statistics.median(ours), statistics.median(floors)
    print(f"target {opts.target}, five built-ins, median of {opts.repeat}")
    print(f"  compare        {mo:.3f} s")
    print(f"  sum of floors  {mf:.3f} s")
    print(f"compare / floors = {mo / mf:.3f}  (budget 0.50)")


if __name__ == "__main__":
    main()
