"""Provides Recomputation: the forward work a backward pass does again, found
by one data-flow walk over either program it can be read from.

- `recomputation(bwd, ...)`: in the backward jaxpr, the equations inside a
  remat (checkpoint) equation's body that are computed from residuals without
  touching a cotangent, with their ids (the backward pane marks them `↻`);
  and apart from them, the transfers that bring an offloaded residual back
  from host memory (a device_put there reads a residual too, but re-runs no
  forward work: the pane marks it as a transfer).
- `from_linear(linear)`: the same count and FLOPs read from the linear program
  `jax.vjp` returns, without tracing the backward pass, where that reading is
  exact; compare and suggest use it for their rows (`trace.analysis`
  `row_view`).

Why the linear program can tell: JAX transposes a checkpoint
(ad_checkpoint.remat_transpose) by partially evaluating its body with the
linear inputs unknown, re-running the known part (the recomputation) and
transposing the rest. So the backward pass re-runs exactly the body's
equations that read residuals and no tangent, which is what the walk counts
in the backward jaxpr. This holds while

- every checkpoint in the linear program is top level (a nested one is
  transposed inside its parent's transposition and re-runs work again), and
  the only other calls are `jit`s, whose outputs are followed one by one;
- every equation that reads a tangent is a primitive in
  `jaxcompat.primitives.TRANSPOSED_WITHOUT_WORK`: its transpose reads the
  cotangent and adds no forward work (a custom_vjp's backward function, say,
  may recompute from residuals).

Anything else (scans, conds, loops, nested checkpoints, another primitive)
gets None, and the caller traces the backward pass. tests/unit/test_recompute.py
checks the reading against that trace.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from remat_tui.core import jaxcompat as jc
from remat_tui.core.costs import flops
from remat_tui.core.jaxcompat.primitives import eqn_flops, has_own_rule, transposes_without_work


@dataclass
class Recomputation:
    """Backward equations that re-run forward work: inside a remat (checkpoint)
    equation's sub-jaxpr, computed from residuals without touching a cotangent."""

    eqn_ids: set[int] = field(default_factory=set)  # id() of each such equation
    # id() of each device_put bringing an offloaded residual back from host
    # memory: it reads residuals alone too, but moves a value, recomputes none
    transfer_ids: set[int] = field(default_factory=set)
    count: int = 0  # leaf equations, once per call site (a shared jaxpr per use)
    # their FLOPs (`costs.flops` rules): scan bodies x length, a cond's
    # costliest branch, while bodies once (then exact is False)
    flops: int = 0
    flops_exact: bool = True


def recomputation(jaxpr: jc.Jaxpr, residual_invars: set, cotangent_invars: set) -> Recomputation:
    """The recomputation in a backward jaxpr whose inputs are the residuals
    and the cotangents."""
    return _read(jaxpr, residual_invars, cotangent_invars, linear=False)


def from_linear(linear: jc.Linear) -> Recomputation | None:
    """What the backward pass of `linear` (the linear program of a `jax.vjp`)
    re-runs: its equation count and FLOPs as `recomputation` counts them in
    the backward jaxpr (no equation ids: there is no backward jaxpr), or None
    when only tracing the backward pass can tell."""
    try:
        return _read(linear.jaxpr, linear.residuals, linear.tangents, linear=True)
    except _Unreadable:
        return None


class _Unreadable(Exception):
    """The linear program holds something whose transposition is not modelled."""


def _read(
    jaxpr: jc.Jaxpr, residuals: Iterable, cotangents: Iterable, linear: bool
) -> Recomputation:
    found = Recomputation()
    cost = _Flow(found, linear).walk(jaxpr, set(residuals), set(cotangents), False)
    found.flops, found.flops_exact = cost.flops, cost.exact
    return found


class _Flow:
    """The walk: which values derive from residuals alone (`primal`) and which
    from a cotangent, or in the linear program a tangent (`ct`), equation by
    equation and into every body; primal work inside a remat body is
    recomputation, counted into `found`.

    In a backward jaxpr every equation is taken as it comes, and an equation
    holding bodies gives all its outputs the kind its inputs give. In the
    linear program (`linear`) only what the module docstring says is modelled
    (anything else raises _Unreadable), and a call's outputs take the kinds of
    its body's outputs one by one."""

    def __init__(self, found: Recomputation, linear: bool):
        self.found = found
        self.linear = linear

    def walk(self, jaxpr: jc.Jaxpr, primal: set, ct: set, in_remat: bool) -> flops.Count:
        """Marks the recomputing equations of `jaxpr`; returns their FLOPs (one run)."""
        total, exact = 0, True
        for eqn in jaxpr.eqns:
            spent, spent_exact = self._equation(eqn, primal, ct, in_remat)
            total += spent
            exact = exact and spent_exact
        return flops.Count(total, exact)

    def _equation(self, eqn: jc.JaxprEqn, primal: set, ct: set, in_remat: bool) -> tuple[int, bool]:
        """(FLOPs, exact) the equation re-runs, its outputs' kinds recorded."""
        calls = jc.bodies(eqn)
        uses_ct = uses_primal = False
        for v in eqn.invars:
            if isinstance(v, jc.Var):
                if v in ct:
                    uses_ct = True
                elif v in primal:
                    uses_primal = True
        if uses_ct and not uses_primal:  # the second test above was skipped
            uses_primal = any(isinstance(v, jc.Var) and v in primal for v in eqn.invars)
        if self.linear:
            _check_linear(eqn, calls, uses_ct, in_remat)
        if uses_ct and uses_primal and jc.primitives.is_barrier(eqn):
            # remat3 pins residuals and cotangents behind one barrier: each
            # output is its own input, so residuals stay residuals.
            for i, o in zip(eqn.invars, eqn.outvars, strict=True):
                if isinstance(i, jc.Var):
                    (ct if i in ct else primal if i in primal else set()).add(o)
            return 0, True
        by_body = self.linear and bool(calls)  # outputs follow the body's, one by one
        spent = 0
        if by_body:
            pass
        elif uses_ct:
            ct.update(eqn.outvars)
        elif uses_primal:
            primal.update(eqn.outvars)
            if jc.primitives.brings_from_host(eqn):
                if not self.linear:
                    self.found.transfer_ids.add(id(eqn))
            elif in_remat:
                if not self.linear:
                    self.found.eqn_ids.add(id(eqn))
                if not calls:
                    self.found.count += 1
                    spent = eqn_flops(eqn)
                elif has_own_rule(eqn):  # a leaf, as flops.is_leaf
                    spent = eqn_flops(eqn)
        if not calls:
            return spent, True
        inner_remat = in_remat or jc.is_remat(eqn)
        inner: list[tuple] = []
        for body in calls:
            sub_primal, sub_ct = _body_inputs(body, primal, ct, uses_primal, uses_ct)
            inner.append((body, self.walk(body.jaxpr, sub_primal, sub_ct, inner_remat)))
            if by_body:
                _body_outputs(body, eqn, sub_primal, sub_ct, primal, ct)
        if has_own_rule(eqn):  # a leaf: its bodies' work is its own rule's
            return spent, True
        combined = flops.combine(eqn, inner)  # scan x length, cond's costliest branch, ...
        return spent + combined.flops, combined.exact


def _check_linear(eqn: jc.JaxprEqn, calls: Any, uses_ct: bool, in_remat: bool) -> None:
    """In the linear program: a call must be a jit or a top-level checkpoint
    with one body wired one to one, and an equation reading a tangent must
    transpose without work; else _Unreadable."""
    if calls:
        top_remat = jc.is_remat(eqn) and not in_remat
        wired = len(calls) == 1 and calls[0].inputs is not None and calls[0].outputs
        if not (jc.is_jit(eqn) or top_remat) or not wired:
            raise _Unreadable(jc.primitive_name(eqn))
    elif uses_ct and not transposes_without_work(eqn):
        raise _Unreadable(jc.primitive_name(eqn))


def _body_inputs(
    body: jc.Body, primal: set, ct: set, uses_primal: bool, uses_ct: bool
) -> tuple[set, set]:
    """(primal, ct) among the body's inputs: as the equation's inputs bound to
    them are; with its wiring unknown, every input of the kind the equation's
    inputs give (cotangent first)."""
    sub = body.jaxpr
    if body.inputs is None:  # unknown calling convention: be conservative
        sub_ct = set(sub.invars) if uses_ct else set()
        sub_primal = set(sub.invars) if uses_primal and not uses_ct else set()
        return sub_primal, sub_ct
    pairs = [(s, o) for s, o in zip(sub.invars, body.inputs, strict=True) if isinstance(o, jc.Var)]
    return {s for s, o in pairs if o in primal}, {s for s, o in pairs if o in ct}


def _body_outputs(
    body: jc.Body, eqn: jc.JaxprEqn, sub_primal: set, sub_ct: set, primal: set, ct: set
) -> None:
    """Each output of a call takes the kind of the body's output it is."""
    for inner, outer in zip(body.jaxpr.outvars, eqn.outvars, strict=True):
        if not isinstance(inner, jc.Var):
            continue
        if inner in sub_ct:
            ct.add(outer)
        elif inner in sub_primal:
            primal.add(outer)
