"""Provides FLOP counts of jaxprs (Contract 6), without compiling anything.

The counting rules, one equation at a time:

- `dot_general`: 2 x multiply-adds, i.e. 2 * prod(lhs shape) * prod(rhs free
  dims) (= 2 * batch * lhs free * rhs free * contracting). `ragged_dot_general`
  likewise, with the rhs group dimension not counted (each lhs row meets one
  group).
- `conv_general_dilated`: 2 x the multiply-adds that touch real input: taps
  that land in padding or in the holes of an lhs dilation are not counted, as
  XLA's cost analysis does not count them. So a "SAME" convolution counts a
  little less than 2 * outputs * kernel size.
- Reductions (`reduce_sum`, `reduce_max`, ..., `argmax`, `argmin`, `reduce`):
  one per combining step, input elements - output elements (summing n values
  takes n - 1 adds). Windowed reductions (`reduce_window_*`): one per window
  element per output element. Scatters that combine (`scatter-add`, `-mul`,
  `-min`, `-max`, `-sub`): one per update element.
- Data movement and bookkeeping count 0: reshape, transpose, broadcast_in_dim,
  squeeze, expand_dims, slice, dynamic_slice, dynamic_update_slice, gather,
  scatter (plain), concatenate, pad, rev, split, converts
  (convert_element_type, bitcast_convert_type), copies, device_put,
  reduce_precision, optimization_barrier, `name` (checkpoint_name), iota,
  sharding constraints and PRNG key wrapping. They move or relabel values and
  compute nothing.
- Every other primitive: one per output element. That includes `select_n`
  (a selection is one elementwise operation), comparisons, transcendental
  functions (one each, however the backend expands them), cumulative scans
  (`cumsum`: one per output), `sort` and `fft` (one per output element, an
  undercount of their n log n).
- Bodies: `scan` x its length; `while` (cond and body) once, and the count is
  flagged inexact (its trip count is not known without running it) unless
  the loop costs 0; `cond` its most expensive
  branch (a bound: only one branch runs); `shard_map` its per-device body x
  the devices of its manual axes; `jit`, `closed_call`, `remat`,
  `custom_jvp_call`, `custom_vjp_call` once per use (the wrappers themselves
  cost 0); `custom_linear_solve` its `solve`. Any other primitive holding a
  jaxpr (`pallas_call`, say): its bodies once each, flagged inexact.
  A jaxpr shared by several equations is counted once per use (and computed
  once: counts are memoised by identity).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from remat_tui.core import jaxcompat as jc
from remat_tui.core.jaxcompat.primitives import eqn_flops, has_own_rule


@dataclass(frozen=True)
class Count:
    """FLOPs of a jaxpr, and whether the rules could count them exactly."""

    flops: int = 0
    exact: bool = True

    def __add__(self, other: Count) -> Count:
        return Count(self.flops + other.flops, self.exact and other.exact)


def count(jaxpr: jc.Jaxpr) -> Count:
    """FLOPs of running `jaxpr` (a Jaxpr or ClosedJaxpr) once."""
    jaxpr = jc.open_jaxpr(jaxpr)
    return _Counter().jaxpr(jaxpr)


class _Counter:
    def __init__(self) -> None:
        self.memo: dict[int, Count] = {}

    def jaxpr(self, jaxpr: jc.Jaxpr) -> Count:
        key = id(jaxpr)
        found = self.memo.get(key)
        if found is None:
            flops, exact = 0, True
            for eqn in jaxpr.eqns:
                if is_leaf(eqn):
                    flops += eqn_flops(eqn)
                else:
                    c = combine(eqn, [(b, self.jaxpr(b.jaxpr)) for b in jc.bodies(eqn)])
                    flops += c.flops
                    exact = exact and c.exact
            found = self.memo[key] = Count(flops, exact)
        return found


def is_leaf(eqn: jc.JaxprEqn) -> bool:
    """Whether the equation is counted by its own rule (eqn_flops), not by its
    bodies (combine)."""
    return has_own_rule(eqn) or not jc.bodies(eqn)


def combine(eqn: jc.JaxprEqn, subs: Iterable[tuple]) -> Count:
    """The count of an equation holding jaxprs, given (jaxcompat.Body, its
    Count) for each body it runs (a caller may pass only part of a body's
    work, as linemap does for recomputation)."""
    subs = [(b, c) for b, c in subs if b.counted]
    total = sum((c for _, c in subs), Count())
    if subs and all(b.alternative for b, _ in subs):  # one branch runs: a bound
        return Count(max(c.flops for _, c in subs), total.exact)
    flops, exact = 0, total.exact
    for body, c in subs:
        if body.runs is None:  # a loop: trip count unknown, exact only if it costs nothing
            flops += c.flops
            exact = exact and c.flops == 0
        else:
            flops += c.flops * body.runs
    if not all(b.known for b, _ in subs):  # not in the table: bodies once
        exact = exact and flops == 0
    return Count(flops, exact)


def count_dots(jaxpr: jc.Jaxpr) -> tuple[int, int]:
    """(dot_general equations, those without batch dimensions), bodies included:
    what tells whether a dots-without-batch-dims policy can save anything."""
    total = unbatched = 0
    for eqn, _ in jc.nested_eqns(jaxpr):
        batch = jc.primitives.dot_batch_dims(eqn)
        if batch is not None:
            total += 1
            unbatched += not batch[0] and not batch[1]
    return total, unbatched
