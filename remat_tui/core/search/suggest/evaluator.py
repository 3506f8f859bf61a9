"""Provides `Evaluator`: how suggest evaluates a candidate, the one thing
that makes and changes its rows, and `SearchProgress`, what it says as it
goes.

A row is made by analysing its configuration (once: configurations that
decide alike share one row, `Analysed`), and at once judged for its
offloads (`search.notes.offloads`) and given the transposition FLOPs its
step time counts (measured once, on the code as written); compiling (and,
measuring, running it on the device) fills in XLA's numbers; `finish` adds
the notes that weigh rows against each other. The strategies
(`search.suggest.ordered`, `search.exact.search`) only choose what to
evaluate; `is_answer` is the one test of whether a row could be the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from remat_tui.core.search.compare import (
    analysed_row,
    compile_row,
    evaluate,
    mark_pareto,
    peak_notes,
)
from remat_tui.core.search.configs.distinct import merge_key
from remat_tui.core.search.notes.offloads import judge_offloads
from remat_tui.core.search.rows import Row
from remat_tui.core.search.suggest.choice import answers
from remat_tui.core.setup.config import Config
from remat_tui.core.units import human_bytes
from remat_tui.core.xla.compile.host_memory import one_devices_host_bytes
from remat_tui.core.xla.estimates import step_time
from remat_tui.core.xla.run import pool as compile_pool
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.model import Analysis
    from remat_tui.core.search.configs.skips import Skips
    from remat_tui.core.xla.compile.compiled import Compiled
    from remat_tui.core.xla.estimates.chips import Chip

LeastCost = Callable[[Row], tuple]  # a row's least cost before compiling (`Evaluator.least`)


class SearchProgress(Protocol):
    """What suggest says as it goes: (done, total, the configuration), and the
    stage ("compiling") where it compiles; analysing gives none."""

    def __call__(self, done: int, total: int, config: Config, stage: str = ..., /) -> object: ...


class Analysed:
    """Rows of configurations, analysed without compiling; configurations
    that decide alike (`search.configs.distinct`) analysed once, and the same
    Row given for each."""

    def __init__(
        self,
        target: Target,
        first: Analysis,
        cancelled: Callable[[], bool] | None,
        progress: SearchProgress | None,
    ) -> None:
        self.target, self.first = target, first
        self.cancelled, self.progress = cancelled, progress
        self.rows: dict[tuple, Row] = {}  # what a configuration decides -> its row

    def __call__(self, configs: list[Config]) -> list[Row]:
        keys = [merge_key(c, self.first.sites) for c in configs]
        new: dict[tuple, Config] = {}
        for key, config in zip(keys, configs, strict=True):
            if key not in self.rows:
                new.setdefault(key, config)
        rows = evaluate(self.target, list(new.values()), self.first, False, self.cancelled,
                        self.progress)  # fmt: skip
        self.rows.update(zip(new, rows, strict=True))
        return [self.rows[k] for k in keys]

    def row(self, config: Config) -> Row:
        """The row of a configuration analysed already (or one that decides alike)."""
        return self.rows[merge_key(config, self.first.sites)]

    def known(self, config: Config) -> Row | None:
        """The row of `config` where one that decides alike was analysed, else None."""
        return self.rows.get(merge_key(config, self.first.sites))

    def all(self) -> list[Row]:
        return list(self.rows.values())


class Evaluator:
    """One suggest's rows: analysed, judged, compiled and run (the module
    doc), for `budget` on the device of `base`.

    `compiling`: the compiled measure (False: residual bytes, nothing
    compiled); `runs`: run each compile that fits the budget that many times
    (the measured search); `transpose`: the code as written's transposition
    FLOPs (`search.compare` `measure_baseline`); `skips`: what the user left
    out (`--skip`)."""

    def __init__(
        self,
        target: Target,
        base: Config,
        first: Analysis,
        budget: int,
        compiling: bool,
        runs: int | None,
        transpose: int | None,
        skips: Skips,
        cancelled: Callable[[], bool] | None = None,
        progress: SearchProgress | None = None,
    ) -> None:
        self.target, self.base, self.first = target, base, first
        self.budget, self.compiling, self.runs = budget, compiling, runs
        self.transpose, self.skips = transpose, skips
        self.cancelled, self.progress = cancelled, progress
        self.is_answer = answers(budget)
        self._analysed = Analysed(target, first, cancelled, progress)
        self._judged: set[int] = set()  # rows judged for their offloads (by id)
        self._apart = analysed_row(target, cancelled)

    def stopped(self) -> bool:
        return bool(self.cancelled and self.cancelled())

    def kept(self, configs: Sequence[Config]) -> list[Config]:
        """`configs` less those a --skip drops (never the code as written),
        the code as written first."""
        others = [c for c in configs if c != self.base]
        return [self.base, *self.skips.keep(others, self.first.sites)]

    def analyse(self, configs: Sequence[Config]) -> list[Row]:
        """The rows of `configs`, analysed without compiling, each judged for
        its offloads and given the transposition FLOPs once."""
        rows = self._analysed(list(configs))
        fresh = list({id(r): r for r in rows if id(r) not in self._judged}.values())
        if fresh:
            self._judged.update(id(r) for r in fresh)
            judge_offloads(self.target, fresh, self.first, self._instead)
            if self.compiling:
                for row in fresh:
                    row.transpose_flops = self.transpose
        return rows

    def _instead(self, config: Config) -> Row:
        """The row judge_offloads weighs an offload against (the same
        configuration recomputing instead): one analysed already where there
        is one, else analysed apart (not a candidate: not counted as searched)."""
        known = self._analysed.known(config)
        return known if known is not None else self._apart(config)

    @property
    def baseline(self) -> Row:
        """The code as written's row (analysed first, whatever the strategy)."""
        return self._analysed.row(self.base)

    def all(self) -> list[Row]:
        """Every row analysed so far, once each."""
        return self._analysed.all()

    def compile(self, rows: Sequence[Row], first: int = 0, total: int | None = None) -> None:
        """Compile `rows` (those not compiled yet), side by side where compiles
        can run elsewhere (never when measuring: a run must have the device to
        itself); progress counts them from `first` of `total`. Nothing for the
        residual measure: there the rows are their analyses."""
        if not self.compiling:
            return
        fresh = [r for r in rows if r.compiled is None and r.error is None]
        count = len(fresh) if total is None else total
        run_if = self._fits_budget if self.runs is not None else None

        def one(numbered: tuple[int, Row]) -> None:
            i, row = numbered
            if self.progress is not None:
                self.progress(first + i, count, row.config, "compiling")
            compile_row(self.target, row, self.cancelled, self.runs, run_if)

        numbered = list(enumerate(fresh))
        for _ in compile_pool.run_all(numbered, one) if self.runs is None else map(one, numbered):
            pass

    def _fits_budget(self, compiled: Compiled) -> bool:
        return compiled.fits and compiled.peak_bytes <= self.budget

    def compile_baseline(self, total: int = 1) -> str:
        """Compile the code as written, first: the answer is measured against
        it, and its compile says the chip and how many devices share the step.
        Returns why no configuration can fit, or ''."""
        baseline = self.baseline
        self.compile([baseline], 0, total)
        floor = _floor(baseline)
        if floor is not None and floor > self.budget:
            return (
                f"none can fit: the arguments and what the step returns alone need "
                f"{human_bytes(floor)} per device under every configuration"
            )
        return ""

    @property
    def chip(self) -> Chip | None:
        """The chip the code as written compiled for, where the table knows it."""
        compiled = self.baseline.compiled
        return step_time.chip_of(compiled.device) if compiled else None

    @property
    def least(self) -> LeastCost | None:
        """A row's least cost before compiling (the code as written compiled
        first: its chip and devices): its step time's lower bound on a chip
        the table knows, else its recompute FLOPs; host bytes break ties. None
        for the residual measure, where nothing is compiled."""
        if not self.compiling:
            return None
        compiled = self.baseline.compiled
        chip, devices = self.chip, compiled.devices if compiled else 1

        def least(row: Row) -> tuple:
            if chip is None or row.step_flops is None:
                return (row.recompute_flops, row.host_bytes)
            # what crosses to host, counted as the estimate counts it
            # (`search.compare` compile_row): the bytes one device moves
            moved = 0.0
            if not row.offload_without_host:
                whole = row.global_host_bytes or row.host_bytes
                moved = one_devices_host_bytes(
                    row.host_bytes, whole, row.auto_sharded_devices, devices
                )
            return (step_time.lower_bound(chip, row.step_flops / devices, moved), row.host_bytes)

        return least

    def finish(self, rows: list[Row]) -> None:
        """The notes that weigh the answer's candidates against the code as
        written, and the Pareto marks."""
        peak_notes(rows, self.base)
        mark_pareto(rows)


def _floor(baseline: Row) -> int | None:
    """Bytes every configuration's compiled program holds at once: its
    arguments and its outputs (the same under every policy), which live from
    its start to its end; None without a compile that fit."""
    c = baseline.compiled
    if not c or not c.fits:
        return None
    return c.argument_bytes + c.output_bytes - c.alias_bytes
