"""Provides how suggest chooses its answer among the rows it compiled (or
analysed): `answers`, the one test of whether a row could be it, `choose`, and what
is said of them (`within_resolution`, `device_memory`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from remat_tui.core.search.rows import CostSource, Row
from remat_tui.core.xla.estimates import step_time


def answers(budget: int) -> Callable[[Row], bool]:
    """Whether a row could be the answer, for `budget`: the one test suggest
    and its strategies use. It fits the device and the budget, its run (if
    any) did not fail, and what it offloads has host memory to go to. (An
    offload slower than recomputing is an answer, chosen last: `choose`.)"""

    def is_answer(row: Row) -> bool:
        return (
            row.fits
            and row.weighed_bytes <= budget
            and not row.measure_failed
            and not row.offload_without_host
        )

    return is_answer


def choose(rows: list[Row], is_answer: Callable[[Row], bool]) -> tuple[Row, bool]:
    """(the answer, whether it fits): the least cost among the rows
    `is_answer` accepts (`answers`), an offload slower than recomputing only
    where no other is; else the smallest (of those with somewhere to put
    what they offload, and that compiled, where any did)."""
    fitting = [r for r in rows if is_answer(r)]
    if fitting:
        return min(fitting, key=lambda r: (r.offload_slower, r.cost, r.weighed_bytes)), True
    usable = [r for r in rows if not r.offload_without_host] or rows
    measured = [r for r in usable if r.error is None] or usable
    return min(measured, key=lambda r: (r.weighed_bytes, r.cost)), False


@dataclass(frozen=True)
class Within:
    """The best configuration found, set aside for the code as written,
    which also fits and whose cost it beats by less than the cost can tell
    apart (`resolution`, a share of the code as written's cost)."""

    row: Row
    saving: float  # its cost below the code as written's, a share of that
    resolution: float
    source: CostSource  # the cost's source (estimate or measured)

    def to_dict(self) -> dict:
        return {
            "configuration": self.row.config.label(),
            "saving": self.saving,
            "resolution": self.resolution,
            "cost_source": self.source,
        }


def within_resolution(best: Row, written: Row, is_answer: Callable[[Row], bool]) -> Within | None:
    """Where the code as written fits the budget and `best` beats its cost by
    less than the cost can tell (an estimate: step_time.RESOLUTION; measured:
    the spread of either row's runs), the change is not worth making: the
    answer `best` set aside, else None. Recompute FLOPs are exact: never."""
    if best is written or not is_answer(written):
        return None
    source = best.cost_source
    if source is CostSource.FLOPS or written.cost_source != source:
        return None
    ours, theirs = best.cost[0], written.cost[0]
    if theirs <= 0 or ours >= theirs:
        return None
    resolution = step_time.RESOLUTION if source is CostSource.ESTIMATE else _spread(best, written)
    saving = (theirs - ours) / theirs
    return Within(best, saving, resolution, source) if saving < resolution else None


def _spread(*rows: Row) -> float:
    """How much measured runs of the same step differed: the largest (median
    - fastest) / fastest of the rows."""
    out = 0.0
    for row in rows:
        if row.measured is None:
            continue
        low, mid = row.measured.min_seconds, row.measured.median_seconds
        if low and mid:
            out = max(out, (mid - low) / low)
    return out


def device_memory(rows: list[Row]) -> int | None:
    """The device's memory for a program: what XLA said it has when a compile
    did not fit, else the chip table's figure."""
    said = [r.compiled.available_bytes for r in rows if r.compiled and r.compiled.available_bytes]
    if said:
        return max(said)
    compiled = next((r.compiled for r in rows if r.compiled), None)
    chip = step_time.chip_of(compiled.device) if compiled else None
    return chip.memory_bytes if chip is not None else None
