"""Provides how `jax.ad_checkpoint.print_saved_residuals` words and orders a
residual, which JAX keeps in the private `_saved_residuals`: literals,
constants, arguments, then equation outputs in program order. Adapter: since
JAX 0.11 it looks through a chain of reduce_precision copies, not one."""

from __future__ import annotations

from collections.abc import Callable

from remat_tui.core.jaxcompat import primitives
from remat_tui.core.jaxcompat.objects import Atom, Jaxpr, JaxprEqn, Var
from remat_tui.core.jaxcompat.private import api_util as _api_util
from remat_tui.core.jaxcompat.remat import checkpoint_name
from remat_tui.core.jaxcompat.version import version_tuple

_CHAINS = version_tuple() >= (0, 11)

LITERAL = "from a literal"
CONSTANT = "from a constant"


def arg_names(fn: Callable, args: tuple, kwargs: dict) -> tuple[str, ...]:
    """The flattened argument names JAX uses in 'from the argument W1'."""
    info = _api_util.debug_info("saved_residuals", fn, args, kwargs)
    return tuple(info.arg_names or ())


def looked_through(jaxpr: Jaxpr) -> dict[Var, Atom]:
    """Residual variable -> the variable JAX names it by: the input of the
    reduce_precision that copied it (JAX does not count that as the producer)."""
    subst: dict[Var, Atom] = {
        e.outvars[0]: e.invars[0] for e in jaxpr.eqns if primitives.is_reduce_precision(e)
    }
    if not _CHAINS:
        return subst
    out: dict[Var, Atom] = {}
    for v in subst:
        w: Atom = v
        while isinstance(w, Var) and w in subst:  # a literal is no key
            w = subst[w]
        out[v] = w
    return out


def argument(name: str) -> str:
    # JAX's fallback wording is a plain string with a literal "{i}" in it.
    return f"from the argument {name}" if name else "from the argument at flattened index {i}"


def output(eqn: JaxprEqn, where: str) -> tuple[str, str, str | None]:
    """(kind, words, checkpoint name) for an equation's output: named,
    jit_output or output. JAX tests the name's truth, so '' is not one."""
    if name := checkpoint_name(eqn):
        return "named", f"named '{name}' from {where}", name
    if eqn.primitive.name == "jit":
        return "jit_output", f"output of jitted function '{eqn.params['name']}' from {where}", None
    return "output", f"output of {eqn.primitive.name} from {where}", None
