"""Provides ShownView: the analysis shown, drawn into the main screen's widgets
(both panes, the residual table, the source pane, the title, the status and
error lines, the sidebar's lists). The App decides what is shown
(app/main.py `show`); this draws it, and redraws a part when that part's
input changes (a compile's result, the Names verdicts, a residual selected).
"""

from __future__ import annotations

import os

from textual.content import Content
from textual.css.query import NoMatches
from textual.markup import escape
from textual.widgets import Static

from remat_tui.app.codeview import CodeView
from remat_tui.app.drawing import draw
from remat_tui.app.residual_table import ResidualTable
from remat_tui.app.sidebar import Sidebar
from remat_tui.app.status import summary
from remat_tui.report.units import human_bytes

NO_LINES: frozenset[int] = frozenset()


class ShownView:
    """Draws `app.shown` into `screen`'s widgets."""

    def __init__(self, screen) -> None:
        self.screen = screen
        self.sources: dict[str, list[str]] = {}  # the files the source pane has shown
        self.source_file: str | None = None

    @property
    def app(self):
        return self.screen.app

    def query_one(self, selector, expect_type=None):
        return self.screen.query_one(selector, expect_type)

    def draw(self, a) -> None:
        """Everything on the main screen that depends on the analysis `a`."""
        app = self.app
        self.show_error(None)
        drawings = app.analyses.drawings
        drawing = drawings.get(id(a))
        if drawing is None:
            drawing = drawings[id(a)] = draw(a)
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
        host = f" · {human_bytes(a.totals.host_bytes)} host" if a.totals.host_bytes else ""
        device = human_bytes(a.totals.device_bytes) + (" device" if host else "")
        table.border_title = f"Residuals  {len(a.residuals)} · {device}{host}"
        self.select_residual(table.selected if a.residuals else -1)
        self.update_title()
        self.update_status(a)
        app.name_states = self.screen.scoped_states()  # the sites may be known only now
        # What the command line asked for and could not have is said with the
        # first analysis, and kept while it is shown (cautions are redrawn when
        # the Names verdicts arrive).
        app.launch_warnings, app.start_warnings = app.start_warnings, []
        self.show_cautions(a)
        self.refresh_sidebar()

    def show_cautions(self, a) -> None:
        """Warnings and notes above the panes, kept on screen with the analysis
        (not a toast that fades); none: the error line hidden."""
        app = self.app
        saved_in_vain = app.name_judge.verdicts(app.target, a, self.screen.name_scope())
        cautions = [
            *(f"[b]warning:[/b] {escape(w)}" for w in [*app.launch_warnings, *a.warnings]),
            *(f"[b]note:[/b] {escape(n)}" for n in app.notes_for(a)),
            *(
                f"[b]note:[/b] {escape(why)}"
                for name, why in saved_in_vain.items()
                if app.name_states.get(name) == "save"
            ),
        ]
        self.show_error("\n".join(cautions) if cautions else None, warning=True)

    def names_judged(self) -> None:
        """The Names verdicts changed: the list's marks, and the cautions unless
        an error is shown (an error stays until it is fixed)."""
        self.refresh_sidebar()
        error = self.query_one("#error", Static)
        showing_an_error = error.display and not error.has_class("-warning")
        if self.app.shown is not None and not showing_an_error:
            self.show_cautions(self.app.shown)

    def select_residual(self, index: int) -> None:
        a = self.app.shown
        fwd = self.query_one("#forward", CodeView)
        bwd = self.query_one("#backward", CodeView)
        if a is None or not 0 <= index < len(a.residuals):
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
        self.show_source(src.file if src else self.app.target.file, src.line - 1 if src else None)

    def show_source(self, path: str | None, line: int | None) -> None:
        """Show `path` in the source pane, its residual-producing lines marked, and
        select `line` (0-based) if given."""
        pane = self.query_one("#source", CodeView)
        source_lines = self.app.analyses.drawings[id(self.app.shown)].source_lines
        marked = source_lines.get(path, NO_LINES) if path else NO_LINES
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

    def forget_sources(self, saved) -> None:
        """The files `saved` (paths, real paths alike) changed on disk: read
        them again when next shown."""
        for path in list(self.sources):
            if path in saved or os.path.realpath(path) in saved:
                del self.sources[path]
        self.source_file = None

    def update_title(self) -> None:
        app = self.app
        policy = app.spec.canonical if app.spec else "?"
        name = f"{app.path}:{app.target.name}" if app.target else app.path
        # Fixed one-line widgets: layout=False spares a layout pass of the whole screen.
        self.query_one("#title", Static).update(
            f"[b]remat-tui[/b]  {escape(name)}  policy [b]{escape(policy)}[/b]  {app.device}",
            layout=False,
        )
        self.query_one(Sidebar).show_device(app.devices, app.device)

    def update_status(self, a) -> None:
        snippet = self.query_one("#snippet", Static)
        old = str(snippet.render())
        if old != a.python:
            # A layout pass (costly: it redraws every widget) only if the snippet
            # wraps onto a different number of lines.
            width = max(snippet.content_region.width, 1)
            lines = len(Content(a.python).wrap(width))
            snippet.update(a.python, layout=lines != len(Content(old).wrap(width)))
        self.set_status(self.status_text(a))

    def set_status(self, text) -> None:
        self.query_one("#status", Static).update(text, layout=False)

    def status_text(self, a) -> str:
        app = self.app
        base = app.analyses.cache.get(app.baseline_key())
        known = app.compiles.known.get(app.key_of(a)) if app.wanted.compiled else None
        devices = known.devices if known is not None else None
        return summary(a, base, app.show_timings, app.compiled_headline(a), devices=devices)

    def tick(self) -> None:
        """While a worker runs, say what it is doing and for how long; the UI keeps
        answering keys."""
        app = self.app
        text = app.activity.text(app.show_timings, app.shown is not None)
        try:
            if text is not None:
                self.set_status(text)
            elif app.shown is not None and app.analyses.pending is None:
                key = app.compiles.compiling  # the compile clock, while it runs
                if key is not None and key == app.key_of(app.shown):
                    self.set_status(self.status_text(app.shown))
        except NoMatches:  # the app is closing: the timer outlived the main screen's widgets
            pass

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
            if self.app.shown is not None
            else "nothing analysed yet"
        )
        error.update(f"[b]error:[/b] {escape(message)}\n[dim]{hint}[/dim]")

    def refresh_sidebar(self) -> None:
        app = self.app
        sidebar = self.query_one(Sidebar)
        sidebar.show_policies(app.policy_specs, app.spec.canonical if app.spec else None)
        sidebar.show_sites(app.shown.sites if app.shown else [])
        scope = self.screen.name_scope()
        sidebar.names_scope(scope.function if scope else None)
        sidebar.show_names(
            app.analyses.names_seen(),
            app.name_states,
            app.shown.names if app.shown else [],
            app.name_judge.verdicts(app.target, app.shown, scope),
        )
        if app.analyses.pending is None:  # background work waits for the user's trace
            app.name_judge.judge(app.target, app.shown, scope)
