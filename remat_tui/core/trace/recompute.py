"""Provides the recompute FLOPs of a configuration read from the linear program
`jax.vjp` returns, without tracing the backward pass, where that reading is
exact; compare and suggest use it for their rows (core/trace/analysis.py `row_view`).

Why it can be exact: JAX transposes a checkpoint (ad_checkpoint.remat_transpose)
by partially evaluating its body with the linear inputs unknown, re-running
the known part (the recomputation) and transposing the rest. So the backward
pass re-runs exactly the body's equations that read residuals and no tangent,
which is what `linemap.recomputation` counts there. This holds while

- every checkpoint in the linear program is top level (a nested one is
  transposed inside its parent's transposition and re-runs work again), and
  the only other calls are `jit`s, whose outputs are followed one by one;
- every equation that reads a tangent is a primitive in
  `jaxcompat.primitives.TRANSPOSED_WITHOUT_WORK`:
  its transpose reads the cotangent and adds no forward work (a custom_vjp's
  backward function, say, may recompute from residuals).

Anything else (scans, conds, loops, nested checkpoints, another primitive)
gets None, and the caller traces the backward pass. tests/test_recompute.py
checks the reading against that trace.
"""

from __future__ import annotations

from remat_tui.core import jaxcompat as jc
from remat_tui.core.costs import flops
from remat_tui.core.jaxcompat.primitives import eqn_flops, transposes_without_work
from remat_tui.core.trace.linemap import Recomputation


class _Unreadable(Exception):
    """The linear program holds something whose transposition is not modelled."""


def from_linear(linear: jc.Linear) -> Recomputation | None:
    """What the backward pass of `linear` (the linear program of a `jax.vjp`)
    re-runs: its equation count and FLOPs as `linemap.recomputation` counts
    them there (no equation ids: there is no backward jaxpr), or None when
    only tracing the backward pass can tell."""
    found = Recomputation()
    try:
        cost = _walk(linear.jaxpr, set(linear.residuals), set(linear.tangents), False, found)
    except _Unreadable:
        return None
    found.flops, found.flops_exact = cost.flops, cost.exact
    return found


def _walk(jaxpr, primal: set, tangent: set, in_remat: bool, found: Recomputation) -> flops.Count:
    cost = flops.Count()
    for eqn in jaxpr.eqns:
        held = jc.bodies(eqn)
        if held:
            cost += _call(eqn, held, primal, tangent, in_remat, found)
            continue
        ins = [v for v in eqn.invars if isinstance(v, jc.Var)]
        if any(v in tangent for v in ins):
            if not transposes_without_work(eqn):
                raise _Unreadable(jc.primitive_name(eqn))
            tangent.update(eqn.outvars)
        elif any(v in primal for v in ins):
            primal.update(eqn.outvars)
            if in_remat:
                found.count += 1
                cost += flops.Count(eqn_flops(eqn))
    return cost


def _call(eqn, held, primal: set, tangent: set, in_remat: bool, found) -> flops.Count:
    """A jit, or a top-level checkpoint: its body walked with its inputs' kinds,
    and each output taking the kind of the body's output it is."""
    remat = jc.is_remat(eqn)
    if not (jc.is_jit(eqn) or (remat and not in_remat)) or len(held) != 1:
        raise _Unreadable(jc.primitive_name(eqn))
    body = held[0].jaxpr
    pairs = [(s, o) for s, o in zip(body.invars, eqn.invars, strict=True) if isinstance(o, jc.Var)]
    inner_primal = {s for s, o in pairs if o in primal}
    inner_tangent = {s for s, o in pairs if o in tangent}
    cost = _walk(body, inner_primal, inner_tangent, in_remat or remat, found)
    for inner, outer in zip(body.outvars, eqn.outvars, strict=True):
        if not isinstance(inner, jc.Var):
            continue
        if inner in inner_tangent:
            tangent.add(outer)
        elif inner in inner_primal:
            primal.add(outer)
    return cost
