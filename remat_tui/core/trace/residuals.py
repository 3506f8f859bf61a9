"""Provides the residual list, computed the way `print_saved_residuals` does.

The order and wording are JAX's (jaxcompat.residual_words); tests compare the
result with JAX's own output at run time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from remat_tui.core import jaxcompat as jc
from remat_tui.core.jaxcompat import residual_words as words
from remat_tui.core.model import Origin, Residual, Source


@dataclass
class FoundResidual:
    """A residual plus the JAX objects the line maps need (not kept in the model)."""

    residual: Residual
    var: Any  # the forward Var (or Literal) saved
    eqn_index: int | None  # top-level forward equation defining it
    outvar_positions: list[int]  # positions among the forward residual outputs


def find_residuals(
    jaxpr: jc.Jaxpr,
    num_res: int,
    arg_names: tuple[str, ...],
    origin_of: Callable[[Any], Origin | None] = lambda var: None,
    device_bytes: Callable[[Any], int | None] = lambda aval: None,
) -> list[FoundResidual]:
    """The residuals of a forward `vjp` jaxpr whose last `num_res` outputs are
    residuals, each with its origin (`origin_of(var)`, `trace.origins`)
    and per-device bytes (`device_bytes(aval)`, per_device_bytes)."""
    res_outvars = jaxpr.outvars[len(jaxpr.outvars) - num_res :]
    names = arg_names or ("unknown",) * len(jaxpr.invars)
    # JAX looks through reduce_precision to the equation that produced the value.
    subst = words.looked_through(jaxpr)
    positions: dict[Any, list[int]] = {}
    literals = []
    for i, v in enumerate(res_outvars):
        if isinstance(v, jc.Literal):
            literals.append((v, i))
        else:
            positions.setdefault(subst.get(v, v), []).append(i)

    found: list[FoundResidual] = []

    def add(
        var: jc.Atom,
        text_tail: str,
        kind: str,
        eqn_index: int | None = None,
        pos: list[int] | None = None,
        **extra: Any,
    ) -> None:
        aval = var.aval
        extra.update(origin=origin_of(var), bytes_per_device=device_bytes(aval))
        found.append(
            FoundResidual(
                _residual(aval, text_tail, kind, **extra),
                var,
                eqn_index,
                pos if pos is not None else positions.get(var, []),
            )
        )

    for lit, i in literals:
        add(lit, words.LITERAL, "literal", pos=[i])
    for v in jaxpr.constvars:
        if v in positions:
            add(v, words.CONSTANT, "constant")
    for i, v in enumerate(jaxpr.invars):
        if v in positions:
            add(v, words.argument(names[i]), "argument", argument=names[i] or None)
    producers = _Producers(jaxpr)
    for k, eqn in enumerate(jaxpr.eqns):
        for v in eqn.outvars:
            if v not in positions:
                continue
            kind, tail, name = words.output(eqn, jc.summarize(eqn.source_info))
            source = _source(eqn, producers)
            add(v, tail, kind, k, name=name, source=source, primitive=jc.primitive_name(eqn))
    return found


class _Producers(dict[jc.Var, jc.JaxprEqn | None]):
    """Variable -> the equation defining it, built on first use (rarely needed)."""

    def __init__(self, jaxpr: jc.Jaxpr) -> None:
        super().__init__()
        self._jaxpr = jaxpr

    def __missing__(self, var: jc.Var) -> jc.JaxprEqn | None:
        if not self:
            self.update({v: e for e in self._jaxpr.eqns for v in e.outvars})
        return self.get(var)


def _source(eqn: jc.JaxprEqn, producers: _Producers) -> Source | None:
    """The user's line behind an equation. JAX inserts the device_put of an
    offloaded value with no line of its own: it gets the line of the value's."""
    seen = 0
    while (source := jc.user_source(eqn.source_info)) is None and seen < 8:
        value = eqn.invars[0] if eqn.invars else None
        if not jc.primitives.is_device_put(eqn) or not isinstance(value, jc.Var):
            return None
        producer = producers[value]
        if producer is None:
            return None
        eqn, seen = producer, seen + 1
    return source


def aval_bytes(aval: Any) -> int:
    shape = tuple(getattr(aval, "shape", ()))
    return int(math.prod(shape)) * _dtype_facts(aval.dtype)[1]


_dtypes: dict = {}  # dtype -> (its name, its item size): numpy's str() of a dtype is slow


def _dtype_facts(dtype: Any) -> tuple[str, int]:
    facts = _dtypes.get(dtype)
    if facts is None:
        try:
            itemsize = np.dtype(dtype).itemsize
        except TypeError:  # extended dtypes (PRNG keys) know their own size
            itemsize = getattr(dtype, "itemsize", 0)
        facts = _dtypes[dtype] = (str(dtype), int(itemsize))
    return facts


def _residual(
    aval: Any,
    text_tail: str,
    kind: str,
    primitive: str | None = None,
    name: str | None = None,
    argument: str | None = None,
    source: Source | None = None,
    origin: Origin | None = None,
    bytes_per_device: int | None = None,
) -> Residual:
    short = jc.short(aval)
    return Residual(
        text=f"{short} {text_tail}",
        aval=short,
        shape=tuple(int(d) for d in aval.shape),
        dtype=_dtype_facts(aval.dtype)[0],
        bytes=aval_bytes(aval),
        memory="host" if jc.is_host(aval) else "device",
        kind=kind,
        primitive=primitive,
        name=name,
        argument=argument,
        source=source,
        origin=origin,
        bytes_per_device=bytes_per_device,
    )


def per_device_bytes(aval: Any) -> int | None:
    """Bytes on each device for an aval sharded over a mesh (explicit sharding,
    `f32[8@data,4]`), or None when every device would hold all of it (no
    sharding, or a mesh whose sharded axes have one device each)."""
    sharding: Any = getattr(aval, "sharding", None)
    spec = getattr(sharding, "spec", None)
    if not spec or all(axis is None for axis in spec):
        return None
    try:
        shard = sharding.shard_shape(tuple(aval.shape))
    except Exception:  # a sharding that cannot split this shape: no per-device figure
        return None
    if tuple(shard) == tuple(aval.shape):  # a mesh axis of one device: nothing is split
        return None
    whole = aval_bytes(aval)
    size = math.prod(aval.shape)
    return whole if not size else whole * math.prod(shard) // size
