"""Provides the one line that converts a Linen nn.scan's stored parameters
to a structure's layout (Contract 15, issue 43): `conversion`, the
expression structure_code_flax.py prints for the user to paste, and
`Conversion`, which `verify` (`xla.verify.runs`) evaluates from that very
text on the stored parameters, so that its check covers the paste.

The layout the Linen helpers keep (linen_helpers.py): `nested_nn_scan`
holds layer g*(N/G)+j of the N at [g, j] under 'layers'; `split_nn_scan`
holds [:K] under 'first' and [K:] under 'rest'. The JAX-level rebuild that
remat-tui compiles for a structure (structure_code.py's nested_scan and
split_scan) reads the stored [N, ...] arrays in that same order. `restore`
reads that layout back to [N, ...], written apart from the printed line:
verify runs the structure on restore(convert(stored)), so a printed line
that puts any layer elsewhere (a transposed regroup, an off-by-one split)
runs the layers on other parameters and fails the check.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from remat_tui.core.setup.structure_specs import NESTED, Structure


def conversion(structure: Structure, length: int) -> str:
    """The expression, in `scanned` (the nn.scan's stored parameters, each
    [length, ...]) and `jax`, that gives them in `structure`'s layout."""
    k = structure.count
    if structure.kind == NESTED:
        regroup = f"p.reshape({k}, {length // k}, *p.shape[1:])"
        return f"{{'layers': jax.tree.map(lambda p: {regroup}, scanned)}}"
    return (
        f"{{'first': jax.tree.map(lambda p: p[:{k}], scanned), "
        f"'rest': jax.tree.map(lambda p: p[{k}:], scanned)}}"
    )


def restore(structure: Structure, length: int, converted: Any) -> Any:
    """`converted` (parameters in `structure`'s layout) read back as the
    helpers read them, each [length, ...] again (module doc)."""
    if structure.kind == NESTED:
        return jax.tree.map(lambda p: p.reshape(length, *p.shape[2:]), converted["layers"])
    return jax.tree.map(lambda a, b: jnp.concatenate([a, b]), converted["first"], converted["rest"])


@dataclass(frozen=True)
class Conversion:
    """Where a Linen nn.scan's stored parameters are in the arguments (the
    positional argument `position`, then the dict keys `keys`; `where`
    says it, `params['layers']`), and the structure's printed line that
    converts them."""

    structure: Structure
    length: int
    position: int
    keys: tuple[str, ...]
    where: str

    @property
    def text(self) -> str:
        return conversion(self.structure, self.length)

    def convert(self, scanned: Any) -> Any:
        """The printed line, evaluated on `scanned`: the very text the
        snippet prints, so what is checked is what is pasted."""
        return eval(self.text, {"jax": jax, "scanned": scanned})  # noqa: S307 (our own line)

    def line(self) -> str:
        """What verify says it did, in one line."""
        return (
            f"{self.where} converted by the snippet's line, scanned = {self.text}, "
            "and read back in the layout its helper keeps"
        )

    def applied(self, fn: Callable) -> Callable:
        """`fn` with its stored parameters passed through the printed line and
        read back (`restore`): the same arguments, the same outputs and
        gradients' paths, the same values where the line is right."""

        def through(scanned: Any) -> Any:
            return restore(self.structure, self.length, self.convert(scanned))

        @functools.wraps(fn)
        def converted(*args: Any, **kwargs: Any) -> Any:
            moved = list(args)
            moved[self.position] = _replaced(args[self.position], self.keys, through)
            return fn(*moved, **kwargs)

        return converted


def find_conversion(
    structure: Structure, length: int, name: str | None, args: tuple, positional: list[str]
) -> Conversion | str:
    """The Conversion of the nn.scan whose module is named `name` (its
    `name=`), stored in `args` (the positional arguments, arrays or
    ShapeDtypeStructs) as a dict under key `name` whose every leaf is
    [length, ...]; or why it cannot be found. `positional`: the function's
    positional parameters' names, for `where`."""
    if name is None:
        return "its nn.scan's module has no name= that can be read, to find its parameters by"
    found: dict[tuple, bool] = {}  # (position, keys) -> every leaf [length, ...]
    for path, leaf in jax.tree_util.tree_flatten_with_path(tuple(args))[0]:
        keys = [getattr(p, "key", None) for p in path[1:]]
        shape: tuple[int, ...] = tuple(getattr(leaf, "shape", ()))
        for i, key in enumerate(keys):
            if key != name or not all(isinstance(k, str) for k in keys[: i + 1]):
                continue
            at = (path[0].idx, tuple(keys[: i + 1]))
            found[at] = found.get(at, True) and len(shape) > 0 and shape[0] == length
    stacked = [at for at, whole in found.items() if whole]
    outermost = [at for at in stacked if not any(_inside(at, other) for other in stacked)]
    if len(outermost) != 1:
        many = "several are" if outermost else "none is"
        return (
            f"its parameters are a dict under '{name}' of [{length}, ...] arrays in the "
            f"arguments, and {many}"
        )
    ((position, keys),) = outermost
    head = positional[position] if position < len(positional) else f"args[{position}]"
    where = head + "".join(f"[{key!r}]" for key in keys)
    return Conversion(structure, length, position, keys, where)


def _inside(at: tuple, other: tuple) -> bool:
    """`at` lies strictly within `other` (the same argument, a longer path)."""
    return at[0] == other[0] and len(at[1]) > len(other[1]) and at[1][: len(other[1])] == other[1]


def _replaced(tree: Any, keys: tuple[str, ...], f: Callable[[Any], Any]) -> Any:
    """`tree` with its subtree at `keys` (dict keys) made f(subtree), the
    mappings on the way copied as their own type (a dict, Flax's FrozenDict)."""
    if not keys:
        return f(tree)
    head, rest = keys[0], keys[1:]
    inner = _replaced(tree[head], rest, f)
    if isinstance(tree, dict):
        return {**tree, head: inner}
    assert isinstance(tree, Mapping)  # found by its dict keys
    return type(tree)({**tree, head: inner})  # type: ignore[call-arg]
