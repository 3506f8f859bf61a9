"""Provides the RematApp: what the user wants shown, and which analysis is
shown (`show`), wired to the controllers that do the work.

What the user asked for is one frozen value, `wanted` (app/wanted.py): keys,
lists and palette commands assign a new one and its watcher asks for the
analysis. The controllers the App owns do the work and post messages back:
`startup` (app/startup.py: loading the file, starting a target), `analyses`
(app/analyses.py: the cache, requests, bursts, the trace worker), `compiles`
(app/compiles.py: `p`, the compile child) and `reloader` (app/reload.py).
The main screen (app/main_screen.py) holds the layout and the keys
(app/keys.py), and its `view` (app/shown_view.py) draws the analysis shown;
`run` is in app/launch.py.
"""

from __future__ import annotations

from dataclasses import replace

from textual import on
from textual.app import App
from textual.reactive import var

from remat_tui.app.analyses import Analyses
from remat_tui.app.commands import RematCommands
from remat_tui.app.compiles import CompileFailed, CompileReady, Compiles
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
from remat_tui.app.screens import HelpScreen
from remat_tui.app.startup import Startup
from remat_tui.app.status import Activity, nothing_shown
from remat_tui.app.wanted import Wanted, request_key
from remat_tui.core.setup import policies
from remat_tui.errors import RematError


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
        self.startup = Startup(self, name, policy, device, sites)  # what the command line asked
        self.show_timings = show_timings
        self.target = None
        self.devices: list[str] = []
        self.policy_specs: list[str] = []
        self.name_states: dict[str, str] = {}  # R/S/O where name toggles apply (a view)
        self.analyses = Analyses(self)
        self.compiles = Compiles(self)
        self.shown = None
        self.load_error: str | None = None  # set when the file could not be loaded
        self.last_export: str | None = None  # the export dialog offers it again
        # What the command line asked for and could not have (an unknown policy or
        # device): shown with the first analysis, which view.show_error(None) would hide.
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

    # ---- loading the file and starting a target (app/startup.py) -----------------------

    def load(self) -> None:
        self.startup.load()

    @on(TargetsLoaded)
    def targets_loaded(self, message: TargetsLoaded) -> None:
        self.startup.loaded(message)

    @on(LoadFailed)
    def load_failed(self, message: LoadFailed) -> None:
        self.startup.failed(message)

    def start(self, target, keep_policy: bool = False) -> None:
        """Analyse `target` (`keep_policy`: under what is wanted now, as after a reload)."""
        self.startup.start(target, keep_policy)

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
        self.view.refresh_sidebar()

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
            self.view.show_error(with_suggestion(exc.message, text, self.target.policies))
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
            self.view.update_status(self.shown)  # the baseline for the % difference arrived

    def on_analysis_failed(self, message: AnalysisFailed) -> None:
        if not self.analyses.failed(message):
            return
        self.activity.end()
        self.view.show_error(message.message)
        if self.shown is None:  # nothing to fall back on: say so, no stale spinner
            self.view.update_title()
            self.view.set_status(nothing_shown(bool(self.reloader.watched)))
            return
        # What is wanted goes back to what is shown, in one step and asking
        # nothing (a device that failed, e.g. a topology libtpu cannot load,
        # would otherwise make every later policy fail the same way).
        self.set_reactive(RematApp.wanted, self.wanted.with_config(self.shown.config))
        self.name_states = self.main_screen.scoped_states()
        self.view.update_title()
        self.view.update_status(self.shown)
        self.view.refresh_sidebar()

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
                self.view.update_status(self.shown)

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
            self.view.update_status(self.shown)

    def on_compile_failed(self, message: CompileFailed) -> None:
        if self.compiles.failed(message):
            self.view.show_error(
                f"compiling failed: {message.message}",
                hint="the analysis shown is this configuration's; only its compile "
                "failed (p turns compiling off)",
            )
            if self.shown is not None:  # the status line said "compiling…" until now
                self.view.update_status(self.shown)

    def on_unmount(self) -> None:
        self.reloader.stop()
        self.analyses.close()
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

    # ---- drawing an analysis (app/shown_view.py) ---------------------------------------

    @property
    def view(self):
        """What draws the shown analysis into the main screen's widgets."""
        return self.main_screen.view

    def show(self, a) -> None:
        """Show `a`: drawn, then what follows from it (the view the user had
        before a reload, the baseline for the status line's %, its compile)."""
        self.shown = a
        self.view.draw(a)
        self.reloader.restore_view(a)
        self.analyses.ensure(self.baseline_key())  # the status line compares with it
        self.compile_shown()

    def on_names_judged(self, message: NamesJudged) -> None:
        self.name_judge.store(message)
        self.view.names_judged()

    def tick(self) -> None:
        self.view.tick()
