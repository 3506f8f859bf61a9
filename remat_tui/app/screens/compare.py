"""Provides the CompareScreen: every configuration's costs in a sortable table,

the Pareto front marked, memory against recompute FLOPs as a chart, and the
highlighted row's whole configuration, snippet and notes beneath, wrapped (a
configuration can be longer than its column has room for).

The comparison runs in this screen's own worker (thread), one configuration
after another, and says how far it is and about how long is left; escape
stops it and keeps the rows so far (escape again leaves). With compiling on
in the main screen (`p`), every row is compiled too: its peak, temporaries
and estimated step time fill their columns, and the panel beneath says the
estimate's parts. With measuring on (`x`), every row also runs on the
device: its measured time fills a column of its own and ranks the rows.
Enter on a row closes the screen with that row's Config, which the App opens
in the main screen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.coordinate import Coordinate
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from remat_tui.app.arguments import prepared
from remat_tui.app.screens.compare_chart import draw_compare_chart
from remat_tui.app.screens.failure import failure_words
from remat_tui.app.screens.table_layout import (
    NOTES_MAX,
    TableLayout,
    capped_cell,
    fitted_labels,
    lay_out,
    whole_label,
)
from remat_tui.app.screens.table_rows import highlighted_config, keyed_index
from remat_tui.app.widgets.footer import Footer
from remat_tui.core.search.rows import CostSource
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.structure_specs import without_helper
from remat_tui.core.units import count
from remat_tui.report.comparisons import (
    COLUMNS,
    any_measured,
    columns,
    legend_devices,
    measured_ranks,
    notes_cell,
    row_cells,
)
from remat_tui.report.compiled import estimate_words, measured_words, rates_words

if TYPE_CHECKING:
    from remat_tui.core.search.compare import Comparison
    from remat_tui.core.search.rows import Row
    from remat_tui.registry import Target

# A row JAX refused has no numbers: last, whatever the order.
SORTS = {
    "memory": lambda r: (r.refused, r.weighed_bytes, r.recompute_flops),
    "recompute": lambda r: (r.refused, r.recompute_flops, r.weighed_bytes),
    "host": lambda r: (r.refused, r.host_bytes, r.weighed_bytes),
    # measured, else est. step time once compiled (rows with neither, which do
    # not fit, last)
    "time": lambda r: (r.refused, r.cost_source is CostSource.FLOPS, r.cost, r.weighed_bytes),
}


@dataclass
class CompareProgress(Message):
    done: int
    total: int
    label: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CompareProgress)


@dataclass
class CompareRow(Message):
    row: Row


@dataclass
class CompareDone(Message):
    comparison: Comparison


@dataclass
class CompareFailed(Message):
    message: str


@dataclass
class CompareStopped(Message):
    """Escape stopped the comparison: the rows made so far are the answer."""


def full_label(config: Config) -> str:
    """The configuration in full, every spec canonical (the table's column
    shortens names policies to the names they save)."""
    changed = config.sites or config.structure is not None
    parts = [] if config.policy == policies.AS_WRITTEN and changed else [config.policy]
    parts += [f"site {key}: {spec}" for key, spec in config.sites]
    parts += [] if config.structure is None else [f"structure {config.structure}"]
    return "; ".join(parts)


# Where a row's backward pass runs a call back to Python again (issue 43).
RERUNS = " · ↻: it runs a call back to Python again in the backward pass (notes: which)"
DETAIL_FIELDS = ("configuration", "paste", "estimate", "rates", "measured", "notes")
DETAIL_LABELS = {"estimate": "est. step"}  # the others are labelled as named


def detail(row: Row) -> dict[str, str]:
    """What the panel beneath the table says of the highlighted row, by
    DETAIL_FIELDS: its whole configuration, the code to paste, the estimate in
    its parts and where its rates came from, what running it measured and its
    notes ('' where it has none)."""
    return {
        "configuration": full_label(row.config),
        "paste": without_helper(row.python),
        "estimate": estimate_words(row.time) if row.time else "",
        "rates": rates_words(row.time) if row.time else "",
        "measured": measured_words(row.measured) if row.measured else "",
        "notes": notes_cell(row),
    }


class CompareScreen(Screen[Config | None]):
    """Costs of every configuration worth comparing, for the App's target."""

    BINDINGS = [
        Binding("escape", "back", "back"),
        Binding("m", "sort('memory')", "sort: memory"),
        Binding("f", "sort('recompute')", "sort: recompute"),
        Binding("h", "sort('host')", "sort: host"),
        Binding("t", "sort('time')", "sort: step time"),
        Binding("enter", "open", "open in main screen", show=True),
    ]

    def __init__(
        self,
        target: Target,
        base: Config,
        compiled: bool = False,
        budget: str | None = None,
        show_timings: bool = True,
        measure: bool = False,
    ):
        """`base`: the Config whose sites and device every row shares;
        `compiled`: compile each row (the main screen's `p`); `budget`: the
        last one typed for suggest, drawn on the chart; `show_timings`: say
        how long the comparison took; `measure`: run each row on the device
        and rank by the time measured (the main screen's `x`)."""
        super().__init__()
        self.show_timings = show_timings
        self.measure_rows = measure
        self.stopped = False  # escape stopped the comparison: the rows so far stand
        self.target = target
        self.base = base
        self.budget = budget
        self.rows: list = []
        self.sort_key = "memory"
        self.started = time.monotonic()
        self.first_row_at: float | None = None  # when the first row was shown
        self.done_at: float | None = None  # when it ended: every row in, ★ marked, or failed
        self.chart_axes: tuple[str, str] | None = None  # the axis labels drawn
        self.chart_budget: int | None = None  # the budget line drawn, in bytes
        self.chart_title = ""  # the chart's title as drawn
        self.compiled = compiled  # compile every row: the main screen's `p` is on
        self.heads: tuple[str, ...] = COLUMNS  # the headers of the table's cells
        self.table_layout: TableLayout | None = None  # which of them show, how wide, where

    def compose(self) -> ComposeResult:
        with Vertical(id="compare"):
            yield Static("comparing…", id="compare-status", markup=False)
            with Horizontal(id="compare-body"):
                yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
                yield PlotextPlot(id="compare-chart")
            # The highlighted row in full, wrapped beside its labels: the table's
            # configuration column is cut off wherever the screen is narrower.
            with Vertical(id="compare-detail") as panel:
                panel.display = False  # until a row is highlighted
                for field in DETAIL_FIELDS:
                    with Horizontal(id=f"detail-{field}", classes="detail-row"):
                        yield Static(DETAIL_LABELS.get(field, field), classes="detail-label")
                        yield Static("", id=f"detail-{field}-value", classes="detail-value",
                                     markup=False)  # fmt: skip
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*COLUMNS)
        self.set_focus(table)  # now: arrows typed ahead move the cursor
        self.run_compare()

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def run_compare(self) -> None:
        from remat_tui.core.search.compare import compare
        from remat_tui.core.trace.configured import Cancelled

        try:
            # The example arguments built once, not once per row.
            target = prepared(self.target, self.base.device)
            result = compare(
                target,
                sites=self.base.site_overrides,
                device=self.base.device,
                compiled=self.compiled,
                measure=self.measure_rows,
                progress=lambda i, n, c: self.post_message(CompareProgress(i, n, c.label())),
                cancelled=lambda: self.stopped or not self.is_attached,
                on_row=lambda row: self.post_message(CompareRow(row)),
            )
        except Cancelled:
            if self.is_attached:
                self.post_message(CompareStopped())
            return
        except Exception as exc:  # bad input, or our bug: said in place, the app kept
            self.post_message(CompareFailed(failure_words(exc)))
            return
        self.post_message(CompareDone(result))

    @on(CompareProgress)
    def progress(self, message: CompareProgress) -> None:
        if self.stopped:
            return
        elapsed = time.monotonic() - self.started
        how = "comparing and compiling" if self.compiled else "comparing"
        if self.measure_rows:
            how = "comparing, compiling and running"
        left = ""
        if message.done:
            remaining = elapsed / message.done * (message.total - message.done)
            left = f", about {remaining:.0f} s left" if remaining >= 1 else ""
        self.query_one("#compare-status", Static).update(
            f"{how} {message.done + 1}/{message.total}: {message.label}  {elapsed:.1f} s"
            f"{left}  (escape stops, keeping the rows so far)"
        )

    def action_back(self) -> None:
        """Escape: stop a comparison under way, keeping its rows; else leave."""
        if self.done_at is None and not self.stopped:
            self.stopped = True
            self.query_one("#compare-status", Static).update("stopping…")
            return
        self.dismiss(None)

    @on(CompareStopped)
    def stopped_here(self) -> None:
        """The rows so far stand: marked among themselves (★ weighs only them)."""
        from remat_tui.core.search.compare import mark_pareto

        self.done_at = time.monotonic()
        mark_pareto(self.rows)
        self.query_one("#compare-status", Static).update(
            f"stopped: {count(len(self.rows), 'configuration')} compared · ★ among these "
            f"{sum(r.pareto for r in self.rows)} · enter opens a row · escape goes back"
        )
        self.show_columns()
        self.show_rows(self.cursor_key())
        self.draw_chart()

    @on(CompareRow)
    def row_measured(self, message: CompareRow) -> None:
        """Each row as soon as it is measured: the table fills while the rest
        are analysed (★ and the notes weighing rows come with the last)."""
        if self.done_at is not None:
            return
        if not self.rows:
            self.first_row_at = time.monotonic()
        selected = self.cursor_key()
        self.rows.append(message.row)
        self.show_columns()
        self.show_rows(selected)

    @on(CompareFailed)
    def failed(self, message: CompareFailed) -> None:
        self.done_at = time.monotonic()  # it ended: escape goes back
        self.query_one("#compare-status", Static).update(
            f"compare failed: {message.message} · escape goes back"
        )

    @on(CompareDone)
    def done(self, message: CompareDone) -> None:
        if self.stopped and self.done_at is not None:
            return  # stopped meanwhile: the rows so far are shown
        c = message.comparison
        self.done_at = time.monotonic()
        self.rows = list(c.rows)
        front = sum(r.pareto for r in self.rows)
        took = f" in {c.seconds:.1f} s" if self.show_timings else ""
        self.query_one("#compare-status", Static).update(
            f"{count(len(self.rows), 'configuration')}{took} · memory: {self.measure()} · "
            f"★ {front} Pareto-optimal "
            "(no other needs no more memory at no more cost) · enter opens a row"
            + legend_devices(self.rows)
            + (RERUNS if any(r.reruns_callbacks for r in self.rows) else "")
        )
        self.show_columns()
        self.show_rows()
        self.draw_chart()

    def measure(self) -> str:
        """What the memory column, the sort and the chart weigh."""
        if not self.compiled:
            return "residual bytes per device (p in the main screen compiles each row)"
        steps = {r.compiled.step for r in self.rows if r.compiled}
        step = "training step" if "train" in steps else "gradient alone"
        return f"compiled peak per device ({step})"

    def show_columns(self) -> None:
        """The columns some row has a value in (the first, ★, always): no room
        goes to peak and temp when nothing was compiled, nor to host when
        nothing is offloaded; the configuration second, its labels fitted to
        its width; the chart beside the table where both have room, else
        beneath it (app/screens/table_layout.py). Headers say whose bytes
        each counts."""
        cells = self.cells()
        heads = columns(self.rows)
        labels = [whole_label(r.config) for r in self.rows]
        layout = lay_out(
            heads, cells, labels, self.app.size.width, trailing=("notes",), cap=NOTES_MAX
        )
        body = self.query_one("#compare-body")
        body.set_class(not layout.beside, "-stacked")
        table = self.query_one(DataTable)
        table.styles.width = layout.table_width if layout.beside else "100%"
        # Widths from every cell, set here: DataTable's auto-width is measured
        # when the table is next idle, and a refill can miss it (the columns
        # then stay as wide as their headers).
        if layout == self.table_layout and heads == self.heads:
            return
        self.table_layout, self.heads = layout, heads
        table.clear(columns=True)
        for i, width in zip(layout.order, layout.widths, strict=True):
            table.add_column(heads[i], width=width)

    def cells(self) -> list[tuple[str, ...]]:
        """Every row's cells, in `columns(self.rows)`: with a measured column
        (and each row's rank in it) once a row was run."""
        rank = measured_ranks(self.rows) if any_measured(self.rows) else None
        return [row_cells(r, rank) for r in self.rows]

    def cursor_key(self) -> str | None:
        """The key of the row under the table's cursor, if any."""
        table = self.query_one(DataTable)
        if not table.row_count or table.cursor_row is None:
            return None
        return table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value

    def show_rows(self, selected: str | None = None) -> None:
        """The rows in the chosen order, the cursor on the row keyed `selected`
        (rows arrive one by one while the comparison runs), else at the top."""
        table = self.query_one(DataTable)
        table.clear()
        cells = self.cells()
        layout = self.table_layout
        assert layout is not None  # show_columns laid the table out first
        label, notes = self.heads.index("configuration"), self.heads.index("notes")
        labels = fitted_labels([r.config for r in self.rows], layout.label_width)
        for index, _row in sorted(enumerate(self.rows), key=lambda ir: SORTS[self.sort_key](ir[1])):
            shown = {i: cells[index][i] for i in layout.order}
            shown[label] = labels[index]
            if notes in shown:  # the panel beneath has them whole
                shown[notes] = capped_cell(shown[notes])
            table.add_row(*shown.values(), key=str(index))
        if selected is not None and selected in {k.value for k in table.rows}:
            table.move_cursor(row=table.get_row_index(selected))
        else:
            table.scroll_to(y=0, animate=False)  # clear() keeps the old scroll
        # The panel follows the cursor now, not when the highlight event comes:
        # a table refilled with the cursor in place posts none.
        self.show_detail(self.cursor_key())

    @on(DataTable.RowHighlighted)
    def row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_detail(event.row_key.value)

    def show_detail(self, key: str | None) -> None:
        """The panel beneath the table for the row keyed `key` (None: nothing)."""
        if not self.rows or key is None:
            return
        for field, text in detail(self.rows[int(key)]).items():
            self.query_one(f"#detail-{field}-value", Static).update(text)
            self.query_one(f"#detail-{field}").display = bool(text)
        self.query_one("#compare-detail").display = True

    def draw_chart(self) -> None:
        """Memory against recompute FLOPs (estimated step time once compiled),
        the last suggest budget as a vertical line (app/screens/compare_chart.py)."""
        drawn = draw_compare_chart(
            self.query_one(PlotextPlot), self.rows, self.budget, self.compiled
        )
        if drawn is not None:
            self.chart_axes, self.chart_budget = drawn.axes, drawn.budget
            self.chart_title = drawn.title

    def on_resize(self, event: events.Resize) -> None:
        """Another width: the table's columns and the chart's place again."""
        if self.rows:
            self.show_columns()
            self.show_rows(self.cursor_key())

    def action_sort(self, key: str) -> None:
        self.sort_key = key
        if self.rows:
            self.show_rows()
            self.notify(f"sorted by {key}")

    def action_open(self) -> None:
        config = highlighted_config(self.query_one(DataTable), self.rows)
        if config is not None:
            self.dismiss(config)

    @on(DataTable.RowSelected)
    def row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(self.rows[keyed_index(event.row_key)].config)
