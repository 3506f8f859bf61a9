"""Provides how suggest compiles its candidates (Contract 8): `Runner` (a
row's compile, and its run on the device when measuring), and the ordered
search, `compile_in_order`, which compiles only what can change the answer;
`SearchProgress` is what the search says as it goes.

Every candidate is first analysed without compiling: its recompute FLOPs and
host bytes need no compile, and give a lower bound of its step time
(`xla.estimates.step_time`). The code as written is compiled first; the rest
from the least bound up, and the search stops at the first candidate whose
bound exceeds the cost of the best one found to fit: it and every later one
cost more. Compiles that run out of memory are fast and are rows that do not
fit; other compile failures are rows with an error. Either way the search
goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from remat_tui.core.search.compare import compile_row
from remat_tui.core.search.configs.structure_grid import saves_at_least
from remat_tui.core.search.rows import Row
from remat_tui.core.setup.config import Config
from remat_tui.core.units import human_bytes
from remat_tui.core.xla.compile import service as compile_service
from remat_tui.core.xla.compile.host_memory import one_devices_host_bytes
from remat_tui.core.xla.estimates import step_time
from remat_tui.core.xla.run import pool as compile_pool
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.xla.compile.compiled import Compiled
    from remat_tui.core.xla.estimates.chips import Chip

LeastCost = Callable[[Row], tuple]  # a row's least cost before compiling (`least_cost`)


class SearchProgress(Protocol):
    """What suggest says as it goes: (done, total, the configuration), and the
    stage ("compiling") where it compiles; analysing gives none."""

    def __call__(self, done: int, total: int, config: Config, stage: str = ..., /) -> object: ...


class Runner:
    """How suggest compiles a row: compile_row, and with `runs`, a run of each
    compile `worth_running` accepts (those that fit the budget)."""

    def __init__(self, runs: int | None, worth_running: Callable[[Compiled], bool] | None) -> None:
        self.runs, self.worth_running = runs, worth_running

    def __call__(self, target: Target, row: Row, cancelled: Callable[[], bool] | None) -> None:
        run_if = self.worth_running if self.runs is not None else None
        compile_row(target, row, cancelled, self.runs, run_if)


def compile_every(
    target: Target,
    rows: list[Row],
    cancelled: Callable[[], bool] | None,
    progress: SearchProgress | None,
    run: Runner,
) -> None:
    """Compile every row (the exact search's, or every candidate to check the
    ordered search), side by side where compiles can run elsewhere (never a
    measured search: a run must have the device to itself)."""

    def one(numbered: tuple[int, Row]) -> None:
        i, row = numbered
        if progress is not None:
            progress(i, len(rows), row.config, "compiling")
        run(target, row, cancelled)

    numbered = list(enumerate(rows))
    for _ in compile_pool.run_all(numbered, one) if run.runs is None else map(one, numbered):
        pass


def compile_baseline(
    target: Target,
    baseline: Row,
    budget: int,
    cancelled: Callable[[], bool] | None,
    progress: SearchProgress | None,
    run: Runner,
    total: int = 1,
) -> str:
    """Compile the code as written, first: the answer is measured against it,
    and its compile says the chip and how many devices share the step.
    Returns why no configuration can fit, or ''."""
    if baseline.compiled is None and baseline.error is None:
        if progress is not None:
            progress(0, total, baseline.config, "compiling")
        run(target, baseline, cancelled)
    floor = _floor(baseline)
    if floor is not None and floor > budget:
        return (
            f"none can fit: the arguments and what the step returns alone need "
            f"{human_bytes(floor)} per device under every configuration"
        )
    return ""


def compile_in_order(
    target: Target,
    rows: list[Row],
    baseline: Row,
    budget: int,
    cancelled: Callable[[], bool] | None,
    progress: SearchProgress | None,
    run: Runner | None = None,
    known: tuple[Row, ...] = (),
) -> tuple[list[Row], str, list[Row]]:
    """Compile rows from the least cost they can have, and stop at the first
    whose least cost exceeds the cost of the best row found to fit the budget:
    no later row can be the answer. The baseline comes first
    (`compile_baseline`); `known`: rows compiled already (the exact search's),
    whose best answer bounds the rest from the start. A split that saves,
    layer by layer, at least what a row compiled over the budget saves
    (`search.configs.structure_grid` `saves_at_least`) is left out: it is taken
    not to fit either.

    A row's least cost before compiling is exact in its recompute FLOPs and
    host bytes; on a chip the table knows, it is the step time's lower bound
    (`xla.estimates.step_time`), which its compile can only raise; so rows are
    weighed by their estimated cost here, measured or not. `run` compiles a
    row (Runner). Returns the rows compiled (the baseline first, `known`
    not among them), why the rest were not, and the splits left out as
    saving at least what did not fit."""
    runner = run or Runner(None, None)
    none_can_fit = compile_baseline(target, baseline, budget, cancelled, progress, runner,
                                    len(rows))  # fmt: skip
    done = [baseline]
    covered: list[Row] = []  # splits saving at least what a row over the budget saves
    if none_can_fit:
        return done, none_can_fit, covered

    def over(row: Row) -> bool:
        return row.compiled is not None and (not row.fits or row.weighed_bytes > budget)

    def saves_too_much(row: Row) -> bool:
        if any(saves_at_least(row.config, d.config) for d in (*done, *known) if over(d)):
            covered.append(row)
            return True
        return False

    chip = _chip(baseline)
    least = least_cost(baseline)

    # Side by side where compiles can run elsewhere, `width` at a time (never a
    # measured search: a run must have the device to itself).
    width = compile_pool.width() if runner.runs is None else 1

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

            def one(numbered: tuple[int, Row]) -> None:
                i, row = numbered
                if progress is not None:
                    progress(len(done) + i, len(rows), row.config, "compiling")
                runner(target, row, cancelled)

            for _ in compile_pool.run_all(list(enumerate(wave)), one):
                pass
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
    fresh = (r for r in rows if r is not baseline and r.compiled is None and r.error is None)
    ordered = sorted(fresh, key=least)
    compile_from_cheapest(
        [r for r in ordered if not r.offload_slower],
        best_of(lambda r: _answers(r, budget)),
        lambda r: _answers(r, budget),
    )
    slower = [r for r in ordered if r.offload_slower]
    fits = any(_answers(r, budget) for r in (*done, *known))
    if not fits:

        def within(r: Row) -> bool:
            return r.fits and r.weighed_bytes <= budget

        compile_from_cheapest(slower, best_of(within), within)
    return done, _why_skipped(chip, fits and bool(slower)), covered


def least_cost(baseline: Row) -> LeastCost:
    """A row's least cost before compiling, as a function of the row (the
    baseline compiled: its chip and devices): its step time's lower bound on
    a chip the table knows, else its recompute FLOPs; host bytes break ties."""
    chip = _chip(baseline)
    devices = baseline.compiled.devices if baseline.compiled else 1

    def least(row: Row) -> tuple:
        if chip is None or row.step_flops is None:
            return (row.recompute_flops, row.host_bytes)
        # what crosses to host, counted as the estimate counts it (`search.compare`
        # compile_row): the bytes one device moves
        moved = 0.0
        if not row.offload_without_host:
            whole = row.global_host_bytes or row.host_bytes
            moved = one_devices_host_bytes(row.host_bytes, whole, row.auto_sharded_devices, devices)
        bound = step_time.lower_bound(chip, row.step_flops / devices, moved)
        return (bound, row.host_bytes)

    return least


def _chip(baseline: Row) -> Chip | None:
    """The chip the baseline compiled for, where the table knows it."""
    return step_time.chip_of(baseline.compiled.device) if baseline.compiled else None


def _why_skipped(chip: Chip | None, slower_offloads_left: bool) -> str:
    """Why the rows `compile_in_order` left out could not be the answer."""
    if chip is not None:
        why = f"each is estimated slower on {chip.name} than the answer, even before compiling"
    else:
        why = "each recomputes more than the answer, so none of them could be it"
    if slower_offloads_left:
        why += "; or it offloads what is faster to recompute, and another configuration fits"
    return why


def _floor(baseline: Row) -> int | None:
    """Bytes every configuration's compiled program holds at once: its
    arguments and its outputs (the same under every policy), which live from
    its start to its end; None without a compile that fit."""
    c = baseline.compiled
    if not c or not c.fits:
        return None
    return c.argument_bytes + c.output_bytes - c.alias_bytes


def _answers(row: Row, budget: int) -> bool:
    """Whether a compiled row could be the answer: it fits the budget, and
    its offload is not slower than recomputing."""
    return row.fits and row.weighed_bytes <= budget and not row.offload_slower
