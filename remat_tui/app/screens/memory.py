"""Provides the MemoryScreen: where the compiled peak of the shown
configuration goes (Contract 7, core/xla/buffers/memory.py): the live bytes over XLA's
schedule as a chart, the backward part's start and the peak marked; beside it
the buffers live at the peak, largest first, with category, residual R# (the
App names them from the analysis shown) and line. Enter on a buffer closes
the screen on its source line, which the App shows in the source pane, its
residual row selected.

The breakdown comes with the compile `p` made (the App keeps it); the screen
reads it and computes nothing.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual_plotext import PlotextPlot

from remat_tui.app.widgets.footer import Footer
from remat_tui.core.units import BYTE_UNITS, axis_unit, human_bytes
from remat_tui.report import memory as memory_view
from remat_tui.report.tables import text_table

SCREEN_COLUMNS = ("bytes", "category", "residual", "line", "shape", "instruction")
SHAPE_WIDTH = 28  # a loop's tuple buffer lists every member: cut, the rest in the reports


def _cut(text: str, width: int = SHAPE_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


class MemoryScreen(Screen[tuple[str, int, str | None] | None]):
    """The curve and the buffers at the peak; dismissed with the chosen
    buffer's (file, line, residual R# or None), or None."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "back"),
        Binding("enter", "open", "open its line", show=True),
    ]

    def __init__(self, memory: dict, headline: str):
        """Its words and rows are made here, before the screen is pushed: an
        error in them is said by the opener, over the main screen."""
        super().__init__()
        self.memory = memory
        self.headline = headline
        self.chart_marks: dict[str, float] = {}  # what the chart marks, for tests
        m = memory
        lines = [headline, memory_view.summary(m)]
        if m.get("explanation"):
            lines.append(m["explanation"])
        lines.append("enter opens a buffer's line in the main screen · escape goes back")
        self.status_text = "\n".join(lines)
        order = [memory_view.BUFFER_COLUMNS.index(c) for c in SCREEN_COLUMNS]
        shape = SCREEN_COLUMNS.index("shape")
        rows = []
        for row in memory_view.buffer_rows(m, top=len(m["at_peak"])):
            cells = [row[i] for i in order]
            cells[shape] = _cut(cells[shape])
            rows.append(tuple(cells))
        self.header, *self.buffer_lines = text_table([SCREEN_COLUMNS, *rows])

    def compose(self) -> ComposeResult:
        yield Static("", id="memory-status", markup=False)
        with Horizontal(id="memory-body"):
            yield PlotextPlot(id="memory-chart")
            # One line per buffer in an OptionList, its columns padded once:
            # a DataTable renders each cell apart, and took most of the time to
            # the first frame (bench/bench_memory.py).
            with Vertical(id="memory-buffers"):
                yield Static("", id="memory-header", markup=False)
                yield OptionList(id="memory-table", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#memory-status", Static).update(self.status_text)
        self.query_one("#memory-header", Static).update(self.header)
        buffers = self.query_one(OptionList)
        buffers.add_options(self.buffer_lines)
        buffers.highlighted = 0 if self.buffer_lines else None
        self.set_focus(buffers)  # now: arrows typed ahead move the cursor
        self.draw_chart()

    def draw_chart(self) -> None:
        """Live bytes at each step of XLA's schedule, in the unit they read best
        in; a vertical line where the backward part starts, the peak a star."""
        m = self.memory
        plt = self.query_one(PlotextPlot).plt
        plt.clear_data()
        if not m["curve"]:
            return
        unit, size = axis_unit(max(b for _, b in m["curve"]), BYTE_UNITS)
        steps = [s for s, _ in m["curve"]]
        plt.plot(steps, [b / size for _, b in m["curve"]], marker="braille")
        plt.ylim(0, m["peak_bytes"] / size * 1.05)  # from zero: the peak's height reads true
        plt.scatter([m["peak_step"]], [m["peak_bytes"] / size], marker="star", color="red")
        self.chart_marks = {"peak_step": m["peak_step"], "peak": m["peak_bytes"] / size}
        if m.get("backward_from") is not None:
            plt.vline(m["backward_from"], "orange")
            self.chart_marks["backward_from"] = m["backward_from"]
        plt.title(f"live bytes, peak {human_bytes(m['peak_bytes'])}")  # short: the chart is narrow
        plt.xlabel("XLA schedule step · orange: backward starts")
        plt.ylabel(unit)
        self.query_one(PlotextPlot).refresh()

    def action_open(self) -> None:
        index = self.query_one(OptionList).highlighted
        if index is not None:
            self.open_row(index)

    @on(OptionList.OptionSelected)
    def buffer_selected(self, event: OptionList.OptionSelected) -> None:
        self.open_row(event.option_index)

    def open_row(self, index: int) -> None:
        buffer = self.memory["at_peak"][index]
        source = buffer["source"]
        if not source:
            self.notify("XLA carries no line of yours for this buffer", severity="warning")
            return
        self.dismiss((source["file"], source["line"], buffer.get("residual")))
