"""Provides the RematApp: the app's state as two frozen values held as
reactives, `wanted` (what the user asked for, app/state/wanted.py) and
`loaded` (what is loaded and shown, app/state/loaded.py); the controllers
that do the work (app/controllers/), wired; and the handlers that hand each
message to the one that deals with it.

Values go down, messages come up: the lists, the palette and the keys post
what they want (app/messages.py, the Sidebar's) or run the App's actions
(app/keys.py); `asking` makes that the next `wanted`, whose watcher has
`showing` show it or ask for it; the workers' answers come back as messages,
which `loading` and `showing` turn into the next `loaded` and what is painted
(`painter` decides the words). The controllers read the state as one value,
a Scene (app/state/scene.py); the main screen (app/screens/main_screen.py)
and the screens the keys open get what they show as arguments.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from textual import on
from textual.app import App
from textual.reactive import var

from remat_tui.app.commands import PaletteChoices, RematCommands
from remat_tui.app.controllers.analyses import Analyses
from remat_tui.app.controllers.asking import Asking
from remat_tui.app.controllers.compiles import CompileFailed, CompileReady, Compiles
from remat_tui.app.controllers.hangup import release as release_hangup
from remat_tui.app.controllers.layout import Layout
from remat_tui.app.controllers.loading import Loading
from remat_tui.app.controllers.name_judge import NameJudge, NamesJudged
from remat_tui.app.controllers.opening import Opening
from remat_tui.app.controllers.painting import Painter
from remat_tui.app.controllers.reload import Reloader
from remat_tui.app.controllers.showing import Showing
from remat_tui.app.controllers.startup import Startup
from remat_tui.app.controllers.verifying import (
    VerifyDone,
    VerifyFailed,
    Verifying,
    VerifyProgress,
)
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
from remat_tui.app.screens import HelpScreen
from remat_tui.app.screens.budget import BudgetTyped
from remat_tui.app.screens.main_screen import MainScreen
from remat_tui.app.state.loaded import Loaded
from remat_tui.app.state.scene import Scene
from remat_tui.app.state.status import Activity
from remat_tui.app.state.wanted import Wanted
from remat_tui.app.widgets.sidebar import Sidebar

if TYPE_CHECKING:
    from textual import events

    from remat_tui.app.widgets.shown_view import ShownView


class RematApp(App):
    """remat-tui: what autodiff saves, and what a policy changes."""

    CSS_PATH = "app.tcss"
    TITLE = "remat-tui"
    COMMANDS = App.COMMANDS | {RematCommands}
    BINDINGS = APP_KEYS  # help and quit; the main screen lists the rest

    wanted: var[Wanted] = var(Wanted(), always_update=True, init=False)
    """What the user asked to see; assigning it asks for that analysis."""
    loaded: var[Loaded] = var(Loaded(), init=False)
    """What is loaded and shown; replaced whole (the Painter reads it as a Scene)."""

    def __init__(
        self,
        path: str,
        name: str | None = None,
        policy: str = "as_written",
        device: str | None = None,
        show_timings: bool = True,
        sites: list[str] | tuple[str, ...] = (),
        mesh: str | tuple[tuple[str, int], ...] | None = None,
    ):
        """`mesh`: --mesh (`data=4,model=2`, or its axes), built over the chosen
        devices for a target whose args factory takes a `mesh`."""
        super().__init__()
        self.path = path
        self.startup = Startup(self, path, name, policy, device, sites, mesh)  # the command line's
        self.activity = Activity()  # what the status line says the app is doing
        self.analyses = Analyses(self)
        self.compiles = Compiles(self)
        self.reloader = Reloader(self, path)
        self.widths = Layout(self)  # the layout for the terminal's width
        self.name_judge = NameJudge(self)  # names whose saving spares no recompute
        self.verifying = Verifying(self)  # a: the gradients of what is shown, verified
        view = lambda: self.view  # noqa: E731  (the main screen is made after the App)
        self.painter = Painter(
            view,
            self.analyses,
            self.compiles,
            self.name_judge,
            self.activity,
            show_timings,
            self.verifying,
        )  # what the main screen says, from a Scene of the state
        self.asking = Asking(self.scene, self.want, self.painter.name_states, view)
        watched = lambda: bool(self.reloader.watched)  # noqa: E731
        self.showing = Showing(
            self,
            view,
            self.analyses,
            self.compiles,
            self.name_judge,
            self.painter,
            self.activity,
            watched,
        )
        self.loading = Loading(
            self, self.startup, self.reloader, self.analyses, self.showing, self.activity
        )
        # the screens the keys open over the main screen, and what they give back
        self.opening = Opening(
            self,
            self.asking.config,
            self.open_line,
            known=lambda: self.compiles.known,
            headline=lambda scene: self.painter.headline(scene, scene.shown),
            start=lambda name: self.loading.start(name, keep_typed=True),
            show_timings=show_timings,
        )

    # ---- the state ------------------------------------------------------------------------

    def scene(self) -> Scene:
        """The state, as one value (app/state/scene.py), for the controllers."""
        highlighted = self.main_screen.sidebar.highlighted_site
        return Scene(self.path, self.wanted, self.loaded, highlighted)

    def want(self, wanted: Wanted) -> None:
        self.wanted = wanted

    def want_quietly(self, wanted: Wanted) -> None:
        """What is wanted, changed without asking for anything (it is known)."""
        self.set_reactive(RematApp.wanted, wanted)

    def watch_wanted(self, old: Wanted, new: Wanted) -> None:
        self.showing.wanted_changed(old, new)

    # ---- layout and lifecycle -------------------------------------------------------------

    def get_default_screen(self) -> MainScreen:
        self.main_screen = MainScreen(self.path, self.widths, id="_default")
        return self.main_screen

    @property
    def view(self) -> ShownView:
        """What paints the main screen's widgets (app/widgets/shown_view.py)."""
        return self.main_screen.view

    def on_resize(self, event: events.Resize) -> None:
        self.widths.resize(event.size.width)

    def on_mount(self) -> None:
        self.set_interval(0.2, self.showing.tick)  # 5 Hz: lively, yet leaves the GIL to the trace

    @on(ScreenReady)
    def load(self) -> None:
        """Import JAX and the file (once the main screen's widgets are mounted:
        what it loads is drawn into them)."""
        self.startup.load()

    def on_unmount(self) -> None:
        self.reloader.stop()
        self.analyses.close()
        self.compiles.close()
        release_hangup(self)

    # ---- loading and reloading the file (app/controllers/loading.py) ----------------------

    @on(TargetsLoaded)
    def targets_loaded(self, message: TargetsLoaded) -> None:
        self.loading.targets_loaded(message)

    @on(LoadFailed)
    def load_failed(self, message: LoadFailed) -> None:
        self.loading.load_failed(message)

    @on(TargetWanted)
    def target_wanted(self, message: TargetWanted) -> None:
        self.loading.start(message.name)

    @on(FilesChanged)
    def files_changed(self, message: FilesChanged) -> None:
        self.loading.files_changed(message.paths)

    @on(Reloaded)
    def reloaded(self, message: Reloaded) -> None:
        self.loading.reloaded(message)

    @on(ReloadFailed)
    def reload_failed(self, message: ReloadFailed) -> None:
        self.loading.reload_failed(message)

    # ---- what the lists, the keys and the palette ask for (controllers/asking.py) --------

    @on(PolicyWanted)
    def policy_wanted(self, message: PolicyWanted) -> None:
        if message.listed:  # typed: listed, with a number key if one is free
            self.loaded = self.loaded.listing(message.spec)
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
        self.showing.paint_sidebar()  # the name states there, and where toggles apply

    @on(Sidebar.DeviceChosen)
    def device_chosen(self, message: Sidebar.DeviceChosen) -> None:
        self.asking.device(message.device)

    @on(ErrorShown)
    def error_shown(self, message: ErrorShown) -> None:
        self.view.show_error(message.message)

    @on(BudgetTyped)
    def budget_typed(self, message: BudgetTyped) -> None:
        self.opening.last_budget = message.text  # on the suggest or fit screen

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

    def action_verify(self) -> None:
        """`a`: verify the configuration shown against the code as written on
        its device (app/controllers/verifying.py); again while it runs: cancel."""
        scene = self.scene()
        if scene.target is None or scene.shown is None:
            self.notify("nothing is shown yet to verify", severity="warning")
            return
        key = scene.key_of(scene.shown)
        assert key is not None  # there is a target
        self.notify(self.verifying.toggle(key, scene.target, scene.shown.config), markup=False)
        self.painter.verdict(scene)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    async def action_opening(self, name: str) -> None:
        """The keys that open a screen over the main screen, and `m` (the
        table of them: app/controllers/opening.py's OPENERS)."""
        await self.opening.open(name, self.scene(), lambda: self.loaded.shown)

    def open_line(self, where: tuple[str, int, str | None] | None) -> None:
        """Show a user's line (from the memory screen) in the source pane, and
        select the buffer's residual (`R3`), else the first one made there."""
        if where is not None and self.loaded.shown is not None:
            self.view.open_line(*where)

    def palette_choices(self) -> PaletteChoices:
        """What the command palette offers over the main screen."""
        return PaletteChoices.of(self.loaded, self.analyses.names_seen())

    # ---- answers from the workers (app/controllers/showing.py) ----------------------------

    def on_analysis_ready(self, message: AnalysisReady) -> None:
        self.showing.analysis_ready(message)

    def on_analysis_failed(self, message: AnalysisFailed) -> None:
        self.showing.analysis_failed(message)

    def on_compile_ready(self, message: CompileReady) -> None:
        self.showing.compile_ready(message)

    def on_compile_failed(self, message: CompileFailed) -> None:
        self.showing.compile_failed(message)

    def on_names_judged(self, message: NamesJudged) -> None:
        self.showing.names_judged(message)

    @on(Progress)
    def progress(self, message: Progress) -> None:
        self.showing.progress(message)

    @on(VerifyProgress)
    def verify_progress(self, message: VerifyProgress) -> None:
        if self.verifying.progress(message):  # the verify under way's stage
            self.painter.verdict(self.scene())

    @on(VerifyDone)
    def verify_done(self, message: VerifyDone) -> None:
        if self.verifying.done(message):  # a verdict still wanted
            self.painter.verdict(self.scene())

    @on(VerifyFailed)
    def verify_failed(self, message: VerifyFailed) -> None:
        if self.verifying.failed(message):
            self.painter.verdict(self.scene())
