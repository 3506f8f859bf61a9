"""What compare's rows pay for saying which calls back to Python they run
again (issue 43): `compare()` of every candidate of a model, with each row
made by `row_view` as it is now (one walk of the forward program for a call
back to Python; the backward pass traced only where it finds one) against
`row_view` as it was (no such walk, no effects), side by side in one process,
alternating, on a fresh function object each time; and the walks' own time,
summed (noise on a shared machine moves the ratio more than they do). Bar:
1.05x on a model with no callback (examples/mlp.py by default), where the
backward pass is never traced on either side.

    python bench/bench_row_effects.py [--file examples/mlp.py] [--repeat 7]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import remat_tui
from remat_tui.core.search import compare as compare_module
from remat_tui.core.trace import analysis
from remat_tui.core.trace.recomputation import from_linear

NOW = analysis.row_view
WALKS: list[float] = []  # seconds of each walk for a call back to Python, on the now side
_calls_back = analysis.calls_back


def _timed_walk(jaxpr) -> bool:
    start = time.perf_counter()
    try:
        return _calls_back(jaxpr)
    finally:
        WALKS.append(time.perf_counter() - start)


analysis.calls_back = _timed_walk


def row_view_before(t, cancelled=None):
    """`row_view` before the rows said their effects (commit 025a964)."""
    begun = analysis._clock(t)
    read = from_linear(t.linear) if t.linear is not None else None
    if read is not None:
        return analysis._analysis(t, None, read, *analysis._without_panes(t, read), begun)
    bwd = t.backward(cancelled)
    recompute = analysis._recompute_in(t, bwd)
    return analysis._analysis(t, bwd, recompute, *analysis._without_panes(t, recompute), begun)


def timed(target, row_view) -> float:
    compare_module.row_view = row_view
    fresh = dataclasses.replace(target, fn=lambda *a, **k: target.fn(*a, **k))
    start = time.perf_counter()
    remat_tui.compare(fresh)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--file", default="examples/mlp.py")
    parser.add_argument("--repeat", type=int, default=7)
    a = parser.parse_args()
    target = next(iter(remat_tui.load_targets(a.file).values()))
    timed(target, NOW)  # warm-up: JAX's imports and caches
    WALKS.clear()
    before, now = [], []
    for i in range(a.repeat):
        sides = [(before, row_view_before), (now, NOW)]
        for times, view in sides if i % 2 == 0 else sides[::-1]:
            times.append(timed(target, view))
    compare_module.row_view = NOW
    walks = len(WALKS)
    walk = sum(WALKS) / a.repeat
    b, n = statistics.median(before), statistics.median(now)
    rows = len(remat_tui.compare(target).rows)
    print(f"{a.file}: compare of {rows} rows, median of {a.repeat} each, alternating")
    print(f"  before (no effects): {b * 1000:.1f} ms")
    print(f"  now (effects):       {n * 1000:.1f} ms")
    print(f"  ratio now/before:    {n / b:.3f}x (bar 1.05x)")
    print(f"  of which the walks:  {walk * 1000:.2f} ms a compare ({walks // a.repeat} walks)")


if __name__ == "__main__":
    main()
