"""Provides Showing: what follows from what is wanted and from the workers'
answers. A new `wanted` is shown from the cache or asked for; an analysis that
arrives is shown (drawn, then its title, status line, cautions and lists
painted, its baseline and its compile asked for); a failed one puts what is
wanted back to what is shown; a compile, the Names verdicts and the progress
of a trace update the status line and the lists.

Owned by the App (not a mixin). The state it reads and replaces is two
values the App holds, `loaded` (app/state/loaded.py) and `wanted`
(app/state/wanted.py), read as a Scene; the controllers whose answers it
handles (analyses, compiles, names), the Painter that decides the words and
the view that paints them are given to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from textual.css.query import NoMatches

from remat_tui.app.controllers.analyses import Analyses
from remat_tui.app.controllers.compiles import CompileFailed, CompileReady, Compiles
from remat_tui.app.controllers.name_judge import NameJudge, NamesJudged
from remat_tui.app.controllers.painting import Painter
from remat_tui.app.messages import AnalysisFailed, AnalysisReady, Progress
from remat_tui.app.state.loaded import Loaded
from remat_tui.app.state.scene import Scene
from remat_tui.app.state.status import Activity, nothing_shown
from remat_tui.app.state.wanted import Wanted

if TYPE_CHECKING:
    from remat_tui.core.model import Analysis


class Holder(Protocol):
    """What Showing asks of the App: its two state values."""

    loaded: Loaded
    wanted: Wanted

    def scene(self) -> Scene: ...

    def want_quietly(self, wanted: Wanted) -> None: ...  # no new request follows


class Showing:
    def __init__(
        self,
        holder: Holder,
        view: Callable,
        analyses: Analyses,
        compiles: Compiles,
        name_judge: NameJudge,
        painter: Painter,
        activity: Activity,
        watched: Callable[[], bool],
    ) -> None:
        """`view()`: the main screen's ShownView (made after the App);
        `watched()`: whether a save of the file reloads it."""
        self.holder = holder
        self.view = view
        self.analyses = analyses
        self.compiles = compiles
        self.name_judge = name_judge
        self.painter = painter
        self.activity = activity
        self.watched = watched

    # ---- what is wanted -----------------------------------------------------------------

    def wanted_changed(self, old: Wanted, new: Wanted) -> None:
        """Show what is wanted now from the cache, or ask for it."""
        scene = self.holder.scene()
        if scene.target is None:
            return
        same = old.target == new.target and old.config == new.config
        if same and (old.compiled, old.measured) != (new.compiled, new.measured):
            self.compiling_switched(old, new)  # `p` or `x` alone: nothing to trace
            return
        key = new.key(scene.reloads)
        cached = self.analyses.ask(scene.target, key, scene.baseline_key())
        if cached is not None:
            self.show(cached)
        else:
            self.activity.begin(f"tracing {key[1].label()}")
            self.name_judge.pause()  # the trace asked for first; judged once it is shown
        self.paint_sidebar()

    def compiling_switched(self, old: Wanted, new: Wanted) -> None:
        """`p` (compile what is shown) or `x` (and run it) turned on or off."""
        allowed = self.compiles.switch(old, new, self.view().show_error)
        if allowed != new:  # x refused: the device cannot run steps
            self.holder.want_quietly(allowed)
        self.compile_shown()
        if self.holder.loaded.shown is not None:
            self.paint_status(self.holder.loaded.shown)

    def compile_shown(self) -> None:
        """Compile what is shown, unless compiling is off or it is known already."""
        scene = self.holder.scene()
        if scene.wanted.compiled and scene.shown is not None and scene.target is not None:
            key = scene.key_of(scene.shown)
            assert key is not None  # there is a target
            self.compiles.compile(key, scene.target)

    # ---- an analysis shown --------------------------------------------------------------

    def show(self, a: Analysis) -> None:
        """Show `a`: drawn, then what follows from it (the view the user had
        before a reload, the baseline for the status line's %, its compile)."""
        loaded = replace(self.holder.loaded, shown=a)
        self.holder.loaded = loaded
        view = self.view()
        target_file = loaded.target.file if loaded.target is not None else None  # it is there
        view.draw(a, self.analyses.drawing(a), target_file)
        self.paint_title()
        self.paint_status(a)
        # What the command line asked for and could not have is said with the
        # first analysis, and kept while it is shown.
        self.holder.loaded = replace(
            loaded, launch_warnings=loaded.start_warnings, start_warnings=()
        )
        self.painter.cautions(self.holder.scene(), a)
        scene = self.holder.scene()
        if self.painter.verifying.running not in (None, scene.key_of(a)):
            self.painter.verifying.cancel()  # its verdict would be stale as it came
        self.painter.verdict(scene)  # the `a` key's verdict, or the last marked stale
        self.paint_sidebar()
        view.restore_view(a)
        if loaded.target is not None:  # (it is: `a` is its analysis)
            self.analyses.ensure(loaded.target, self.holder.scene().baseline_key())
        self.compile_shown()

    def paint_title(self) -> None:
        self.painter.title(self.holder.scene())

    def paint_status(self, a: Analysis) -> None:
        self.painter.status(self.holder.scene(), a)

    def paint_sidebar(self) -> None:
        self.painter.lists(self.holder.scene())

    def tick(self) -> None:
        try:
            scene = self.holder.scene()
            self.painter.activity_line(scene)
            if self.painter.verifying.running is not None:  # its clock
                self.painter.verdict(scene)
        except NoMatches:  # the app is closing: the timer outlived the main screen's widgets
            pass

    # ---- the workers' answers -----------------------------------------------------------

    def analysis_ready(self, message: AnalysisReady) -> None:
        scene = self.holder.scene()
        keep = (scene.shown, self.analyses.cache.get(scene.baseline_key()))
        if self.analyses.ready(message, keep):
            self.activity.end()
            self.show(message.analysis)
        elif scene.shown is not None and message.key == scene.baseline_key():
            self.paint_status(scene.shown)  # the baseline for the % difference arrived

    def analysis_failed(self, message: AnalysisFailed) -> None:
        if not self.analyses.failed(message):
            return
        self.activity.end()
        self.view().show_error(message.message)
        shown = self.holder.loaded.shown
        if shown is None:  # nothing to fall back on: say so, no stale spinner
            self.paint_title()
            self.view().set_status(nothing_shown(self.watched()))
            return
        # What is wanted goes back to what is shown, in one step and asking
        # nothing (a device that failed, e.g. a topology libtpu cannot load,
        # would otherwise make every later policy fail the same way).
        self.holder.want_quietly(self.holder.wanted.with_config(shown.config))
        self.paint_title()
        self.paint_status(shown)
        self.paint_sidebar()

    def compile_ready(self, message: CompileReady) -> None:
        self.compiles.ready(message)
        scene = self.holder.scene()
        if scene.shown is not None and scene.key_of(scene.shown) == message.key:
            self.paint_status(scene.shown)

    def compile_failed(self, message: CompileFailed) -> None:
        if self.compiles.failed(message):
            self.view().show_error(
                f"compiling failed: {message.message}",
                hint="the analysis shown is this configuration's; only its compile "
                "failed (p turns compiling off)",
            )
            if self.holder.loaded.shown is not None:  # the status said "compiling…" until now
                self.paint_status(self.holder.loaded.shown)

    def names_judged(self, message: NamesJudged) -> None:
        """The Names verdicts changed: the list's marks, and the cautions unless
        an error is shown (an error stays until it is fixed)."""
        self.name_judge.store(message)
        self.paint_sidebar()
        shown = self.holder.loaded.shown
        if shown is not None and not self.view().showing_an_error:
            self.painter.cautions(self.holder.scene(), shown)

    def progress(self, message: Progress) -> None:
        if message.request is None or message.request == self.analyses.request:
            self.activity.begin(message.what)
            self.tick()
