"""Provides name_verdicts: for each checkpoint_name, whether saving it alone at
one place (the outer policy, or a checkpointed function) spares any recompute,
and why not when it does not (`search.notes.unchanged.spare_verdict`, naming
the work beneath it still re-run: `search.notes.reruns`). The app's Names list
marks those names; compare says the same in its notes.

Measured, not guessed: one lean analysis with no name saved at the place and
one per name saved alone (compare's rows, without the jaxpr text).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from remat_tui.core.search.notes.reruns import rerun_beneath
from remat_tui.core.search.notes.unchanged import spare_verdict
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.analysis import row_view
from remat_tui.core.trace.traced import trace_config
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.model import Site
    from remat_tui.core.trace.traced import Trace


def name_verdicts(
    target: Target,
    config: Config,
    names: list[str],
    function: str | None = None,
    sites: Sequence[Site] = (),
    cancelled: Callable[[], bool] | None = None,
) -> dict[str, str]:
    """{name: why saving it alone is not worth it} for the names where it is
    not, at `function` (every site of it; `sites`: the analysis's Site list)
    or, with no function, as the outer policy of `config`. Only the names
    half of the policy there changes (policies.with_names): under
    save_from_both_policies(dots_saveable, ...) each name is weighed with
    the dots still saved."""
    around = place_spec(config, function, sites)

    def at_place(names_spec: policies.PolicySpec) -> Config:
        spec = policies.with_names(around, names_spec)
        if function is None:
            return config.with_policy(spec)
        return config.at_function(sites, function, spec)

    def measure(spec: policies.PolicySpec) -> tuple[int, int, Trace]:
        t = trace_config(target, at_place(spec), cancelled)
        a = row_view(t, cancelled)
        return a.flops["recompute"], a.totals.device_bytes, t

    none_flops, none_bytes, _ = measure(policies.names_policy([], []))
    out = {}
    for name in names:
        flops, device_bytes, t = measure(policies.names_policy([name], []))
        verdict = spare_verdict(
            name, none_flops - flops, none_flops, device_bytes - none_bytes,
            beneath=lambda t=t, name=name: rerun_beneath(t, name),
        )  # fmt: skip
        if verdict is not None:
            out[name] = verdict
    return out


def place_spec(
    config: Config, function: str | None, sites: Sequence[Site]
) -> policies.PolicySpec | None:
    """The policy `config` gives the place: the outer policy (no function),
    else the override at `function` (or at its first site), else the policy
    written there; None where that is a callable remat-tui cannot read."""
    if function is None:
        return config.spec
    overrides = dict(config.site_specs)
    mine = [s for s in sites if s.function == function]
    for key in (function, *(s.id for s in mine)):
        if key in overrides:
            return overrides[key]
    return mine[0].spec if mine else None
