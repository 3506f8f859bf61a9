"""Provides `differentiated`: which arguments the compiled gradient step
differentiates (`xla.compile.lowering`), as the step users run does.

`jax.value_and_grad(loss)` differentiates its first argument (the
parameters, in `loss(params, batch...)`), not the batch: the compiled step
does the same, or the positions the target names with `params=`. Integer
(and other non-floating) leaves are never differentiated, even when named:
JAX gives them no gradient. Two cases `value_and_grad` refuses outright get
the nearest step that runs, said in `why`: a first argument with no
floating-point leaf (`loss(tokens, params)`: every floating-point positional
argument), and a target with keyword arguments only (every floating-point
keyword argument).

The leaves are the traced ones (`setup.arguments`): a module's
functions and Python numbers are carried, never differentiated.

The residual list is not this step's: it is `print_saved_residuals`' own,
which differentiates every traced argument. `every_argument` says whether
the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from remat_tui.errors import RematError
from remat_tui.registry import Target

FIRST = "the first argument, as jax.value_and_grad does by default"
NAMED = "the arguments the target names with params="
FIRST_NOT_FLOAT = (
    "every floating-point argument: the first has no floating-point leaf to "
    "differentiate (name the parameters with params= to choose)"
)
KEYWORDS_ONLY = (
    "every floating-point keyword argument: the target takes no positional one "
    "(jax.value_and_grad differentiates positional arguments only)"
)


@dataclass(frozen=True)
class Differentiated:
    """What one compiled gradient step differentiates: `leaves`, indices in
    the target's flat (args, kwargs) leaves; `positions` and `keywords`, the
    arguments they belong to; `why`, the rule that chose them; and
    `every_argument`, whether that is every floating-point leaf (as the
    residual list's vjp differentiates)."""

    leaves: tuple[int, ...]
    positions: tuple[int, ...]
    keywords: tuple[str, ...]
    why: str
    every_argument: bool

    def to_dict(self) -> dict:
        return {
            "positions": list(self.positions),
            "keywords": list(self.keywords),
            "why": self.why,
            "every_argument": self.every_argument,
        }


def differentiated(target: Target, in_tree: Any, abstract: list, what: str) -> Differentiated:
    """The leaves the gradient step of `target` differentiates, for its flat
    (args, kwargs) leaves `abstract` (shapes and dtypes) of tree `in_tree`."""
    args, kwargs = jax.tree_util.tree_unflatten(in_tree, list(range(len(abstract))))
    floating = {i for i, x in enumerate(abstract) if jnp.issubdtype(x.dtype, jnp.inexact)}

    def floating_leaves(tree: Any) -> tuple[int, ...]:
        return tuple(i for i in jax.tree.leaves(tree) if i in floating)

    by_position = {p: floating_leaves(a) for p, a in enumerate(args)}
    by_keyword = {k: floating_leaves(v) for k, v in sorted(kwargs.items())}
    if target.param_positions is not None:
        chosen, why = parameter_positions(target, len(args), what), NAMED
    elif not args:
        chosen, why = (), KEYWORDS_ONLY
    elif by_position[0]:
        chosen, why = (0,), FIRST
    else:
        chosen, why = tuple(p for p, leaves in by_position.items() if leaves), FIRST_NOT_FLOAT
    keywords = tuple(k for k, leaves in by_keyword.items() if leaves) if not args else ()
    positions = tuple(p for p in chosen if by_position[p])
    leaves = sorted(
        [i for p in positions for i in by_position[p]]
        + [i for k in keywords for i in by_keyword[k]]
    )
    return Differentiated(
        leaves=tuple(leaves),
        positions=positions,
        keywords=keywords,
        why=why,
        every_argument=set(leaves) == floating,
    )


def parameter_positions(target: Target, count: int, what: str) -> tuple[int, ...]:
    """The positions `params=` names, checked against the `count` the
    function takes."""
    # asked only of a target with params= (remat_tui.target requires it for a training step)
    positions = target.param_positions
    assert positions is not None
    wrong = [i for i in positions if not 0 <= i < count]
    if wrong:
        raise RematError(
            f"{what}: params={target.param_positions} names argument positions {wrong}, but the "
            f"function takes {count} positional argument(s). Give positions in args."
        )
    return tuple(sorted(set(positions)))
