"""Provides the jaxpr objects (Jaxpr, Var, Literal, ...) through the public
`jax.extend.core`, and the one adapter their shapes need: JAX 0.11 merged
`ClosedJaxpr` into `Jaxpr` (a Jaxpr now carries its consts)."""

from __future__ import annotations

from typing import Any

from jax.extend import core as jex

from remat_tui.core.jaxcompat.private import core as _core

Jaxpr = jex.Jaxpr
ClosedJaxpr = jex.ClosedJaxpr
Var = jex.Var
Literal = jex.Literal
DropVar = jex.DropVar
JaxprEqn = jex.JaxprEqn
Atom = Var | Literal  # what an equation takes: a variable or a literal

# Adapter "merged closed jaxprs" (JAX 0.11+): ClosedJaxpr is Jaxpr itself.
CLOSED_IS_JAXPR = ClosedJaxpr is Jaxpr


def is_jaxpr(value: object) -> bool:
    return isinstance(value, (Jaxpr, ClosedJaxpr))


def open_jaxpr(value: Any) -> Jaxpr:
    """The jaxpr whose equations and variables a (closed) jaxpr holds."""
    if not CLOSED_IS_JAXPR and isinstance(value, ClosedJaxpr):
        return value.jaxpr
    return value


def consts_of(value: object) -> list:
    return list(getattr(value, "consts", ()) or ())


def like(old: Any, new: Jaxpr) -> Any:
    """`new` (an open jaxpr made from `old`'s) in `old`'s form: closed over
    `old`'s consts where `old` was a ClosedJaxpr. Since 0.11, a jaxpr made with
    `replace` keeps its consts already."""
    if not CLOSED_IS_JAXPR and isinstance(old, ClosedJaxpr):
        return ClosedJaxpr(new, old.consts)
    return new


def eval_jaxpr(jaxpr: Jaxpr, consts: list, *args: Any) -> list:
    """Evaluate `jaxpr` (equations re-bound with their source information)."""
    return _core.eval_jaxpr(jaxpr, consts, *args)


def fresh_var(var: Var) -> Var:
    """A new variable of the same type (DropVars stay DropVars)."""
    return DropVar(var.aval) if isinstance(var, DropVar) else Var(var.aval)


def short(aval: Any) -> str:
    return aval.str_short(short_dtypes=True)


def is_host(aval: object) -> bool:
    return "host" in str(getattr(aval, "memory_space", "")).lower()
