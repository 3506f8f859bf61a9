"""Provides the bytes live at each step of a compiled program's schedule
(`occupancy`), counting once the bytes two live values of one allocation
share, and the curve thinned for drawing with its peak kept (`thin`): the
arithmetic under `xla.buffers.accounting`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from remat_tui.core.jaxcompat import buffers as xla

MAX_CURVE_POINTS = 512


@dataclass(frozen=True, eq=False)  # compared by identity: an allocation is large
class Placed:
    """One HLO value in its allocation, live over [start, end] of the schedule."""

    value: xla.Value
    allocation: xla.Allocation
    start: int
    end: int


def occupancy(values: list[Placed], steps: int) -> list[int]:
    """Bytes covered by live values at each step: each value's size while it
    is live, less what two live values of one allocation cover twice."""
    delta = [0] * (steps + 1)
    for p in values:
        delta[p.start] += p.value.size
        delta[p.end + 1] -= p.value.size
    total, out = 0, []
    for t in range(steps):
        total += delta[t]
        out.append(total)
    # Shared bytes: a sweep over time keeps each allocation's live values and
    # checks every newcomer against them; where two overlap, the step's total
    # is corrected by what the overlapping values cover twice.
    by_start: dict[int, list[Placed]] = defaultdict(list)
    for p in values:
        by_start[p.start].append(p)
    active: dict[int, list[Placed]] = defaultdict(list)
    shared: dict[tuple[int, int], dict[tuple[int, int], Placed]] = defaultdict(dict)
    for t in sorted(by_start):
        for p in by_start[t]:
            a = p.allocation.index
            active[a] = [q for q in active[a] if q.end >= t]
            for q in active[a]:
                if overlap(p.value, q.value):
                    for s in range(t, min(p.end, q.end) + 1):
                        involved = shared[(s, a)]
                        involved[(a, p.value.id)] = p
                        involved[(a, q.value.id)] = q
            active[a].append(p)
    for (t, _), involved in shared.items():
        # Every value sharing bytes with another at t is here, so what the
        # others cover is counted once already.
        live = list(involved.values())
        out[t] -= sum(p.value.size for p in live) - union(
            [(p.value.offset, p.value.offset + p.value.size) for p in live]
        )
    return out


def overlap(a: xla.Value, b: xla.Value) -> bool:
    return a.offset < b.offset + b.size and b.offset < a.offset + a.size


def union(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for lo, hi in sorted(intervals):
        if end is None or lo >= end:
            total += hi - lo
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total


def thin(curve: list[int], peak_step: int) -> tuple[tuple[int, int], ...]:
    """At most MAX_CURVE_POINTS points: the largest of each run of steps, so
    every local high survives and the peak is among them."""
    steps = len(curve)
    if steps <= MAX_CURVE_POINTS:
        return tuple(enumerate(curve))
    out = []
    for i in range(MAX_CURVE_POINTS):
        lo, hi = i * steps // MAX_CURVE_POINTS, (i + 1) * steps // MAX_CURVE_POINTS
        if lo >= hi:
            continue
        best = peak_step if lo <= peak_step < hi else max(range(lo, hi), key=curve.__getitem__)
        out.append((best, curve[best]))
    return tuple(out)
