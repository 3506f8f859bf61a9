"""Provides everything remat-tui needs from `jax._src`, in one place.

JAX keeps the pieces that `print_saved_residuals` is built from private. This
module is the only one that imports them, so a JAX upgrade touches one file;
tests compare our results with JAX's public `print_saved_residuals` to catch
any drift.
"""

from __future__ import annotations

import os
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jax._src import api_util, core, source_info_util
from jax._src.ad_checkpoint import name_p, remat_p
from jax._src.lax import lax as lax_internal

import remat_tui
from remat_tui.core.model import Source

Jaxpr = core.Jaxpr
ClosedJaxpr = core.ClosedJaxpr
Literal = core.Literal
Var = core.Var
DropVar = core.DropVar
eval_jaxpr = core.eval_jaxpr

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


def remat_policy(eqn):
    """The policy object a remat equation was bound with (None: JAX's default)."""
    return eqn.params["policy"]


def remat_function(eqn) -> str:
    """The name of the function a remat equation checkpoints: as JAX recorded it,
    unless that is a library's wrapper (Linen's `core_fn`, Equinox's
    `fun_checkpoint`): then the user's function the body was traced from."""
    body = eqn.params["jaxpr"]
    info = body.debug_info
    name = getattr(info, "func_name", None) if info is not None else None
    where = (getattr(info, "func_src_info", None) or "").rpartition(" at ")[2]
    if name and not in_library(where):
        return name
    return outermost_own_function(body) or name or "<checkpointed>"


def scan_length(eqn) -> int | None:
    """The trip count of a scan equation; None for anything else."""
    return eqn.params["length"] if eqn.primitive.name == "scan" else None


def sub_jaxpr_slots(eqn) -> Iterator[tuple[str, int | None, Jaxpr]]:
    """(param, index within a tuple param or None, open jaxpr) for each jaxpr the
    equation holds, in the order `jaxprs_in_params` yields them."""
    for key, value in eqn.params.items():
        if isinstance(value, tuple) and value and isinstance(value[0], (Jaxpr, ClosedJaxpr)):
            for i, v in enumerate(value):
                yield key, i, v.jaxpr if isinstance(v, ClosedJaxpr) else v
        elif isinstance(value, ClosedJaxpr):
            yield key, None, value.jaxpr
        elif isinstance(value, Jaxpr):
            yield key, None, value


def replace_sub_jaxpr(eqn, key: str, index: int | None, new: Jaxpr):
    """`eqn` with the jaxpr in param `key` (position `index`) replaced by `new`,
    keeping a ClosedJaxpr's consts."""
    old = eqn.params[key]
    if index is not None:
        items = list(old)
        items[index] = _like(items[index], new)
        value = tuple(items)
    else:
        value = _like(old, new)
    return eqn.replace(params={**eqn.params, key: value})


def _like(old, new: Jaxpr):
    return ClosedJaxpr(new, old.consts) if isinstance(old, ClosedJaxpr) else new


def fresh_var(var):
    """A new variable of the same type (DropVars stay DropVars)."""
    return DropVar(var.aval) if isinstance(var, DropVar) else Var(var.aval)


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


# Installed libraries (Flax, Equinox, optax, ...) live here; JAX's own user
# frame is often inside one of them, which hides the user's line.
_LIBRARY_ROOTS = tuple(
    {os.path.join(p, "") for p in (sysconfig.get_path("purelib"), sysconfig.get_path("platlib"))}
)


def own_source(source_info, prefer_dir: str | None = None, fallback: bool = True):
    """The user's own line: the innermost frame outside JAX and outside installed
    libraries, preferring one under `prefer_dir` (the target file's folder, so
    its local modules count as the user's too). With no such frame, JAX's own
    user frame, or None when `fallback` is off."""
    frames = own_frames(source_info)
    chosen = next((f for f in frames if prefer_dir and f.file_name.startswith(prefer_dir)), None)
    if chosen is None and frames:
        chosen = frames[0]
    if chosen is not None:
        return _frame_source(chosen)
    return user_source(source_info) if fallback else None


def own_frames(source_info) -> list:
    """The frames outside JAX and installed libraries, innermost first."""
    return [
        f
        for f in source_info_util.user_frames(source_info.traceback)
        if not f.file_name.startswith(_LIBRARY_ROOTS)
    ]


def outermost_own_function(jaxpr) -> str | None:
    """The function a traced body starts in: the outermost frame of the user's
    own code behind its first equation that has one (a library's wrapper, such
    as Flax's or Equinox's around a checkpointed block, is skipped)."""
    for eqn in jaxpr.eqns:
        frames = own_frames(eqn.source_info)
        if frames:
            return frames[-1].function_name
    return None


def in_library(path: str) -> bool:
    return path.startswith(_LIBRARY_ROOTS)


def _frame_source(frame) -> Source:
    return Source(frame.file_name, frame.start_line, frame.start_column, frame.function_name)


def linear_jaxpr(vjp) -> Jaxpr | None:
    """The linear program behind the function `jax.vjp` returned (its
    residuals are the constvars, the tangents the invars): what the backward
    pass transposes. (Also on the shape-only copy `return_shape=True` gives.)
    None if this JAX's vjp does not expose it."""
    jaxpr = getattr(vjp, "jaxpr", None)
    return jaxpr if isinstance(jaxpr, Jaxpr) else None


def sub_jaxprs(eqn) -> Iterator[Jaxpr]:
    return core.jaxprs_in_params(eqn.params)


def tpu_chips_here() -> int:
    """TPU chips attached to this machine, counted as JAX does before it loads
    libtpu (from PCI device ids; nothing is initialised)."""
    from jax._src import hardware_utils

    return hardware_utils.num_available_tpu_chips_and_device_id()[0]


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
