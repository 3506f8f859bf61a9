"""Provides the RematApp: the app's state (what is loaded, what the user wants
shown, which analysis is shown), its lifecycle (loading, reloading, the
workers' answers) and the wiring of the controllers that do the work.

What the user asked for is one frozen value, `wanted` (app/state/wanted.py):
the lists, the palette and the keys post what they want (app/messages.py, the
Sidebar's messages) or run the App's actions (app/keys.py); `asking` makes
that the next `wanted`, whose watcher asks for the analysis. The other
controllers (app/controllers/) do the work and post messages back: `startup`
(loading the file), `analyses` (the cache, requests, bursts, the trace
worker), `compiles` (`p`, the compile child), `reloader` and `name_judge`;
`painter` decides what the main screen says and `opening` opens the screens
over it. Each is given what it needs; those that read the state get it as
one value, a Scene (app/state/scene.py). The main screen
(app/screens/main_screen.py) reads none of it: its `view`
(app/widgets/shown_view.py) paints what it is given, and the screens the keys
open (app/screens/) get their inputs as arguments. `run` is in app/launch.py.
"""

from __future__ import annotations

from dataclasses import replace

from textual import on
from textual.app import App
from textual.css.query import NoMatches
from textual.markup import escape
from textual.reactive import var

from remat_tui.app.commands import PaletteChoices, RematCommands
from remat_tui.app.controllers.analyses import Analyses
from remat_tui.app.controllers.asking import Asking
from remat_tui.app.controllers.compiles import CompileFailed, CompileReady, Compiles
from remat_tui.app.controllers.hangup import quit_on_hangup
from remat_tui.app.controllers.hangup import release as release_hangup
from remat_tui.app.controllers.layout import Layout
from remat_tui.app.controllers.name_judge import NameJudge, NamesJudged
from remat_tui.app.controllers.opening import Opening
from remat_tui.app.controllers.painting import Painter
from remat_tui.app.controllers.reload import Reloader
from remat_tui.app.controllers.startup import Startup
from remat_tui.app.keys import APP_KEYS
from remat_tui.app.messages import (
    AnalysisFailed,
    AnalysisReady,
    ErrorShown,
    FilesChanged,
    LoadFailed,
    NameCycled,
    PolicyWanted,
    Progress,
    Reloaded,
    ReloadFailed,
    ScreenReady,
    SiteWanted,
    TargetsLoaded,
    TargetWanted,
)
from remat_tui.app.screens import HelpScreen, PickScreen
from remat_tui.app.screens.main_screen import MainScreen
from remat_tui.app.state.scene import Scene
from remat_tui.app.state.status import Activity, nothing_shown
from remat_tui.app.state.wanted import Wanted, request_key
from remat_tui.app.widgets.sidebar import Sidebar
from remat_tui.core.setup import policies


class RematApp(App):
    """remat-tui: what autodiff saves, and what a policy changes."""

    CSS_PATH = "app.tcss"
    TITLE = "remat-tui"
    COMMANDS = App.COMMANDS | {RematCommands}
    BINDINGS = APP_KEYS  # help and quit; the main screen lists the rest

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
        self.show_timings = show_timings
        self.startup = Startup(self, path, name, policy, device, sites)  # the command line's
        self.target = None
        self.targets: dict = {}  # every target of the file, by name
        self.devices: list[str] = []
        self.listed: dict[str, policies.PolicySpec] = {}  # the Policies list, parsed once
        self.shown = None
        self.load_error: str | None = None  # set when the file could not be loaded
        # What the command line asked for and could not have (an unknown policy or
        # device): shown with the first analysis, which view.show_error(None) would hide.
        self.start_warnings: list[str] = []
        self.launch_warnings: list[str] = []  # those shown with the analysis on screen
        self.activity = Activity()  # what the status line says the app is doing
        self.reloads = 0  # how many times the file was imported again (part of the key)
        self.analyses = Analyses(self)
        self.compiles = Compiles(self)
        self.reloader = Reloader(self, path)
        self.widths = Layout(self)  # the layout for the terminal's width
        self.name_judge = NameJudge(self)  # names whose saving spares no recompute
        view = lambda: self.view  # noqa: E731  (the main screen is made after the App)
        self.painter = Painter(
            view, self.analyses, self.compiles, self.name_judge, self.activity, show_timings
        )  # what the main screen says, from a Scene of the state
        self.asking = Asking(self.scene, self.want, self.painter.name_states, view)
        # the screens the keys open over the main screen, and what they give back
        self.opening = Opening(self, self.asking.config, self.open_line)

    # ---- layout ----------------------------------------------------------------------------------

    def get_default_screen(self) -> MainScreen:
        self.main_screen = MainScreen(self.path, self.widths, id="_default")
        return self.main_screen

    @property
    def view(self):
        """What paints the main screen's widgets (app/widgets/shown_view.py)."""
        return self.main_screen.view

    def on_resize(self, event) -> None:
        self.widths.resize(event.size.width)

    def on_mount(self) -> None:
        self.set_interval(0.2, self.tick)  # 5 Hz: lively, yet leaves the GIL to the trace

    @on(ScreenReady)
    def load(self) -> None:
        """Import JAX and the file (once the main screen's widgets are mounted:
        what it loads is drawn into them)."""
        self.startup.load()

    # ---- loading the file and starting a target --------------------------------------------------

    @on(TargetsLoaded)
    def targets_loaded(self, message: TargetsLoaded) -> None:
        """The file is imported: start its target, or ask which when it has several."""
        quit_on_hangup(self)  # JAX is loaded now: undo its ignoring SIGHUP
        self.activity.end()
        self.load_error = None
        self.reloader.watch(message.watched)
        self.devices = message.devices
        self.set_reactive(RematApp.wanted, self.wanted.with_device(message.device))
        self.targets = message.targets
        if message.device_error:
            self.view.show_error(message.device_error)
        self.start_warnings += self.startup.warnings(message.device_error)
        name, error = self.startup.choose(message.targets)
        if error is not None:
            self.view.show_error(error)
        if name is not None:
            self.start(message.targets[name])
            return
        self.view.show_title(f"remat-tui  {escape(self.path)}  pick a target")
        self.view.set_status("Pick a target (escape quits)")

        def picked(chosen: str | None) -> None:
            self.exit() if chosen is None else self.start(self.targets[chosen])

        count = f"{len(self.targets)} target{'s' if len(self.targets) > 1 else ''}"
        title = f"{self.path} has {count}: pick one"
        self.push_screen(PickScreen(title, list(self.targets), error=error), picked)

    @on(LoadFailed)
    def load_failed(self, message: LoadFailed) -> None:
        """The file could not be loaded: say why in place, and wait for a save."""
        quit_on_hangup(self)
        self.activity.end()
        self.load_error = message.message
        self.reloader.watch(message.watched)
        self.view.show_title(f"remat-tui  {escape(self.path)}  (not loaded)", layout=True)
        how = "save the file to load it again" if self.reloader.watched else "fix the file"
        self.view.set_status(f"Not loaded: {how} · q quits")
        self.view.show_error(message.message)

    def start(self, target, keep_policy: bool = False, keep_typed: bool = False) -> None:
        """Analyse `target` under the policy the command line asked for
        (`keep_policy`: what is wanted now, names and site overrides included,
        as after a reload); `keep_typed`: the specs typed in the palette stay
        listed where they still parse."""
        first, typed = self.target is None, list(self.listed.values())
        self.target = target
        self.main_screen.target_loaded = True
        self.listed = self.startup.listed(target)
        config, warnings = self.startup.request(target, self.wanted, keep_policy, first)
        self.start_warnings += warnings
        self.wanted = replace(self.wanted, target=target.name, config=config)
        self.paint_title()
        if not keep_policy:
            self.main_screen.query_one("#residuals").focus()
        if keep_typed:
            for spec in self.startup.still_parsing(typed, target, self.listed):
                self.listed[spec.canonical] = spec
            self.paint_sidebar()

    @on(TargetWanted)
    def target_wanted(self, message: TargetWanted) -> None:
        self.start(self.targets[message.name])

    # ---- what is wanted, and its analysis --------------------------------------------------------

    def scene(self) -> Scene:
        """The state, as one value (app/state/scene.py), for the Painter and Asking."""
        return Scene(
            path=self.path,
            target=self.target,
            wanted=self.wanted,
            shown=self.shown,
            listed=self.listed,
            devices=tuple(self.devices),
            reloads=self.reloads,
            launch_warnings=tuple(self.launch_warnings),
            highlighted_site=self.main_screen.sidebar.highlighted_site,
        )

    @property
    def spec(self) -> policies.PolicySpec | None:
        """The outer policy wanted (None before a target is loaded)."""
        return self.wanted.spec if self.target is not None else None

    @property
    def device(self) -> str | None:
        return self.wanted.device

    @property
    def policy_specs(self) -> list[str]:
        """The Policies list: built-ins, the target's own, then specs typed."""
        return list(self.listed)

    @property
    def name_states(self) -> dict[str, str]:
        return self.painter.name_states(self.scene())

    def watch_wanted(self, old: Wanted, new: Wanted) -> None:
        if self.target is None:
            return
        same = old.target == new.target and old.config == new.config
        if same and (old.compiled, old.measured) != (new.compiled, new.measured):
            self.compiling_switched(old, new)  # `p` or `x` alone: nothing to trace
            return
        key = self.key()
        cached = self.analyses.ask(self.target, key, self.baseline_key())
        if cached is not None:
            self.show(cached)
        else:
            self.activity.begin(f"tracing {key[1].label()}")
            self.name_judge.pause()  # the trace asked for first; judged once it is shown
        self.paint_sidebar()

    def want(self, wanted: Wanted) -> None:
        self.wanted = wanted

    def key(self, policy: str | policies.PolicySpec | None = None) -> tuple:
        """The request key of what is wanted (under the outer `policy`, when given)."""
        wanted = self.wanted if policy is None else self.wanted.with_policy(policy)
        return wanted.key(self.reloads)

    def baseline_key(self) -> tuple:
        """as_written everywhere: what the status line's change is measured against."""
        return self.wanted.baseline().key(self.reloads)

    def key_of(self, a) -> tuple | None:
        """The request key an analysis shown was made for."""
        return request_key(self.target.name, a.config, self.reloads) if self.target else None

    # ---- what the lists, the keys and the palette ask for (app/controllers/asking.py) ------------

    @on(PolicyWanted)
    def policy_wanted(self, message: PolicyWanted) -> None:
        if message.listed and message.spec.canonical not in self.listed:
            self.listed[message.spec.canonical] = message.spec  # typed: a number key if free
        self.asking.policy(message.spec)

    @on(Sidebar.PolicyChosen)
    def policy_chosen(self, message: Sidebar.PolicyChosen) -> None:
        self.asking.policy(message.spec)

    @on(SiteWanted)
    def site_wanted(self, message: SiteWanted) -> None:
        self.asking.site(message.site, message.spec)

    @on(Sidebar.SiteChosen)
    def site_chosen(self, message: Sidebar.SiteChosen) -> None:
        self.asking.cycle_site(message.site)

    @on(NameCycled)
    @on(Sidebar.NameChosen)
    def name_chosen(self, message: NameCycled | Sidebar.NameChosen) -> None:
        self.asking.cycle_name(message.name)

    @on(Sidebar.SiteHighlighted)
    def site_highlighted(self) -> None:
        self.paint_sidebar()  # the name states there, and where toggles apply

    @on(Sidebar.DeviceChosen)
    def device_chosen(self, message: Sidebar.DeviceChosen) -> None:
        self.asking.device(message.device)

    @on(ErrorShown)
    def error_shown(self, message: ErrorShown) -> None:
        self.view.show_error(message.message)

    def action_policy(self, index: int) -> None:
        """Policy `index` of the list: outer, or at the site highlighted in a
        focused Sites list."""
        sidebar = self.main_screen.sidebar
        site = sidebar.highlighted_site if sidebar.sites_focused else None
        if (warning := self.asking.listed(index, site)) is not None:
            self.notify(warning, severity="warning")

    def action_toggle_compile(self) -> None:
        on = not self.wanted.compiled
        self.wanted = replace(self.wanted, compiled=on, measured=self.wanted.measured and on)

    def action_toggle_measure(self) -> None:
        """`x`: run each compiled step on its device and time it (`p` comes on with it)."""
        on = not self.wanted.measured
        self.wanted = replace(self.wanted, measured=on, compiled=self.wanted.compiled or on)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def palette_choices(self) -> PaletteChoices:
        """What the command palette offers over the main screen."""
        return PaletteChoices(
            policies=dict(self.listed),
            names=tuple(self.analyses.names_seen()),
            sites=tuple(self.shown.sites if self.shown else ()),
            targets=tuple(self.targets) if len(self.targets) > 1 else (),
            target=self.target.name if self.target else None,
            declared=self.target.policies if self.target else None,
        )

    # ---- the keys that open a screen over the main screen (app/controllers/opening.py) -----------

    def open_line(self, where: tuple[str, int, str | None] | None) -> None:
        """Show a user's line (from the memory screen) in the source pane, and
        select the buffer's residual (`R3`), else the first one made there."""
        if where is not None and self.shown is not None:
            self.view.open_line(*where)

    def on_budget_typed(self, message) -> None:
        self.opening.last_budget = message.text  # on the suggest or fit screen

    def shown_compile(self):
        """The compiled numbers of the analysis shown, when known."""
        return self.compiles.known.get(self.key_of(self.shown)) if self.shown else None

    async def action_compare(self) -> None:
        await self.opening.compare(self.target, self.wanted, self.show_timings)

    async def action_fit(self) -> None:
        await self.opening.fit(self.target, self.wanted, self.show_timings)

    async def action_suggest(self) -> None:
        known = self.shown_compile()
        await self.opening.suggest(self.target, self.wanted, self.shown, known, self.show_timings)

    def action_mark(self) -> None:
        self.opening.mark(self.shown, self.reloads)

    async def action_diff(self) -> None:
        name = self.target.name if self.target else None
        await self.opening.diff(self.shown, self.reloads, name, self.compiles.known)

    async def action_memory(self) -> None:
        shown = self.shown
        headline = self.painter.headline(self.scene(), shown) if shown is not None else None
        await self.opening.memory(shown, self.shown_compile(), self.wanted.compiled, headline)

    async def action_export(self) -> None:
        await self.opening.export(lambda: self.shown)

    async def action_pick_target(self) -> None:
        def start(name: str) -> None:
            self.start(self.targets[name], keep_typed=True)

        await self.opening.pick_target(self.path, list(self.targets), self.target, start)

    # ---- answers from the workers ----------------------------------------------------------------

    def on_analysis_ready(self, message: AnalysisReady) -> None:
        keep = (self.shown, self.analyses.cache.get(self.baseline_key()))
        if self.analyses.ready(message, keep):
            self.activity.end()
            self.show(message.analysis)
        elif self.shown is not None and message.key == self.baseline_key():
            self.paint_status(self.shown)  # the baseline for the % difference arrived

    def on_analysis_failed(self, message: AnalysisFailed) -> None:
        if not self.analyses.failed(message):
            return
        self.activity.end()
        self.view.show_error(message.message)
        if self.shown is None:  # nothing to fall back on: say so, no stale spinner
            self.paint_title()
            self.view.set_status(nothing_shown(bool(self.reloader.watched)))
            return
        # What is wanted goes back to what is shown, in one step and asking
        # nothing (a device that failed, e.g. a topology libtpu cannot load,
        # would otherwise make every later policy fail the same way).
        self.set_reactive(RematApp.wanted, self.wanted.with_config(self.shown.config))
        self.paint_title()
        self.paint_status(self.shown)
        self.paint_sidebar()

    def on_compile_ready(self, message: CompileReady) -> None:
        self.compiles.ready(message)
        if self.shown is not None and self.key_of(self.shown) == message.key:
            self.paint_status(self.shown)

    def on_compile_failed(self, message: CompileFailed) -> None:
        if self.compiles.failed(message):
            self.view.show_error(
                f"compiling failed: {message.message}",
                hint="the analysis shown is this configuration's; only its compile "
                "failed (p turns compiling off)",
            )
            if self.shown is not None:  # the status line said "compiling…" until now
                self.paint_status(self.shown)

    def on_names_judged(self, message: NamesJudged) -> None:
        """The Names verdicts changed: the list's marks, and the cautions unless
        an error is shown (an error stays until it is fixed)."""
        self.name_judge.store(message)
        self.paint_sidebar()
        if self.shown is not None and not self.view.showing_an_error:
            self.painter.cautions(self.scene(), self.shown)

    @on(Progress)
    def progress(self, message: Progress) -> None:
        if message.request is None or message.request == self.analyses.request:
            self.activity.begin(message.what)
            self.tick()

    # ---- compiling (p) ---------------------------------------------------------------------------

    def compiling_switched(self, old: Wanted, new: Wanted) -> None:
        """`p` (compile what is shown) or `x` (and run it) turned on or off."""
        allowed = self.compiles.switch(old, new, self.view.show_error)
        if allowed != new:  # x refused: the device cannot run steps
            self.set_reactive(RematApp.wanted, allowed)
        self.compile_shown()
        if self.shown is not None:
            self.paint_status(self.shown)

    def compile_shown(self) -> None:
        """Compile what is shown, unless compiling is off or it is known already."""
        if self.wanted.compiled and self.shown is not None and self.target is not None:
            self.compiles.compile(self.key_of(self.shown), self.target)

    # ---- hot reload (app/controllers/reload.py) --------------------------------------------------

    @on(FilesChanged)
    def files_changed(self, message: FilesChanged) -> None:
        if self.target is None and not self.targets:  # never loaded: load as at start
            self.load()
        else:
            self.reloader.saved(message.paths)

    @on(Reloaded)
    def reloaded(self, message: Reloaded) -> None:
        """The file imported again: the same request analysed on the new code."""
        if not self.reloader.answers(message):
            return  # a newer save supersedes it
        if self.target is None:
            self.load()
            return
        self.targets = message.targets
        target = message.targets.get(self.target.name)
        if target is None:
            self.activity.end()
            self.view.show_error(
                f"{self.path} no longer defines a target named {self.target.name!r} "
                f"(it defines {', '.join(message.targets)}); press t to pick one."
            )
            return
        if len(self.screen_stack) > 1:  # compare, suggest or diff: made from the code before
            self.notify(
                "The file was saved: the screen open shows the code before the save; "
                "close it and open it again for the new code.",
                severity="warning",
            )
        self.view.forget_sources(message.watched)  # the source pane reads saved files again
        # Analyses of the old code are dropped (the shown one stays until the new
        # one arrives); `reloads` is part of the cache key, so a trace of the old
        # code that finishes late is never taken for the new one.
        self.reloads += 1
        self.analyses.forget_all_but(self.shown)
        self.view.remember_view()
        self.start(target, keep_policy=True, keep_typed=True)

    @on(ReloadFailed)
    def reload_failed(self, message: ReloadFailed) -> None:
        if self.reloader.answers(message):
            self.activity.end()
            self.view.show_error(message.message)
            if self.shown is not None:
                self.paint_status(self.shown)

    def on_unmount(self) -> None:
        self.reloader.stop()
        self.analyses.close()
        self.compiles.close()
        release_hangup(self)

    # ---- what the main screen shows (painting.py decides, shown_view.py paints) ---------

    def show(self, a) -> None:
        """Show `a`: drawn, then what follows from it (the view the user had
        before a reload, the baseline for the status line's %, its compile)."""
        self.shown = a
        self.view.draw(a, self.analyses.drawing(a), self.target.file)
        self.paint_title()
        self.paint_status(a)
        # What the command line asked for and could not have is said with the
        # first analysis, and kept while it is shown.
        self.launch_warnings, self.start_warnings = self.start_warnings, []
        self.painter.cautions(self.scene(), a)
        self.paint_sidebar()
        self.view.restore_view(a)
        self.analyses.ensure(self.target, self.baseline_key())  # the status line compares
        self.compile_shown()

    def paint_title(self) -> None:
        self.painter.title(self.scene())

    def paint_status(self, a) -> None:
        self.painter.status(self.scene(), a)

    def paint_sidebar(self) -> None:
        self.painter.lists(self.scene())

    def tick(self) -> None:
        try:
            self.painter.activity_line(self.scene())
        except NoMatches:  # the app is closing: the timer outlived the main screen's widgets
            pass
