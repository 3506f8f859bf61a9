"""Provides the MemoryScreen: where the compiled peak of the shown
configuration goes (Contract 7, core/memory.py): the live bytes over XLA's
schedule as a chart, the backward part's start and the peak marked; beside it
the buffers live at the peak, largest first, with category and line. Enter on
a buffer closes the screen on its source line, which the App shows in the
source pane (and selects the residual made there, if one is).

The breakdown comes with the compile `p` made (the App keeps it); the screen
reads it and computes nothing.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from remat_tui.app.footer import Footer
from remat_tui.report import memory as memory_view
from remat_tui.report.units import BYTE_UNITS, axis_unit, human_bytes


class MemoryScreen(Screen[tuple[str, int] | None]):
    """The curve and the buffers at the peak; dismissed with (file, line) or None."""

    DEFAULT_CSS = """
    #memory-status { height: auto; padding: 0 1; background: $panel; }
    #memory-body { height: 1fr; }
    #memory-chart { width: 2fr; min-width: 40; }
    #memory-table { width: 3fr; }
    """
    BINDINGS = [
        Binding("escape", "dismiss(None)", "back"),
        Binding("enter", "open", "open its line", show=True),
    ]

    def __init__(self, memory: dict, headline: str):
        super().__init__()
        self.memory = memory
        self.headline = headline
        self.chart_marks: dict[str, float] = {}  # what the chart marks, for tests

    def compose(self) -> ComposeResult:
        yield Static("", id="memory-status", markup=False)
        with Horizontal(id="memory-body"):
            yield PlotextPlot(id="memory-chart")
            yield DataTable(id="memory-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        m = self.memory
        lines = [self.headline, memory_view.summary(m)]
        if m.get("explanation"):
            lines.append(m["explanation"])
        lines.append("enter opens a buffer's line in the main screen · escape goes back")
        self.query_one("#memory-status", Static).update("\n".join(lines))
        table = self.query_one(DataTable)
        table.add_columns(*memory_view.BUFFER_COLUMNS)
        rows = memory_view.buffer_rows(m, top=len(m["at_peak"]))
        for index, row in enumerate(rows):
            table.add_row(*row, key=str(index))
        table.focus()
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
        plt.title(f"live bytes · peak {human_bytes(m['peak_bytes'])} · backward from orange line")
        plt.xlabel("step of XLA's schedule")
        plt.ylabel(unit)
        self.query_one(PlotextPlot).refresh()

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if table.row_count and table.cursor_row is not None:
            self.open_row(int(table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value))

    @on(DataTable.RowSelected)
    def row_selected(self, event: DataTable.RowSelected) -> None:
        self.open_row(int(event.row_key.value))

    def open_row(self, index: int) -> None:
        source = self.memory["at_peak"][index]["source"]
        if not source:
            self.notify("XLA carries no line of yours for this buffer", severity="warning")
            return
        self.dismiss((source["file"], source["line"]))
