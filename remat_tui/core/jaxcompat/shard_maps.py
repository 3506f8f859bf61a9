"""Provides what tracing inside a `shard_map` body needs (for a scan rebuilt
there, `trace.rebuilt_scans`): the context JAX itself traces the body in,
read off the shard_map equation (`manual_body`) and entered again
(`ManualBody.entered`): the mesh's manual axes bound, so that the body's
collectives find them; the abstract mesh with those axes Manual, so that
values have the body's local types; and `check_vma` as the shard_map has it,
so that they vary over the axes they did."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jax.sharding import use_abstract_mesh

from remat_tui.core.jaxcompat import private
from remat_tui.core.jaxcompat.objects import JaxprEqn
from remat_tui.core.jaxcompat.version import expects


@dataclass(frozen=True)
class ManualBody:
    """The context a shard_map traces its body in."""

    mesh: Any  # the shard_map's mesh (a Mesh or AbstractMesh)
    axes: frozenset  # the axes it makes manual
    check_vma: bool

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """Code traced inside is traced as in the body."""
        with contextlib.ExitStack() as stack:
            for context in _contexts(self):
                stack.enter_context(context)
            yield


@expects("shard_map's _as_manual_mesh and _extend_axis_env, and config's _check_vma")
def _contexts(body: ManualBody) -> list:
    """The contexts JAX's _shard_map_staging traces a body in."""
    module = private.shard_map()
    inner = module._as_manual_mesh(body.mesh, body.axes)
    return [
        module._extend_axis_env(body.mesh, body.axes),
        use_abstract_mesh(inner),
        private.config()._check_vma(body.check_vma),
    ]


@expects("a shard_map equation with mesh, newly_manual_axes and check_vma")
def manual_body(eqn: JaxprEqn) -> ManualBody | None:
    """The context of a shard_map equation's body; None for anything else."""
    if eqn.primitive.name != "shard_map":
        return None
    p = eqn.params
    mesh = p["mesh"]
    axes = p.get("newly_manual_axes", p.get("manual_axes", frozenset(mesh.axis_names)))
    return ManualBody(mesh, frozenset(axes), bool(p.get("check_vma", True)))
