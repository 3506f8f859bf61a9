"""Provides targets that scale (Contract 10): a target whose `args` (or
`kwargs`) factory takes a parameter named `batch` can be built at any batch
size, which fit (`search.fit.batches`) grows to find the largest that fits.

    @remat_tui.target(args=lambda batch=32: (params, jax.ShapeDtypeStruct((batch, 784), f32)))

The parameter's default is the example's batch: what every other view
analyses, and where fit starts. Without a default there is no example to
analyse (`setup.loading` says so), and fit starts from its smallest
batch. Built at another batch, the arguments are kept as shapes only
(`jax.ShapeDtypeStruct`, sharding kept): compiling needs nothing more, and a
factory that makes real arrays does not keep them alive for every batch tried.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import jax
import numpy as np
from jax.tree_util import tree_flatten, tree_map

from remat_tui.core.runtime.lru import LRU
from remat_tui.core.setup.loading import factory_parameter, resolve_arguments
from remat_tui.errors import RematError
from remat_tui.registry import Target

BATCH = "batch"  # the factory parameter that makes a target scale
LIMIT = 64  # built batches kept: a search visits a few per configuration, all alike
# (id(target), devices, batch) -> (target, the target built at that batch)
_built: LRU[tuple[Target, Target]] = LRU(LIMIT)  # (the target, it at a batch)


def scales(t: Target) -> bool:
    """Whether the target's example can be built at other batch sizes."""
    return any(factory_parameter(f, BATCH) is not None for f in (t.args, t.kwargs))


def example_batch(t: Target) -> int | None:
    """The example's batch: the `batch` parameter's default (None when it has
    none). A RematError when the args and kwargs factories disagree on it."""
    defaults = set()
    for factory in (t.args, t.kwargs):
        parameter = factory_parameter(factory, BATCH)
        if parameter is not None and parameter.default is not parameter.empty:
            defaults.add(parameter.default)
    if len(defaults) > 1:
        raise RematError(
            f"{t.label}: the args and kwargs factories give `batch` different defaults "
            f"({', '.join(map(repr, sorted(defaults, key=repr)))}); give both the example's batch."
        )
    (default,) = defaults or {None}
    if default is not None and (not isinstance(default, int) or default < 1):
        raise RematError(
            f"{t.label}: the `batch` parameter's default is {default!r}; give the example's "
            "batch size, a positive whole number (batch=32)."
        )
    return default


def require_scalable(t: Target) -> None:
    """Raise RematError saying how to make the target scale, when it does not."""
    if scales(t):
        return
    if callable(t.args):
        have = "its args factory takes no `batch` parameter"
    else:
        have = "its args are a fixed tuple"
    raise RematError(
        f"{t.label}: fit grows the batch, but {have}, so remat-tui cannot build the "
        "example at another batch size. Make args a factory of the batch, its default the "
        "example's batch, e.g. @remat_tui.target(args=lambda batch=32: (params, "
        "jax.ShapeDtypeStruct((batch, 784), jnp.float32)))."
    )


def at_batch(t: Target, batch: int, devices: list | None = None) -> Target:
    """The target with its example built at `batch`, as shapes (the module doc),
    for `devices` (what a factory taking `devices` receives). The same object
    for the same (target, devices, batch) while it is kept, so caches keyed by
    the target (the compiled numbers') answer a batch seen before."""
    key = (id(t), tuple(devices) if devices is not None else None, batch)

    def build() -> tuple[Target, Target]:
        args, kwargs = tree_map(_shape_of, resolve_arguments(t, devices, batch))
        return t, replace(t, args=args, kwargs=kwargs)

    return _built.get_or_build(key, build, valid=lambda hit: hit[0] is t)[1]


def argument_bytes(t: Target) -> int:
    """The bytes the built target's arguments take on one device (a sharded
    argument's shard)."""
    leaves, _ = tree_flatten((t.args, t.kwargs))
    total = 0
    for leaf in leaves:
        shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
        if shape is None or dtype is None:
            continue
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None and len(getattr(sharding, "device_set", ())) > 1:
            shape = sharding.shard_shape(tuple(shape))
        total += int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return total


def shapes(t: Target) -> list[tuple]:
    """The built target's argument shapes, in flattening order."""
    leaves, _ = tree_flatten((t.args, t.kwargs))
    return [tuple(getattr(leaf, "shape", ())) for leaf in leaves]


def _shape_of(leaf: Any) -> Any:
    """An array as its shape, dtype and placement; anything else as it is."""
    if isinstance(leaf, (jax.Array, np.ndarray)):
        sharding = getattr(leaf, "sharding", None)
        weak = bool(getattr(leaf, "weak_type", False))
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding, weak_type=weak)
    return leaf
