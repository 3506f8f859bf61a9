"""Provides the RematApp: loading and reloading the target, what the user
wants shown, and drawing its analysis into the main screen.

What the user asked for is one frozen value, `wanted` (app/wanted.py): keys,
lists and palette commands assign a new one and its watcher asks for the
analysis. Two controllers the App owns do the work and post messages back:
`analyses` (app/analyses.py: the cache, requests, bursts, the trace worker)
and `compiles` (app/compiles.py: `p`, the compile child). The main screen
(app/main_screen.py) holds the layout and the keys (app/keys.py); `run` is in
app/launch.py.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import replace

from textual import on, work
from textual.app import App
from textual.content import Content
from textual.css.query import NoMatches
from textual.markup import escape
from textual.reactive import var
from textual.widgets import Static

from remat_tui.app.analyses import Analyses
from remat_tui.app.codeview import CodeView
from remat_tui.app.commands import RematCommands
from remat_tui.app.compiles import CompileFailed, CompileReady, Compiles
from remat_tui.app.drawing import draw
from remat_tui.app.hangup import quit_on_hangup
from remat_tui.app.hangup import release as release_hangup
from remat_tui.app.hints import with_suggestion
from remat_tui.app.keys import APP_KEYS
from remat_tui.app.keys import BINDINGS as KEYS
from remat_tui.app.layout import Layout
from remat_tui.app.main_screen import MainScreen
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
from remat_tui.app.name_judge import NameJudge, NamesJudged
from remat_tui.app.reload import Reloader
from remat_tui.app.residual_table import ResidualTable
from remat_tui.app.screens import HelpScreen, PickScreen
from remat_tui.app.sidebar import Sidebar
from remat_tui.app.status import Activity, nothing_shown, summary
from remat_tui.app.wanted import Wanted, request_key
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config, parse_site_option
from remat_tui.errors import RematError
from remat_tui.report.units import human_bytes

NO_LINES: frozenset[int] = frozenset()


class RematApp(App):
    """remat-tui: what autodiff saves, and what a policy changes."""

    CSS_PATH = "app.tcss"
    TITLE = "remat-tui"
    COMMANDS = App.COMMANDS | {RematCommands}
    BINDINGS = APP_KEYS  # help and quit; the main screen has the rest

    wanted: var[Wanted] = var(Wanted(), always_update=True, init=False)
    """What the user asked to see; assigning it asks for that analysis."""

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
        # What the command line asked for, read when the first target starts.
        self.requested_policy = policy
        self.requested_device = device
        self.requested_sites = dict(parse_site_option(t) for t in sites)
        self.show_timings = show_timings
        self.target = None
        self.devices: list[str] = []
        self.policy_specs: list[str] = []
        self.name_states: dict[str, str] = {}  # R/S/O where name toggles apply (a view)
        self.analyses = Analyses(self)
        self.compiles = Compiles(self)
        self.shown = None
        self.sources: dict[str, list[str]] = {}
        self.source_file: str | None = None
        self.load_error: str | None = None  # set when the file could not be loaded
        self.last_export: str | None = None  # the export dialog offers it again
        # What the command line asked for and could not have (an unknown policy or
        # device): shown with the first analysis, which show_error(None) would hide.
        self.start_warnings: list[str] = []
        self.launch_warnings: list[str] = []  # those shown with the analysis on screen
        self.targets: dict = {}  # every target of the file, by name
        self.activity = Activity()  # what the status line says the app is doing
        self.reloader = Reloader(self)
        self.reloads = 0  # how many times the file was imported again (part of the key)
        self.widths = Layout(self)  # the layout for the terminal's width
        self.name_judge = NameJudge(self)  # names whose saving spares no recompute
        self.marked: tuple | None = None  # (analysis, reloads) marked as A by m, for v
        self.last_budget = ""  # the budget last typed for suggest (f), offered again

    # ---- layout -------------------------------------------------------------------------

    def get_default_screen(self) -> MainScreen:
        self.main_screen = MainScreen(id="_default")
        return self.main_screen

    def on_resize(self, event) -> None:
        self.widths.resize(event.size.width)

    def on_mount(self) -> None:
        self.set_interval(0.2, self.tick)  # 5 Hz: lively, yet leaves the GIL to the trace
        # Loading starts once the main screen's widgets are all mounted
        # (MainScreen.on_mount): what it loads is drawn into them.

    # ---- loading (JAX import and the target file, off the UI thread) --------------------

    @work(thread=True, group="load", exit_on_error=False)
    def load(self) -> None:
        try:
            self.post_message(Progress("importing JAX"))
            import jax  # noqa: F401  (the stage the status line names)

            from remat_tui.app.reload import import_targets
            from remat_tui.core.setup.devices import available_devices, device_label, resolve_device

            self.post_message(Progress(f"importing {self.path}"))
            targets, error, watched = import_targets(self.path)
            if error is not None:
                self.post_message(LoadFailed(error, watched))
                return
            devices = available_devices()  # local devices, then TPU topologies
            try:
                device = device_label(resolve_device(self.requested_device))
                device_error = None
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
        self.set_reactive(RematApp.wanted, replace(self.wanted, device=message.device))
        targets = self.targets = message.targets
        if message.device_error:
            self.show_error(message.device_error)
            self.start_warnings.append(message.device_error)
        from remat_tui.core.jaxcompat import untested_message

        if untested := untested_message():  # said once, with the first analysis
            self.start_warnings.append(untested)
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
        first = self.target is None
        self.target = target
        self.policy_specs = policies.builtin_specs() + list(target.policies)
        requested = self.wanted.policy if keep_policy else self.requested_policy
        try:
            policy = policies.parse(requested, target.policies).canonical
        except RematError as exc:  # e.g. a name the target does not declare: say so, go on
            message = with_suggestion(exc.message, requested, target.policies)
            self.start_warnings.append(f"{message} Showing {policies.AS_WRITTEN} instead.")
            policy = policies.AS_WRITTEN
        sites = self.wanted.sites
        if first and self.requested_sites:  # --site, checked and made canonical once
            try:
                sites = Config.make(sites=self.requested_sites, declared=target.policies).sites
            except RematError as exc:
                self.start_warnings.append(f"--site: {exc.message} Showing no override.")
        self.wanted = replace(self.wanted, target=target.name, policy=policy, sites=sites)
        self.update_title()
        if not keep_policy:
            self.query_one(ResidualTable).focus()

    # ---- what is wanted, and its analysis ---------------------------------------------

    @property
    def spec(self) -> policies.PolicySpec | None:
        """The outer policy wanted, parsed (None before a target is loaded)."""
        if self.target is None:
            return None
        text = self.wanted.policy
        if self._parsed is None or self._parsed[0] != text:
            self._parsed = (text, policies.parse(text, self.target.policies))
        return self._parsed[1]

    _parsed: tuple | None = None

    @property
    def device(self) -> str | None:
        return self.wanted.device

    @property
    def site_overrides(self) -> dict:
        return self.wanted.site_overrides

    @property
    def auto_compile(self) -> bool:
        return self.wanted.compiled

    def watch_wanted(self, old: Wanted, new: Wanted) -> None:
        if self.target is None:
            return
        if replace(old, compiled=new.compiled) == new and old.compiled != new.compiled:
            self.compiling_switched(new.compiled)  # `p` alone: nothing to trace
            return
        self.name_states = self.main_screen.scoped_states()
        key = self.key()
        cached = self.analyses.ask(key, self.baseline_key())
        if cached is not None:
            self.show(cached)
        else:
            self.activity.begin(f"tracing {key[1].label()}")
            self.name_judge.pause()  # the trace asked for first; judged once it is shown
        self.refresh_sidebar()

    def key(self, spec_text: str | None = None) -> tuple:
        """The request key of what is wanted (under `spec_text`, when given)."""
        wanted = self.wanted if spec_text is None else replace(self.wanted, policy=spec_text)
        return wanted.key(self.reloads)

    def baseline_key(self) -> tuple:
        """as_written everywhere: what the status line's change is measured against."""
        return self.wanted.baseline().key(self.reloads)

    def key_of(self, a) -> tuple | None:
        """The request key an analysis shown was made for."""
        return request_key(self.target.name, a.config, self.reloads) if self.target else None

    def apply_policy(self, text: str) -> None:
        """Want `text` as the outer policy (a bad spec: said, nothing asked)."""
        if self.target is None:
            return
        try:
            spec = policies.parse(text, self.target.policies)
        except RematError as exc:
            self.show_error(with_suggestion(exc.message, text, self.target.policies))
            return
        self.wanted = replace(self.wanted, policy=spec.canonical)

    def on_budget_typed(self, message) -> None:
        self.last_budget = message.text  # f offers it again (app/screens/suggest.py)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(KEYS))

    def on_analysis_ready(self, message: AnalysisReady) -> None:
        keep = (self.shown, self.analyses.cache.get(self.baseline_key()))
        if self.analyses.ready(message, keep):
            self.activity.end()
            self.show(message.analysis)
        elif self.shown is not None and message.key == self.baseline_key():
            self.update_status(self.shown)  # the baseline for the % difference arrived

    def on_analysis_failed(self, message: AnalysisFailed) -> None:
        if not self.analyses.failed(message):
            return
        self.activity.end()
        self.show_error(message.message)
        if self.shown is None:  # nothing to fall back on: say so, no stale spinner
            self.update_title()
            self.query_one("#status", Static).update(
                nothing_shown(bool(self.reloader.watched)), layout=False
            )
            return
        # What is wanted goes back to what is shown, in one step and asking
        # nothing (a device that failed, e.g. a topology libtpu cannot load,
        # would otherwise make every later policy fail the same way).
        self.set_reactive(RematApp.wanted, self.wanted.with_config(self.shown.config))
        self.name_states = self.main_screen.scoped_states()
        self.update_title()
        self.update_status(self.shown)
        self.refresh_sidebar()

    def notes_for(self, a) -> list[str]:
        """Why this configuration may change nothing (core/search/notes.py), measured
        against as_written when that analysis is at hand."""
        from remat_tui.core.search.notes import Baseline, notes_for

        base = self.analyses.cache.get(self.baseline_key())
        return notes_for(a, Baseline.of(base) if base is not None else None)

    # ---- compiling (p) ------------------------------------------------------------------

    def compiling_switched(self, on: bool) -> None:
        if on:
            self.notify("Compiling every analysis shown (p turns it off); nothing is run")
            self.compiles.switched_on()
            self.compile_shown()
        else:
            self.compiles.switched_off()
            self.notify("Compiling off: residual bytes lead again")
            if self.shown is not None:
                self.update_status(self.shown)

    def compile_shown(self) -> None:
        """Compile what is shown, unless compiling is off or it is known already."""
        if self.wanted.compiled and self.shown is not None and self.target is not None:
            self.compiles.compile(self.key_of(self.shown), self.target)

    def compiled_headline(self, a) -> str | None:
        """The compiled peak (or the compile's clock) for `a`; None with `p` off."""
        if not self.wanted.compiled:
            return None
        return self.compiles.headline(self.key_of(a), self.show_timings)

    def on_compile_ready(self, message: CompileReady) -> None:
        self.compiles.ready(message)
        if self.shown is not None and self.key_of(self.shown) == message.key:
            self.update_status(self.shown)

    def on_compile_failed(self, message: CompileFailed) -> None:
        if self.compiles.failed(message):
            self.show_error(
                f"compiling failed: {message.message}",
                hint="the analysis shown is this configuration's; only its compile "
                "failed (p turns compiling off)",
            )
            if self.shown is not None:  # the status line said "compiling…" until now
                self.update_status(self.shown)

    def on_unmount(self) -> None:
        self.reloader.stop()
        self.compiles.close()
        release_hangup(self)

    @on(Progress)
    def progress(self, message: Progress) -> None:
        if message.request is None or message.request == self.analyses.request:
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

    # ---- drawing an analysis -------------------------------------------------------------

    def show(self, a) -> None:
        self.shown = a
        self.show_error(None)
        drawings = self.analyses.drawings
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
        self.name_states = self.main_screen.scoped_states()  # the sites may be known only now
        # What the command line asked for and could not have is said with the
        # first analysis, and kept while it is shown (cautions are redrawn when
        # the Names verdicts arrive).
        self.launch_warnings, self.start_warnings = self.start_warnings, []
        self.show_cautions(a)
        self.refresh_sidebar()
        self.reloader.restore_view(a)
        self.analyses.ensure(self.baseline_key())  # the status line compares with it
        self.compile_shown()

    def show_cautions(self, a) -> None:
        """Warnings and notes above the panes, kept on screen with the analysis
        (not a toast that fades); none: the error line hidden."""
        saved_in_vain = self.name_judge.verdicts(self.target, a, self.main_screen.name_scope())
        cautions = [
            *(f"[b]warning:[/b] {escape(w)}" for w in [*self.launch_warnings, *a.warnings]),
            *(f"[b]note:[/b] {escape(n)}" for n in self.notes_for(a)),
            *(
                f"[b]note:[/b] {escape(why)}"
                for name, why in saved_in_vain.items()
                if self.name_states.get(name) == "save"
            ),
        ]
        self.show_error("\n".join(cautions) if cautions else None, warning=True)

    def on_names_judged(self, message: NamesJudged) -> None:
        self.name_judge.store(message)
        self.refresh_sidebar()
        error = self.query_one("#error", Static)
        showing_an_error = error.display and not error.has_class("-warning")
        if self.shown is not None and not showing_an_error:  # an error stays until it is fixed
            self.show_cautions(self.shown)

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
        source_lines = self.analyses.drawings[id(self.shown)].source_lines
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

    def update_title(self) -> None:
        policy = self.spec.canonical if self.spec else "?"
        name = f"{self.path}:{self.target.name}" if self.target else self.path
        # Fixed one-line widgets: layout=False spares a layout pass of the whole screen.
        self.query_one("#title", Static).update(
            f"[b]remat-tui[/b]  {escape(name)}  policy [b]{escape(policy)}[/b]  {self.device}",
            layout=False,
        )
        self.query_one(Sidebar).show_device(self.devices, self.device)

    def update_status(self, a) -> None:
        snippet = self.query_one("#snippet", Static)
        old = str(snippet.render())
        if old != a.python:
            # A layout pass (costly: it redraws every widget) only if the snippet
            # wraps onto a different number of lines.
            width = max(snippet.content_region.width, 1)
            lines = len(Content(a.python).wrap(width))
            snippet.update(a.python, layout=lines != len(Content(old).wrap(width)))
        self.query_one("#status", Static).update(self.status_text(a), layout=False)

    def status_text(self, a) -> str:
        base = self.analyses.cache.get(self.baseline_key())
        known = self.compiles.known.get(self.key_of(a)) if self.wanted.compiled else None
        devices = known.devices if known is not None else None
        return summary(a, base, self.show_timings, self.compiled_headline(a), devices=devices)

    def tick(self) -> None:
        """While a worker runs, say what it is doing and for how long; the UI keeps
        answering keys."""
        text = self.activity.text(self.show_timings, self.shown is not None)
        try:
            if text is not None:
                self.query_one("#status", Static).update(text, layout=False)
            elif self.shown is not None and self.analyses.pending is None:
                key = self.compiles.compiling  # the compile clock, while it runs
                if key is not None and key == self.key_of(self.shown):
                    self.query_one("#status", Static).update(
                        self.status_text(self.shown), layout=False
                    )
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
            if self.shown is not None
            else "nothing analysed yet"
        )
        error.update(f"[b]error:[/b] {escape(message)}\n[dim]{hint}[/dim]")

    # ---- sidebar: policies and names -----------------------------------------------------

    def known_names(self) -> list[str]:
        """Every checkpoint_name seen in any analysis of this session, first seen first."""
        return self.analyses.names_seen()

    def refresh_sidebar(self) -> None:
        sidebar = self.query_one(Sidebar)
        sidebar.show_policies(self.policy_specs, self.spec.canonical if self.spec else None)
        sidebar.show_sites(self.shown.sites if self.shown else [])
        scope = self.main_screen.name_scope()
        sidebar.names_scope(scope.function if scope else None)
        sidebar.show_names(
            self.known_names(),
            self.name_states,
            self.shown.names if self.shown else [],
            self.name_judge.verdicts(self.target, self.shown, scope),
        )
        if self.analyses.pending is None:  # background work waits for the user's trace
            self.name_judge.judge(self.target, self.shown, scope)
