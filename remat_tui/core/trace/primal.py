"""Provides the primal program of a target: traced once, cached, and the
source of its checkpoint sites and of site-overridden functions to analyse.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from jax.tree_util import tree_structure, tree_unflatten

from remat_tui.core import jaxcompat as jc
from remat_tui.core.runtime.lru import LRU
from remat_tui.core.setup.arguments import FlatArguments
from remat_tui.core.setup.meshes import arguments_mesh
from remat_tui.core.setup.structure_specs import Structure
from remat_tui.core.setup.usererrors import describe, user_traceback
from remat_tui.core.trace import rebuilt_scans as structures
from remat_tui.core.trace import sites as site_lib
from remat_tui.errors import RematError
from remat_tui.registry import Target

CACHE_SIZE = 8  # primal programs kept (one per target, argument shapes and device)
EVALUATORS = 16  # rewritten programs kept per primal program (one per override plan)
_cache: LRU[Primal] = LRU(CACHE_SIZE)


@dataclass
class Primal:
    # The target's function: weakly where it can be (the entry goes with the
    # function, and with it what JAX caches for that function), so its id in
    # the cache key is never taken for another's.
    fn: Callable[[], Callable | None]
    closed: object  # the ClosedJaxpr of the target
    out_tree: object
    sites: list[site_lib.FoundSite]
    prefer_dir: str | None = None
    # One function object per plan, kept: jax.checkpoint caches the trace (and
    # its JVP) of the function it wraps by identity, so the next outer policy
    # over the same plan re-uses them instead of tracing the program again.
    evaluators: LRU[Callable] = field(default_factory=lambda: LRU(EVALUATORS))

    _scans: list | None = field(default=None, repr=False)

    @property
    def scans(self) -> list:
        """The scans a structure may rebuild (`trace.rebuilt_scans`
        FoundScan), found on first need."""
        if self._scans is None:
            program = jc.open_jaxpr(self.closed)
            self._scans = structures.find_scans(program, self.sites, self.prefer_dir)
        return self._scans

    def evaluator(
        self, plan: dict, declared: dict | None, structure: Structure | None = None
    ) -> Callable:
        """A function of the flattened arguments computing the target with the
        planned sites changed and, with a `structure`, its scan rebuilt; its
        equations keep the user's source lines."""
        overrides = tuple(sorted((i, spec.canonical) for i, spec in plan.items()))
        key = (overrides, structure.canonical if structure is not None else None)
        run = self.evaluators.get(key)
        if run is None:
            splices = {}
            if structure is not None:
                scan = structures.scan_of(self.scans, structure)
                splices[(scan.steps, scan.index)] = structures.splice_for(scan, structure, declared)
            jaxpr = site_lib.rewrite(
                jc.open_jaxpr(self.closed), self.sites, plan, declared, splices
            )
            consts, out_tree = jc.consts_of(self.closed), self.out_tree

            def run(*flat: Any) -> Any:
                return tree_unflatten(out_tree, jc.eval_jaxpr(jaxpr, consts, *flat))

            self.evaluators.put(key, run)
        return run


def primal_program(
    target: Target, flat: FlatArguments, device: jax.Device, prefer_dir: str | None
) -> Primal:
    # The sharding (its mesh included) is part of the key: a topology traces on the
    # same local device as cpu:0, with the same shapes, over another mesh. So are
    # the carried leaves (another activation function is another program).
    avals = tuple(
        (getattr(x, "shape", ()), getattr(x, "dtype", type(x)), getattr(x, "sharding", None))
        for x in flat.leaves
    )
    key = (id(target.fn), id(target.policies), flat.key, avals, str(device))
    hit = _cache.get(key)
    if hit is not None and hit.fn() is target.fn:
        return hit

    def flat_fn(*leaves: Any) -> Any:
        a, kw = flat.rebuild(leaves)
        with arguments_mesh(leaves):
            out = target.fn(*a, **kw)
        require_array_output(target, out)
        return out

    try:
        closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*flat.leaves)
    except RematError:
        raise
    except Exception as exc:
        raise RematError(
            f"{target.label}: tracing the function to find its checkpoints failed: "
            f"{describe(exc)}\n{user_traceback(exc)}"
        ) from None
    primal = Primal(
        fn=_held(target.fn, key),
        closed=closed,
        out_tree=tree_structure(out_shape),
        sites=site_lib.find_sites(jc.open_jaxpr(closed), target.policies, prefer_dir, target.file),
        prefer_dir=prefer_dir,
    )
    _cache.put(key, primal)
    return primal


def _held(fn: Callable, key: Hashable) -> Callable[[], Callable | None]:
    """A weak reference to `fn` that drops its cache entry when `fn` goes,
    or, for a callable that takes no weak reference, a strong one."""
    try:
        return weakref.ref(fn, lambda _: _cache.retain(lambda k, _v: k != key))
    except TypeError:
        return lambda: fn


def require_array_output(target: Target, out: Any) -> None:
    for leaf in jax.tree_util.tree_leaves(out):
        # Python and NumPy scalars are outputs JAX accepts (an aux batch count, say).
        if isinstance(leaf, (bool, int, float, complex, np.generic)):
            continue
        if not hasattr(leaf, "dtype") or not hasattr(leaf, "shape"):
            raise RematError(
                f"{target.label}: the function returned a "
                f"{type(leaf).__name__}, not an array; it must return arrays "
                "(or a pytree of arrays) to be differentiated."
            )
