"""Provides what the app derives from checkpoint sites: where name toggles
apply, the name states there, and the next policy when a site is cycled.

Pure functions of the shown analysis and the app's requested overrides, so
the App only wires them to keys and lists.
"""

from __future__ import annotations

from remat_tui.app.sidebar import states_from
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.errors import RematError


def site_scope(analysis, highlighted: int | None):
    """The site whose function's sites name toggles set: the highlighted site
    (the first when none is), or None when there are no sites (outer policy)."""
    if analysis is None or not analysis.sites:
        return None
    return next((s for s in analysis.sites if s.id == highlighted), analysis.sites[0])


def scope_states(site, outer_spec, known_names, overrides, declared) -> dict:
    """Name states (R/S/O) of the policy in force where toggles apply."""
    if site is None:
        return states_from(outer_spec, known_names) if outer_spec is not None else {}
    text = overrides.get(site.id) or overrides.get(site.function) or site.policy
    if text.startswith("custom:"):
        return {}
    try:
        return states_from(policies.parse(text, declared), known_names)
    except RematError:
        return {}


def toggled_overrides(overrides: dict, analysis, function: str, spec: str) -> dict:
    """Overrides with `spec` at every site of `function`: an id set earlier for
    one of them would win over the function's name, so it goes."""
    return Config().with_sites(overrides).at_function(analysis.sites, function, spec).site_overrides


def next_site_policy(site, specs: list[str]) -> str | None:
    """Cycling a site: as in the code (None) → each listed policy → as in the code.
    The policy the code already has is skipped: choosing it would change nothing."""
    order = [None, *(s for s in specs if s != site.policy)]
    current = site.override if site.override in order else None
    return order[(order.index(current) + 1) % len(order)]
