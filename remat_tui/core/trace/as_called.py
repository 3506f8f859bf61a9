"""Provides what the backward pass is traced from: the vjp of the call as the
user made it, so that the backward pane is JAX's own text for that call.

JAX's notebook helper (`print_fwd_bwd`) prints the forward pass traced
(make_jaxpr: every argument an input) but takes the backward pass from
`jax.vjp` run on the values themselves, where two things differ from a trace:

- one array passed as several arguments is one object, and jax.vjp maps a
  residual to an argument by identity, so every use reads the same input
  (`W1 = W2 = W3 = jnp.ones((4, 4))`: the backward pass reads `c` three times);
- a Python scalar or a NumPy value is a constant, not a traced input: JAX bakes
  it into the backward pass (`3.0:f32[]`) instead of taking it as a residual.

The forward pane and the residual list stay as traced (print_saved_residuals
traces too). Only the backward pass is traced from the vjp of the call as made,
without running it: arrays stay traced, shared where the user shared them.
That costs a second trace of the forward pass, paid only where the call has a
constant or a shared array, and only when the backward pass is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jax.tree_util import tree_flatten, tree_flatten_with_path, tree_unflatten

from remat_tui.core import jaxcompat as jc


@dataclass(frozen=True)
class BackwardInputs:
    """What the backward jaxpr is traced from."""

    fn: Callable  # (*residuals, *cotangents) -> the vjp applied
    residuals: list  # the residuals' shapes
    cotangents: list  # the cotangents' shapes
    # forward residual output -> the backward input holding it (None: JAX
    # bakes it into the backward pass as a constant)
    positions: list[int | None]


def backward_inputs(
    flat_fn: Callable,
    leaves: list,
    traced_vjp: Any,
    out_shape: Any,
    forward: jc.Jaxpr,
    device: jax.Device,
) -> BackwardInputs:
    """The backward pass's inputs for `jax.vjp(flat_fn, *leaves)`: `traced_vjp`
    is the vjp's shape as traced (its residual leaves are the last outputs of
    the `forward` jaxpr), `out_shape` the output's."""
    called = _vjp_as_called(flat_fn, leaves) if called_differs(leaves) else traced_vjp
    positions = _positions(traced_vjp, called)
    res_shapes, res_tree = tree_flatten(called)
    res_outvars = forward.outvars[len(forward.outvars) - len(positions) :]
    traced_of = {j: i for i, j in enumerate(positions) if j is not None}
    # None: a leaf only the call has (an array passed twice is kept at every
    # position, needed or not): an argument, on the device
    avals = [
        res_outvars[traced_of[j]].aval if j in traced_of else None for j in range(len(res_shapes))
    ]
    res_shapes = _keep_memory_space(res_shapes, avals, device)
    ct_shapes, ct_tree = tree_flatten(out_shape)

    def backward(*flat: Any) -> Any:
        vjp_fn = tree_unflatten(res_tree, flat[: len(res_shapes)])
        return vjp_fn(tree_unflatten(ct_tree, flat[len(res_shapes) :]))

    return BackwardInputs(backward, res_shapes, ct_shapes, positions)


def called_differs(leaves: list) -> bool:
    """Whether jax.vjp on the values would see the call otherwise than the
    trace does: a constant argument, or one array passed twice."""
    keys = [_identity(leaf, i) for i, leaf in enumerate(leaves)]
    return None in keys or len(set(keys)) < len(keys)


def _vjp_as_called(flat_fn: Callable, leaves: list) -> Any:
    """The vjp's shape (its residuals') as jax.vjp makes it for the call
    itself: each distinct array one traced input, given at every position it
    was passed; constants passed as they are."""
    keys = [_identity(leaf, i) for i, leaf in enumerate(leaves)]
    inputs = {key: leaf for key, leaf in zip(keys, leaves, strict=True) if key is not None}
    index = {key: i for i, key in enumerate(inputs)}

    def as_called(*traced: Any) -> Any:
        pairs = zip(keys, leaves, strict=True)
        args = [x if key is None else traced[index[key]] for key, x in pairs]
        return jax.vjp(flat_fn, *args)[1]

    _, called = jax.make_jaxpr(as_called, return_shape=True)(*inputs.values())
    return called


def _identity(leaf: Any, position: int) -> tuple | None:
    """Which traced input a leaf is: an array is one value wherever it is
    passed (its id); an abstract stand-in describes a shape, not a value, so
    each is its own input (its position); a constant is none (None)."""
    if isinstance(leaf, jax.ShapeDtypeStruct):  # first: jax.Array's isinstance is slower
        return ("position", position)
    if isinstance(leaf, jax.Array):
        return ("array", id(leaf))
    return None


def _positions(traced: Any, called: Any) -> list[int | None]:
    """For each residual leaf of the traced vjp, the index of the leaf at the
    same path in the called vjp, or None where the call has none there."""
    paths = {path: j for j, (path, _) in enumerate(tree_flatten_with_path(called)[0])}
    return [paths.get(path) for path, _ in tree_flatten_with_path(traced)[0]]


def _keep_memory_space(shapes: list, avals: list, device: jax.Device) -> list:
    """`return_shape` drops where a residual lives; an offloaded one must reach the
    backward trace in host memory, or the backward pane would show it on device."""
    if not any(jc.is_host(a) for a in avals):
        return shapes
    mesh = Mesh(np.array([device]), ("remat_tui",))
    host = NamedSharding(mesh, PartitionSpec(), memory_kind="pinned_host")
    return [
        jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=host) if jc.is_host(a) else s
        for s, a in zip(shapes, avals, strict=True)
    ]
