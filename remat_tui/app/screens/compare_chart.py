"""Provides `draw_compare_chart`: the compare screen's chart, memory against
recompute FLOPs (or step time once compiled), the Pareto front marked, the
last suggest budget as a vertical line."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual_plotext import PlotextPlot

from remat_tui.core.search.rows import CostSource
from remat_tui.core.units import BYTE_UNITS, FLOP_UNITS, axis_unit, human_bytes, parse_size
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.core.search.rows import Row

SECOND_UNITS = (("µs", 1e-6), ("ms", 1e-3), ("s", 1.0))


def budget_bytes(text: str | None) -> int | None:
    """The last budget typed for suggest, in bytes, when it reads as one."""
    if not text:
        return None
    try:
        return parse_size(text)
    except RematError:
        return None


@dataclass(frozen=True)
class Drawn:
    """What the chart shows: its axes' labels, the budget line, in bytes, and
    its title."""

    axes: tuple[str, str]
    budget: int | None
    title: str = ""


LEGEND_ROOM = 1.3  # the y axis reaches 30% above the highest point


def draw_compare_chart(
    plot: PlotextPlot, rows: Sequence[Row], budget: str | None, compiled: bool
) -> Drawn | None:
    """Draw `rows` (compare's) on `plot`: each axis in the unit its values read
    best in; memory on a log scale when one row needs 20x another (an outlier
    would squash the rest); `budget` (the last suggest's text) as a vertical
    line. Returns a Drawn, or None when no row has memory to draw."""
    plt = plot.plt
    plt.clear_data()
    rows = [r for r in rows if r.weighed_bytes > 0]
    if not rows:
        return None
    budget_in_bytes = budget_bytes(budget)
    largest = max([r.weighed_bytes for r in rows] + ([budget_in_bytes] if budget_in_bytes else []))
    byte_unit, byte_size = axis_unit(largest, BYTE_UNITS)
    # Once compiled, rows are weighed by their measured, else estimated, step
    # time (★ too): plot that; rows that have neither are left out of the chart.
    measured = [r for r in rows if r.cost_source is CostSource.MEASURED]
    timed = measured or [r for r in rows if r.time]
    if timed:
        rows = timed
        y_unit, y_size = axis_unit(max(r.cost[0] for r in rows), SECOND_UNITS)
        ys = [r.cost[0] / y_size for r in rows]
        kind = "measured step" if measured else "est. step"
        # the chip the estimates are for; none on a chip the table does not know
        chip = next((r.time.chip for r in rows if r.time), None)
        y_label = f"{kind} ({y_unit}, {chip})" if chip else f"{kind} ({y_unit})"
        y_what = "step time"
    else:
        y_unit, y_size = axis_unit(max(r.recompute_flops for r in rows), FLOP_UNITS)
        ys = [r.recompute_flops / y_size for r in rows]
        y_label, y_what = f"recompute ({y_unit})", "recomputation"
    xs = [r.weighed_bytes / byte_size for r in rows]
    # The legend's two rows sit in the plot's top left, where the least
    # memory and the most recomputation meet: room above the highest point
    # keeps such a row in sight (it was drawn under the legend).
    plt.ylim(0, max(ys) * LEGEND_ROOM or 1)
    # Plotext's own log scale logs the signals in place at each build, so a
    # chart drawn twice is logged twice (and fails on the negative values):
    # the data is logged here, and the ticks say the bytes.
    log = max(xs) / min(xs) >= 20
    if log:
        xs = [math.log10(x) for x in xs]
        plt.xticks(*_decades(min(xs), max(xs)))
    others = [(x, y) for x, y, r in zip(xs, ys, rows, strict=True) if not r.pareto]
    front = sorted((x, y) for x, y, r in zip(xs, ys, rows, strict=True) if r.pareto)
    if others:
        plt.scatter(*zip(*others, strict=True), marker="dot", label="other")
    if front:
        plt.scatter(*zip(*front, strict=True), marker="star", color="red", label="Pareto ★")
    if budget_in_bytes:
        at = budget_in_bytes / byte_size
        plt.vline(math.log10(at) if log else at, "orange")
    what = "compiled peak" if compiled else "memory"
    memory = "peak per device" if compiled else "memory"
    axes = (f"{memory} ({byte_unit}{', log scale' if log else ''})", y_label)
    # The budget in the chart's words, not as typed (`3.3e9`)
    said = f" · budget {human_bytes(budget_in_bytes)}" if budget_in_bytes else ""
    title = f"{what} vs {y_what}{said}"
    plt.title(title)
    plt.xlabel(axes[0])
    plt.ylabel(axes[1])
    plot.refresh()
    return Drawn(axes, budget_in_bytes, title)


def _decades(low: float, high: float) -> tuple[list[float], list[str]]:
    """Ticks at 1, 2 and 5 times each power of ten between `low` and `high`
    (log10s), labelled with the values they stand for."""
    values = [m * 10.0**k for k in range(math.floor(low), math.ceil(high) + 1) for m in (1, 2, 5)]
    shown = [v for v in values if low <= math.log10(v) <= high]
    return [math.log10(v) for v in shown], [f"{v:g}" for v in shown]
