"""Provides `flatten_arguments`: a target's example (args, kwargs) split into
the leaves traced as the function's inputs and the rest, carried into the
function unchanged, as `eqx.filter_value_and_grad` under `eqx.filter_jit`
takes a module (issue 41).

Traced, as JAX traces them: every array (JAX or NumPy, or a
`jax.ShapeDtypeStruct`), whatever its dtype (an integer array is traced and
gets JAX's float0 tangent, as before); and a Python number given as an
argument or in a tuple, list or dict (print_saved_residuals traces `3.0`).
Carried: everything else, which JAX cannot take as an input: a module's
activation functions, strings, and its Python numbers and flags (Equinox's
`Dropout(p=0.0, inference=False)` branches on them in Python; traced, they
would be values it cannot branch on). Where a leaf sits in a module is where
a pytree node that is not a tuple, list or dict holds it.

The carried values are part of what a program is (another activation is
another program), so they must hash: a leaf that is neither an array nor
hashable is an error naming its path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.tree_util import PyTreeDef, tree_flatten, tree_leaves, tree_structure, tree_unflatten

from remat_tui.core.jaxcompat.residual_words import arg_names
from remat_tui.errors import RematError

_SCALARS = (bool, int, float, complex)
_ARRAYS = (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)
_PLAIN = (tuple, list, dict)  # with their subclasses: namedtuple, OrderedDict, defaultdict


@dataclass(frozen=True, eq=False)
class FlatArguments:
    """The example (args, kwargs), flattened for JAX's tools."""

    leaves: list  # the traced leaves, in flattening order
    # (args, kwargs) with None where a leaf is carried: what the traced leaves unflatten to
    in_tree: PyTreeDef
    whole: PyTreeDef  # (args, kwargs) as given
    carried: tuple[tuple[int, Any], ...]  # (index among every leaf, value)

    def rebuild(self, flat: Sequence) -> tuple[tuple, dict]:
        """(args, kwargs) as given, from traced leaves `flat` (or tracers of them)."""
        if not self.carried:
            return tree_unflatten(self.whole, flat)
        held = dict(self.carried)
        given = iter(flat)
        return tree_unflatten(
            self.whole,
            [held[i] if i in held else next(given) for i in range(self.whole.num_leaves)],
        )

    def traced(self) -> tuple[tuple, dict]:
        """(args, kwargs) with None where a leaf is carried: the part JAX takes."""
        return tree_unflatten(self.in_tree, self.leaves)

    @property
    def key(self) -> tuple:
        """What, beside the traced leaves' shapes, tells two calls' programs apart."""
        return (self.whole, self.carried)


def flatten_arguments(fn: Callable, args: tuple, kwargs: dict, label: str) -> FlatArguments:
    """(args, kwargs) of `fn` split as the module doc says; `label` names the
    target in the error a leaf that cannot be carried raises."""
    whole_leaves, whole = tree_flatten((args, kwargs))
    # Where a leaf sits decides only for a Python number: most calls have none.
    scalars = any(isinstance(leaf, _SCALARS) for leaf in whole_leaves)
    in_module = _in_a_module((args, kwargs)) if scalars else [False] * len(whole_leaves)
    traced: list = []
    carried: list[tuple[int, Any]] = []
    for i, leaf in enumerate(whole_leaves):
        if _is_traced(leaf, in_module[i]):
            traced.append(leaf)
            continue
        try:
            hash(leaf)
        except TypeError:
            raise _not_carried(fn, args, kwargs, label, i, leaf) from None
        carried.append((i, leaf))
    if not carried:
        return FlatArguments(traced, whole, whole, ())
    held = {i for i, _ in carried}
    marked = [None if i in held else leaf for i, leaf in enumerate(whole_leaves)]
    in_tree = tree_structure(tree_unflatten(whole, marked))
    return FlatArguments(traced, in_tree, whole, tuple(carried))


def _is_traced(leaf: Any, in_module: bool) -> bool:
    if isinstance(leaf, _ARRAYS) or hasattr(leaf, "__jax_array__"):
        return True
    return isinstance(leaf, _SCALARS) and not in_module


def _in_a_module(tree: Any) -> list[bool]:
    """For each leaf of `tree`, whether a pytree node other than a tuple, list
    or dict holds it (an Equinox module, a dataclass registered as a node)."""
    marks: list[bool] = []
    for part in tree_leaves(tree, is_leaf=lambda x: x is not None and not isinstance(x, _PLAIN)):
        inside = tree_leaves(part)
        is_node = len(inside) != 1 or inside[0] is not part
        marks.extend([is_node] * len(inside))
    return marks


def _not_carried(
    fn: Callable, args: tuple, kwargs: dict, label: str, index: int, leaf: Any
) -> RematError:
    names = arg_names(fn, args, kwargs)
    where = names[index] if index < len(names) and names[index] else f"leaf {index}"
    return RematError(
        f"{label}: the argument {where} is a {type(leaf).__name__}, neither an array nor "
        "hashable. remat-tui traces an argument's arrays and carries the rest of it into the "
        "function unchanged, as eqx.filter_jit does, and a value it carries must hash. Take "
        "it out of the arguments: split the model with eqx.partition(model, eqx.is_array) and "
        "pass the arrays, or pass the value to the function via a closure."
    )
