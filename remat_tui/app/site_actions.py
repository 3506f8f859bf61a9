"""Provides SiteActions: setting checkpoint sites' policies and cycling
checkpoint_names, at the selected site's function when the code has sites, else
as the outer policy; and opening a whole Config (from the compare screen). A
mixin of RematApp (handlers named on_<message>, as Textual finds them).
"""

from __future__ import annotations

from remat_tui.app.sidebar import Sidebar, next_state
from remat_tui.app.site_state import (
    next_site_policy,
    scope_states,
    site_scope,
    toggled_overrides,
)
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.errors import RematError


class SiteActions:
    """Sites, names and configurations (mixed into RematApp)."""

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
        self.wanted = self.wanted.with_sites(overrides)

    def cycle_site(self, site_id: int) -> None:
        """as in the code → each listed policy → as in the code."""
        site = next((s for s in self.shown.sites if s.id == site_id), None) if self.shown else None
        if site is not None:
            self.apply_site(site_id, next_site_policy(site, self.policy_specs))

    def on_sidebar_site_chosen(self, message: Sidebar.SiteChosen) -> None:
        self.cycle_site(message.site)

    def on_sidebar_site_highlighted(self, message: Sidebar.SiteHighlighted) -> None:
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

    def on_sidebar_policy_chosen(self, message: Sidebar.PolicyChosen) -> None:
        self.apply_policy(message.spec)

    def on_sidebar_device_chosen(self, message: Sidebar.DeviceChosen) -> None:
        self.choose_device(message.device)

    def on_sidebar_name_chosen(self, message: Sidebar.NameChosen) -> None:
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
            self.wanted = self.wanted.with_sites(
                toggled_overrides(self.site_overrides, self.shown, scope.function, composed)
            )

    def open_config(self, config: Config | None) -> None:
        """Show `config` (outer policy, site overrides, device) in the main screen."""
        if config is not None:
            self.wanted = self.wanted.with_config(config)
