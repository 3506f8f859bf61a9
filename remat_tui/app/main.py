"""Provides the RematApp: panes, residual table, sidebar, export, wired together.

Workers only call the core and post messages (app/messages.py); handlers here
change state and widgets. Analyses are cached per (target, policy, device).
"""

from __future__ import annotations

import contextlib
import gc
import os
import traceback
from functools import partial

from pygments.lexers import PythonLexer
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.markup import escape
from textual.widgets import Footer, Static

from remat_tui.app import cache as analysis_cache
from remat_tui.app.arguments import prepared
from remat_tui.app.codeview import CodeView
from remat_tui.app.commands import RematCommands, keep_typed
from remat_tui.app.drawing import TABLE_COLUMNS, Drawing, draw
from remat_tui.app.hangup import quit_on_hangup
from remat_tui.app.hangup import release as release_hangup
from remat_tui.app.layout import Layout
from remat_tui.app.lexer import JaxprLexer
from remat_tui.app.messages import (
    AnalysisFailed,
    AnalysisReady,
    FilesChanged,
    LoadFailed,
    Progress,
    Reloaded,
    ReloadFailed,
    TargetsLoaded,
)
from remat_tui.app.reload import Reloader
from remat_tui.app.residual_table import ResidualTable
from remat_tui.app.screens import ExportScreen, HelpScreen, PickScreen, export
from remat_tui.app.sidebar import Sidebar, next_state
from remat_tui.app.site_state import (
    next_site_policy,
    scope_states,
    site_scope,
    toggled_overrides,
)
from remat_tui.app.status import Activity, nothing_shown, summary
from remat_tui.app.suggest import with_suggestion
from remat_tui.core import policies
from remat_tui.core.config import Config, parse_site_option
from remat_tui.errors import RematError
from remat_tui.report.units import human_bytes

NO_LINES: frozenset[int] = frozenset()


class RematApp(App):
    """remat-tui: what autodiff saves, and what a policy changes."""

    CSS_PATH = "app.tcss"
    TITLE = "remat-tui"
    COMMANDS = App.COMMANDS | {RematCommands}
    BINDINGS = [
        Binding("0", "policy(0)", "policy", key_display="0-9"),
        *(Binding(str(i), f"policy({i})", show=False) for i in range(1, 10)),
        Binding("space", "cycle_name", "cycle name"),
        Binding("n", "focus_names", "names", show=False),
        Binding("s", "focus_sites", "sites", show=False),
        Binding("r", "focus_residuals", "residuals", show=False),
        Binding("o", "sort_residuals", "sort by bytes", show=False),
        Binding("c", "compare", "compare"),
        Binding("t", "pick_target", "target", show=False),
        Binding(
            "b",
            "toggle_sidebar",
            "lists",
            tooltip="hide or show the sidebar's lists (hidden below 100 columns)",
        ),
        Binding("d", "pick_device", "device"),
        Binding("e", "export", "export"),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
        # Not Textual's "press q to quit" hint: here ctrl+c quits, as in a shell
        # (a focused text field still copies with it; the app binding comes after).
        Binding("ctrl+c", "quit", "quit", show=False),
    ]

    def __init__(
        self,
        path: str,
        name: str | None = None,
        policy: str = "as_written",
        device: str | None = None,
        show_timings: bool = True,
        sites: list[str] | tuple[str, ...] = (),
    ):
        super().__init__()
        self.path = path
        self.target_name = name
        self.requested_policy = policy
        self.device = device
        self.show_timings = show_timings
        self.target = None
        self.devices: list[str] = []
        self.policy_specs: list[str] = []
        self.spec: policies.PolicySpec | None = None
        self.name_states: dict[str, str] = {}
        # Site overrides ({site id or function name: spec}), from --site and the Sites list.
        self.site_overrides: dict = dict(parse_site_option(t) for t in sites)
        self.cache: dict[tuple, object] = {}  # app/cache.py: LRU, at most LIMIT analyses
        self.drawings: dict[int, Drawing] = {}  # by id() of a cached Analysis
        self.shown = None
        self.request = 0
        self.pending: tuple | None = None
        self.pending_since = 0.0
        self.sources: dict[str, list[str]] = {}
        self.source_file: str | None = None
        self.load_error: str | None = None  # set when the file could not be loaded
        self.last_export: str | None = None  # the export dialog offers it again
        # What the command line asked for and could not have (an unknown policy or
        # device): shown with the first analysis, which show_error(None) would hide.
        self.start_warnings: list[str] = []
        self.targets: dict = {}  # every target of the file, by name
        self.activity = Activity()  # what the status line says the app is doing
        self.reloader = Reloader(self)
        self.reloads = 0  # how many times the file was imported again (part of the key)
        self.widths = Layout(self)  # the layout for the terminal's width

    # ---- layout -------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(f"remat-tui  {self.path}  loading JAX…", id="title")
        with Horizontal(id="body"):
            yield Sidebar(id="sidebar")
            with Vertical(id="main"):
                yield Static("", id="error")
                with Horizontal(id="panes"):
                    yield CodeView(JaxprLexer(), id="forward")
                    yield CodeView(JaxprLexer(), id="backward")
                with Horizontal(id="lower"):
                    yield ResidualTable(TABLE_COLUMNS, id="residuals")
                    yield CodeView(PythonLexer(), id="source")
        yield Static("", id="snippet", markup=False)
        yield Static(
            "Loading JAX… (the first import takes a few seconds)", id="status", markup=False
        )
        yield Footer()

    def on_resize(self, event) -> None:
        self.widths.resize(event.size.width)

    def on_mount(self) -> None:
        self.query_one("#forward").border_title = "forward (vjp)"
        self.query_one("#backward").border_title = "backward"
        self.query_one("#residuals").border_title = "Residuals"
        self.query_one("#source").border_title = "Source"
        self.query_one("#error").display = False
        self.set_interval(0.2, self.tick)  # 5 Hz: lively, yet leaves the GIL to the trace
        self.load()

    # ---- loading (JAX import and the target file, off the UI thread) --------------------

    @work(thread=True, group="load", exit_on_error=False)
    def load(self) -> None:
        try:
            self.post_message(Progress("importing JAX"))
            import jax

            from remat_tui.app.reload import import_targets
            from remat_tui.core.devices import device_label, resolve_device

            self.post_message(Progress(f"importing {self.path}"))
            targets, error, watched = import_targets(self.path)
            if error is not None:
                self.post_message(LoadFailed(error, watched))
                return
            devices = [device_label(d) for d in jax.devices()]
            try:
                device, device_error = device_label(resolve_device(self.device)), None
            except RematError as exc:
                device, device_error = devices[0], f"{exc.message} Using {devices[0]}."
            self.post_message(TargetsLoaded(targets, devices, device, device_error, watched))
        except RematError as exc:
            self.post_message(LoadFailed(exc.message))
        except Exception as exc:  # our bug: say so, keep the app alive
            self.log.error(traceback.format_exc())
            self.post_message(LoadFailed(f"internal error while loading: {exc!r}"))

    @on(TargetsLoaded)
    def targets_loaded(self, message: TargetsLoaded) -> None:
        quit_on_hangup(self)  # JAX is loaded now: undo its ignoring SIGHUP
        self.activity.end()
        self.load_error = None
        self.reloader.watch(message.watched)
        self.devices = message.devices
        self.device = message.device
        targets = self.targets = message.targets
        if message.device_error:
            self.show_error(message.device_error)
            self.start_warnings.append(message.device_error)
        if self.target_name is not None and self.target_name not in targets:
            self.show_error(
                f"no target named {self.target_name!r} in {self.path}; "
                f"targets: {', '.join(targets)}. Pick one."
            )
            self.target_name = None
        if self.target_name is None and len(targets) > 1:
            self.query_one("#title", Static).update(
                f"remat-tui  {escape(self.path)}  pick a target", layout=False
            )
            self.query_one("#status", Static).update("Pick a target (escape quits)", layout=False)

            def picked(name: str | None) -> None:
                if name is None:
                    self.exit()
                else:
                    self.start(targets[name])

            self.push_screen(
                PickScreen(f"{self.path} has {len(targets)} targets: pick one", list(targets)),
                picked,
            )
        else:
            self.start(targets[self.target_name or next(iter(targets))])

    @on(LoadFailed)
    def load_failed(self, message: LoadFailed) -> None:
        quit_on_hangup(self)
        self.activity.end()
        self.load_error = message.message
        self.reloader.watch(message.watched)
        self.query_one("#title", Static).update(f"remat-tui  {escape(self.path)}  (not loaded)")
        how = "save the file to load it again" if self.reloader.watched else "fix the file"
        self.query_one("#status", Static).update(f"Not loaded: {how} · q quits", layout=False)
        self.show_error(message.message)

    def start(self, target, keep_policy: bool = False) -> None:
        """Analyse `target` under the requested policy (`keep_policy`: the current
        one, names and site overrides included, as after a reload)."""
        self.target = target
        self.policy_specs = policies.builtin_specs() + list(target.policies)
        current = self.spec.canonical if keep_policy and self.spec else None
        requested = current or self.requested_policy
        try:
            policies.parse(requested, target.policies)
        except RematError as exc:  # e.g. a name the target does not declare: say so, go on
            message = with_suggestion(exc.message, requested, target.policies)
            self.start_warnings.append(f"{message} Showing {policies.AS_WRITTEN} instead.")
            requested = policies.AS_WRITTEN
        self.apply_policy(requested)
        self.update_title()
        if not keep_policy:
            self.query_one(ResidualTable).focus()

    def on_unmount(self) -> None:
        self.reloader.stop()
        release_hangup(self)

    @on(Progress)
    def progress(self, message: Progress) -> None:
        if message.request is None or message.request == self.request:
            self.activity.begin(message.what)
            self.tick()

    @on(FilesChanged)
    def files_changed(self, message: FilesChanged) -> None:
        if self.target is None and not self.targets:  # never loaded: load as at start
            self.load()
        else:
            self.reloader.saved(message.paths)

    @on(Reloaded)
    def reloaded(self, message: Reloaded) -> None:
        if not self.reloader.reloaded(message):
            self.load()

    @on(ReloadFailed)
    def reload_failed(self, message: ReloadFailed) -> None:
        self.reloader.failed(message)

    # ---- requests, the cache, and the worker ---------------------------------------------

    def key(self, spec_text: str, sites: dict | None = None) -> tuple:
        """(target, Config): what an analysis is asked for, and the cache key."""
        overrides = self.site_overrides if sites is None else sites
        config = Config(spec_text, Config().with_sites(overrides).sites, self.device)
        return (self.target.name, config, self.reloads)

    def baseline_key(self) -> tuple:
        """as_written everywhere: what the status line's change is measured against."""
        return self.key(policies.AS_WRITTEN, sites={})

    def apply_policy(self, text: str) -> None:
        """Parse and show a policy: from the cache at once, or traced in the background."""
        if self.target is None:
            return
        try:
            spec = policies.parse(text, self.target.policies)
        except RematError as exc:
            self.show_error(with_suggestion(exc.message, text, self.target.policies))
            return
        self.spec = spec
        self.name_states = self.scoped_states()
        key = self.key(spec.canonical)
        self.request += 1
        if key in self.cache:
            self.pending = None
            self.show(analysis_cache.touch(self.cache, key))
        else:
            self.pending = key
            self.activity.begin(f"tracing {key[1].label()}")
            self.analyse(self.request, key, spec)
        self.refresh_sidebar()

    @work(thread=True, group="analysis", exit_on_error=False)
    def analyse(self, request: int, key: tuple, spec) -> None:
        from remat_tui.core.analysis import Cancelled, analyze

        def stage(what: str) -> None:
            self.post_message(Progress(what, request if request >= 0 else None))

        if request != self.request and key != self.baseline_key():
            return  # superseded while it waited for a thread: a burst of keys traces once
        try:
            # Example arguments are built once per target, not once per policy.
            target = prepared(self.target, stage if request == self.request else None)
            if request == self.request:
                stage(f"tracing {key[1].label()}")
            result = analyze(
                target,
                config=key[1],
                cancelled=lambda: request != self.request and key != self.baseline_key(),
            )
        except Cancelled:
            return
        except RematError as exc:
            self.post_message(AnalysisFailed(request, key, exc.message))
            return
        except Exception as exc:  # our bug: report it in place, keep the last good state
            self.log.error(traceback.format_exc())
            self.post_message(AnalysisFailed(request, key, f"internal error: {exc!r}"))
            return
        self.post_message(AnalysisReady(request, key, result))

    @on(AnalysisReady)
    def analysis_ready(self, message: AnalysisReady) -> None:
        analysis_cache.remember(
            self.cache,
            self.drawings,
            message.key,
            message.analysis,
            keep=(self.shown, self.cache.get(self.baseline_key())),
        )
        self.call_after_refresh(self.settle_memory)
        if message.request == self.request:
            self.pending = None
            self.activity.end()
            self.show(message.analysis)
        elif self.shown is not None and message.key == self.baseline_key():
            self.update_status(self.shown)  # the baseline for the % difference arrived

    def settle_memory(self) -> None:
        """Once the new analysis is on screen: collect the trace's garbage, then move
        what is left (the cached analyses, alive as long as the app) out of the
        collector's sight, so its full collections, which would otherwise walk
        every cached jaxpr equation, stop stalling frames and traces."""
        gc.collect()
        gc.freeze()

    @on(AnalysisFailed)
    def analysis_failed(self, message: AnalysisFailed) -> None:
        if message.request == self.request:
            self.pending = None
            self.activity.end()
            self.show_error(message.message)
            if self.shown is None:  # nothing to fall back on: say so, no stale spinner
                self.update_title()
                self.query_one("#status", Static).update(
                    nothing_shown(bool(self.reloader.watched)), layout=False
                )
            else:  # the sidebar goes back to what is shown
                self.spec = policies.parse(self.shown.policy, self.target.policies)
                self.site_overrides = self.shown.config.site_overrides
                self.name_states = self.scoped_states()
                self.update_status(self.shown)
                self.refresh_sidebar()

    def ensure_baseline(self) -> None:
        """Trace as_written too (once per device): the status line compares with it."""
        key = self.baseline_key()
        if key not in self.cache and self.pending is None:
            self.analyse(-1, key, policies.parse(policies.AS_WRITTEN))

    # ---- drawing an analysis -------------------------------------------------------------

    def show(self, a) -> None:
        self.shown = a
        self.show_error(None)
        drawing = self.drawings.get(id(a))
        if drawing is None:
            drawing = self.drawings[id(a)] = draw(a)
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
        table.border_title = f"Residuals  {len(a.residuals)} · {human_bytes(a.totals.bytes)}"
        self.select_residual(table.selected if a.residuals else -1)
        cautions = [
            *(f"[b]warning:[/b] {escape(w)}" for w in [*self.start_warnings, *a.warnings]),
            *(f"[b]note:[/b] {escape(n)}" for n in self.notes_for(a)),
        ]
        if cautions:  # kept on screen with the analysis, not a toast that fades
            self.show_error("\n".join(cautions), warning=True)
        self.start_warnings = []
        self.update_title()
        self.update_status(a)
        self.name_states = self.scoped_states()  # the sites may be known only now
        self.refresh_sidebar()
        self.reloader.restore_view(a)
        self.ensure_baseline()

    def select_residual(self, index: int) -> None:
        a = self.shown
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
        self.show_source(src.file if src else self.target.file, src.line - 1 if src else None)

    def show_source(self, path: str | None, line: int | None) -> None:
        """Show `path` in the source pane, its residual-producing lines marked, and
        select `line` (0-based) if given."""
        pane = self.query_one("#source", CodeView)
        source_lines = self.drawings[id(self.shown)].source_lines
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

    @on(ResidualTable.Highlighted)
    def row_highlighted(self, event: ResidualTable.Highlighted) -> None:
        self.select_residual(event.index)

    def notes_for(self, a) -> list[str]:
        """Why this configuration may change nothing (core/notes.py), measured
        against as_written when that analysis is at hand."""
        from remat_tui.core.notes import Baseline, notes_for

        base = self.cache.get(self.baseline_key())
        return notes_for(a, Baseline.of(self.target, base) if base is not None else None)

    def update_title(self) -> None:
        policy = self.spec.canonical if self.spec else "?"
        name = f"{self.path}:{self.target.name}" if self.target else self.path
        # Fixed one-line widgets: layout=False spares a layout pass of the whole screen.
        self.query_one("#title", Static).update(
            f"[b]remat-tui[/b]  {escape(name)}  policy [b]{escape(policy)}[/b]  {self.device}",
            layout=False,
        )
        self.query_one(Sidebar).show_device(self.device)

    def update_status(self, a) -> None:
        snippet = self.query_one("#snippet", Static)
        old = str(snippet.render())
        if old != a.python:
            # A layout pass (costly: it redraws every widget) only if the snippet
            # wraps onto a different number of lines.
            width = max(snippet.content_region.width, 1)
            lines = len(Content(a.python).wrap(width))
            snippet.update(a.python, layout=lines != len(Content(old).wrap(width)))
        base = self.cache.get(self.baseline_key())
        text = summary(a, base, self.show_timings)
        self.query_one("#status", Static).update(text, layout=False)

    def tick(self) -> None:
        """While a worker runs, say what it is doing and for how long; the UI keeps
        answering keys."""
        text = self.activity.text(self.show_timings, self.shown is not None)
        if text is not None:
            self.query_one("#status", Static).update(text, layout=False)

    def show_error(self, message: str | None, warning: bool = False) -> None:
        """An error (or, with `warning`, cautions about the shown analysis: markup,
        user strings escaped) above the panes, until the next analysis is shown;
        None hides it."""
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
        hint = (
            "still showing the last good analysis; save the file, or change the policy "
            "or device, to try again"
            if self.shown is not None
            else "nothing analysed yet"
        )
        error.update(f"[b]error:[/b] {escape(message)}\n[dim]{hint}[/dim]")

    # ---- sidebar: policies and names -----------------------------------------------------

    def known_names(self) -> list[str]:
        """Every checkpoint_name seen in any analysis of this session, first seen first."""
        seen: dict[str, None] = {}
        for a in self.cache.values():
            for n in a.names:
                seen.setdefault(n.name)
        return list(seen)

    def refresh_sidebar(self) -> None:
        sidebar = self.query_one(Sidebar)
        sidebar.show_policies(self.policy_specs, self.spec.canonical if self.spec else None)
        sidebar.show_sites(self.shown.sites if self.shown else [])
        scope = self.name_scope()
        sidebar.names_scope(scope.function if scope else None)
        sidebar.show_names(
            self.known_names(), self.name_states, self.shown.names if self.shown else []
        )

    # ---- sites ---------------------------------------------------------------------------

    def name_scope(self):
        """Where name toggles apply: every site of the highlighted site's function,
        or the outer policy (None) when the function has no sites."""
        return site_scope(self.shown, self.query_one(Sidebar).highlighted_site)

    def apply_site(self, site: int | str, text: str | None) -> None:
        """Set a site's policy (None: as written in the code) and analyse."""
        if self.target is None:
            return
        try:
            spec = None if text is None else policies.parse(text, self.target.policies).canonical
        except RematError as exc:
            self.show_error(f"site {site}: {exc.message}")
            return
        overrides = dict(self.site_overrides)
        overrides.pop(site, None)
        if spec is not None:
            overrides[site] = spec
        self.site_overrides = overrides
        self.apply_policy(self.spec.canonical if self.spec else self.requested_policy)

    def cycle_site(self, site_id: int) -> None:
        """as in the code → each listed policy → as in the code."""
        site = next((s for s in self.shown.sites if s.id == site_id), None) if self.shown else None
        if site is not None:
            self.apply_site(site_id, next_site_policy(site, self.policy_specs))

    @on(Sidebar.SiteChosen)
    def site_chosen(self, message: Sidebar.SiteChosen) -> None:
        self.cycle_site(message.site)

    @on(Sidebar.SiteHighlighted)
    def site_highlighted(self, message: Sidebar.SiteHighlighted) -> None:
        self.name_states = self.scoped_states()
        self.refresh_sidebar()

    def scoped_states(self) -> dict[str, str]:
        return scope_states(
            self.name_scope(),
            self.spec,
            self.known_names(),
            self.site_overrides,
            self.target.policies if self.target else None,
        )

    @on(Sidebar.PolicyChosen)
    def policy_chosen(self, message: Sidebar.PolicyChosen) -> None:
        self.apply_policy(message.spec)

    @on(Sidebar.NameChosen)
    def name_chosen(self, message: Sidebar.NameChosen) -> None:
        self.cycle_name(message.name)

    def cycle_name(self, name: str) -> None:
        states = dict(self.name_states)
        states[name] = next_state(states.get(name, "recompute"))
        saved = [n for n, s in states.items() if s == "save"]
        offloaded = [n for n, s in states.items() if s == "offload"]
        composed = policies.names_policy(saved, offloaded).canonical
        scope = self.name_scope()
        if scope is None:
            self.apply_policy(composed)
        else:  # the checkpoint in the code is the lever: set it at every site of the function
            self.site_overrides = toggled_overrides(
                self.site_overrides, self.shown, scope.function, composed
            )
            self.apply_policy(self.spec.canonical if self.spec else self.requested_policy)

    # ---- actions -------------------------------------------------------------------------

    def action_policy(self, index: int) -> None:
        sidebar = self.query_one(Sidebar)
        if index >= len(self.policy_specs):
            last = len(self.policy_specs) - 1
            self.notify(
                f"no policy {index}: the list has 0-{last} (ctrl+p to type any spec)"
                if self.policy_specs
                else "no target is loaded yet",
                severity="warning",
            )
            return
        if sidebar.sites_focused and sidebar.highlighted_site is not None:
            self.apply_site(sidebar.highlighted_site, self.policy_specs[index])
        else:
            self.apply_policy(self.policy_specs[index])

    def action_cycle_name(self) -> None:
        sidebar = self.query_one(Sidebar)
        if self.target is None:
            self.notify("no target is loaded", severity="warning")
        elif sidebar.sites_focused and sidebar.highlighted_site is not None:
            self.cycle_site(sidebar.highlighted_site)
        elif not sidebar.has_names:
            self.notify("this function defines no checkpoint_name", severity="warning")
        elif not sidebar.names_focused:
            # A stray space elsewhere must not start a trace: go to the names first.
            self.widths.reveal_sidebar()
            sidebar.focus_names()
            self.notify("Names: ↑ ↓ pick a name, space cycles recompute → save → offload")
        elif (name := sidebar.highlighted_name) is not None:
            self.cycle_name(name)

    def action_focus_names(self) -> None:
        self.widths.reveal_sidebar()
        self.query_one(Sidebar).focus_names()

    def action_toggle_sidebar(self) -> None:
        self.widths.toggle_sidebar()

    def action_pick_target(self) -> None:
        """Open another target of the same file (its analyses are cached apart)."""
        if len(self.targets) < 2:
            self.notify(f"{self.path} defines one target", severity="warning")
            return
        current = self.target.name if self.target else None

        def picked(name: str | None) -> None:
            if name is not None and name != current:
                before = list(self.policy_specs)
                self.start(self.targets[name])
                keep_typed(self, before)

        title = f"{self.path}: {len(self.targets)} targets"
        self.push_screen(PickScreen(title, list(self.targets), current), picked)

    def action_focus_sites(self) -> None:
        self.widths.reveal_sidebar()
        if not self.query_one(Sidebar).focus_sites():
            self.notify("this function applies no jax.checkpoint: no sites", severity="warning")

    def action_compare(self) -> None:
        """Every configuration's costs, in a screen of its own; a row opens here."""
        if self.target is None or self.spec is None:
            self.notify("nothing is loaded yet", severity="warning")
            return
        from remat_tui.app.screens.compare import CompareScreen

        base = self.key(policies.AS_WRITTEN)[1]
        self.push_screen(CompareScreen(self.target, base), self.open_config)

    def open_config(self, config: Config | None) -> None:
        """Show `config` (outer policy, site overrides, device) in the main screen."""
        if config is None:
            return
        self.site_overrides = config.site_overrides
        if config.device:
            self.device = config.device
        self.apply_policy(config.policy)

    def action_sort_residuals(self) -> None:
        """Residuals by bytes, largest first, or back in JAX's order."""
        table = self.query_one(ResidualTable)
        table.by_bytes = not table.by_bytes
        order = "by bytes, largest first" if table.by_bytes else "in JAX's order"
        table.border_subtitle = "sorted by bytes (o)" if table.by_bytes else ""
        self.notify(f"Residuals {order} (o toggles)")

    def action_focus_residuals(self) -> None:
        self.query_one(ResidualTable).focus()

    def action_pick_device(self) -> None:
        if not self.devices:
            return

        def chosen(device: str | None) -> None:
            if device and device != self.device:
                self.device = device
                self.apply_policy(self.spec.canonical if self.spec else self.requested_policy)

        self.push_screen(
            PickScreen("Device (analyses are cached per device)", self.devices, self.device), chosen
        )

    def action_export(self) -> None:
        if self.shown is None:
            self.notify("nothing to export yet", severity="warning")
            return
        default = self.last_export or f"remat-{self.shown.target_name}.html"
        self.push_screen(ExportScreen(default), partial(export, self))

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.BINDINGS))


def run(
    path: str,
    name: str | None,
    policy: str = "as_written",
    device: str | None = None,
    sites: list[str] | tuple[str, ...] = (),
) -> int:
    import asyncio
    import sys
    import threading

    app = RematApp(path, name, policy=policy, device=device, sites=sites)
    with _stdout_off_the_screen():
        # Our own loop: asyncio.run (Python 3.12+) would wait for every worker
        # thread at the end, a trace the user quit during included.
        app.run(loop=asyncio.new_event_loop())
    code = 2 if app.load_error else 0  # bad input exits 2, as in the headless CLI
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    if any(t.is_alive() and not t.daemon for t in others):
        # A trace still running (threads cannot be stopped): Python would wait
        # for it at exit, seconds after the screen closed. Nothing of it is wanted.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


@contextlib.contextmanager
def _stdout_off_the_screen():
    """Textual draws on stderr; a target that writes to file descriptor 1 (a C
    library, os.write; print() is captured by Textual) would draw over the app
    when both are the terminal. Such writes are dropped while the app runs."""
    import sys

    if sys.platform == "win32" or not (os.isatty(1) and os.isatty(2)):
        yield  # Windows draws on stdout; textual-serve talks over it
        return
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
