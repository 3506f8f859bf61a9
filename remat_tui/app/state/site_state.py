"""Provides what the app derives from checkpoint sites: where name toggles
apply, the name states there, and the next policy when a site is cycled.

Pure functions of the shown analysis and the requested Config, so the App
only wires them to keys and lists.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from remat_tui.core.model import Analysis
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config

if TYPE_CHECKING:
    from remat_tui.core.model import Site
    from remat_tui.core.setup.policy_spec import PolicySpec

NAME_STATES = ("recompute", "save", "offload")
"""What a names policy does with a checkpoint_name, in the order space cycles them."""


def states_from(spec: PolicySpec, known_names: Iterable[str]) -> dict[str, str]:
    """Name states when `spec` is a names policy; empty (shown as ·) otherwise,
    since other policies do not decide by name."""
    if spec.kind not in ("save_only_these_names", policies.OFFLOAD_NAMES):
        return {}
    states = {n: "recompute" for n in known_names}
    states.update({n: "save" for n in spec.names})
    states.update({n: "offload" for n in spec.offloaded})
    return states


def next_state(state: str) -> str:
    """recompute → save → offload → recompute."""
    return NAME_STATES[(NAME_STATES.index(state) + 1) % len(NAME_STATES)]


def site_scope(analysis: Analysis | None, highlighted: int | None) -> Site | None:
    """The site whose function's sites name toggles set: the highlighted site
    (the first when none is), or None when there are no sites (outer policy)."""
    if analysis is None or not analysis.sites:
        return None
    return next((s for s in analysis.sites if s.id == highlighted), analysis.sites[0])


def scope_states(site: Site | None, config: Config, known_names: Iterable[str]) -> dict:
    """Name states (R/S/O) of the policy in force where toggles apply: at
    `site`'s function (its override in `config`, else the policy in the
    code), or the outer policy when `site` is None."""
    if site is None:
        return states_from(config.spec, known_names)
    overrides = dict(config.site_specs)
    spec = overrides.get(site.id) or overrides.get(site.function) or site.spec
    return states_from(spec, known_names) if spec is not None else {}  # None: custom:


def next_site_policy(site: Site, specs: list[str]) -> str | None:
    """Cycling a site: as in the code (None) → each listed policy → as in the code.
    The policy the code already has is skipped: choosing it would change nothing."""
    order = [None, *(s for s in specs if s != site.policy)]
    current = site.override if site.override in order else None
    return order[(order.index(current) + 1) % len(order)]
