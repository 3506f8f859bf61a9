"""Provides the meshes users build (Contract 17), made over the devices
remat-tui chose: `parse_mesh` reads `--mesh data=4,model=2`, `build_mesh`
makes it over the chosen devices for a factory parameter named `mesh`,
`placed_sharding` rebinds a sharding over a `jax.sharding.AbstractMesh`
(parameters from `nnx.eval_shape`, specs written against an abstract mesh)
or over a mesh of one device to the chosen devices, and `mesh_of` says what
mesh the arguments are sharded over, for the compile key, a `check`
baseline and the labels.

A mesh is said as its axes, `(("data", 4), ("model", 2))`: hashable, so a
configuration compiled over it is keyed by it, and written `data=4,model=2`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import Any

from remat_tui.errors import RematError

Axes = tuple[tuple[str, int], ...]  # a mesh's axes: (name, size), in order

MESH_EXAMPLE = "--mesh data=4,model=2"


def parse_mesh(text: str) -> Axes:
    """`data=4,model=2` -> (("data", 4), ("model", 2)); bad input said in one line."""
    axes: list[tuple[str, int]] = []
    for part in text.split(","):
        name, sep, size = (s.strip() for s in part.partition("="))
        if not (sep and name.isidentifier() and size.isdigit() and int(size) > 0):
            raise RematError(
                f"--mesh {text!r}: {part.strip() or 'an empty axis'!r} is not AXIS=SIZE. Give "
                f"each axis a name and a size of 1 or more, comma-separated: {MESH_EXAMPLE}."
            )
        if name in dict(axes):
            raise RematError(
                f"--mesh {text!r}: the axis {name!r} is named twice. Give each axis once: "
                f"{MESH_EXAMPLE}."
            )
        axes.append((name, int(size)))
    return tuple(axes)


def mesh_words(axes: Axes | None) -> str:
    """(("data", 4), ("model", 2)) -> `data=4,model=2`; no mesh: ``."""
    return ",".join(f"{name}={size}" for name, size in axes or ())


def build_mesh(axes: Axes, devices: Sequence, what: str) -> Any:
    """A `jax.sharding.Mesh` of `axes` over `devices` (as many as the mesh
    has: the chosen device's platform's local devices, or a TPU topology's
    chips), with JAX's default axis types, as `jax.make_mesh` gives them."""
    import jax

    require_devices(axes, devices, what)
    names = tuple(name for name, _ in axes)
    return jax.make_mesh(tuple(n for _, n in axes), names, devices=list(devices))


def require_devices(axes: Axes, devices: Sequence, what: str) -> None:
    """A mesh is made over every device of the chosen set: its sizes must
    multiply to their number."""
    size = math.prod(n for _, n in axes)
    if size != len(devices):
        raise RematError(
            f"{what}: the mesh {mesh_words(axes)} has {size} devices, and the chosen device set "
            f"has {len(devices)}. Give --mesh (mesh= in the API) sizes that multiply to "
            f"{len(devices)}, e.g. --mesh data={len(devices)}, or choose "
            f"{size} devices (--device tpu:TOPOLOGY, or for CPU devices "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={size})."
        )


def placed_sharding(sharding: Any, devices: Sequence, chosen: Any, what: str) -> Any:
    """`sharding` with its mesh made over the chosen devices, where it needs
    one: a NamedSharding over an AbstractMesh gets a concrete mesh of the same
    axes (names, sizes, axis types) over the first devices of `devices`; over
    a mesh of one device, a mesh of it over `chosen` (the user's mesh kept:
    their code may name its axes). Anything else: None, left to the caller."""
    from jax.sharding import AbstractMesh, NamedSharding

    if not isinstance(sharding, NamedSharding):
        return None
    mesh = sharding.mesh
    if isinstance(mesh, AbstractMesh):
        if mesh.size > len(devices):
            raise RematError(
                f"{what}: its example arguments are sharded over an abstract mesh of "
                f"{mesh.size} devices ({_axes_words(mesh)}), and the chosen device set has "
                f"{len(devices)}. Choose {mesh.size} devices (--device tpu:TOPOLOGY, or "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={mesh.size} for CPU devices)."
            )
        over = list(devices)[: mesh.size] if mesh.size > 1 else [chosen]
    elif mesh.size == 1:
        over = [chosen]
    else:
        return None
    return sharding.update(mesh=_concrete(mesh, over))


def _concrete(mesh: Any, devices: list) -> Any:
    """A concrete mesh of `mesh`'s axes over `devices`, its axis types kept."""
    import jax

    shape, names = tuple(mesh.axis_sizes), tuple(mesh.axis_names)
    try:
        return jax.make_mesh(shape, names, axis_types=tuple(mesh.axis_types), devices=devices)
    except TypeError:  # a JAX whose make_mesh takes no axis types
        return jax.make_mesh(shape, names, devices=devices)


def mesh_of(leaves: Sequence) -> Axes | None:
    """The axes of the mesh the arguments are sharded over (the largest, where
    several), or None where none is a NamedSharding's."""
    found: dict[Axes, int] = {}
    for leaf in leaves:
        mesh = getattr(getattr(leaf, "sharding", None), "mesh", None)
        if mesh is None or getattr(mesh, "axis_names", None) is None:
            continue
        axes = tuple(zip(mesh.axis_names, (int(n) for n in mesh.axis_sizes), strict=True))
        found[axes] = math.prod(n for _, n in axes)
    return max(found, key=lambda a: found[a]) if found else None


def _axes_words(mesh: Any) -> str:
    return ",".join(f"{n}={s}" for n, s in zip(mesh.axis_names, mesh.axis_sizes, strict=True))


def arguments_mesh(leaves: Sequence) -> contextlib.AbstractContextManager:
    """The mesh the traced arguments are sharded over, entered as the current
    abstract mesh while the user's function is traced, as their own step runs
    under `jax.set_mesh(mesh)`: code that writes a bare PartitionSpec
    (`reshard(x, P("data"))`, `with_sharding_constraint`, `shard_map`
    without `mesh=`) needs one. Nothing is entered where a mesh already is
    current, where no argument is sharded over a mesh, or where they are
    sharded over several."""
    import jax
    from jax.sharding import get_abstract_mesh, use_abstract_mesh

    if not get_abstract_mesh().empty:
        return contextlib.nullcontext()
    meshes = set()
    for leaf in leaves:
        mesh = getattr(getattr(jax.typeof(leaf), "sharding", None), "mesh", None)
        if mesh is not None and not mesh.empty:
            meshes.add(mesh)
    if len(meshes) != 1:
        return contextlib.nullcontext()
    return use_abstract_mesh(meshes.pop())
