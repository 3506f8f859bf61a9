"""Provides the ordered list, how suggest compiles candidates it has
listed (Contract 8): `compile_in_order`, which compiles only what can
change the answer, and `compile_all`, every one (what the ordered list is
checked against); each returns what it found (`Ordered`).

Every candidate is first analysed without compiling: its recompute FLOPs and
host bytes need no compile, and give a lower bound of its step time
(`xla.estimates.step_time`, the evaluator's `least`). The code as written is
compiled first; the rest from the least bound up, and the search stops at
the first candidate whose bound exceeds the cost of the best one found to
fit: it and every later one cost more. Compiles that run out of memory are
fast and are rows that do not fit; other compile failures are rows with an
error. Either way the search goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from remat_tui.core.search.configs.structure_grid import saves_at_least
from remat_tui.core.search.rows import Row
from remat_tui.core.trace.configured import Cancelled
from remat_tui.core.xla.compile import service as compile_service
from remat_tui.core.xla.run import pool as compile_pool

if TYPE_CHECKING:
    from remat_tui.core.search.suggest.evaluator import Evaluator
    from remat_tui.core.xla.estimates.chips import Chip


@dataclass
class Ordered:
    """What compiling listed candidates found.

    Attributes:
        rows: those compiled (the code as written first), from which the
            answer is chosen.
        candidates: every candidate it was given.
        covered: splits saving, layer by layer, at least what a row compiled
            over the budget saves: taken not to fit, not compiled.
        why: why the rest were not compiled ('' where nothing was left out).
        stopped: a stop (`Cancelled`) ended it.
        none_can_fit: what every configuration holds (the code as written's
            arguments and outputs) is above the budget: proven after one
            compile, and nothing else compiled.
    """

    rows: list[Row]
    candidates: list[Row]
    covered: list[Row] = field(default_factory=list)
    why: str = ""
    stopped: bool = False
    none_can_fit: bool = False

    @property
    def left(self) -> list[Row]:
        """The candidates left uncompiled, other than the splits covered."""
        return [r for r in self.candidates
                if r.compiled is None and r.error is None and r not in self.covered]  # fmt: skip

    @property
    def skipped(self) -> list[Row]:
        """The candidates not among its rows, other than the splits covered
        (those compiled ahead of where one compile at a time stops too)."""
        return [r for r in self.candidates if r not in self.rows and r not in self.covered]

    def bound(self, least: Callable[[Row], tuple] | None) -> float | None:
        """The least cost those left uncompiled can have (an offload slower
        than recomputing cannot be the answer where another is); None where
        nothing is left, or nothing can price it."""
        if least is None:
            return None
        costs = [least(r)[0] for r in self.left if not r.offload_slower]
        return min(costs, default=None)


def compile_all(evaluator: Evaluator, rows: list[Row]) -> Ordered:
    """Compile every row: what `compile_in_order` is checked against."""
    try:
        evaluator.compile(rows)
    except Cancelled:
        return _stopped(rows)
    return Ordered(rows, rows)


def compile_in_order(evaluator: Evaluator, rows: list[Row], known: Sequence[Row] = ()) -> Ordered:
    """Compile rows from the least cost they can have, and stop at the first
    whose least cost exceeds the cost of the best row found to fit the budget:
    no later row can be the answer. The code as written comes first
    (`Evaluator.compile_baseline`); `known`: rows compiled already (the exact
    search's), whose best answer bounds the rest from the start. A split that
    saves, layer by layer, at least what a row compiled over the budget saves
    (`search.configs.structure_grid` `saves_at_least`) is left out: it is
    taken not to fit either.

    A row's least cost before compiling is exact in its recompute FLOPs and
    host bytes; on a chip the table knows, it is the step time's lower bound
    (`xla.estimates.step_time`), which its compile can only raise; so rows are
    weighed by their estimated cost here, measured or not."""
    try:
        return _in_order(evaluator, rows, known)
    except Cancelled:
        return _stopped(rows)


def _stopped(rows: list[Row]) -> Ordered:
    """What a stop left: the rows compiled before it (or that failed)."""
    done = [r for r in rows if r.compiled or r.error]
    return Ordered(done, rows, stopped=True)


def _in_order(evaluator: Evaluator, rows: list[Row], known: Sequence[Row]) -> Ordered:
    baseline = evaluator.baseline
    none_can_fit = evaluator.compile_baseline(len(rows))
    found = Ordered([baseline], rows)
    if none_can_fit:
        found.why, found.none_can_fit = none_can_fit, True
        return found
    done, covered, budget = found.rows, found.covered, evaluator.budget

    def over(row: Row) -> bool:
        return row.compiled is not None and (not row.fits or row.weighed_bytes > budget)

    def saves_too_much(row: Row) -> bool:
        if any(saves_at_least(row.config, d.config) for d in (*done, *known) if over(d)):
            covered.append(row)
            return True
        return False

    least = evaluator.least
    assert least is not None  # compiling: the compiled measure
    # Side by side where compiles can run elsewhere, `width` at a time (never a
    # measured search: a run must have the device to itself).
    width = compile_pool.width() if evaluator.runs is None else 1

    def compile_from_cheapest(
        candidates: list[Row], best: tuple | None, answers: Callable[[Row], bool]
    ) -> None:
        """Compile `candidates` (least bound first) until one's bound exceeds
        the best cost found among those `answers` accepts. In waves of
        `width`: a wave's rows past where one at a time would have stopped
        were compiled ahead for nothing, and are left out, so the rows and
        the answer are those of one compile at a time."""
        position = 0
        while position < len(candidates):
            wave = []
            for row in candidates[position:]:
                if best is not None and least(row) > best:
                    break  # this row and every later one cost more than one that fits
                position += 1
                if not saves_too_much(row):
                    wave.append(row)
                if len(wave) == width:
                    break
            if not wave:
                return
            evaluator.compile(wave, len(done), len(rows))
            for i, row in enumerate(wave):
                if best is not None and least(row) > best:
                    compile_service.counts.add("ahead", len(wave) - i)
                    return
                done.append(row)
                if answers(row) and (best is None or row.estimated_cost < best):
                    best = row.estimated_cost

    def best_of(answers: Callable[[Row], bool]) -> tuple | None:
        costs = [r.estimated_cost for r in (baseline, *known) if answers(r)]
        return min(costs, default=None)

    # An offload slower than recomputing is the answer only if nothing else
    # fits: those are compiled last, and only then.
    def faster(row: Row) -> bool:
        return evaluator.is_answer(row) and not row.offload_slower

    fresh = (r for r in rows if r is not baseline and r.compiled is None and r.error is None)
    ordered = sorted(fresh, key=least)
    compile_from_cheapest([r for r in ordered if not r.offload_slower], best_of(faster), faster)
    slower = [r for r in ordered if r.offload_slower]
    fits = any(faster(r) for r in (*done, *known))
    if not fits:
        compile_from_cheapest(slower, best_of(evaluator.is_answer), evaluator.is_answer)
    found.why = _why_skipped(evaluator.chip, fits and bool(slower))
    return found


def _why_skipped(chip: Chip | None, slower_offloads_left: bool) -> str:
    """Why the rows `compile_in_order` left out could not be the answer."""
    if chip is not None:
        why = f"each is estimated slower on {chip.name} than the answer, even before compiling"
    else:
        why = "each recomputes more than the answer, so none of them could be it"
    if slower_offloads_left:
        why += "; or it offloads what is faster to recompute, and another configuration fits"
    return why
