"""Provides `host_callbacks`: the equations of a program that call back to
Python (`jax.pure_callback`, `io_callback`, `jax.debug.callback`), each with
the user's line and whether a checkpoint as written holds it. A configuration
that recomputes one runs it again in the backward pass: where it reads Python
state (a counter, a random generator), the recomputed value is not the
saved one, and the gradients move (issue 43). The names are JAX's
primitives' own."""

from __future__ import annotations

from dataclasses import dataclass

from remat_tui.core.jaxcompat.bodies import bodies
from remat_tui.core.jaxcompat.objects import Jaxpr
from remat_tui.core.jaxcompat.remat import is_remat
from remat_tui.core.jaxcompat.sources import summarize, user_source

CALLBACKS = frozenset({"pure_callback", "io_callback", "debug_callback"})


@dataclass(frozen=True)
class HostCallback:
    """One call back to Python: the primitive (`pure_callback`, ...), the
    user's line (`model.py:39`, else JAX's summary) and whether a checkpoint
    as written holds it."""

    kind: str
    where: str
    checkpointed: bool


def host_callbacks(jaxpr: Jaxpr) -> list[HostCallback]:
    """Every call back to Python in `jaxpr` and the bodies it holds, in
    program order, each (kind, line) once."""
    found: dict[tuple[str, str], HostCallback] = {}

    def walk(program: Jaxpr, under: bool) -> None:
        for eqn in program.eqns:
            if eqn.primitive.name in CALLBACKS:
                source = user_source(eqn.source_info)
                where = source.where() if source else summarize(eqn.source_info)
                key = (eqn.primitive.name, where)
                if key not in found or (under and not found[key].checkpointed):
                    found[key] = HostCallback(eqn.primitive.name, where, under)
            for body in bodies(eqn):
                walk(body.jaxpr, under or is_remat(eqn))

    walk(jaxpr, False)
    return list(found.values())
