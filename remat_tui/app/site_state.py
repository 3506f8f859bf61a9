"""Provides what the app derives from checkpoint sites: where name toggles
apply, the name states there, and the next policy when a site is cycled.

Pure functions of the shown analysis and the requested Config, so the App
only wires them to keys and lists.
"""

from __future__ import annotations

from remat_tui.app.sidebar import states_from
from remat_tui.core.setup.config import Config


def site_scope(analysis, highlighted: int | None):
    """The site whose function's sites name toggles set: the highlighted site
    (the first when none is), or None when there are no sites (outer policy)."""
    if analysis is None or not analysis.sites:
        return None
    return next((s for s in analysis.sites if s.id == highlighted), analysis.sites[0])


def scope_states(site, config: Config, known_names) -> dict:
    """Name states (R/S/O) of the policy in force where toggles apply: at
    `site`'s function (its override in `config`, else the policy in the
    code), or the outer policy when `site` is None."""
    if site is None:
        return states_from(config.spec, known_names)
    overrides = dict(config.site_specs)
    spec = overrides.get(site.id) or overrides.get(site.function) or site.spec
    return states_from(spec, known_names) if spec is not None else {}  # None: custom:


def next_site_policy(site, specs: list[str]) -> str | None:
    """Cycling a site: as in the code (None) → each listed policy → as in the code.
    The policy the code already has is skipped: choosing it would change nothing."""
    order = [None, *(s for s in specs if s != site.policy)]
    current = site.override if site.override in order else None
    return order[(order.index(current) + 1) % len(order)]
