"""Provides the recompute FLOPs of a configuration read from the linear program
`jax.vjp` returns, without tracing the backward pass, where that reading is
exact; compare and suggest use it for their rows (analysis `row_only`).

Why it can be exact: JAX transposes a checkpoint (ad_checkpoint.remat_transpose)
by partially evaluating its body with the linear inputs unknown, re-running
the known part (the recomputation) and transposing the rest. So the backward
pass re-runs exactly the body's equations that read residuals and no tangent,
which is what `linemap.recomputation` counts there. This holds while

- every checkpoint in the linear program is top level (a nested one is
  transposed inside its parent's transposition and re-runs work again), and
  the only other calls are `jit`s, whose outputs are followed one by one;
- every equation that reads a tangent is a primitive in `TRANSPOSED_WITHOUT_WORK`:
  its transpose reads the cotangent and adds no forward work (a custom_vjp's
  backward function, say, may recompute from residuals).

Anything else (scans, conds, loops, nested checkpoints, another primitive)
gets None, and the caller traces the backward pass. tests/test_recompute.py
checks the reading against that trace.
"""

from __future__ import annotations

from remat_tui.core import flops
from remat_tui.core import jax_internals as ji
from remat_tui.core.linemap import Recomputation

# Linear primitives whose transpose rules compute from the cotangent (or move
# data, 0 FLOPs), each exercised by tests/test_recompute.py. select_n only with
# a boolean selector (see _compares_cases).
TRANSPOSED_WITHOUT_WORK = frozenset(
    {
        "add",
        "add_any",
        "sub",
        "neg",
        "mul",
        "div",
        "dot_general",
        "broadcast_in_dim",
        "reduce_sum",
        "reshape",
        "transpose",
        "select_n",
        "convert_element_type",
        "squeeze",
        "gather",
        "slice",
        "dynamic_slice",
        "dynamic_update_slice",
        "concatenate",
        "pad",
        "cumsum",
        "copy",
    }
)


class _Unreadable(Exception):
    """The linear program holds something whose transposition is not modelled."""


def from_linear(linear) -> Recomputation | None:
    """What the backward pass of `linear` (the jaxpr of a `jax.vjp`: residuals
    as its constvars, tangents as its invars) re-runs: its equation count and
    FLOPs as `linemap.recomputation` counts them there (no equation ids: there
    is no backward jaxpr), or None when only tracing the backward pass can tell."""
    found = Recomputation()
    try:
        cost = _walk(linear, set(linear.constvars), set(linear.invars), False, found)
    except _Unreadable:
        return None
    found.flops, found.flops_exact = cost.flops, cost.exact
    return found


def _walk(jaxpr, primal: set, tangent: set, in_remat: bool, found: Recomputation) -> flops.Count:
    cost = flops.Count()
    for eqn in jaxpr.eqns:
        subs = list(ji.sub_jaxprs(eqn))
        if subs:
            cost += _call(eqn, subs, primal, tangent, in_remat, found)
            continue
        ins = [v for v in eqn.invars if isinstance(v, ji.Var)]
        if any(v in tangent for v in ins):
            if eqn.primitive.name not in TRANSPOSED_WITHOUT_WORK or _compares_cases(eqn):
                raise _Unreadable(eqn.primitive.name)
            tangent.update(eqn.outvars)
        elif any(v in primal for v in ins):
            primal.update(eqn.outvars)
            if in_remat:
                found.count += 1
                cost += flops.Count(flops.eqn_flops(eqn))
    return cost


def _compares_cases(eqn) -> bool:
    """A select_n whose selector is not boolean: its transpose compares the
    selector with each case (`eq`), forward work the linear program lacks."""
    return eqn.primitive.name == "select_n" and eqn.invars[0].aval.dtype != bool


def _call(eqn, subs, primal: set, tangent: set, in_remat: bool, found) -> flops.Count:
    """A jit, or a top-level checkpoint: its body walked with its inputs' kinds,
    and each output taking the kind of the body's output it is."""
    remat = ji.is_remat(eqn)
    if not (eqn.primitive.name == "jit" or (remat and not in_remat)) or len(subs) != 1:
        raise _Unreadable(eqn.primitive.name)
    (body,) = subs
    pairs = [(s, o) for s, o in zip(body.invars, eqn.invars, strict=True) if isinstance(o, ji.Var)]
    inner_primal = {s for s, o in pairs if o in primal}
    inner_tangent = {s for s, o in pairs if o in tangent}
    cost = _walk(body, inner_primal, inner_tangent, in_remat or remat, found)
    for inner, outer in zip(body.outvars, eqn.outvars, strict=True):
        if not isinstance(inner, ji.Var):
            continue
        if inner in inner_tangent:
            tangent.add(outer)
        elif inner in inner_primal:
            primal.add(outer)
    return cost
