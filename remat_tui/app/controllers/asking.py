"""Provides Asking: what the user asks for (a policy, a site's policy, a name
cycled, a configuration from compare, suggest or the diff, a device), turned
into the next `wanted`, or into an error said in place when a typed spec does
not parse.

Owned by the App (not a mixin): the App's handlers of the lists', the
palette's and the keys' requests call it (app/main.py); it reads the state
from a Scene (app/state/scene.py) and hands the new Wanted back through `want`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from remat_tui.app.state.scene import Scene
from remat_tui.app.state.site_state import next_site_policy, scope_spec, toggled
from remat_tui.app.state.wanted import Wanted
from remat_tui.app.widgets.shown_view import ShownView
from remat_tui.core.setup import policies
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.core.setup.config import Config

Policy = str | policies.PolicySpec  # a listed or typed spec, or one parsed already


class Asking:
    """The user's requests, made into the next Wanted, for one App."""

    def __init__(
        self,
        scene: Callable[[], Scene],
        want: Callable[[Wanted], None],
        name_states: Callable[[Scene], dict],
        view: Callable[[], ShownView],
    ) -> None:
        """`scene()`: the App's state now; `want(wanted)`: ask for it;
        `name_states(scene)`: R/S/O where name toggles apply; `view()`: where
        an error is said."""
        self.scene = scene
        self.want = want
        self.name_states = name_states
        self.view = view

    def policy(self, policy: Policy) -> None:
        """`policy` as the outer policy (a bad spec: said, nothing asked)."""
        s = self.scene()
        if s.target is None:
            return
        try:
            spec = _spec(s, policy)
        except RematError as exc:
            self.view().show_error(exc.message)
            return
        self.want(s.wanted.with_policy(spec))

    def site(self, site: int | str, policy: Policy | None) -> None:
        """A site's policy (None: as written in the code)."""
        s = self.scene()
        if s.target is None:
            return
        try:
            spec = None if policy is None else _spec(s, policy)
        except RematError as exc:
            self.view().show_error(f"site {site}: {exc.message}")
            return
        overrides = dict(s.wanted.config.site_specs)
        overrides.pop(site, None)
        if spec is not None:
            overrides[site] = spec
        self.want(s.wanted.with_sites(overrides))

    def cycle_site(self, site_id: int) -> None:
        """as in the code → each listed policy → as in the code."""
        s = self.scene()
        site = next((x for x in (s.shown.sites if s.shown else []) if x.id == site_id), None)
        if site is not None:
            self.site(site_id, next_site_policy(site, list(s.listed)))

    def cycle_name(self, name: str) -> None:
        """recompute → save → offload, where name toggles apply (Scene.scope):
        at every site of the scope's function (the checkpoint in the code is
        the lever), else as the outer policy. Only what the policy there
        decides by name changes: the other half of a save_from_both_policies
        stays."""
        s = self.scene()
        current = scope_spec(s.scope, s.wanted.config)
        composed = toggled(current, self.name_states(s), name)
        if s.scope is None:
            self.policy(composed)
        else:  # an id set earlier for one of the function's sites would win: it goes
            assert s.shown is not None  # the scope is one of its sites
            config = s.wanted.config.at_function(s.shown.sites, s.scope.function, composed)
            self.want(s.wanted.with_sites(dict(config.site_specs)))

    def config(self, config: Config | None) -> None:
        """A whole Config (outer policy, site overrides, device): a row of
        compare, suggest's answer, a side of the diff; None: nothing."""
        if config is not None:
            self.want(self.scene().wanted.with_config(config))

    def device(self, device: str) -> None:
        wanted = self.scene().wanted
        if device != wanted.device:
            self.want(wanted.with_device(device))

    def listed(self, index: int, site: int | None) -> str | None:
        """Policy `index` of the list, at `site` (a highlighted site of a focused
        Sites list) or as the outer policy; what to warn of when there is none."""
        specs = list(self.scene().listed.values())
        if index >= len(specs):
            if not specs:
                return "no target is loaded yet"
            return f"no policy {index}: the list has 0-{len(specs) - 1} (ctrl+p to type any spec)"
        if site is not None:
            self.site(site, specs[index])
        else:
            self.policy(specs[index])
        return None


def _spec(s: Scene, policy: Policy) -> policies.PolicySpec:
    """A listed policy's spec (parsed when listed); other text parsed now."""
    if isinstance(policy, policies.PolicySpec):
        return policy
    listed = s.listed.get(policy)
    declared = s.target.policies if s.target is not None else None  # asked with a target
    return listed if listed is not None else policies.parse(policy, declared)
