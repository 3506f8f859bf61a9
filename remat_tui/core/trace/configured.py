"""Provides the configured function: the target as a Config asks for it (its
checkpoint sites overridden, the outer policy wrapped around it), which
`trace.analysis` traces and `xla.compile.lowering` compiles; and what both take
and raise on the way (`as_target`, `Cancelled`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import jax

from remat_tui.core import jaxcompat as jc
from remat_tui.core.setup import policies
from remat_tui.core.setup.arguments import FlatArguments, flatten_arguments
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import device_set, trace_device
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.setup.meshes import arguments_mesh
from remat_tui.core.trace import sites as site_lib
from remat_tui.core.trace.primal import Primal, primal_program, require_array_output
from remat_tui.registry import Target


def as_target(fn: Target | Callable, args: tuple | None, kwargs: dict | None) -> Target:
    """A Target as given, or one made of a plain callable and its arguments."""
    if isinstance(fn, Target):
        if args is not None or kwargs is not None:
            raise TypeError("pass args/kwargs only with a plain callable, not a Target")
        return fn
    return Target(fn=fn, name=getattr(fn, "__name__", "f"), args=args or (), kwargs=kwargs)


class Cancelled(Exception):
    """Raised while tracing (`trace.traced`) or making a view of the trace
    (`trace.analysis`) when the caller no longer wants the result."""


def check_cancelled(cancelled: Callable[[], bool] | None) -> None:
    if cancelled is not None and cancelled():
        raise Cancelled()


def configured_function(
    target: Target, config: Config, flat: FlatArguments, device: jax.Device
) -> tuple[Callable, Primal | None, dict]:
    """The target as `config` asks for it, as a function of the traced
    (args, kwargs) leaves (`setup.arguments`): its checkpoint sites
    overridden and its structure built (a rewrite of the primal program),
    and the outer policy wrapped around it. Also the primal program (when sites are overridden, a
    structure or an outer policy is set, else None) and the override plan
    ({site id: spec}). What analysis traces and `xla.compile.costs` compiles."""
    spec = config.spec
    primal: Primal | None = None
    plan: dict = {}
    if config.site_specs or config.structure is not None or spec.kind != policies.AS_WRITTEN:
        # Under an outer policy the cached primal program is what is wrapped:
        # the next policy then re-uses JAX's trace of it (Primal.evaluator).
        primal = primal_program(target, flat, device, target_dir(target))
        plan = site_lib.resolve_overrides(
            primal.sites, dict(config.site_specs), jc.open_jaxpr(primal.closed)
        )
        flat_fn = primal.evaluator(plan, target.policies, config.structure)
    else:
        flat_fn = flat_function(target, flat)
    if spec.kind != policies.AS_WRITTEN:
        flat_fn = _checkpointed(flat_fn, policies.checkpoint_policy(spec, target.policies))
    return flat_fn, primal, plan


def program_scans(target: Target, config: Config) -> list:
    """The scans of the target's program a structure may rebuild (its primal
    program's, `trace.rebuilt_scans` FoundScan), traced for the config's
    device (cached with the primal program)."""
    dev = config.jax_device
    flat = flatten_arguments(target.fn, *resolve_arguments(target, device_set(dev)), target.label)
    here = trace_device(dev)
    with jax.default_device(here):
        return primal_program(target, flat, here, target_dir(target)).scans


def flat_function(target: Target, flat: FlatArguments) -> Callable:
    """The target's function of its traced (args, kwargs) leaves, the carried
    ones put back (`setup.arguments`), as JAX's own tools call it."""

    def flat_fn(*leaves: Any) -> Any:
        a, kw = flat.rebuild(leaves)
        with arguments_mesh(leaves):
            out = target.fn(*a, **kw)
        require_array_output(target, out)
        return out

    return flat_fn


def _checkpointed(flat_fn: Callable, jax_policy: jc.Policy) -> Callable:
    return jax.checkpoint(flat_fn, policy=jax_policy)


def target_dir(target: Target) -> str | None:
    """The target file's folder, which tracebacks and sources prefer."""
    return os.path.join(os.path.dirname(target.file), "") if target.file else None
