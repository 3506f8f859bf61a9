"""Provides `gathered_bytes`: whether a forward equation gathers its value
from the devices' shards (an all-gather once partitioned), and how many
bytes one device then holds, for a residual's story: recomputing a gathered
value gathers it again (the collectives of `jaxcompat.collectives`).

A value's per-device shape is read from its type's sharding (explicit
sharding: `reshard`, `sharding_constraint`), or is its shape inside a
`shard_map` body, where `all_gather` works on one device's block. All of it
is JAX's private structure, so it lives in jaxcompat.
"""

from __future__ import annotations

import math
from typing import Any

# Primitives that may gather: resharding to a less sharded layout, or
# shard_map's explicit collective.
_GATHERING = frozenset({"reshard", "sharding_constraint", "all_gather", "all_gather_invariant"})


def gathered_bytes(eqn: Any) -> int | None:
    """One device's bytes of `eqn`'s output where the equation gathers it
    (its output is larger per device than its operand), else None."""
    if eqn.primitive.name not in _GATHERING or not eqn.invars or not eqn.outvars:
        return None
    before = _device_bytes(eqn.invars[0].aval)
    after = _device_bytes(eqn.outvars[0].aval)
    if before is None or after is None or after <= before:
        return None
    return after


def _device_bytes(aval: Any) -> int | None:
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return None
    sharding = getattr(aval, "sharding", None)
    try:
        local = sharding.shard_shape(shape) if sharding is not None else shape
    except Exception:  # a sharding without a mesh to divide by: the whole shape
        local = shape
    return math.prod(local) * dtype.itemsize
