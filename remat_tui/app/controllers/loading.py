"""Provides Loading: the file loaded (or not), a target started, and the file
loaded again when it is saved. What each step learns becomes the next
`loaded` (app/state/loaded.py), and the target started the next `wanted`.

Owned by the App (not a mixin). It is given the App as Textual's (screens,
notifications, exit) and as the holder of the two state values, and the
controllers it drives: Startup (what the command line asked for), the
Reloader, the Analyses cache and Showing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from textual.markup import escape

from remat_tui.app.controllers.hangup import quit_on_hangup
from remat_tui.app.messages import LoadFailed, Reloaded, ReloadFailed, TargetsLoaded
from remat_tui.app.screens import PickScreen
from remat_tui.app.state.loaded import frozen

if TYPE_CHECKING:
    from remat_tui.app.controllers.analyses import Analyses
    from remat_tui.app.controllers.reload import Reloader
    from remat_tui.app.controllers.showing import Showing
    from remat_tui.app.controllers.startup import Startup
    from remat_tui.app.state.status import Activity


class Loading:
    def __init__(
        self,
        app: Any,  # the RematApp: app/main.py imports this module, which cannot name it
        startup: Startup,
        reloader: Reloader,
        analyses: Analyses,
        showing: Showing,
        activity: Activity,
    ) -> None:
        """`app`: the RematApp (push_screen, notify, exit; `loaded`, `wanted`,
        `view`, `main_screen`)."""
        self.app = app
        self.startup = startup
        self.reloader = reloader
        self.analyses = analyses
        self.showing = showing
        self.activity = activity

    def targets_loaded(self, message: TargetsLoaded) -> None:
        """The file is imported: start its target, or ask which when it has several."""
        app = self.app
        quit_on_hangup(app)  # JAX is loaded now: undo its ignoring SIGHUP
        self.activity.end()
        self.reloader.watch(message.watched)
        app.want_quietly(app.wanted.with_device(message.device))
        app.loaded = replace(
            app.loaded,
            load_error=None,
            devices=tuple(message.devices),
            targets=frozen(message.targets),
        ).warned(self.startup.warnings(message.device_error))
        if message.device_error:
            app.view.show_error(message.device_error)
        name, error = self.startup.choose(message.targets)
        if error is not None:
            app.view.show_error(error)
        if name is not None:
            self.start(name)
            return
        app.view.show_title(f"remat-tui  {escape(app.path)}  pick a target")
        app.view.set_status("Pick a target (escape quits)")

        def picked(chosen: str | None) -> None:
            app.exit() if chosen is None else self.start(chosen)

        targets = app.loaded.targets
        count = f"{len(targets)} target{'s' if len(targets) > 1 else ''}"
        title = f"{app.path} has {count}: pick one"
        app.push_screen(PickScreen(title, list(targets), error=error), picked)

    def load_failed(self, message: LoadFailed) -> None:
        """The file could not be loaded: say why in place, and wait for a save."""
        app = self.app
        quit_on_hangup(app)
        self.activity.end()
        app.loaded = replace(app.loaded, load_error=message.message)
        self.reloader.watch(message.watched)
        app.view.show_title(f"remat-tui  {escape(app.path)}  (not loaded)", layout=True)
        how = "save the file to load it again" if self.reloader.watched else "fix the file"
        app.view.set_status(f"Not loaded: {how} · q quits")
        app.view.show_error(message.message)

    def start(self, name: str, keep_policy: bool = False, keep_typed: bool = False) -> None:
        """Analyse the target `name` under the policy the command line asked
        for (`keep_policy`: what is wanted now, names and site overrides
        included, as after a reload); `keep_typed`: the specs typed in the
        palette stay listed where they still parse."""
        app = self.app
        before = app.loaded
        target, meshed = self.startup.meshed(before.targets[name])  # --mesh, where it takes one
        first, typed = before.target is None, list(before.listed.values())
        listed = self.startup.listed(target)
        config, warnings = self.startup.request(target, app.wanted, keep_policy, first)
        app.loaded = replace(before, target=target, listed=frozen(listed)).warned(meshed + warnings)
        app.main_screen.target_loaded = True
        app.wanted = replace(app.wanted, target=target.name, config=config)
        self.showing.paint_title()
        if not keep_policy:
            app.main_screen.query_one("#residuals").focus()
        if keep_typed:
            app.loaded = app.loaded.listing(*self.startup.still_parsing(typed, target, listed))
            self.showing.paint_sidebar()

    # ---- hot reload (app/controllers/reload.py) -------------------------------------------

    def files_changed(self, paths: Iterable[str]) -> None:
        loaded = self.app.loaded
        if loaded.target is None and not loaded.targets:  # never loaded: load as at start
            self.startup.load()
        else:
            self.reloader.saved(paths)

    def reloaded(self, message: Reloaded) -> None:
        """The file imported again: the same request analysed on the new code."""
        app = self.app
        if not self.reloader.answers(message):
            return  # a newer save supersedes it
        if app.loaded.target is None:
            self.startup.load()
            return
        current = app.loaded.target.name
        app.loaded = replace(app.loaded, targets=frozen(message.targets))
        if current not in message.targets:
            self.activity.end()
            app.view.show_error(
                f"{app.path} no longer defines a target named {current!r} "
                f"(it defines {', '.join(message.targets)}); press t to pick one."
            )
            return
        if len(app.screen_stack) > 1:  # compare, suggest or diff: made from the code before
            app.notify(
                "The file was saved: the screen open shows the code before the save; "
                "close it and open it again for the new code.",
                severity="warning",
            )
        app.view.forget_sources(message.watched)  # the source pane reads saved files again
        # Analyses of the old code are dropped (the shown one stays until the new
        # one arrives); `reloads` is part of the cache key, so a trace of the old
        # code that finishes late is never taken for the new one.
        app.loaded = replace(app.loaded, reloads=app.loaded.reloads + 1)
        self.analyses.forget_all_but(app.loaded.shown)
        app.view.remember_view()
        self.start(current, keep_policy=True, keep_typed=True)

    def reload_failed(self, message: ReloadFailed) -> None:
        if self.reloader.answers(message):
            self.activity.end()
            self.app.view.show_error(message.message)
            if self.app.loaded.shown is not None:
                self.showing.paint_status(self.app.loaded.shown)
