"""Provides `merge_key` and `distinct`: configurations that make the same
decisions, merged before anything is traced or compiled (Contract 13).

Two configurations are one where their outer policies make the same
decisions (`setup.policies` `same_decisions`: `save_only_these_names()`
is nothing_saveable, ...) and so do their site overrides, an override being
no override at all where it makes the decisions of the policy written at
that site (`--site block=nothing_saveable` on `jax.checkpoint(block)`, whose
default policy is nothing_saveable). What still differs only as programs
(dots_saveable and dots_with_no_batch_dims_saveable on a model without
batched dots) is compiled once by `xla.compile.service`'s key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config

if TYPE_CHECKING:
    from remat_tui.core.places import Site


def merge_key(config: Config, sites: Sequence[Site]) -> tuple:
    """What `config` decides, as a value: equal for configurations that
    save, recompute and offload alike. `sites`: the analysis's Site list."""
    overrides = []
    for key, spec in config.site_specs:
        decided = policies.same_decisions(spec)
        written = [s for s in sites if key in (s.id, s.function)]
        if written and all(_written_policy(s) == decided for s in written):
            continue  # the site's own policy: as written there
        overrides.append((key, decided))
    # A structure rebuilds a scan: it decides apart from any policy.
    return (policies.same_decisions(config.spec), tuple(overrides), config.structure, config.device)


def distinct(configs: list[Config], sites: Sequence[Site]) -> list[Config]:
    """`configs` with each set of configurations that decide alike kept once,
    where it first comes."""
    kept: dict = {}
    for config in configs:
        kept.setdefault(merge_key(config, sites), config)
    return list(kept.values())


def _written_policy(site: Site) -> policies.PolicySpec | None:
    """The decisions of the policy written at `site` (its spec, read off the
    code once); None for one remat-tui cannot name (a custom policy equals
    nothing)."""
    return None if site.spec is None else policies.same_decisions(site.spec)
