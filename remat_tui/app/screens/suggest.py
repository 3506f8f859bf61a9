"""Provides the SuggestScreen: the least-cost configuration whose memory fits
a budget (typed in app/screens/budget.py's BudgetScreen; the search is
core/search/suggest/pipeline.py), with the code to paste at each site and
what the answer is proven against.

The search analyses and compiles many configurations, so it runs in this
screen's worker (a thread) and says how far it is: for the exact search, the
model's bound, the best answer verified and the gap between them, as they
narrow. Escape stops it after the compile under way and shows the best
answer verified so far (a second escape goes back). A newer budget (b)
supersedes it: threads cannot be killed, so each search carries its request
number, stops at the next configuration once it is no longer current, and a
late answer is dropped. Leaving the screen stops it the same way. A search
that raises ends there: its error is said in place, the clock stops, and
escape goes back. Enter closes the screen with the suggested Config, which
the App opens in the main screen.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static

from remat_tui.app.arguments import prepared
from remat_tui.app.screens.budget import BudgetScreen, BudgetTyped
from remat_tui.app.screens.failure import failure_words
from remat_tui.app.screens.table_layout import (
    NOTES_MAX,
    TableLayout,
    capped_cell,
    fitted_labels,
    lay_out,
    whole_label,
)
from remat_tui.app.widgets.footer import Footer
from remat_tui.core.setup.config import Config
from remat_tui.core.units import count, human_bytes, human_flops
from remat_tui.report.phrases import signed

if TYPE_CHECKING:
    from remat_tui.core.search.exact.search import Narrowing
    from remat_tui.core.search.suggest.pipeline import Suggestion
    from remat_tui.registry import Target

RESIDUAL = "residual bytes per device"
COMPILED = "compiled peak per device"
# What a search looks for, by what ranks its rows (core/search/rows.py's
# `cost_source`): the recompute FLOPs, or once compiled the estimated step
# time, or once run on the device the measured one.
LOOKS_FOR = {
    "flops": "the least recompute",
    "estimate": "the fastest step (estimated)",
    "measured": "the fastest step (measured)",
}
RANKED_BY = {
    "flops": "ranked by recompute",
    "estimate": "ranked by the estimated step time",
    "measured": "ranked by the measured step time",
}


def ranking(compiled: bool, measured: bool) -> str:
    """What ranks a search's rows before it runs (a `LOOKS_FOR` key): the
    measured time with `x`, the estimate with `p`, else the recompute."""
    return "measured" if measured else "estimate" if compiled else "flops"


LEFT_TO_THE_BODY = ("most at peak",)  # the body's `its peak:` line says it whole


def table_layout(
    heads: tuple[str, ...], cells: list[tuple[str, ...]], configs: list[Config], width: int
) -> tuple[TableLayout, list[tuple[str, ...]]]:
    """The answer's table laid out as compare's is, and its cells: the row's
    name and its configuration first, every figure on screen from 120
    columns (the columns the body says whole left to it), the notes last and
    capped (the body says them whole too)."""
    cells = [
        tuple(
            "" if head in LEFT_TO_THE_BODY else cell for head, cell in zip(heads, row, strict=True)
        )
        for row in cells
    ]
    whole = [whole_label(c) for c in configs]
    layout = lay_out(heads, cells, whole, width, lead=2, trailing=("notes",), cap=NOTES_MAX)
    return layout, cells


@dataclass
class SuggestProgress(Message):
    request: int
    analysed: int
    compiled: int
    label: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SuggestProgress)


@dataclass
class SuggestNarrowing(Message):
    """The exact search's bound, best and gap, as they narrow, in words (made
    in the worker: words that fail to make fail the search, not the App)."""

    request: int
    words: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SuggestNarrowing)


@dataclass
class SuggestDone(Message):
    request: int
    suggestion: Suggestion


@dataclass
class SuggestFailed(Message):
    request: int
    message: str


class SuggestScreen(Screen[Config | None]):
    """The search under one budget, then its answer; f asks for another."""

    BINDINGS = [
        Binding("escape", "stop_or_leave", "stop / back"),
        Binding("enter", "open", "open in main screen"),
        Binding("b", "budget", "another budget"),
    ]

    def __init__(
        self,
        target: Target,
        budget: tuple[int, str],
        device: str | None,
        compiled: bool,
        show_timings: bool = True,
        measure: bool = False,
    ):
        """`compiled`: the compiled peak must fit (the main screen's `p`);
        `show_timings`: the search's clock shown; `measure`: the candidates
        that fit are run on the device, and the fastest chosen (`x`)."""
        super().__init__()
        self.show_timings = show_timings
        self.run_on_device = measure
        self.target = target
        self.device = device
        self.compiled = compiled
        self.budget = budget
        self.request = 0
        self.suggestion: Suggestion | None = None  # the answer to the current request, once in
        self.started = 0.0
        self.analysed = 0  # configurations analysed so far by the current search
        self.compiles = 0  # and compiled (each analysed first: counted apart)
        self.current_label = ""  # the configuration it is analysing
        self.narrowed = ""  # the exact search's bound, best and gap, in words
        self.running = False  # a search is under way: its clock moves, escape stops it
        self.stopping = False  # escape asked the current search to stop, keeping its best

    def compose(self) -> ComposeResult:
        yield Static("", id="suggest-status")
        table: DataTable = DataTable(id="suggest-rows", cursor_type="none", zebra_stripes=True)
        table.can_focus = False  # enter belongs to the screen: it opens the suggestion
        table.display = False  # until there is an answer to show
        yield table
        with VerticalScroll(id="suggest-body"):
            yield Static("", id="suggest-text", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#suggest-body").focus()
        self.set_interval(0.5, self.tick)  # the clock moves between configurations too
        self.search(self.budget)

    def search(self, budget: tuple[int, str] | None) -> None:
        """Start a search under `budget` (None: keep what is shown)."""
        if budget is None:
            return
        self.budget = budget
        self.request += 1
        self.post_message(BudgetTyped(budget[1]))  # what f offers next, here or on the main screen
        self.suggestion = None
        self.analysed = self.compiles = 0
        self.narrowed = ""
        self.stopping = False
        self.running = True
        self.started = time.monotonic()
        table = self.query_one(DataTable)
        table.clear()
        table.display = False
        self.query_one("#suggest-text", Static).update("")
        self.show_progress("")
        self.run_search(self.request, budget[0])

    @work(thread=True, exclusive=True, group="suggest", exit_on_error=False)
    def run_search(self, request: int, budget: int) -> None:
        from remat_tui.core.search.suggest.pipeline import suggest
        from remat_tui.core.trace.configured import Cancelled
        from remat_tui.report.suggest import narrowing_line

        analysed = compiles = 0

        def progress(_i: int, _n: int, config: Config, stage: str = "") -> None:
            # suggest analyses and compiles in batches: counted across them,
            # a compile apart from the analysis of the same configuration
            nonlocal analysed, compiles
            if stage == "compiling":
                compiles += 1
            else:
                analysed += 1
            self.post_message(SuggestProgress(request, analysed, compiles, config.label()))

        def narrowing(n: Narrowing) -> None:
            self.post_message(SuggestNarrowing(request, narrowing_line(n)))

        try:
            # The example arguments built once, not once per configuration searched.
            target = prepared(self.target, self.device)
            result = suggest(
                target,
                budget,
                compiled=self.compiled,
                measure=self.run_on_device,
                device=self.device,
                sites={},  # the saving is measured against the code as written
                cancelled=lambda: request != self.request or not self.is_attached or self.stopping,
                progress=progress,
                narrowing=narrowing,
            )
        except Cancelled:
            if self.stopping and request == self.request:
                self.post_message(SuggestFailed(request, "stopped before any answer was verified"))
            return
        except Exception as exc:  # bad input, or our bug: said in place, the app kept
            self.log.error(traceback.format_exc())
            self.post_message(SuggestFailed(request, failure_words(exc)))
            return
        self.post_message(SuggestDone(request, result))

    def measure(self) -> str:
        return COMPILED if self.compiled else RESIDUAL

    def ranks(self) -> str:
        return ranking(self.compiled, self.run_on_device)

    def clock(self) -> str:
        if not self.show_timings:
            return ""
        return f"  {time.monotonic() - self.started:.1f} s"

    def show_progress(self, label: str) -> None:
        what = f" · {label}" if label else ""
        compiled = f", {self.compiles} compiled" if self.compiles else ""
        narrowed = f"\n{self.narrowed}" if self.narrowed else ""
        keys = (
            "stopping after the compile under way… (escape again goes back)"
            if self.stopping
            else "b another budget (stops this search) · escape stops, keeping the best so far"
        )
        self.query_one("#suggest-status", Static).update(
            Content(
                f"searching for {LOOKS_FOR[self.ranks()]} within {human_bytes(self.budget[0])} "
                f"({self.measure()}): {self.analysed} analysed{compiled}{what}{self.clock()}"
                f"{narrowed}\n{keys}"
            )
        )

    def tick(self) -> None:
        if self.running and self.is_current and (self.analysed or self.compiles):
            self.show_progress(self.current_label)

    @on(SuggestProgress)
    def progress(self, message: SuggestProgress) -> None:
        if message.request == self.request and self.running:
            self.analysed, self.compiles = message.analysed, message.compiled
            self.current_label = message.label
            self.show_progress(message.label)

    @on(SuggestNarrowing)
    def narrowing(self, message: SuggestNarrowing) -> None:
        if message.request == self.request and self.running:
            self.narrowed = "exact search: " + message.words
            self.show_progress(self.current_label)

    @on(SuggestFailed)
    def failed(self, message: SuggestFailed) -> None:
        if message.request == self.request:
            self.running = self.stopping = False  # the clock stops; escape goes back
            self.query_one("#suggest-status", Static).update(
                Content.styled(
                    f"suggest failed: {message.message}\nb tries another budget · escape goes back",
                    "$text-error",
                )
            )

    @on(SuggestDone)
    def done(self, message: SuggestDone) -> None:
        if message.request != self.request:
            return  # a newer budget was typed meanwhile
        self.running = False
        s = self.suggestion = message.suggestion
        from remat_tui.report.suggest import proof_words

        budget = human_bytes(s.budget)
        searched = count(s.searched, "configuration")
        how = f"exact search: {searched}" if s.search.method == "model" else (
            f"exact: all {searched}")  # fmt: skip
        if s.measure == "compiled":
            run = f", {s.measured_count} run on the device" if self.run_on_device else ""
            how += f" ({s.compiled_count} compiled{run})"
        # Why some were left out, in the core's words (the body says the same).
        left_out = "not compiled" if s.measure == "compiled" else "left out"
        why = f": {s.skipped_why}" if s.skipped_why else ""
        skipped = f"\n{s.skipped} {left_out}{why}" if s.skipped else ""
        ranked = RANKED_BY[s.best.cost_source]
        if s.cancelled:
            head = Content.styled("■ stopped: the best verified so far", "bold $text-warning")
            outcome = f" ({self.measure()}, budget {budget}, {ranked})"
        elif s.fits:
            head = Content.styled(f"✓ fits {budget}", "bold $text-success")
            outcome = f" ({self.measure()}, {ranked})"
        else:
            head = Content.styled(f"✗ nothing fits {budget}", "bold $text-warning")
            outcome = f" ({self.measure()}): the smallest is shown"
        took = f" in {time.monotonic() - self.started:.1f} s" if self.clock() else ""
        self.query_one("#suggest-status", Static).update(
            Content.assemble(
                head,
                f"{outcome} · {how} searched{took}{skipped}\n"
                f"{proof_words(s.search, s.cancelled, s.set_aside is not None)}\n"
                "enter opens it in the main screen · b another budget · escape goes back",
            )
        )
        self.show_rows(s)
        self.query_one("#suggest-text", Static).update(self.text(s))

    def show_rows(self, s: Suggestion) -> None:
        """The suggestion beside the code as written, in the compare table's
        columns (those with a value), the configuration fitted to the width."""
        from remat_tui.report.comparisons import any_measured, columns, measured_ranks, row_cells

        rows = (s.best, s.baseline)
        # compare's headers: whose bytes each counts (Contract 17), measured when run
        heads = ("", *columns(rows))
        rank = measured_ranks(rows) if any_measured(rows) else None
        cells = [
            (name, *row_cells(r, rank))
            for name, r in zip(("suggested", "as written"), rows, strict=True)
        ]
        layout, cells = table_layout(heads, cells, [r.config for r in rows], self.app.size.width)
        labels = fitted_labels([r.config for r in rows], layout.label_width)
        label, notes = heads.index("configuration"), heads.index("notes")
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.display = True
        for i, width in zip(layout.order, layout.widths, strict=True):
            table.add_column(heads[i], width=width)
        for row, text in zip(cells, labels, strict=True):
            shown = {i: row[i] for i in layout.order}
            shown[label] = text
            if notes in shown:  # the body beneath has them whole
                shown[notes] = capped_cell(shown[notes])
            table.add_row(*shown.values())

    @staticmethod
    def text(s: Suggestion) -> str:
        """The CLI's report (report/comparisons.py), the recompute it costs beside the
        bytes it saves."""
        from remat_tui.report.suggest import render_suggest

        delta = s.best.recompute_flops - s.baseline.recompute_flops
        recompute = f"recompute against as written: {signed(delta, human_flops)}"
        lines = render_suggest(s, "text").split("\n")
        saving = next(
            (i for i, line in enumerate(lines) if line.startswith("against as written")), 0
        )
        lines.insert(saving + 1, recompute)
        return "\n".join(lines)

    async def action_budget(self) -> None:
        s = self.suggestion
        hint = f"Last: {human_bytes(self.budget[0])}."
        if s is not None:  # what the search found bounds what is worth typing
            smallest = min(r.weighed_bytes for r in s.rows)
            hint += f" Smallest found: {human_bytes(smallest)}; as written: "
            hint += f"{human_bytes(s.baseline.weighed_bytes)}."
        dialog = BudgetScreen(self.measure(), LOOKS_FOR[self.ranks()], self.budget[1], hint)
        await self.app.push_screen(dialog, self.search)

    def action_stop_or_leave(self) -> None:
        """Escape: stop the search, keeping the best answer verified so far;
        go back when none runs (it answered or failed) or a stop is under way."""
        if self.running and not self.stopping and self.is_current:
            self.stopping = True  # the worker stops after its compile under way
            self.show_progress(self.current_label)
            return
        self.dismiss(None)

    def action_open(self) -> None:
        if self.suggestion is None:
            self.notify(
                "still searching: enter opens the answer once it is in"
                if self.running
                else "no answer to open: b tries another budget"
            )
            return
        self.dismiss(self.suggestion.best.config)
