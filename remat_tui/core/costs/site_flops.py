"""Provides FLOPs per checkpoint site (Contract 5's site object, counted by
Contract 6's rules): what a site's body costs in the forward pass, and the
forward work the backward pass does again there under the site's policy.

Forward: the site's remat body in the primal program, counted by `costs.flops`,
times its trip count. It does not depend on the policy (the body runs once in
the forward pass whatever is saved), so an override leaves it unchanged.

Recompute: the equations `trace.recomputation` marks, each attributed to the
innermost remat equation of the backward pass that is a site's. JAX keeps the
call's source information on the remat equation it emits for the backward
pass, so a backward remat belongs to the site applied at the same user line
(file, line, column, function) to the same checkpointed function. Work inside
an outer policy's checkpoint (not a site) stays unattributed. Sites that the
line does not tell apart (a Python loop calling one checkpointed block) are
told apart by trip count and policy, and when still alike, by order: the
backward pass runs them last first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from remat_tui.core import jaxcompat as jc
from remat_tui.core.costs import flops
from remat_tui.core.jaxcompat.primitives import eqn_flops, has_own_rule
from remat_tui.core.model import Site, SiteFlops, Source
from remat_tui.core.setup import policies


def attach(
    sites: list[Site],
    primal: Any,
    bwd: jc.Jaxpr,
    recompute: Any,
    prefer_dir: str | None,
    declared: dict[str, Callable] | None,
) -> list[Site]:
    """`sites` (as shown, overrides set) with their `flops`; `primal` is the
    program they were found in (`trace.primal`), `bwd` the backward jaxpr and
    `recompute` its Recomputation (`trace.recomputation`)."""
    if not sites:
        return sites
    live = [s for s in sites if s.effective != policies.AS_WRITTEN]  # inlined: no remat
    owners = _owners(bwd, live, prefer_dir, declared)
    spent = _Attributor(recompute.eqn_ids, owners).jaxpr(bwd, None)
    matched = set(owners.values())
    out = []
    for site, found in zip(sites, primal.sites, strict=True):
        body = jc.remat_body(_site_eqn(jc.open_jaxpr(primal.closed), found))
        forward = flops.count(body).flops * (site.trip_count or 1)
        if site.effective == policies.AS_WRITTEN:
            again = 0  # the checkpoint is removed: nothing is recomputed there
        elif site.id in matched:
            again = spent.get(site.id, flops.Count()).flops
        else:
            again = None  # no backward remat told to be this site's
        out.append(replace(site, flops=SiteFlops(forward, again)))
    return out


def _site_eqn(jaxpr: jc.Jaxpr, found: Any) -> jc.JaxprEqn:
    """The site's remat equation in the primal program, by its recorded path."""
    for i, slot in found.steps:
        jaxpr = next(b.jaxpr for b in jc.bodies(jaxpr.eqns[i]) if b.slot == slot)
    return jaxpr.eqns[found.index]


def _owners(
    bwd: jc.Jaxpr, sites: list[Site], prefer_dir: str | None, declared: dict[str, Callable] | None
) -> dict[int, int]:
    """id(backward remat equation) -> the id of the site it re-runs."""
    by_call: dict[tuple, list[Site]] = {}
    for s in sites:
        by_call.setdefault((s.called_at, s.function), []).append(s)
    groups: dict[tuple[int, ...], list] = {}
    for eqn, source, trip in _remats(bwd, prefer_dir):
        alike = by_call.get((source, jc.remat_function(eqn)), [])
        if len(alike) > 1:
            # Narrow by what else is known, unless that would leave none: a
            # trip count or a policy read differently must not lose the match.
            alike = [s for s in alike if s.trip_count == trip] or alike
            policy = policies.describe_jax(jc.remat_policy(eqn), declared)
            alike = [s for s in alike if s.effective == policy] or alike
        if alike:
            groups.setdefault(tuple(s.id for s in alike), []).append(eqn)
    owners: dict[int, int] = {}
    for ids, eqns in groups.items():
        if len(ids) == 1:
            owners.update((id(e), ids[0]) for e in eqns)
        elif len(ids) == len(eqns):  # transposition runs the last site first
            owners.update((id(e), i) for e, i in zip(reversed(eqns), ids, strict=True))
        # otherwise ambiguous: those sites' recompute stays unknown
    return owners


def _remats(
    jaxpr: jc.Jaxpr, prefer_dir: str | None
) -> list[tuple[jc.JaxprEqn, Source | None, int | None]]:
    """(remat equation, its user source, trip count) in program order, the
    source found as `trace.sites` finds a site's `called_at`: inside a
    scan body the line that entered the scan stands in for frames a library's
    scan leaves."""
    found = []

    def walk(j: jc.Jaxpr, trip: int | None, outer_source: Source | None) -> None:
        for eqn in j.eqns:
            held = jc.bodies(eqn)
            if not held:
                continue  # not a remat, and no body to enter: its source is not needed
            # Reading a source walks the traceback: done only for equations with bodies.
            own = jc.own_source(eqn.source_info, prefer_dir, fallback=False) or outer_source
            if jc.is_remat(eqn):
                found.append((eqn, own or jc.user_source(eqn.source_info), trip))
            for body in held:
                walk(body.jaxpr, (trip or 1) * body.iterations if body.iterations else trip, own)

    walk(jaxpr, None, None)
    return found


class _Attributor:
    """Recomputed FLOPs per owner (site id, or None outside any site), summed
    by `costs.flops`'s rules: scan bodies x length, a cond's costliest branch."""

    def __init__(self, marked: set[int], owners: dict[int, int]):
        self.marked = marked
        self.owners = owners
        # A body's split depends only on the site around it: memoised per use.
        self.memo: dict[tuple[int, int | None], dict] = {}

    def jaxpr(self, jaxpr: jc.Jaxpr, current: int | None) -> dict[int | None, flops.Count]:
        key = (id(jaxpr), current)
        if key in self.memo:
            return self.memo[key]
        out: dict[int | None, flops.Count] = {}
        for eqn in jaxpr.eqns:
            held = jc.bodies(eqn)
            if not held or has_own_rule(eqn):  # a leaf, as linemap counts it
                if id(eqn) in self.marked:
                    out[current] = out.get(current, flops.Count()) + flops.Count(eqn_flops(eqn))
                continue
            here = self.owners.get(id(eqn), current)
            inner = [(body, self.jaxpr(body.jaxpr, here)) for body in held]
            for owner in {k for _, split in inner for k in split}:
                part = [(sub, split.get(owner, flops.Count())) for sub, split in inner]
                out[owner] = out.get(owner, flops.Count()) + flops.combine(eqn, part)
        self.memo[key] = out
        return out
