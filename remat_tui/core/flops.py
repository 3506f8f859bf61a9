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

import math
from collections.abc import Iterable
from dataclasses import dataclass

from remat_tui.core import jax_internals as ji


@dataclass(frozen=True)
class Count:
    """FLOPs of a jaxpr, and whether the rules could count them exactly."""

    flops: int = 0
    exact: bool = True

    def __add__(self, other: Count) -> Count:
        return Count(self.flops + other.flops, self.exact and other.exact)


ZERO = frozenset(
    {
        # shapes and layouts
        "reshape",
        "transpose",
        "broadcast_in_dim",
        "broadcast_to",
        "squeeze",
        "expand_dims",
        "rev",
        # slicing and indexing
        "slice",
        "dynamic_slice",
        "dynamic_update_slice",
        "gather",
        "scatter",
        "concatenate",
        "pad",
        "split",
        # converts and copies
        "convert_element_type",
        "bitcast_convert_type",
        "copy",
        "copy_p",
        "device_put",
        "reduce_precision",
        # markers, barriers, placement
        "name",
        "optimization_barrier",
        "sharding_constraint",
        "reshard",
        "mesh_cast",
        "layout_constraint",
        "shard_alike",
        "pvary",
        "stop_gradient",
        "remove_memory_space",
        # constants and PRNG key bookkeeping
        "iota",
        "zeros_like",
        "empty",
        "random_seed",
        "random_wrap",
        "random_unwrap",
        "create_token",
        "after_all",
        "debug_callback",
        "debug_print",
    }
)

REDUCTIONS = frozenset(
    {
        "reduce_sum",
        "reduce_max",
        "reduce_min",
        "reduce_prod",
        "reduce_and",
        "reduce_or",
        "reduce_xor",
        "argmax",
        "argmin",
        "reduce",
    }
)
WINDOW_REDUCTIONS = frozenset(
    {"reduce_window_sum", "reduce_window_max", "reduce_window_min", "reduce_window"}
)
COMBINING_SCATTERS = frozenset(
    {"scatter-add", "scatter_add", "scatter-sub", "scatter_sub", "scatter-mul", "scatter_mul",
     "scatter-min", "scatter_min", "scatter-max", "scatter_max"}
)  # fmt: skip
CALLS = frozenset(
    {
        "jit",
        "pjit",
        "closed_call",
        "core_call",
        "remat2",
        "checkpoint",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_vjp_call_jaxpr",
    }
)
# Primitives that hold a jaxpr but are counted by their own rule (the jaxpr
# is the combining function, e.g. the `add` of a scatter-add).
_OWN_RULE = (
    REDUCTIONS | WINDOW_REDUCTIONS | COMBINING_SCATTERS | {"scatter", "select_and_scatter_add"}
)


def count(jaxpr) -> Count:
    """FLOPs of running `jaxpr` (a Jaxpr or ClosedJaxpr) once."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)  # ClosedJaxpr -> Jaxpr
    return _Counter().jaxpr(jaxpr)


class _Counter:
    def __init__(self):
        self.memo: dict[int, Count] = {}

    def jaxpr(self, jaxpr) -> Count:
        key = id(jaxpr)
        found = self.memo.get(key)
        if found is None:
            flops, exact = 0, True
            for eqn in jaxpr.eqns:
                if is_leaf(eqn):
                    flops += eqn_flops(eqn)
                else:
                    c = combine(eqn, [(sub, self.jaxpr(sub)) for sub in ji.sub_jaxprs(eqn)])
                    flops += c.flops
                    exact = exact and c.exact
            found = self.memo[key] = Count(flops, exact)
        return found


def is_leaf(eqn) -> bool:
    """Whether the equation is counted by its own rule (eqn_flops), not by its
    bodies (combine)."""
    name = eqn.primitive.name
    if name in _OWN_RULE:
        return True
    holds = _HOLDS_JAXPRS.get(name)
    if holds is None:  # a primitive's params hold jaxprs always or never
        holds = _HOLDS_JAXPRS[name] = next(iter(ji.sub_jaxprs(eqn)), None) is not None
    return not holds


_HOLDS_JAXPRS: dict[str, bool] = {}


def has_own_rule(eqn) -> bool:
    """An equation holding a jaxpr that is counted by its own rule all the same
    (the jaxpr is a combining function, such as a scatter-add's `add`)."""
    return eqn.primitive.name in _OWN_RULE


def combine(eqn, subs: Iterable[tuple]) -> Count:
    """The count of an equation holding jaxprs, given (sub-jaxpr, its Count) for
    each sub-jaxpr it runs (in `ji.sub_jaxprs` order; a caller may pass only
    part of a body's work, as linemap does for recomputation)."""
    name = eqn.primitive.name
    subs = list(subs)
    total = sum((c for _, c in subs), Count())
    if name == "scan":
        return Count(total.flops * eqn.params["length"], total.exact)
    if name == "while":  # trip count unknown: exact only if the loop costs nothing
        return Count(total.flops, total.exact and total.flops == 0)
    if name == "cond":
        return Count(max((c.flops for _, c in subs), default=0), total.exact)
    if name == "shard_map":
        return Count(total.flops * _manual_devices(eqn.params), total.exact)
    if name == "custom_linear_solve":
        solve = getattr(eqn.params["jaxprs"], "solve", None)
        solve = getattr(solve, "jaxpr", solve)
        return sum((c for s, c in subs if s is solve), Count())
    if name in CALLS:
        return total
    return Count(total.flops, total.exact and total.flops == 0)  # unknown: bodies once


def _manual_devices(params) -> int:
    shape = getattr(params.get("mesh"), "shape", None) or {}
    axes = params.get("newly_manual_axes", params.get("manual_axes", shape.keys()))
    return math.prod(shape.get(a, 1) for a in axes)


def _elements(var) -> int:
    shape = getattr(var.aval, "shape", None)
    return math.prod(shape) if shape is not None else 0


def eqn_flops(eqn) -> int:
    """FLOPs of one equation by its own rule (its bodies, if any, not counted)."""
    name = eqn.primitive.name
    if name in ZERO:
        return 0
    if name == "dot_general":
        return _dot(eqn)
    if name == "conv_general_dilated":
        return _conv(eqn)
    if name == "ragged_dot_general":
        return _ragged_dot(eqn)
    if name in REDUCTIONS:
        n = len(eqn.outvars)  # a variadic reduce has n operands and n outputs
        ins = sum(_elements(v) for v in eqn.invars[:n])
        return max(ins - sum(_elements(v) for v in eqn.outvars), 0)
    if name in WINDOW_REDUCTIONS:
        window = math.prod(eqn.params["window_dimensions"])
        return sum(_elements(v) for v in eqn.outvars) * window
    if name in COMBINING_SCATTERS:
        return _elements(eqn.invars[2])  # operand, indices, updates
    return sum(_elements(v) for v in eqn.outvars)


def _dot(eqn) -> int:
    (_, rhs_contract), (_, rhs_batch) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape
    skip = set(rhs_contract) | set(rhs_batch)
    rhs_free = math.prod(d for i, d in enumerate(rhs) if i not in skip)
    return 2 * math.prod(lhs) * rhs_free


def _ragged_dot(eqn) -> int:
    numbers = eqn.params["ragged_dot_dimension_numbers"]
    (_, rhs_contract), (_, rhs_batch) = numbers.dot_dimension_numbers
    lhs, rhs = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape
    skip = set(rhs_contract) | set(rhs_batch) | set(numbers.rhs_group_dimensions)
    rhs_free = math.prod(d for i, d in enumerate(rhs) if i not in skip)
    return 2 * math.prod(lhs) * rhs_free


def _conv(eqn) -> int:
    p = eqn.params
    lhs_spec, rhs_spec, out_spec = p["dimension_numbers"]
    lhs, rhs = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape
    out = eqn.outvars[0].aval.shape
    lhs_dil = p.get("lhs_dilation") or (1,) * (len(lhs) - 2)
    rhs_dil = p.get("rhs_dilation") or (1,) * (len(lhs) - 2)
    # per output element and real tap: rhs input features multiply-adds
    macs = out[out_spec[0]] * out[out_spec[1]] * rhs[rhs_spec[1]]
    for k in range(len(lhs) - 2):
        macs *= _valid_taps(
            size=lhs[lhs_spec[2 + k]],
            taps=rhs[rhs_spec[2 + k]],
            outs=out[out_spec[2 + k]],
            stride=p["window_strides"][k],
            pad_low=p["padding"][k][0],
            lhs_dilation=lhs_dil[k],
            rhs_dilation=rhs_dil[k],
        )
    return 2 * macs


def _valid_taps(
    size: int, taps: int, outs: int, stride: int, pad_low: int, lhs_dilation: int, rhs_dilation: int
) -> int:
    """(output position, kernel tap) pairs along one spatial dimension whose
    input position is a real element (not padding, not a dilation hole)."""
    extent = (size - 1) * lhs_dilation + 1 if size else 0
    total = 0
    for t in range(taps):
        shift = t * rhs_dilation - pad_low  # input position of output 0 at this tap
        if lhs_dilation == 1:
            # 0 <= o * stride + shift < extent, for 0 <= o < outs
            lo = max(0, -(shift // stride))  # ceil(-shift / stride)
            hi = min(outs - 1, (extent - 1 - shift) // stride)
            total += max(0, hi - lo + 1)
        else:
            total += sum(
                1
                for o in range(outs)
                if 0 <= (pos := o * stride + shift) < extent and pos % lhs_dilation == 0
            )
    return total
