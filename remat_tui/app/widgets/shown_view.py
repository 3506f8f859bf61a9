"""Provides ShownView: the one painter of the main screen's widgets (both
panes, the residual table, the source pane, the title, the snippet, the
status and error lines, the sidebar's lists).

It is given what it paints, as arguments: the App decides what is shown and
what the title, the status line and the lists say (app/controllers/), and this
paints it, redrawing a part when that part's input changes. It keeps only
what it painted last (the analysis and its Drawing, for the residual the
user selects; the files the source pane read; where the user was, to come
back to after a reload).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, overload

from textual.content import Content
from textual.markup import escape
from textual.widget import Widget
from textual.widgets import Static

from remat_tui.app.widgets.codeview import CodeView
from remat_tui.app.widgets.residual_table import ResidualTable
from remat_tui.app.widgets.sidebar import Sidebar
from remat_tui.app.widgets.story_panel import StoryPanel
from remat_tui.core.units import human_bytes

if TYPE_CHECKING:
    from textual.screen import Screen

    from remat_tui.app.state.drawing import Drawing
    from remat_tui.core.model import Analysis, Residual
    from remat_tui.core.xla.compile.compiled import Compiled

NO_LINES: frozenset[int] = frozenset()
PANES = ("#forward", "#backward", "#residuals", "#source")


@dataclass
class View:
    """Where the user was, to come back to after a reload."""

    offsets: dict[str, tuple[int, ...]]  # pane id -> scroll offset (x, y)
    cursor: int
    residual: tuple | None  # what the selected residual was (see `_identity`)


def _identity(r: Residual) -> tuple:
    return (r.aval, r.kind, r.primitive, r.name, r.argument)


@dataclass(frozen=True)
class Lists:
    """What the sidebar's lists show: the Policies (keys 0-9) and the one
    applied, the shown analysis's Sites, the Names with their states (R S O),
    sizes (`infos`, the shown analysis's NameInfos) and verdicts (`in_vain`),
    and where name toggles apply (`scope`, a function, or None: outer);
    `analysed`: an analysis is shown, so no names means the code has none."""

    policies: tuple[str, ...]
    current: str | None
    sites: tuple
    scope: str | None
    names: tuple[str, ...]
    states: dict
    infos: tuple
    in_vain: frozenset = frozenset()
    analysed: bool = True


W = TypeVar("W", bound=Widget)  # a widget class queried for


class ShownView:
    """Paints the main screen (`screen`)'s widgets with what it is given."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen
        self.sources: dict[str, list[str]] = {}  # the files the source pane has shown
        self.source_file: str | None = None
        self.analysis: Analysis | None = None  # the analysis drawn last, with its Drawing
        self.drawing: Drawing | None = None
        self.target_file: str | None = None  # shown for a residual with no line of its own
        self.compiled: Compiled | None = None  # the shown analysis's compile, once known
        self.view: View | None = None  # remembered before a reload (`remember_view`)

    @overload
    def query_one(self, selector: type[W]) -> W: ...
    @overload
    def query_one(self, selector: str, expect_type: type[W]) -> W: ...
    @overload
    def query_one(self, selector: str) -> Widget: ...
    def query_one(
        self, selector: str | type[Widget], expect_type: type[Widget] | None = None
    ) -> Widget:
        if isinstance(selector, str) and expect_type is not None:
            return self.screen.query_one(selector, expect_type)
        return self.screen.query_one(selector)

    def draw(self, a: Analysis, drawing: Drawing, target_file: str | None) -> None:
        """The panes and the residual table for the analysis `a` (its Drawing
        `drawing`, made once per analysis); the error line cleared."""
        self.analysis, self.drawing, self.target_file = a, drawing, target_file
        self.compiled = None  # until the App says which compile is this analysis's
        self.show_error(None)
        for pane_id, view, pane_drawing in (
            ("#forward", a.forward, drawing.forward),
            ("#backward", a.backward, drawing.backward),
        ):
            self.query_one(pane_id, CodeView).set_lines(
                view.lines,
                pane_drawing.marks,
                pane_drawing.marked,
                pane_drawing.recompute,
                pane_drawing.longest,
            )
        self.query_one(
            "#backward"
        ).border_subtitle = f"↻ {a.backward.recompute_eqns} recomputed equations"
        table = self.query_one(ResidualTable)
        table.set_rows(drawing.rows, drawing.host_rows, drawing.widths, sizes=drawing.sizes)
        # Device and host bytes apart, as the status line keeps them: a sum of
        # the two is no memory anything holds.
        # One device's bytes (Contract 17), said so where the residuals are split.
        each = "/device" if a.sharded else ""
        host = f" · {human_bytes(a.totals.host_bytes)}{each} host" if a.totals.host_bytes else ""
        device = human_bytes(a.totals.device_bytes) + each + (" device" if host else "")
        table.border_title = f"Residuals  {len(a.residuals)} · {device}{host}"
        self.select_residual(table.selected if a.residuals else -1)

    def select_residual(self, index: int | None) -> None:
        self._tell(index)
        a = self.analysis
        fwd = self.query_one("#forward", CodeView)
        bwd = self.query_one("#backward", CodeView)
        if a is None or index is None or not 0 <= index < len(a.residuals):
            fwd.selected = bwd.selected = frozenset()
            return
        r = a.residuals[index]
        fwd.selected = frozenset(r.forward_lines)
        bwd.selected = frozenset(r.backward_lines)
        # The panes scroll to the selected residual; their titles say so.
        fwd.border_title = bwd.border_title = None
        if r.forward_lines:
            fwd.show_line(r.forward_lines[0])
            fwd.border_title = f"R{index + 1} made at line {r.forward_lines[0] + 1}"
        lines = r.backward_lines
        if lines:  # with a backward_var, the first line only declares it: show a reader
            line = lines[1] if r.backward_var and len(lines) > 1 else lines[0]
            bwd.show_line(line)
            bwd.border_title = f"R{index + 1} read at line {line + 1}"
        fwd.border_title = " · ".join(filter(None, ["forward (vjp)", fwd.border_title]))
        bwd.border_title = " · ".join(filter(None, ["backward", bwd.border_title]))
        # The line that computed the value (inside a scan body, or the user's line
        # beneath a library's), else JAX's own line.
        src = (r.origin.source if r.origin else None) or r.source
        self.show_source(src.file if src else self.target_file, src.line - 1 if src else None)

    # ---- the story panel (y) -----------------------------------------------------------

    def toggle_story(self) -> None:
        panel = self.query_one(StoryPanel)
        panel.display = not panel.display
        self._tell(self.query_one(ResidualTable).selected)

    def show_compiled(self, compiled: Compiled | None) -> None:
        """The compile of the analysis shown (None: none yet, or p is off)."""
        if compiled is not self.compiled:
            self.compiled = compiled
            self._tell(self.query_one(ResidualTable).selected)

    def _tell(self, index: int | None) -> None:
        panel = self.query_one(StoryPanel)
        if panel.display and self.analysis is not None:
            panel.tell(self.analysis, -1 if index is None else index, self.compiled)

    def show_source(self, path: str | None, line: int | None) -> None:
        """Show `path` in the source pane, its residual-producing lines marked, and
        select `line` (0-based) if given."""
        pane = self.query_one("#source", CodeView)
        drawn = self.drawing  # None before the first analysis is drawn: nothing marked
        marked = drawn.source_lines.get(path, NO_LINES) if path and drawn is not None else NO_LINES
        if path and path != self.source_file:
            if path not in self.sources:
                try:
                    with open(path, encoding="utf-8") as fh:
                        self.sources[path] = fh.read().splitlines()
                except OSError as exc:
                    self.sources[path] = [f"# cannot read {path}: {exc.strerror}"]
            pane.set_lines(self.sources[path], dict.fromkeys(marked, "R"), marked)
            pane.border_title = f"Source  {os.path.relpath(path)}"
            self.source_file = path
        elif path and pane.marked is not marked:  # same file, another analysis
            pane.set_marks(dict.fromkeys(marked, "R"), marked)
        pane.selected = frozenset() if line is None else frozenset({line})
        if line is not None:
            pane.show_line(line)

    def open_line(self, path: str, line: int, residual: str | None) -> None:
        """Show a user's line (1-based) in the source pane, and select the
        residual `residual` (`R3`), else the first one made there."""
        index = int(residual[1:]) - 1 if residual else None
        if index is None and self.analysis is not None:
            index = next(
                (
                    i
                    for i, r in enumerate(self.analysis.residuals)
                    for src in (r.source, r.origin.source if r.origin else None)
                    if src is not None and src.file == path and src.line == line
                ),
                None,
            )
        if index is not None:
            self.query_one(ResidualTable).select(index)
        self.show_source(path, line - 1)

    def forget_sources(self, saved: Iterable[str]) -> None:
        """The files `saved` (paths, real paths alike) changed on disk: read
        them again when next shown."""
        for path in list(self.sources):
            if path in saved or os.path.realpath(path) in saved:
                del self.sources[path]
        self.source_file = None

    # ---- the title, the snippet and the status line -----------------------------------

    def show_title(self, text: str, layout: bool = False) -> None:
        """The title line (markup, user strings escaped by the caller). Fixed
        one-line widgets: layout=False spares a layout pass of the whole screen."""
        self.query_one("#title", Static).update(text, layout=layout)

    def show_snippet(self, python: str) -> None:
        snippet = self.query_one("#snippet", Static)
        old = str(snippet.render())
        if old != python:
            # A layout pass (costly: it redraws every widget) only if the snippet
            # wraps onto a different number of lines.
            width = max(snippet.content_region.width, 1)
            lines = len(Content(python).wrap(width))
            snippet.update(python, layout=lines != len(Content(old).wrap(width)))

    def set_status(self, text: str | Content) -> None:
        self.query_one("#status", Static).update(text, layout=False)

    # ---- the error line ---------------------------------------------------------------

    def show_error(self, message: str | None, warning: bool = False, hint: str = "") -> None:
        """An error (or, with `warning`, cautions about the shown analysis: markup,
        user strings escaped) above the panes, until the next analysis is shown;
        None hides it. `hint` replaces the default line under an error."""
        error = self.query_one("#error", Static)
        if message is None and not error.display:
            return
        error.display = message is not None
        error.set_class(warning, "-warning")
        if message is None:
            return
        if warning:  # already marked up by the caller, its user strings escaped
            error.update(message)
            return
        hint = hint or (
            "still showing the last good analysis; save the file, or change the policy "
            "or device, to try again"
            if self.analysis is not None
            else "nothing analysed yet"
        )
        error.update(f"[b]error:[/b] {escape(message)}\n[dim]{hint}[/dim]")

    def show_cautions(self, warnings: list[str], notes: list[str]) -> None:
        """Warnings and notes above the panes, kept on screen with the analysis
        (not a toast that fades); none: the error line hidden."""
        cautions = [
            *(f"[b]warning:[/b] {escape(w)}" for w in warnings),
            *(f"[b]note:[/b] {escape(n)}" for n in notes),
        ]
        self.show_error("\n".join(cautions) if cautions else None, warning=True)

    @property
    def showing_an_error(self) -> bool:
        """An error is above the panes (not cautions): it stays until it is fixed."""
        error = self.query_one("#error", Static)
        return bool(error.display) and not error.has_class("-warning")

    # ---- the verdict on the gradients (a) ---------------------------------------------

    VERDICT_KINDS = ("-running", "-agree", "-differ", "-not-run", "-failed", "-stale")

    def show_verdict(self, text: str | None, kind: str = "") -> None:
        """The verdict of the `a` key above the panes (plain text), its `kind` one
        of VERDICT_KINDS (its colour); None hides it."""
        verdict = self.query_one("#verdict", Static)
        verdict.display = text is not None
        if text is None:
            return
        for k in self.VERDICT_KINDS:
            verdict.set_class(k == kind, k)
        verdict.update(text)

    @property
    def verdict_text(self) -> str | None:
        """What the verdict line says (None: hidden)."""
        verdict = self.query_one("#verdict", Static)
        return str(verdict.render()) if verdict.display else None

    # ---- the sidebar --------------------------------------------------------------------

    def show_lists(self, lists: Lists) -> None:
        sidebar = self.query_one(Sidebar)
        sidebar.show_policies(lists.policies, lists.current)
        sidebar.show_sites(lists.sites)
        sidebar.names_scope(lists.scope)
        sidebar.show_names(lists.names, lists.states, lists.infos, lists.in_vain, lists.analysed)

    def show_devices(self, devices: Sequence[str], current: str | None) -> None:
        self.query_one(Sidebar).show_device(devices, current)

    # ---- where the user was, across a reload --------------------------------------------

    def remember_view(self) -> None:
        table = self.query_one(ResidualTable)
        shown = self.analysis
        residual = None
        if shown is not None and table.selected is not None:
            residual = _identity(shown.residuals[table.selected])
        offsets = {pane: tuple(self.query_one(pane).scroll_offset) for pane in PANES}
        self.view = View(offsets, table.selected or 0, residual)

    def restore_view(self, a: Analysis) -> None:
        """After the reloaded analysis `a` is drawn: the same residual selected
        (the nearest of the same kind, else the same row) and every pane
        scrolled back. Nothing when no view was remembered."""
        view, self.view = self.view, None
        if view is None:
            return
        table = self.query_one(ResidualTable)
        if a.residuals:
            same = [i for i, r in enumerate(a.residuals) if _identity(r) == view.residual]
            index = min(same, key=lambda i: abs(i - view.cursor)) if same else view.cursor
            index = min(index, len(a.residuals) - 1)
            if index != table.selected:
                # The residual's row on screen: the table may be sorted by bytes.
                table.set_reactive(ResidualTable.cursor, table.order.index(index))
                table.refresh()
                self.select_residual(index)
        for pane, (x, y) in view.offsets.items():
            self.query_one(pane).scroll_to(x=x, y=y, animate=False, immediate=True)
