"""Provides CodeView: a read-only, syntax-highlighted view of many lines that
draws only the lines on screen (Textual's Line API), with per-line marks.

A 20,000-line jaxpr costs nothing until scrolled to: lines are highlighted
with Pygments on first display and cached.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from pygments.lexer import Lexer
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.syntax import Syntax
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import reactive
from textual.strip import Strip

from remat_tui.app.widgets.lineview import LineView

THEME = "monokai"


def _foreground(style: Style) -> Style:
    """A token style without its background: the theme paints one on every
    token, which would hide the line's mark (residual, recompute, selected)
    wherever there is code, i.e. on all of a line that fills the pane."""
    return Style(
        color=style.color,
        bold=style.bold,
        dim=style.dim,
        italic=style.italic,
        underline=style.underline,
    )


class CodeView(LineView, can_focus=True):
    """Lines of code with a gutter (line number + mark) and line backgrounds."""

    COMPONENT_CLASSES = {
        "codeview--marked",
        "codeview--recompute",
        "codeview--selected",
        "codeview--gutter",
    }

    DEFAULT_CSS = """
    CodeView { background: $surface; }
    CodeView > .codeview--gutter { color: $text-muted; }
    CodeView > .codeview--marked { background: $warning 25%; }
    CodeView > .codeview--recompute { background: $primary 25%; }
    CodeView > .codeview--selected { background: $accent 55%; }
    """

    selected: reactive[frozenset[int]] = reactive(frozenset(), always_update=True)
    """Lines of the selected residual, drawn strongest."""

    def __init__(self, lexer: Lexer, *, id: str | None = None):
        super().__init__(id=id)
        self.lexer = lexer
        self.lines: list[str] = []
        self.marks: dict[int, str] = {}  # line -> short gutter mark (R3, ↻)
        self.marked: AbstractSet[int] = set()  # residual lines
        self.recompute: set[int] = set()  # recomputation lines
        # Highlighted segments by line *text*: jaxprs repeat many lines, and
        # switching back to a policy redraws lines seen before.
        self._cache: dict[str, Strip] = {}
        # Finished lines, so going back to a cached analysis redraws from memory.
        self._strips: LRUCache[tuple, Strip] = LRUCache(4096)
        self._gutter = 0
        self._syntax_theme = Syntax.get_theme(THEME)
        self._token_styles: dict = {}

    def set_lines(
        self,
        lines: list[str],
        marks: dict[int, str] | None = None,
        marked: AbstractSet[int] | None = None,
        recompute: set[int] | None = None,
        longest: int | None = None,
    ) -> None:
        """Replace the content; keeps the scroll position when it still fits.
        `longest` is the longest line's length, if the caller already knows it."""
        self.lines = lines
        self.marks = marks or {}
        self.marked = marked or set()
        self.recompute = recompute or set()
        if len(self._cache) > 50_000:
            self._cache.clear()
        self._gutter = len(str(len(lines))) + 5
        if longest is None:
            longest = max(map(len, lines), default=0)
        width = longest + self._gutter
        self.resize_virtual(Size(width, len(lines)))
        self.refresh()

    def set_marks(self, marks: dict[int, str], marked: AbstractSet[int]) -> None:
        """New gutter marks and residual lines for the same content."""
        self.marks, self.marked = marks, marked
        self.refresh()

    def show_line(self, line: int) -> None:
        """Scroll so `line` is in view, about a third from the top. Before the first
        layout the pane's height is unknown, so then it waits for a refresh."""
        if self.scrollable_content_region.height:
            self._scroll_to_line(line)
        else:
            self.call_after_refresh(self._scroll_to_line, line)

    def _scroll_to_line(self, line: int) -> None:
        if 0 <= line < len(self.lines):
            top = max(0, line - self.scrollable_content_region.height // 3)
            if top != self.scroll_offset.y:
                self.scroll_to(y=top, animate=False, immediate=True)

    def watch_selected(self) -> None:
        self.refresh()

    def _highlight(self, index: int) -> Strip:
        """One line as a Strip with a Segment per Pygments token (building rich Text
        and rendering it costs several times more, and this runs per new line)."""
        line = self.lines[index]
        strip = self._cache.get(line)
        if strip is None:
            style_for = self._token_styles
            segments = []
            for _, token, value in self.lexer.get_tokens_unprocessed(line):
                style = style_for.get(token)
                if style is None:
                    style = style_for[token] = _foreground(
                        self._syntax_theme.get_style_for_token(token)
                    )
                segments.append(Segment(value, style))
            strip = self._cache[line] = Strip(segments, cell_len(line))
        return strip

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index >= len(self.lines):
            return Strip.blank(width, self.frame_styles["base"])
        mark = self.marks.get(index, "")
        background = self._background(index)
        key = (
            self.lines[index],
            index,
            mark,
            background,
            scroll_x,
            width,
            self._gutter,
            self.frame_styles["base"],
        )
        strip = self._strips.get(key)
        if strip is None:
            number = str(index + 1).rjust(self._gutter - 5)
            gutter = Segment(f"{number} {mark:<3.3} ", self.frame_styles["codeview--gutter"])
            code = self._highlight(index).crop(scroll_x, scroll_x + width - self._gutter)
            strip = Strip([gutter, *code]).extend_cell_length(width).crop(0, width)
            base = self.frame_styles["base"]
            strip = strip.apply_style(base)
            if background:  # over every cell, the gutter's included: the whole row is marked
                marked = Style(bgcolor=(base + self.frame_styles[background]).bgcolor)
                strip = Strip(Segment.apply_style(strip, post_style=marked), width)
            self._strips[key] = strip
        return strip

    def _background(self, index: int) -> str | None:
        """The component class giving this line its background, if any."""
        if index in self.selected:
            return "codeview--selected"
        if index in self.marked:
            return "codeview--marked"
        if index in self.recompute:
            return "codeview--recompute"
        return None
