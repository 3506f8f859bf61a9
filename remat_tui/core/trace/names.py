"""Provides the checkpoint_name values of an analysis: each name applied anywhere
in the forward or backward jaxpr, with its shapes, bytes and source."""

from __future__ import annotations

from remat_tui.core import jaxcompat as jc
from remat_tui.core.model import NamedValue
from remat_tui.core.trace.residuals import aval_bytes


def named_values(fwd: jc.Jaxpr, bwd: jc.Jaxpr) -> list[NamedValue]:
    """Every checkpoint_name applied anywhere (sub-jaxprs included), first seen
    first. Counted in the forward pass; a name that survives only in the
    backward pass (recomputed under the policy) is counted there."""
    fwd_eqns = name_eqns(fwd)
    bwd_eqns = name_eqns(bwd)
    out = []
    for name in dict.fromkeys([*fwd_eqns, *bwd_eqns]):
        eqns = fwd_eqns.get(name) or bwd_eqns[name]
        avals = tuple(dict.fromkeys(jc.short(e.outvars[0].aval) for e, _ in eqns))
        first = eqns[0][0]
        out.append(
            NamedValue(
                name=name,
                avals=avals,
                bytes=aval_bytes(first.outvars[0].aval),
                count=len(eqns),
                source=jc.user_source(first.source_info),
                total_bytes=sum(aval_bytes(e.outvars[0].aval) * trip for e, trip in eqns),
            )
        )
    return out


def name_eqns(jaxpr: jc.Jaxpr) -> dict[str, list[tuple[jc.JaxprEqn, int]]]:
    """name -> [(equation, how many times it runs: the product of enclosing scan
    lengths)]. A body shared by several equations is walked once per use."""
    found: dict[str, list] = {}
    for eqn, trip in jc.nested_eqns(jaxpr):
        name = jc.checkpoint_name(eqn)
        if name is not None:
            found.setdefault(name, []).append((eqn, trip))
    return found
