"""Provides Startup: what happens between launching the app and its first
analysis. JAX and the target file are imported off the UI thread, the
target is chosen (asked for when the file has several), and it is started
under what the command line asked for (policy, --site, device), where what
could not be had is said with the first analysis instead of failing.

Owned by the App (not a mixin): the App's handlers for TargetsLoaded and
LoadFailed call `loaded` and `failed`; `start` also serves the target picker
and hot reload, which start a target again.
"""

from __future__ import annotations

import traceback
from dataclasses import replace

from textual.markup import escape
from textual.widgets import Static

from remat_tui.app.hangup import quit_on_hangup
from remat_tui.app.hints import with_suggestion
from remat_tui.app.messages import LoadFailed, Progress, TargetsLoaded
from remat_tui.app.residual_table import ResidualTable
from remat_tui.app.screens import PickScreen
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config, parse_site_option
from remat_tui.errors import RematError


class Startup:
    """Loading the file and starting a target, for one App."""

    def __init__(self, app, name, policy: str, device: str | None, sites) -> None:
        self.app = app
        # What the command line asked for, read when the first target starts.
        self.name = name
        self.policy = policy
        self.device = device
        self.sites = dict(parse_site_option(t) for t in sites)

    def load(self) -> None:
        """Import JAX and the target file in a thread; TargetsLoaded or LoadFailed follows."""
        self.app.run_worker(self._load, thread=True, group="load", exit_on_error=False)

    def _load(self) -> None:
        app = self.app
        try:
            app.post_message(Progress("importing JAX"))
            import jax  # noqa: F401  (the stage the status line names)

            from remat_tui.app.reload import import_targets
            from remat_tui.core.setup.devices import available_devices, device_label, resolve_device

            app.post_message(Progress(f"importing {app.path}"))
            targets, error, watched = import_targets(app.path)
            if error is not None:
                app.post_message(LoadFailed(error, watched))
                return
            devices = available_devices()  # local devices, then TPU topologies
            try:
                device = device_label(resolve_device(self.device))
                device_error = None
            except RematError as exc:
                device, device_error = devices[0], f"{exc.message} Using {devices[0]}."
            app.post_message(TargetsLoaded(targets, devices, device, device_error, watched))
        except RematError as exc:
            app.post_message(LoadFailed(exc.message))
        except Exception as exc:  # our bug: say so, keep the app alive
            app.log.error(traceback.format_exc())
            app.post_message(LoadFailed(f"internal error while loading: {exc!r}"))

    def loaded(self, message: TargetsLoaded) -> None:
        """The file is imported: start its target, or ask which when it has several."""
        app = self.app
        quit_on_hangup(app)  # JAX is loaded now: undo its ignoring SIGHUP
        app.activity.end()
        app.load_error = None
        app.reloader.watch(message.watched)
        app.devices = message.devices
        app.set_reactive(type(app).wanted, replace(app.wanted, device=message.device))
        targets = app.targets = message.targets
        if message.device_error:
            app.view.show_error(message.device_error)
            app.start_warnings.append(message.device_error)
        from remat_tui.core.jaxcompat import untested_message

        if untested := untested_message():  # said once, with the first analysis
            app.start_warnings.append(untested)
        if self.name is not None and self.name not in targets:
            app.view.show_error(
                f"no target named {self.name!r} in {app.path}; "
                f"targets: {', '.join(targets)}. Pick one."
            )
            self.name = None
        if self.name is None and len(targets) > 1:
            app.query_one("#title", Static).update(
                f"remat-tui  {escape(app.path)}  pick a target", layout=False
            )
            app.query_one("#status", Static).update("Pick a target (escape quits)", layout=False)

            def picked(name: str | None) -> None:
                if name is None:
                    app.exit()
                else:
                    self.start(targets[name])

            app.push_screen(
                PickScreen(f"{app.path} has {len(targets)} targets: pick one", list(targets)),
                picked,
            )
        else:
            self.start(targets[self.name or next(iter(targets))])

    def failed(self, message: LoadFailed) -> None:
        """The file could not be loaded: say why in place, and wait for a save."""
        app = self.app
        quit_on_hangup(app)
        app.activity.end()
        app.load_error = message.message
        app.reloader.watch(message.watched)
        app.query_one("#title", Static).update(f"remat-tui  {escape(app.path)}  (not loaded)")
        how = "save the file to load it again" if app.reloader.watched else "fix the file"
        app.query_one("#status", Static).update(f"Not loaded: {how} · q quits", layout=False)
        app.view.show_error(message.message)

    def start(self, target, keep_policy: bool = False) -> None:
        """Analyse `target` under the requested policy (`keep_policy`: the current
        one, names and site overrides included, as after a reload)."""
        app = self.app
        first = app.target is None
        app.target = target
        app.policy_specs = policies.builtin_specs() + list(target.policies)
        requested = app.wanted.policy if keep_policy else self.policy
        try:
            policy = policies.parse(requested, target.policies).canonical
        except RematError as exc:  # e.g. a name the target does not declare: say so, go on
            message = with_suggestion(exc.message, requested, target.policies)
            app.start_warnings.append(f"{message} Showing {policies.AS_WRITTEN} instead.")
            policy = policies.AS_WRITTEN
        sites = app.wanted.sites
        if first and self.sites:  # --site, checked and made canonical once
            try:
                sites = Config.make(sites=self.sites, declared=target.policies).sites
            except RematError as exc:
                app.start_warnings.append(f"--site: {exc.message} Showing no override.")
        app.wanted = replace(app.wanted, target=target.name, policy=policy, sites=sites)
        app.view.update_title()
        if not keep_policy:
            app.query_one(ResidualTable).focus()
