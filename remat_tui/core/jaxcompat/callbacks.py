"""Provides `host_callbacks`: the equations of a program that call back to
Python (`jax.pure_callback`, `io_callback`, `jax.debug.callback`), each with
the user's line and whether a checkpoint as written holds it. A configuration
that recomputes one runs it again in the backward pass: where it reads Python
state (a counter, a random generator), the recomputed value is not the
saved one, and the gradients move (issue 43). The names are JAX's
primitives' own."""

from __future__ import annotations

from dataclasses import dataclass

from remat_tui.core.jaxcompat.bodies import bodies, nested_eqns
from remat_tui.core.jaxcompat.objects import Jaxpr, JaxprEqn, Var
from remat_tui.core.jaxcompat.remat import is_remat
from remat_tui.core.jaxcompat.sources import summarize, user_source

DEBUG = "debug_callback"  # jax.debug.callback: no output, only what it does
CALLBACKS = frozenset({"pure_callback", "io_callback", DEBUG})


@dataclass(frozen=True)
class HostCallback:
    """One call back to Python: the primitive (`pure_callback`, ...), the
    user's line (`model.py:39`, else JAX's summary), whether a checkpoint
    as written holds it and whether it runs with an ordered effect."""

    kind: str
    where: str
    checkpointed: bool
    ordered: bool = False  # runs with an ordered effect (`ordered=True`)


def host_callbacks(jaxpr: Jaxpr) -> list[HostCallback]:
    """Every call back to Python in `jaxpr` and the bodies it holds, in
    program order, each (kind, line) once."""
    found: dict[tuple[str, str], HostCallback] = {}

    def walk(program: Jaxpr, under: bool) -> None:
        for eqn in program.eqns:
            if eqn.primitive.name in CALLBACKS:
                where = where_of(eqn)
                key = (eqn.primitive.name, where)
                if key not in found or (under and not found[key].checkpointed):
                    found[key] = HostCallback(eqn.primitive.name, where, under, ordered(eqn))
            for body in bodies(eqn):
                walk(body.jaxpr, under or is_remat(eqn))

    walk(jaxpr, False)
    return list(found.values())


def calls_back(jaxpr: Jaxpr) -> bool:
    """Whether `jaxpr` or a body it holds calls back to Python: one walk that
    stops at the first call (most programs make none, and then nothing a
    configuration recomputes can be one)."""
    return any(eqn.primitive.name in CALLBACKS for eqn, _ in nested_eqns(jaxpr))


def is_callback(eqn: JaxprEqn) -> bool:
    return eqn.primitive.name in CALLBACKS


def ordered(eqn: JaxprEqn) -> bool:
    """Whether a callback runs with an ordered effect: `io_callback(...,
    ordered=True)` says it in its params, `jax.debug.callback(...,
    ordered=True)` in the effect it carries."""
    if eqn.params.get("ordered"):
        return True
    return "Ordered" in type(eqn.params.get("effect")).__name__


def where_of(eqn: JaxprEqn) -> str:
    """The user's line of a callback (`model.py:39`), else JAX's summary."""
    source = user_source(eqn.source_info)
    return source.where() if source else summarize(eqn.source_info)


def rerun_callbacks(bwd: Jaxpr, rerun_ids: set[int]) -> list[JaxprEqn]:
    """The callbacks of the backward program `bwd` that re-run forward work
    (`rerun_ids`: the ids of the equations recomputation re-runs,
    `trace.recomputation`), in program order."""
    return [
        eqn
        for eqn, _ in nested_eqns(bwd)
        if eqn.primitive.name in CALLBACKS and id(eqn) in rerun_ids
    ]


def callbacks_fed_by(bwd: Jaxpr, start: list, rerun_ids: set[int]) -> list[JaxprEqn]:
    """The re-run callbacks of `bwd` computed from the variables `start` (a
    residual's inputs to the backward pass), followed through every
    equation and into the bodies of calls: a body whose inputs line up with
    the call's (a checkpoint, a jit, a scan) by position, any other (a cond's
    branches) whole."""
    found: list[JaxprEqn] = []

    def walk(program: Jaxpr, tainted: set) -> None:
        for eqn in program.eqns:
            read = [isinstance(v, Var) and v in tainted for v in eqn.invars]
            if not any(read):
                continue
            if eqn.primitive.name in CALLBACKS and id(eqn) in rerun_ids:
                found.append(eqn)
            for body in bodies(eqn):
                inner = body.jaxpr
                if len(inner.invars) == len(eqn.invars):
                    walk(inner, {v for v, r in zip(inner.invars, read, strict=True) if r})
                else:
                    walk(inner, set(inner.invars))
            tainted.update(v for v in eqn.outvars if isinstance(v, Var))

    walk(bwd, {v for v in start if isinstance(v, Var)})
    return found
