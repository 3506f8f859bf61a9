"""Provides what each primitive is, by JAX's primitive and param names: what it
costs by Contract 6's rules (`costs.flops` counts bodies), which primitives only
copy a value, and which transpose without re-running forward work."""

from __future__ import annotations

import math

from remat_tui.core.jaxcompat.objects import Atom, JaxprEqn

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
# Primitives that hold a jaxpr but are counted by their own rule (the jaxpr
# is the combining function, e.g. the `add` of a scatter-add).
OWN_RULE = (
    REDUCTIONS | WINDOW_REDUCTIONS | COMBINING_SCATTERS | {"scatter", "select_and_scatter_add"}
)
# JAX inserts these around a saved value; the value itself comes from before.
COPIES = frozenset({"reduce_precision", "device_put", "copy", "copy_p", "optimization_barrier"})

# Linear primitives whose transpose rules compute from the cotangent (or move
# data, 0 FLOPs), each exercised by tests/unit/test_recompute.py. select_n only with
# a boolean selector (see compares_cases).
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


def has_own_rule(eqn: JaxprEqn) -> bool:
    """An equation holding a jaxpr that is counted by its own rule all the same
    (the jaxpr is a combining function, such as a scatter-add's `add`)."""
    return eqn.primitive.name in OWN_RULE


def is_copy(eqn: JaxprEqn) -> bool:
    """A copy JAX inserts around a value (reduce_precision, device_put, ...)."""
    return eqn.primitive.name in COPIES


def is_scalar_promotion(eqn: JaxprEqn) -> bool:
    """A broadcast of a scalar to shape (1,): how shard_map's partial
    evaluation carries a scalar residual out of its body
    (`_promote_scalar_residuals`). Ask also that no frame outside JAX is
    behind it, or it is the user's own."""
    if eqn.primitive.name != "broadcast_in_dim" or len(eqn.invars) != 1:
        return False
    source, result = eqn.invars[0].aval, eqn.outvars[0].aval
    return getattr(source, "shape", None) == () and tuple(getattr(result, "shape", ())) == (1,)


def is_barrier(eqn: JaxprEqn) -> bool:
    """An optimization_barrier: each output is its input, held in place."""
    return eqn.primitive.name == "optimization_barrier"


def is_reduce_precision(eqn: JaxprEqn) -> bool:
    return eqn.primitive.name == "reduce_precision"


def is_device_put(eqn: JaxprEqn) -> bool:
    return eqn.primitive.name == "device_put"


def brings_from_host(eqn: JaxprEqn) -> bool:
    """A device_put that brings a value offloaded to host memory back to the
    device: a transfer, not forward work done again."""
    return (
        is_device_put(eqn)
        and any(_on_host(v) for v in eqn.invars)
        and not all(_on_host(v) for v in eqn.outvars)
    )


def _on_host(var: Atom) -> bool:
    return "host" in str(getattr(var.aval, "memory_space", "")).lower()


def transposes_without_work(eqn: JaxprEqn) -> bool:
    """Whether transposing this linear equation adds no forward work."""
    return eqn.primitive.name in TRANSPOSED_WITHOUT_WORK and not compares_cases(eqn)


def compares_cases(eqn: JaxprEqn) -> bool:
    """A select_n whose selector is not boolean: its transpose compares the
    selector with each case (`eq`), forward work the linear program lacks."""
    if eqn.primitive.name != "select_n":
        return False
    return eqn.invars[0].aval.dtype != bool  # type: ignore[attr-defined]  # as in _shape


def dot_batch_dims(eqn: JaxprEqn) -> tuple[tuple, tuple] | None:
    """(lhs batch dims, rhs batch dims) of a dot_general; None for anything else."""
    if eqn.primitive.name != "dot_general":
        return None
    (_, _), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
    return tuple(lhs_batch), tuple(rhs_batch)


def _shape(atom: Atom) -> tuple[int, ...]:
    # JAX types `aval` as AbstractValue; an array's is a ShapedArray, with a shape
    return atom.aval.shape  # type: ignore[attr-defined]


def _elements(var: Atom) -> int:
    shape = getattr(var.aval, "shape", None)
    return math.prod(shape) if shape is not None else 0


def eqn_flops(eqn: JaxprEqn) -> int:
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


def _dot(eqn: JaxprEqn) -> int:
    (_, rhs_contract), (_, rhs_batch) = eqn.params["dimension_numbers"]
    lhs, rhs = _shape(eqn.invars[0]), _shape(eqn.invars[1])
    skip = set(rhs_contract) | set(rhs_batch)
    rhs_free = math.prod(d for i, d in enumerate(rhs) if i not in skip)
    return 2 * math.prod(lhs) * rhs_free


def _ragged_dot(eqn: JaxprEqn) -> int:
    numbers = eqn.params["ragged_dot_dimension_numbers"]
    (_, rhs_contract), (_, rhs_batch) = numbers.dot_dimension_numbers
    lhs, rhs = _shape(eqn.invars[0]), _shape(eqn.invars[1])
    skip = set(rhs_contract) | set(rhs_batch) | set(numbers.rhs_group_dimensions)
    rhs_free = math.prod(d for i, d in enumerate(rhs) if i not in skip)
    return 2 * math.prod(lhs) * rhs_free


def _conv(eqn: JaxprEqn) -> int:
    p = eqn.params
    lhs_spec, rhs_spec, out_spec = p["dimension_numbers"]
    lhs, rhs = _shape(eqn.invars[0]), _shape(eqn.invars[1])
    out = _shape(eqn.outvars[0])
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
