"""Provides everything remat-tui needs from `jax._src`, in one place.

JAX keeps the pieces that `print_saved_residuals` is built from private. This
module is the only one that imports them, so a JAX upgrade touches one file;
tests compare our results with JAX's public `print_saved_residuals` to catch
any drift.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jax._src import api_util, core, source_info_util
from jax._src.ad_checkpoint import name_p, remat_p
from jax._src.lax import lax as lax_internal

import remat_tui
from remat_tui.core.model import Source

Jaxpr = core.Jaxpr
Literal = core.Literal
Var = core.Var

# Our own frames must never be taken for the user's: JAX attributes each
# equation to the innermost frame outside its exclusions.
source_info_util.register_exclusion(os.path.dirname(os.path.abspath(remat_tui.__file__)))


def arg_names(fn, args: tuple, kwargs: dict) -> tuple[str, ...]:
    """The flattened argument names JAX uses in 'from the argument W1'."""
    info = api_util.debug_info("saved_residuals", fn, args, kwargs)
    return tuple(info.arg_names or ())


def checkpoint_name(eqn) -> str | None:
    """The `checkpoint_name` an equation applies, if it is one."""
    if eqn.primitive is name_p:
        return eqn.params["name"]
    prim = eqn.params.get("_prim")
    if prim is not None and type(prim).__name__ == "CheckpointName":
        return getattr(prim, "name", None)
    return None


def is_remat(eqn) -> bool:
    """A jax.checkpoint (remat) equation: in the backward pass, it re-runs forward work."""
    return eqn.primitive is remat_p


def is_reduce_precision(eqn) -> bool:
    return eqn.primitive is lax_internal.reduce_precision_p


def summarize(source_info) -> str:
    """JAX's own one-line 'file:line:col (function)' for an equation."""
    return source_info_util.summarize(source_info)


def user_source(source_info) -> Source | None:
    """The user's line behind an equation (its innermost non-JAX frame), or None."""
    frame = source_info_util.user_frame(source_info.traceback)
    if frame is None:
        return None
    return Source(frame.file_name, frame.start_line, frame.start_column, frame.function_name)


def sub_jaxprs(eqn) -> Iterator[Jaxpr]:
    return core.jaxprs_in_params(eqn.params)


def is_host(aval) -> bool:
    return "host" in str(getattr(aval, "memory_space", "")).lower()


def short(aval) -> str:
    return aval.str_short(short_dtypes=True)


@dataclass(eq=False)
class EqnRef:
    """Stands in for an equation's traceback while printing, so the printer's
    source map tells us which equation each output line belongs to.
    `path` is the chain of (eqn index) from the top-level jaxpr down."""

    eqn: Any
    path: tuple[int, ...]


Region = tuple[int, int, EqnRef]  # start column, end column, equation


def format_jaxpr(jaxpr: Jaxpr) -> tuple[str, list[list[Region]]]:
    """`str(jaxpr)` plus, for every output line, the regions of it that each
    equation drew. Text is identical to `str(jaxpr)`: tracebacks are not
    printed, so swapping them for references changes only the source map."""
    tagged = _Tagger().jaxpr(jaxpr, ())
    source_map: list[list[tuple[int, int, Any]]] = []
    # use_color=False: JAX colours its output when stdout is a terminal.
    text = core.pp_toplevel_jaxpr(tagged).format(use_color=False, source_map=source_map)
    per_line = [
        [(start, end, ref) for start, end, ref in regions if isinstance(ref, EqnRef)]
        for regions in source_map
    ]
    return text, per_line


class _Tagger:
    """Copies a jaxpr with each equation's traceback replaced by an EqnRef.

    Jaxprs shared between equations stay shared (memoised by identity), so the
    printer still pulls them out as `let` bindings exactly as for the original.
    """

    def __init__(self):
        self.done: dict[int, Any] = {}

    def jaxpr(self, jaxpr: Jaxpr, path: tuple[int, ...]) -> Jaxpr:
        key = id(jaxpr)
        if key in self.done:
            return self.done[key]
        eqns = []
        for i, eqn in enumerate(jaxpr.eqns):
            ref = EqnRef(eqn, path + (i,))
            params = eqn.params
            if any(True for _ in core.jaxprs_in_params(params)):
                params = {k: self.param(v, ref) for k, v in params.items()}
            eqns.append(
                eqn.replace(params=params, source_info=eqn.source_info.replace(traceback=ref))
            )
        out = jaxpr.replace(eqns=eqns)
        self.done[key] = out
        return out

    def param(self, value, ref: EqnRef):
        if (
            isinstance(value, tuple)
            and value
            and all(isinstance(v, (core.Jaxpr, core.ClosedJaxpr)) for v in value)
        ):
            return tuple(self.param(v, ref) for v in value)
        if isinstance(value, core.Jaxpr):
            return self.jaxpr(value, ref.path)
        if isinstance(value, core.ClosedJaxpr):
            key = id(value)
            if key not in self.done:
                self.done[key] = core.ClosedJaxpr(self.jaxpr(value.jaxpr, ref.path), value.consts)
            return self.done[key]
        return value
