"""Provides the configurations suggest weighs.

Two ways, by the size of the space (`search.suggest.pipeline`):

- `enumerated`: a small space (at most ENUMERATE_LIMIT configurations) is
  listed whole: at each place (`search.exact.space`) every built-in
  policy, the target's own, and every save/offload/recompute assignment of
  the names, in every combination over the places; the built-ins around
  the whole function; and the structures.
- `listed`: beside the exact search over the names (`search.exact.search`),
  the candidates that are not name decisions: every built-in policy and the
  target's own at every checkpointed function alike (and, where there are
  several, at each alone), or as the outer policy in code with no
  checkpoint; around the whole function where it has checkpoints (its
  checkpoints as written inside); and the structures of its scans
  (`search.configs.structure_grid`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from remat_tui.core.search.configs.structure_grid import FINE, structure_candidates
from remat_tui.core.search.exact.space import Place
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.places import Site

ENUMERATE_LIMIT = 64  # configurations listed whole; beyond, the exact search's model
STATES = ("recompute", "save", "offload")


def space_size(target: Target, names: list[str], places: list[Place]) -> int:
    """How many configurations enumerating would list (before merging)."""
    return len(choices(target, names)) ** len(places)


def enumerated(
    target: Target, base: Config, sites: Sequence[Site], places: list[Place], names: list[str]
) -> list[Config]:
    """Every combination of every choice at every place, the code as
    written first, then the structures."""
    combos = itertools.product(choices(target, names), repeat=len(places))
    listed = [configure(base, sites, places, c) for c in combos]
    outer = outer_policies(target, base, sites)
    return [base, *listed, *outer, *structure_candidates(target, base, FINE)]


def listed(target: Target, base: Config, sites: Sequence[Site]) -> list[Config]:
    """The candidates that are not name decisions (the module doc), the code
    as written first."""
    specs = policies.candidate_specs(target.policies)
    functions = list(dict.fromkeys(s.function for s in sites))
    out = [base]
    if not functions:
        out += [base.with_policy(spec) for spec in specs]
    for spec in specs:
        config = base
        for function in functions:
            config = config.at_function(sites, function, spec)
        out.append(config)
        if len(functions) > 1:
            out += [base.at_function(sites, f, spec) for f in functions]
    return [*out, *outer_policies(target, base, sites), *structure_candidates(target, base, FINE)]


def outer_policies(target: Target, base: Config, sites: Sequence[Site]) -> list[Config]:
    """Where the code has checkpoints, every built-in policy and the target's
    own around the whole function, its checkpoints as written inside: as
    compare lists them, so that suggest never says nothing fits while a row
    of compare does. (Without checkpoints the outer policy is the place.)"""
    if not sites:
        return []
    return [base.with_policy(spec) for spec in policies.candidate_specs(target.policies)
            if spec.kind != policies.AS_WRITTEN]  # fmt: skip


def choices(target: Target, names: list[str]) -> list[policies.PolicySpec]:
    """Every policy one place can have: built-ins, the target's own, and each
    save/offload/recompute assignment of the names."""
    out = policies.candidate_specs(target.policies)
    for states in itertools.product(STATES, repeat=len(names)):
        saved = [n for n, s in zip(names, states, strict=True) if s == "save"]
        offloaded = [n for n, s in zip(names, states, strict=True) if s == "offload"]
        out.append(policies.names_policy(saved, offloaded))
    # Spellings of the same decisions once: the first (save_only_these_names()
    # is nothing_saveable).
    once: dict[policies.PolicySpec, policies.PolicySpec] = {}
    for spec in out:
        once.setdefault(policies.same_decisions(spec), spec)
    return list(dict.fromkeys(once.values()))


def configure(
    base: Config,
    sites: Sequence[Site],
    places: list[Place],
    specs: Sequence[policies.PolicySpec],
) -> Config:
    """`base` with `specs[i]` at `places[i]`: a function (every call), one
    call (its site id), or the outer policy."""
    if places[0].key is None:
        return base.with_policy(specs[0])
    config = base
    for place, spec in zip(places, specs, strict=True):
        function, key = place.site
        if place.call is None:
            config = config.at_function(sites, function, spec)
        else:
            config = config.with_sites({**dict(config.site_specs), key: spec})
    return config
