"""Provides ResidualTable: the residual rows, drawn with the Line API.

A DataTable lays out every row when its content changes; the unrolled
transformer has ~900 residuals, which made each policy switch cost a few
hundred milliseconds. This table draws only the rows on screen, so switching
between cached analyses costs the same for 10 rows or 10,000.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip

from remat_tui.app.widgets.lineview import LineView


class ResidualTable(LineView, can_focus=True):
    """A fixed header and selectable rows of plain strings."""

    BINDINGS = [
        Binding("up,k", "move(-1)", "up", show=False),
        Binding("down,j", "move(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home,g", "jump(0)", "first", show=False),
        Binding("end,G", "jump(-1)", "last", show=False),
    ]

    COMPONENT_CLASSES = {"residual-table--header", "residual-table--cursor", "residual-table--host"}

    DEFAULT_CSS = """
    ResidualTable { background: $surface; }
    ResidualTable > .residual-table--header { text-style: bold; color: $text-accent; }
    ResidualTable > .residual-table--cursor { background: $accent 55%; }
    ResidualTable:blur > .residual-table--cursor { background: $accent 25%; }
    ResidualTable > .residual-table--host { color: $warning; }
    """

    cursor: reactive[int] = reactive(0)
    """Index of the highlighted row on screen (see `selected` for the residual's)."""

    by_bytes: reactive[bool] = reactive(False)
    """Rows sorted by bytes, largest first, instead of JAX's order."""

    @dataclass
    class Highlighted(Message):
        """The user moved to another row."""

        table: ResidualTable
        index: int  # the residual's index in JAX's order, whatever the sort

    def __init__(self, columns: tuple[str, ...], *, id: str | None = None):
        super().__init__(id=id)
        self.columns = columns
        self.rows: list[tuple[str, ...]] = []
        self.host_rows: set[int] = set()
        self.sizes: list[int] = []  # bytes per row, for sorting
        self.order: list[int] = []  # screen position -> row
        self._widths = [len(c) for c in columns]

    def set_rows(
        self,
        rows: list[tuple[str, ...]],
        host_rows: set[int] | None = None,
        widths: list[int] | None = None,
        keep_cursor: bool = True,
        sizes: list[int] | None = None,
    ) -> None:
        """Replace all rows (`widths`: the column widths, if the caller knows them;
        `sizes`: each row's bytes, for the sort by bytes); the cursor stays on the
        same screen position where possible."""
        self.rows = rows
        self.host_rows = host_rows or set()
        self.sizes = sizes or [0] * len(rows)
        self.order = self._ordered()
        self._widths = widths or [
            max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(self.columns)
        ]
        self.resize_virtual(Size(sum(self._widths) + 2 * len(self._widths), len(rows) + 1))
        cursor = min(self.cursor, len(rows) - 1) if keep_cursor else 0
        # No Highlighted message here: the caller selects the row in the same frame.
        self.set_reactive(ResidualTable.cursor, max(cursor, 0))
        self.refresh()

    def _ordered(self) -> list[int]:
        rows = range(len(self.rows))
        if not self.by_bytes:
            return list(rows)
        return sorted(rows, key=lambda i: (-self.sizes[i], i))  # stable: JAX's order in ties

    def watch_by_bytes(self, old: bool, new: bool) -> None:
        """Re-sort, keeping the same residual selected."""
        selected = self.selected
        self.order = self._ordered()
        self.refresh()
        if selected is not None:
            self.select(selected)

    @property
    def selected(self) -> int | None:
        """The highlighted residual's index in JAX's order."""
        return self.order[self.cursor] if 0 <= self.cursor < len(self.order) else None

    def select(self, row: int) -> None:
        """Highlight residual `row` (JAX's order), wherever the sort put it."""
        if 0 <= row < len(self.order):
            self.cursor = self.order.index(row)

    def _format(self, cells: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(cells, self._widths, strict=True))

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self.frame_styles["base"]
        if y == 0:
            text, style = (
                self._format(self.columns),
                base + self.frame_styles["residual-table--header"],
            )
        else:
            index = scroll_y + y - 1
            if index >= len(self.rows):
                return Strip.blank(width, base)
            row = self.order[index]
            text = self._format(self.rows[row])
            style = base
            if row in self.host_rows:
                style += self.frame_styles["residual-table--host"]
            if index == self.cursor:
                style += self.frame_styles["residual-table--cursor"]
        line = " " + text[scroll_x:]
        return Strip([Segment(line, style)]).extend_cell_length(width, style).crop(0, width)

    def watch_cursor(self, old: int, new: int) -> None:
        self._scroll_to_cursor()
        self.refresh()
        if 0 <= new < len(self.order):
            self.post_message(self.Highlighted(self, self.order[new]))

    def on_resize(self) -> None:
        # Shorter (the story panel opened beneath it, the terminal shrank): the
        # selected row, which the story panel tells, stays on screen.
        self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        height = max(self.scrollable_content_region.height - 1, 1)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)

    def action_move(self, delta: int) -> None:
        if self.rows:
            self.cursor = min(max(self.cursor + delta, 0), len(self.rows) - 1)

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(self.scrollable_content_region.height - 2, 1))

    def action_jump(self, index: int) -> None:
        if self.rows:
            self.cursor = index % len(self.rows)

    def on_click(self, event: events.Click) -> None:
        index = self.scroll_offset.y + event.y - 1
        if event.y >= 1 and 0 <= index < len(self.rows):
            self.cursor = index
