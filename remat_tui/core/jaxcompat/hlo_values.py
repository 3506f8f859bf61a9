"""Provides `computing`: the instruction of an optimized HLO module (read by
`jaxcompat.hlo_text`) that really computes a value, looking through
what XLA wraps values in: tuples and their elements, a loop's body (a scan's
stacked output is the loop's tuple element, written each iteration by a
dynamic-update-slice whose update is the iteration's value), a fusion's
root and parameters, and the ops that only move or re-lay bytes (bitcast,
copy, reshape, transpose). `xla.buffers.made` reads the value's op_name and
frames off that instruction, to tie it to the jaxpr equation JAX lowered.

Everything here depends on XLA's opcodes and module layout, so it lives in
jaxcompat.
"""

from __future__ import annotations

from remat_tui.core.jaxcompat.hlo_text import Instruction, Module, primitive

# Ops that move or re-lay a value's bytes, or round it as JAX asks for a
# saved value (reduce-precision): the value is their operand's.
MOVES = frozenset({"bitcast", "copy", "reshape", "transpose", "copy-done", "reduce-precision"})
_MAX_STEPS = 64


class Calls:
    """Which instruction runs each computation (a fusion its fused
    computation, a loop its body), built once per module."""

    def __init__(self, module: Module):
        self.module = module
        self.caller: dict[str, Instruction] = {}
        for instruction in module.instructions.values():
            for computation in instruction.called:
                self.caller.setdefault(computation, instruction)

    def fused_in(self, instruction: Instruction) -> Instruction | None:
        """The fusion instruction whose fused computation holds `instruction`."""
        caller = self.caller.get(instruction.computation)
        return caller if caller is not None and caller.opcode == "fusion" else None


def computing(module: Module, calls: Calls, name: str, index: tuple[int, ...] = ()) -> list:
    """The instructions that compute element `index` of instruction `name`'s
    value (`()`: the whole value): the ops that move or re-lay it, outermost
    first, then the one that computes it; empty where it is a parameter of
    the program or of a loop (a carried value)."""
    path = list(index)
    at = module.instructions.get(name)
    made: list[Instruction] = []
    for _ in range(_MAX_STEPS):
        if at is None:
            return made
        op = at.opcode
        if op == "tuple" and path:
            at = _operand(module, at, path.pop(0))
        elif op == "get-tuple-element" and at.number is not None:
            path.insert(0, at.number)
            at = _operand(module, at, 0)
        elif op in ("while", "fusion", "call") and at.called:
            body = at.called[-1]  # a loop's body comes after its condition
            at = module.instructions.get(module.roots.get(body, ""))
        elif op == "dynamic-update-slice" and not path:
            at = _operand(module, at, 1)  # the update: this iteration's value
        elif op == "copy-start":
            # An asynchronous copy (to another memory space and back): its
            # destination and source ({0}, {1}) are the copied value, wherever
            # it is; {2} is the copy's context (a sync flag), no value's.
            if path and path[0] >= 2:
                return made
            path = []
            at = _operand(module, at, 0)
        elif (op in MOVES or _xlas_convert(at)) and not path:
            made.append(at)
            at = _operand(module, at, 0)
        elif op == "parameter":
            caller = calls.caller.get(at.computation)
            if caller is not None and caller.opcode == "while" and path:
                # A loop's carried value, as the body computes it for the next
                # iteration (a scan stacking its carry stacks that).
                at = module.instructions.get(module.roots.get(at.computation, ""))
                continue
            if caller is None or caller.opcode != "fusion" or at.number is None:
                return made
            at = _operand(module, caller, at.number)
        else:
            return made + [at] if not path else made
    return made


def _xlas_convert(instruction: Instruction) -> bool:
    """A conversion XLA added, not JAX's `convert_element_type` (no op_name, or
    that of the call it sits in): CPU computes in f32 what the program holds
    in bf16 (float normalization) and converts the values back and forth;
    the converted value is its operand's, in another precision."""
    return (
        instruction.opcode == "convert" and primitive(instruction.op_name) != "convert_element_type"
    )


def _operand(module: Module, instruction: Instruction, k: int) -> Instruction | None:
    if k >= len(instruction.operands):
        return None
    return module.instructions.get(instruction.operands[k])


def value_index(index: str) -> tuple[int, ...]:
    """Buffer assignment's `{0,2}` -> (0, 2)."""
    inner = index.strip("{}")
    return tuple(int(p) for p in inner.split(",") if p.strip()) if inner else ()


def elements(shape: str) -> int:
    """`f32[8,128]` -> 1024 (a scalar: 1)."""
    dims = shape.partition("[")[2].rstrip("]")
    count = 1
    for d in dims.split(","):
        if d.strip():
            count *= int(d)
    return count


# The jaxpr's short dtype names where XLA's text spells them otherwise.
_HLO_DTYPES = {"bool": "pred", "i8": "s8", "i16": "s16", "i32": "s32", "i64": "s64"}


def hlo_dtype(jaxpr_dtype: str) -> str:
    """A jaxpr aval's dtype (`bool`, `i32`) as XLA's text spells it (`pred`, `s32`)."""
    return _HLO_DTYPES.get(jaxpr_dtype, jaxpr_dtype)


# Primitives JAX lowers by composing others (`mlir.lower_fun`): XLA's op_name
# names the composed primitives, not theirs, the composition's root last
# (measured on CPU: one_minus_square, new in JAX 0.11, is `mul(add(1, x),
# sub(1, x))`; logistic `div(1, add(1, exp(neg(x))))` on every JAX, except
# on a TPU of generation 8 or newer; asin `atan2(x, sqrt(...))` off GPUs; a
# gather in `fill` mode, jnp.take's default (an embedding lookup), is
# `select_n(in_bounds, gather(...), fill)`, and XLA 0.12 on CPU keeps that
# select's value where 0.10 kept the gather's).
_COMPOSED_ROOTS = {
    "one_minus_square": "mul",
    "logistic": "div",
    "asin": "atan2",
    "gather": "select_n",
}


def hlo_primitives(primitive: str) -> tuple[str, ...]:
    """The primitives XLA's op_name may name for a jaxpr equation of
    `primitive`: its own, and the root of the composition JAX may lower it to."""
    root = _COMPOSED_ROOTS.get(primitive)
    return (primitive,) if root is None else (primitive, root)


def dtype(shape: str) -> str:
    """`f32[8,128]` -> `f32`."""
    return shape.partition("[")[0]
