"""Provides what the app derives from checkpoint sites: where name toggles
apply, the name states there, the policy a toggle makes, and the next policy
when a site is cycled.

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
    """Name states of what `spec` decides by name (a names policy, or the
    names half of a save_from_both_policies); empty (shown as ·) where it
    decides nothing by name."""
    names = policies.names_part(spec)
    if names is None:
        return {}
    states = {n: "recompute" for n in known_names}
    states.update({n: "save" for n in names.names})
    states.update({n: "offload" for n in names.offloaded})
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


def scope_spec(site: Site | None, config: Config) -> PolicySpec | None:
    """The policy in force where toggles apply: at `site`'s function (its
    override in `config`, else the policy in the code; None: a custom one,
    not read), or the outer policy when `site` is None."""
    if site is None:
        return config.spec
    overrides = dict(config.site_specs)
    return overrides.get(site.id) or overrides.get(site.function) or site.spec


def scope_states(site: Site | None, config: Config, known_names: Iterable[str]) -> dict:
    """Name states (R/S/O) of the policy in force where toggles apply."""
    spec = scope_spec(site, config)
    return states_from(spec, known_names) if spec is not None else {}


def toggled(spec: PolicySpec | None, states: dict[str, str], name: str) -> PolicySpec:
    """The policy `spec` becomes when `name` goes to its next state (`states`:
    every name's now): what it decides by name replaced, the rest kept
    (core/setup/policy_spec.py's `with_names`). Offload is skipped where the
    names are half of a save_from_both_policies: JAX refuses an offload there."""
    states = dict(states)
    state = states.get(name, "recompute")
    tried: list[PolicySpec] = []
    for _ in NAME_STATES:
        state = states[name] = next_state(state)
        saved = [n for n, s in states.items() if s == "save"]
        offloaded = [n for n, s in states.items() if s == "offload"]
        tried.append(policies.with_names(spec, policies.names_policy(saved, offloaded)))
        if not (tried[-1].kind == policies.BOTH and tried[-1].offloaded_names()):
            return tried[-1]
    return tried[0]  # it offloads another name there already: JAX's error is shown


def next_site_policy(site: Site, specs: list[str]) -> str | None:
    """Cycling a site: as in the code (None) → each listed policy → as in the code.
    The policy the code already has is skipped: choosing it would change nothing."""
    order = [None, *(s for s in specs if s != site.policy)]
    current = site.override if site.override in order else None
    return order[(order.index(current) + 1) % len(order)]
