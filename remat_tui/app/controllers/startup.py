"""Provides Startup: what the command line asked for (target, policy, --site,
device, --mesh), the worker that imports JAX and the target file off the UI thread,
and the decisions of starting a target: which one (asked for when the file
has several), under which Config, and what could not be had, said with the
first analysis instead of failing.

Owned by the App (not a mixin): it is given Textual's App for its worker and
messages; Loading (app/controllers/loading.py), which handles TargetsLoaded
and LoadFailed, asks it `choose`, `listed` and `request` (`Loading.start`,
which also serves the target picker and hot reload).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from typing import TYPE_CHECKING

from textual.app import App

from remat_tui.app.messages import LoadFailed, Progress, TargetsLoaded
from remat_tui.app.screens.failure import failure_words
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import AS_WRITTEN, Config, parse_site_option
from remat_tui.core.setup.meshes import Axes, mesh_words, parse_mesh
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.app.state.wanted import Wanted
    from remat_tui.registry import Target


class Startup:
    """What the command line asked for, and loading the file, for one App."""

    def __init__(
        self,
        app: App,
        path: str,
        name: str | None,
        policy: str,
        device: str | None,
        sites: Iterable[str],
        mesh: str | Axes | None = None,
    ) -> None:
        self.app = app  # Textual's: run_worker, post_message, log
        self.path = path
        # What the command line asked for, read when the first target starts.
        self.name = name
        self.policy = policy
        self.device = device
        self.sites = dict(parse_site_option(t) for t in sites)
        # --mesh's axes: every target that takes a `mesh` is built over it
        self.mesh = parse_mesh(mesh) if isinstance(mesh, str) else mesh

    def load(self) -> None:
        """Import JAX and the target file in a thread; TargetsLoaded or LoadFailed follows."""
        self.app.run_worker(self._load, thread=True, group="load", exit_on_error=False)

    def _load(self) -> None:
        app = self.app
        try:
            app.post_message(Progress("importing JAX"))
            import jax  # noqa: F401  (the stage the status line names)

            from remat_tui.core.setup.devices import available_devices, device_label
            from remat_tui.core.setup.loading import import_targets

            app.post_message(Progress(f"importing {self.path}"))
            targets, error, watched = import_targets(self.path)
            if error is not None:
                app.post_message(LoadFailed(error, watched))
                return
            assert targets is not None  # import_targets gives targets or an error
            if (refused := self.mesh_refused(targets)) is not None:
                app.post_message(LoadFailed(refused, watched))
                return
            devices = available_devices()  # local devices, then TPU topologies
            try:
                device = devices[0] if self.device is None else device_label(self.device)
                device_error = None
            except RematError as exc:
                device, device_error = devices[0], f"{exc.message} Using {devices[0]}."
            app.post_message(TargetsLoaded(targets, devices, device, device_error, watched))
        except RematError as exc:
            app.post_message(LoadFailed(exc.message))
        except Exception as exc:  # our bug: say so, keep the app alive
            app.log.error(traceback.format_exc())
            app.post_message(LoadFailed(f"while loading: {failure_words(exc)}"))

    def mesh_refused(self, targets: dict[str, Target]) -> str | None:
        """Why --mesh cannot be had, as the headless commands say it: the
        target named (else every target of the file) takes no `mesh`."""
        from remat_tui.core.setup.loading import takes_mesh, with_mesh

        named = [targets[self.name]] if self.name in targets else list(targets.values())
        if self.mesh is None or not named or any(takes_mesh(t) for t in named):
            return None
        try:
            with_mesh(named[0], self.mesh)
        except RematError as exc:
            return exc.message
        return None  # pragma: no cover  (with_mesh refuses a target that takes no mesh)

    def meshed(self, target: Target) -> tuple[Target, list[str]]:
        """`target` asking for --mesh where it takes one (its example arguments
        are then built over that mesh for every analysis, compile, measure and
        search); one of several that takes none is analysed without it, said."""
        from remat_tui.core.setup.loading import takes_mesh, with_mesh

        if self.mesh is None:
            return target, []
        if not takes_mesh(target):
            return target, [
                f"--mesh {mesh_words(self.mesh)}: {target.name} takes no `mesh`; "
                "analysed without it."
            ]
        return with_mesh(target, self.mesh), []

    def warnings(self, device_error: str | None) -> list[str]:
        """What to say with the first analysis: the device that could not be
        had, and a JAX outside the tested range (said once)."""
        from remat_tui.core.jaxcompat import untested_message

        return [w for w in (device_error, untested_message()) if w]

    def choose(self, targets: dict) -> tuple[str | None, str | None]:
        """(the target to start, or None to ask which; why the one the command
        line named cannot be had, or None). A name that is not there is asked
        about even when the file has one target: opening that one on its own
        would hide the typo."""
        if self.name is not None and self.name not in targets:
            error = (
                f"no target named {self.name!r} in {self.path}; "
                f"targets: {', '.join(targets)}. Pick one."
            )
            self.name = None
            return None, error
        if self.name is None and len(targets) > 1:
            return None, None
        return self.name or next(iter(targets)), None

    @staticmethod
    def listed(target: Target) -> dict[str, policies.PolicySpec]:
        """The Policies list of `target`: the built-ins, then its own, by spelling."""
        return {spec.canonical: spec for spec in policies.candidate_specs(target.policies)}

    def request(
        self, target: Target, wanted: Wanted, keep_policy: bool, first: bool
    ) -> tuple[Config, list[str]]:
        """The Config to start `target` under: the command line's policy (with
        `keep_policy`, what is wanted now), the site overrides wanted (the
        first start: --site's), the device wanted; and what could not be had."""
        warnings = []
        try:  # the command line's text parsed once, against this target's policies
            spec = wanted.spec if keep_policy else policies.parse(self.policy, target.policies)
            gone = gone_policies(spec, target)  # a reload may drop a policy the code declared
            if gone:
                raise RematError(f"the code no longer declares {gone}.")
        except RematError as exc:  # e.g. a name the target does not declare: say so, go on
            warnings.append(f"{exc.message} Showing {policies.AS_WRITTEN} instead.")
            spec = AS_WRITTEN
        sites = wanted.config.site_specs
        if first and self.sites:  # --site, checked and made canonical once
            try:
                sites = Config.make(sites=self.sites, declared=target.policies).site_specs
            except RematError as exc:
                warnings.append(f"--site: {exc.message} Showing no override.")
        return Config(spec, sites, wanted.device), warnings

    @staticmethod
    def still_parsing(
        specs: Iterable[policies.PolicySpec], target: Target, listed: dict
    ) -> list[policies.PolicySpec]:
        """Of the specs typed before a target (re)started, those not listed now
        that still parse for it (a policy the old code declared may be gone)."""
        return [s for s in specs if s.canonical not in listed and not gone_policies(s, target)]


def gone_policies(spec: policies.PolicySpec, target: Target) -> str:
    """The policies `spec` names that the target no longer declares, quoted
    and joined; empty when none is gone."""
    return ", ".join(map(repr, sorted(spec.declared_policies() - set(target.policies))))
