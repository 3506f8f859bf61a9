"""Provides the one table of how each higher-order primitive holds its bodies,
and the walks over nested jaxprs built on it.

Every feature that looks inside an equation (sites, names, origins, FLOPs,
recomputation, printing) asks `bodies(eqn)`: a new JAX that adds or changes a
higher-order primitive means one entry here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from remat_tui.core.jaxcompat import remat
from remat_tui.core.jaxcompat.objects import Jaxpr, JaxprEqn, is_jaxpr, like, open_jaxpr
from remat_tui.core.jaxcompat.version import JaxChanged, expects

Slot = tuple[str, Any]  # (param name, index within a tuple param or None)
HI_BODY: Slot = ("_prim", None)  # a hi-primitive object's own jaxpr (remat3)


@dataclass(frozen=True)
class Body:
    """One jaxpr an equation runs, and how it is wired to the equation."""

    jaxpr: Any  # the open jaxpr
    slot: Slot  # where it sits in the equation's params
    inputs: tuple | None  # the equation's atoms bound to jaxpr.invars, one to one; None: unknown
    outputs: bool  # jaxpr.outvars are the equation's outvars, one to one
    runs: int | None = 1  # times it runs per run of the equation; None: not known (a loop)
    alternative: bool = False  # one of several bodies of which one runs (cond branches)
    counted: bool = True  # its work is the equation's (custom_linear_solve: its solve only)
    known: bool = True  # the primitive is in the table (else its bodies are read generically)
    iterations: int | None = None  # a scan's length: each value it stacks is one per iteration
    # its `runs` are one on each device of a mesh, side by side (a shard_map body)
    per_device: bool = False


def bodies(eqn: JaxprEqn) -> tuple[Body, ...]:
    """The jaxprs `eqn` runs, in the order JAX lists them in its params."""
    name = eqn.primitive.name
    if name in _LEAVES:
        return ()
    if remat.is_remat(eqn):
        body = remat.remat_body(eqn)
        slot = HI_BODY if "_prim" in eqn.params else ("jaxpr", None)
        return (Body(body, slot, tuple(eqn.invars), True),)
    rule = _RULES.get(name)
    if rule is not None:
        return rule(eqn)
    found = _generic(eqn)
    if not found and name not in _HI:
        _LEAVES.add(name)  # a primitive's params hold jaxprs always or never
    return found


_LEAVES: set[str] = set()  # primitives seen holding no jaxpr
_HI = frozenset({"call_hi_primitive", "call_hi_primitive_linearized"})  # it depends on _prim


@expects("a scan equation with jaxpr and length")
def _scan(eqn: JaxprEqn) -> tuple[Body, ...]:
    body = open_jaxpr(eqn.params["jaxpr"])
    length = eqn.params["length"]
    return (Body(body, ("jaxpr", None), tuple(eqn.invars), True, runs=length, iterations=length),)


@expects("a while equation with cond_jaxpr, body_jaxpr and their const counts")
def _while(eqn: JaxprEqn) -> tuple[Body, ...]:
    p, ins = eqn.params, list(eqn.invars)
    cond_n, body_n = p["cond_nconsts"], p["body_nconsts"]
    carry = ins[cond_n + body_n :]
    return (
        Body(open_jaxpr(p["cond_jaxpr"]), ("cond_jaxpr", None), (*ins[:cond_n], *carry), False,
             runs=None),
        Body(open_jaxpr(p["body_jaxpr"]), ("body_jaxpr", None),
             (*ins[cond_n : cond_n + body_n], *carry), True, runs=None),
    )  # fmt: skip


@expects("a cond equation with branches")
def _cond(eqn: JaxprEqn) -> tuple[Body, ...]:
    ins = tuple(eqn.invars[1:])  # the first input picks the branch
    return tuple(
        Body(open_jaxpr(b), ("branches", i), ins, True, alternative=True)
        for i, b in enumerate(eqn.params["branches"])
    )


@expects("a shard_map equation with jaxpr and mesh")
def _shard_map(eqn: JaxprEqn) -> tuple[Body, ...]:
    p = eqn.params
    shape = getattr(p.get("mesh"), "shape", None) or {}
    axes = p.get("newly_manual_axes", p.get("manual_axes", shape.keys()))
    devices = math.prod(shape.get(a, 1) for a in axes)
    body = open_jaxpr(p["jaxpr"])
    return (Body(body, ("jaxpr", None), tuple(eqn.invars), True, runs=devices, per_device=True),)


@expects("a custom_linear_solve equation with jaxprs (matvec, vecmat, solve, transpose_solve)")
def _linear_solve(eqn: JaxprEqn) -> tuple[Body, ...]:
    held = eqn.params["jaxprs"]
    out = []
    for field in held._fields:
        value = getattr(held, field)
        if is_jaxpr(value):
            index = held._fields.index(field)
            out.append(Body(open_jaxpr(value), ("jaxprs", index), None, False,
                            counted=field == "solve"))  # fmt: skip
    return tuple(out)


def _jit(eqn: JaxprEqn) -> tuple[Body, ...]:
    """A jit's one body, read straight from its `jaxpr` param (what _generic
    finds there, without looking through every other param: a jit's tuples of
    shardings and donations are as long as its inputs, and analyses ask a
    program's jits for their bodies many times). A jit that keeps it
    elsewhere is read generically."""
    held = eqn.params.get("jaxpr")
    if not is_jaxpr(held):
        return _generic(eqn)
    body = open_jaxpr(held)
    ins = tuple(eqn.invars) if len(body.invars) == len(eqn.invars) else None
    return (Body(body, ("jaxpr", None), ins, len(body.outvars) == len(eqn.outvars)),)


def _generic(eqn: JaxprEqn) -> tuple[Body, ...]:
    """Any other primitive holding jaxprs: each read as a call when its inputs
    and outputs line up with the equation's, else with its wiring unknown."""
    out = []
    known = eqn.primitive.name in _CALLS
    for slot, value in _param_slots(eqn):
        body = open_jaxpr(value)
        ins = tuple(eqn.invars) if len(body.invars) == len(eqn.invars) else None
        outs = len(body.outvars) == len(eqn.outvars)
        out.append(Body(body, slot, ins, outs, known=known))
    hi = eqn.params.get("_prim")
    if hi is not None and is_jaxpr(getattr(hi, "jaxpr", None)):
        body = open_jaxpr(hi.jaxpr)
        ins = tuple(eqn.invars) if len(body.invars) == len(eqn.invars) else None
        out.append(Body(body, HI_BODY, ins, len(body.outvars) == len(eqn.outvars), known=False))
    return tuple(out)


def _param_slots(eqn: JaxprEqn) -> Iterator[tuple[Slot, Any]]:
    for key, value in eqn.params.items():
        if isinstance(value, tuple):
            for i, v in enumerate(value):
                if is_jaxpr(v):
                    yield (key, i), v
        elif is_jaxpr(value):
            yield (key, None), value


# Calls: their bodies run once per use, inputs and outputs one to one.
_CALLS = frozenset(
    {"jit", "pjit", "closed_call", "core_call", "eval_jaxpr", "custom_jvp_call",
     "custom_vjp_call", "custom_vjp_call_jaxpr", "vjp_node[jit]"}
)  # fmt: skip
_RULES = {
    "scan": _scan,
    "while": _while,
    "cond": _cond,
    "shard_map": _shard_map,
    "custom_linear_solve": _linear_solve,
    "jit": _jit,
    "pjit": _jit,
}


def is_jit(eqn: JaxprEqn) -> bool:
    """A jit; in the linear program `jax.vjp` returns, JAX 0.12 binds a jit's
    linear part as `vjp_node[jit]` (adapter "vjp nodes")."""
    return eqn.primitive.name in ("jit", "pjit", "vjp_node[jit]")


# Bodies JAX does not differentiate (a custom rule replaces them): a checkpoint
# inside one changes nothing.
_NOT_DIFFERENTIATED = frozenset(
    {"custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "custom_lin"}
)


def differentiates_bodies(eqn: JaxprEqn) -> bool:
    return eqn.primitive.name not in _NOT_DIFFERENTIATED


@expects("a scan equation with num_consts and num_carry, or ft_in (JAX 0.12)")
def scan_layout(eqn: JaxprEqn) -> tuple[int, int] | None:
    """(num_consts, num_carry) of a scan equation; None for anything else."""
    if eqn.primitive.name != "scan":
        return None
    p = eqn.params
    if "num_consts" in p:
        return p["num_consts"], p["num_carry"]
    # Adapter "scan flat trees" (JAX 0.12): the inputs' (consts, carry, xs)
    # structure is a FlatTree to fill with the equation's inputs.
    consts, carry, _ = p["ft_in"].update(list(eqn.invars)).unpack()
    return len(list(consts)), len(list(carry))


def replace_body(eqn: JaxprEqn, slot: Slot, new: Jaxpr, wrapped: dict | None = None) -> JaxprEqn:
    """`eqn` with the body at `slot` replaced by the open jaxpr `new`. With
    `wrapped` (id of an old closed jaxpr -> its replacement), a closed jaxpr
    shared by several equations is replaced by one shared object, as JAX's
    printer needs to print it once."""
    key, index = slot

    def like_once(old_value: Any) -> Any:
        if wrapped is None:
            return like(old_value, new)
        if id(old_value) not in wrapped:
            wrapped[id(old_value)] = like(old_value, new)
        return wrapped[id(old_value)]

    if slot == HI_BODY:
        hi = eqn.params["_prim"]
        if remat.RematTraced is None or not isinstance(hi, remat.RematTraced):
            raise JaxChanged("only checkpoints to hold a body in a hi-primitive", type(hi).__name__)
        rebuilt = remat.RematTraced(new, hi.policy, hi.prevent_cse)
        return eqn.replace(params={**eqn.params, "_prim": rebuilt})
    old = eqn.params[key]
    if index is None:
        value = like_once(old)
    else:
        items = list(old)
        items[index] = like_once(items[index])
        # A namedtuple param (custom_linear_solve's jaxprs) keeps its type.
        value = type(old)(*items) if hasattr(old, "_fields") else tuple(items)
    return eqn.replace(params={**eqn.params, key: value})


def nested_eqns(jaxpr: Jaxpr, trip: int = 1) -> Iterator[tuple[JaxprEqn, int]]:
    """Every equation in `jaxpr` and the bodies it holds, with how many times it
    runs per run of `jaxpr` (enclosing scan lengths multiplied; a loop's
    unknown count taken as 1). A body shared by several equations is walked
    once per use."""
    for eqn in jaxpr.eqns:
        yield eqn, trip
        for body in bodies(eqn):
            yield from nested_eqns(body.jaxpr, trip * (body.iterations or 1))
