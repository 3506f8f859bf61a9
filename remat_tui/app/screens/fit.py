"""Provides the FitScreen: how big a batch fits a memory budget (Contract 10,
core/search/fit/batches.py), for the configuration shown in the main screen and every
configuration compare weighs: a row per configuration (its largest batch,
peak, step time and examples per second, the best marked) and a chart of
estimated examples per second against batch, a line per configuration.

It receives what it shows (the target, the configurations' shared sites and
device, the shown configuration, the budget last typed) and posts what the
App keeps (BudgetTyped) or dismisses with a row's Config to open. It always
asks for the budget first, the one typed last as the default: enter takes
it, typing replaces it.

The search compiles, so it runs in this screen's worker (a thread), says each
configuration's bracket as it narrows, and fills the table row by row. Escape
stops it after the compile under way, keeping the rows found; a second escape
leaves. A new budget (enter in the budget field) starts over: the search under
the old one stops at its next batch and its late answers are dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static
from textual_plotext import PlotextPlot

from remat_tui.app.screens.budget import BudgetTyped, parse_budget
from remat_tui.app.screens.failure import failure_words
from remat_tui.app.screens.table_layout import fitted_labels, lay_out, whole_label
from remat_tui.app.screens.table_rows import highlighted_config, keyed_index
from remat_tui.app.widgets.footer import Footer
from remat_tui.core.setup.config import Config
from remat_tui.core.units import axis_unit, count, human_bytes
from remat_tui.report.fit import COLUMNS, cells, curve, progress_line, row_label

if TYPE_CHECKING:
    from remat_tui.core.search.fit.results import Fit, FitProgress, FitRow
    from remat_tui.registry import Target

LINES = 8  # configurations the chart draws: the best ones (more is a tangle)
LEGEND = 34  # cells a line's name has in the chart's legend
RATE_UNITS = (("", 1.0), ("thousands", 1e3), ("millions", 1e6))


@dataclass
class FitProgressed(Message):
    request: int
    progress: FitProgress

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FitProgressed) and message.request == self.request


@dataclass
class FitRowFound(Message):
    request: int
    row: FitRow


@dataclass
class FitDone(Message):
    request: int
    result: Fit


@dataclass
class FitFailed(Message):
    request: int
    message: str


class FitScreen(Screen[Config | None]):
    """The largest batch per configuration under one budget, and its chart."""

    BINDINGS = [
        Binding("escape", "stop_or_leave", "stop / back"),
        Binding("b", "budget", "another budget"),
        Binding("enter", "open", "open in main screen", show=True),
    ]

    def __init__(
        self,
        target: Target,
        base: Config,
        shown: Config,
        budget: str = "",
        show_timings: bool = True,
    ):
        """`base`: the sites and device every configuration shares; `shown`:
        the main screen's configuration, searched first; `budget`: the one
        last typed, offered again as the default."""
        super().__init__()
        self.target = target
        self.base = base
        self.shown = shown
        self.budget_text = budget
        self.show_timings = show_timings
        self.request = 0  # the search under way; an answer for an older one is dropped
        self.running = False
        self.rows: list = []
        self.result: Fit | None = None  # once the search ended
        self.started = time.monotonic()
        self.chart_lines: list[str] = []  # the configurations the chart draws
        self.chart_legend: list[str] = []  # their names in its legend

    def compose(self) -> ComposeResult:
        with Vertical(id="fit"):
            yield Static(
                "how big a batch fits: type a budget per device (16GiB, 512MiB, 1.5e9)",
                id="fit-status",
                markup=False,
            )
            yield Input(value=self.budget_text, placeholder="e.g. 16GiB", id="fit-budget")
            with Horizontal(id="fit-body"):
                yield DataTable(id="fit-table", cursor_type="row", zebra_stripes=True)
                yield PlotextPlot(id="fit-chart")
        yield Footer()

    def on_mount(self) -> None:
        self.show_rows()  # the columns, none filled yet
        if self.budget_text:
            self.status(
                "how big a batch fits: enter searches under the last budget, or type "
                "another per device (16GiB, 512MiB, 1.5e9)"
            )
        # It always asks, the last budget as the default (selected: typing replaces
        # it); focused now, not when the next refresh comes, so that keys typed
        # straight after `h` land in the field.
        self.set_focus(self.query_one(Input))

    @on(Input.Submitted, "#fit-budget")
    def budget_typed(self, event: Input.Submitted) -> None:
        budget, error = parse_budget(event.value)
        if error is not None:
            self.status(error)
            return
        self.post_message(BudgetTyped(event.value.strip()))
        self.start(event.value.strip())

    def start(self, text: str) -> None:
        """Search under the budget `text` (already known to parse)."""
        budget, _ = parse_budget(text)
        assert budget is not None  # known to parse
        self.budget_text = text
        self.request += 1
        self.rows, self.result, self.running = [], None, True
        self.started = time.monotonic()
        self.show_rows()
        self.draw_chart()
        self.status(f"fitting under {human_bytes(budget)} per device…")
        self.query_one(DataTable).focus()
        self.run_fit(budget, self.request)

    @work(thread=True, exclusive=True, group="fit", exit_on_error=False)
    def run_fit(self, budget: int, request: int) -> None:
        from remat_tui.core.search.fit.batches import fit

        def stopped() -> bool:
            return not self.is_attached or request != self.request or not self.running

        try:
            result = fit(
                self.target,
                budget,
                sites=self.base.site_overrides,
                device=self.base.device,
                first=self.shown,
                cancelled=stopped,
                progress=lambda p: self.post_message(FitProgressed(request, p)),
                on_row=lambda row: self.post_message(FitRowFound(request, row)),
            )
        except Exception as exc:  # bad input, or our bug: said in place, the app kept
            self.post_message(FitFailed(request, failure_words(exc)))
            return
        self.post_message(FitDone(request, result))

    def status(self, text: str) -> None:
        self.query_one("#fit-status", Static).update(text)

    @on(FitProgressed)
    def progressed(self, message: FitProgressed) -> None:
        if message.request != self.request or not self.running:
            return
        p = message.progress
        elapsed = time.monotonic() - self.started
        same = f", {p.reused} the same program" if p.reused else ""
        took = f" · {elapsed:.0f} s" if self.show_timings else ""
        self.status(
            f"fitting {p.index + 1}/{p.total}: {progress_line(p)} · {count(p.compiles, 'compile')}"
            f"{same}{took}  (escape stops, keeping the rows)"
        )

    @on(FitRowFound)
    def row_found(self, message: FitRowFound) -> None:
        if message.request != self.request or self.result is not None:
            return
        self.rows.append(message.row)
        self.show_rows()
        self.draw_chart()

    @on(FitFailed)
    def failed(self, message: FitFailed) -> None:
        if message.request != self.request:
            return
        self.running = False
        self.status(f"fit failed: {message.message} · another budget, or escape goes back")

    @on(FitDone)
    def done(self, message: FitDone) -> None:
        if message.request != self.request:
            return
        self.running = False
        f = self.result = message.result
        self.rows = list(f.rows)
        best = f.best
        found = (
            f"★ {row_label(best.config)}: batch {best.batch}"
            if best
            else "nothing fits, not even the smallest batch"
        )
        took = f" in {f.seconds:.0f} s" if self.show_timings else ""
        stopped = "stopped: the rows found so far · " if f.cancelled else ""
        self.status(
            f"{stopped}{count(len(self.rows), 'configuration')} under "
            f"{human_bytes(f.budget)} per device, {count(f.compiles, 'compile')}{took} · "
            f"{found} · enter opens a row"
        )
        self.show_rows()
        self.draw_chart()

    def show_rows(self) -> None:
        """The rows, best first once ranked (in the order found until then):
        the configuration second, fitted to its width, the chart beside the
        table where both have room, else beneath it."""
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        rows = [cells(row) for row in self.rows]
        configs = [row.config for row in self.rows]
        whole = [whole_label(c) for c in configs]
        layout = lay_out(COLUMNS, rows, whole, self.app.size.width, trailing=("notes",))
        self.query_one("#fit-body").set_class(not layout.beside, "-stacked")
        table.styles.width = layout.table_width if layout.beside else "100%"
        for i, width in zip(layout.order, layout.widths, strict=True):
            table.add_column(COLUMNS[i], width=width)
        label = COLUMNS.index("configuration")
        labels = fitted_labels(configs, layout.label_width)
        for index, (row, text) in enumerate(zip(rows, labels, strict=True)):
            table.add_row(*(text if i == label else row[i] for i in layout.order), key=str(index))
        if rows:  # the cursor on the row it was on (clear() put it at the top)
            table.move_cursor(row=min(cursor, len(rows) - 1), animate=False)

    def on_resize(self, event: events.Resize) -> None:
        """Another width: the table's columns and the chart's place again."""
        self.show_rows()

    def draw_chart(self) -> None:
        """Estimated examples per second against batch: a line per
        configuration (the LINES best), a point per batch tried that fits."""
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        drawn = [(r, curve(r)) for r in self.rows if curve(r)][:LINES]
        self.chart_lines = [row_label(r.config) for r, _ in drawn]
        largest = max((rate for _, points in drawn for _, rate in points), default=1.0)
        unit, size = axis_unit(largest, RATE_UNITS)
        # Fitted as the table's are: the site names cut, the policies kept whole.
        names = fitted_labels([r.config for r, _ in drawn], LEGEND - 2)
        marks = ["★ " if r.best else "" for r, _ in drawn]
        self.chart_legend = [mark + name for mark, name in zip(marks, names, strict=True)]
        for (_row, points), label in zip(drawn, self.chart_legend, strict=True):
            plt.plot([b for b, _ in points], [r / size for _, r in points], marker="dot",
                     label=label)  # fmt: skip
        plt.title("examples/s (estimated) against batch")
        plt.xlabel("batch")
        plt.ylabel(f"examples/s{f' ({unit})' if unit else ''}")
        plot.refresh()

    def action_budget(self) -> None:
        self.set_focus(self.query_one(Input))

    def action_stop_or_leave(self) -> None:
        """Escape: stop the search (its rows kept), or leave when none runs."""
        if self.running:
            self.running = False  # the worker stops after its compile under way
            self.status("stopping after the compile under way… (escape again leaves)")
            return
        self.dismiss(None)

    def action_open(self) -> None:
        config = highlighted_config(self.query_one(DataTable), self.rows)
        if config is not None:
            self.dismiss(config)

    @on(DataTable.RowSelected)
    def row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(self.rows[keyed_index(event.row_key)].config)
