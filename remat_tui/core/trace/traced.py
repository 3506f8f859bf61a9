"""Provides `Trace`: one configuration of a target traced once, the value every
view of it reads (`trace.analysis` makes the views: the full analysis
with its panes, the costs without them, a row of compare or suggest).

The forward pass of `jax.vjp` (with `return_shape=True`, as JAX's own
`saved_residuals` does) is traced at once, with its residuals, where they were
made and the checkpoint sites. The backward pass is traced the first time a
view asks for it, and kept: a row of compare often reads its recompute FLOPs
from the linear program instead (`trace.recomputation`) and never pays for it.

Checkpoint sites need the primal program (`trace.sites`). It is traced only
when the linear program (or the backward pass) shows a checkpoint of the user's,
or when a site is overridden, and is cached per target and argument shapes: a
target without sites never pays for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jax
import numpy as np
from jax.tree_util import tree_flatten

from remat_tui.core import jaxcompat as jc
from remat_tui.core.setup.arguments import FlatArguments, flatten_arguments
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import device_set, trace_device
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.setup.meshes import Axes, arguments_mesh, mesh_of
from remat_tui.core.setup.usererrors import describe, user_traceback
from remat_tui.core.trace.as_called import BackwardInputs, backward_inputs
from remat_tui.core.trace.configured import (
    Cancelled,
    check_cancelled,
    configured_function,
    target_dir,
)
from remat_tui.core.trace.origins import Origins
from remat_tui.core.trace.primal import Primal, primal_program
from remat_tui.core.trace.residuals import FoundResidual, find_residuals, per_device_bytes
from remat_tui.errors import RematError
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.setup.policy_spec import PolicySpec


@dataclass(eq=False)
class Trace:
    """One configuration traced: the forward jaxpr and its residuals at once,
    the backward jaxpr when first asked for (`backward`)."""

    target: Target
    config: Config
    plan: dict[int, PolicySpec]  # the sites the config overrides, by site id
    device: jax.Device  # the device asked for (a local one, or a topology's)
    here: jax.Device  # the local device it is traced on
    forward: jc.Jaxpr  # the forward (vjp) jaxpr, opened
    linear: jc.Linear | None  # the linear program of the vjp; None where JAX keeps none
    found: list[FoundResidual]  # each with its origin and per-device bytes
    primal: Primal | None
    num_residuals: int  # the forward jaxpr's residual outputs
    seconds: float  # spent tracing so far (the backward pass adds its share)
    _backward_source: Callable[[], BackwardInputs] = field(repr=False)
    _backward_inputs: BackwardInputs | None = field(default=None, repr=False)
    # How many devices the arguments sharded automatically are placed over
    # (their shardings' most; 1: none is): their avals carry no sharding, so
    # the residual bytes are global array sizes, and are called so.
    auto_sharded_devices: int = 1
    _backward: jc.Jaxpr | None = field(default=None, repr=False)
    # The axes of the mesh the arguments are sharded over (None: none), which
    # the device's labels name (Contract 17).
    mesh: Axes | None = None

    def backward(self, cancelled: Callable[[], bool] | None = None) -> jc.Jaxpr:
        """The backward jaxpr (opened), traced the first time it is asked for."""
        if self._backward is None:
            check_cancelled(cancelled)
            start = time.perf_counter()
            with jax.default_device(self.here):
                try:
                    inputs = self._inputs()
                    # A custom_vjp's backward rule is the user's code, traced now.
                    with arguments_mesh([*inputs.residuals, *inputs.cotangents]):
                        closed = jax.make_jaxpr(inputs.fn)(*inputs.residuals, *inputs.cotangents)
                except (RematError, Cancelled):
                    raise
                except Exception as exc:
                    raise _failed(self.target, self.config, exc) from None
            self._backward = jc.open_jaxpr(closed)
            self.seconds += time.perf_counter() - start
        check_cancelled(cancelled)
        return self._backward

    def _inputs(self) -> BackwardInputs:
        if self._backward_inputs is None:
            self._backward_inputs = self._backward_source()
        return self._backward_inputs

    @property
    def backward_residuals(self) -> int:
        """How many of the backward jaxpr's inputs are residuals (the rest are
        cotangents); fewer than `num_residuals` where JAX bakes some in."""
        return len(self._inputs().residuals)

    @property
    def backward_positions(self) -> list[int | None]:
        """Forward residual output -> the backward input holding it (None
        where JAX bakes it into the backward pass as a constant)."""
        return self._inputs().positions

    @property
    def sites(self) -> list:
        """The checkpoint sites found (`trace.sites` FoundSite), if any."""
        return self.primal.sites if self.primal is not None else []


def trace_config(
    target: Target, config: Config, cancelled: Callable[[], bool] | None = None
) -> Trace:
    """`config` traced, its device resolved and the example arguments built
    for that device's set."""
    dev = config.jax_device
    return trace(target, config, dev, resolve_arguments(target, device_set(dev)), cancelled)


def trace(
    target: Target,
    config: Config,
    dev: jax.Device,
    arguments: tuple[tuple, dict],
    cancelled: Callable[[], bool] | None = None,
) -> Trace:
    """`config` traced on `dev` (already resolved) with `arguments` built for
    its device set (`xla.compiled_analysis` compiles with the same ones)."""
    start = time.perf_counter()
    here = trace_device(dev)
    flat = flatten_arguments(target.fn, *arguments, target.label)
    _require_differentiable(target, flat.leaves)
    prefer_dir = target_dir(target)
    with jax.default_device(here):
        flat_fn, primal, plan = configured_function(target, config, flat, here)
        forward, linear, num_res, backward_source = _vjp(target, config, flat_fn, flat.leaves, here)
        check_cancelled(cancelled)
        result = Trace(
            target=target,
            config=config,
            plan=plan,
            device=dev,
            here=here,
            forward=forward,
            linear=linear,
            found=[],
            primal=primal,
            num_residuals=num_res,
            seconds=0.0,
            _backward_source=backward_source,
            mesh=mesh_of(flat.leaves),
        )
        # A checkpoint of the user's that is differentiated leaves a remat
        # equation in the linear program as it does in the backward pass
        # (under remat2). Under remat3 a checkpoint that saves everything leaves
        # no trace in either: only the primal program shows it.
        if primal is None and (jc.remat3_enabled() or _has_user_checkpoint(result)):
            result.primal = primal_program(target, flat, here, prefer_dir)
    result.found = _residuals(result, flat, prefer_dir)
    result.auto_sharded_devices = placed_over(flat.leaves)
    result.seconds = time.perf_counter() - start
    check_cancelled(cancelled)
    return result


def _vjp(
    target: Target, config: Config, flat_fn: Callable, leaves: list, here: jax.Device
) -> tuple[jc.Jaxpr, jc.Linear | None, int, Callable[[], BackwardInputs]]:
    """The forward jaxpr of `jax.vjp(flat_fn)` (opened), its linear program (or
    None) and a function giving what the backward pass is traced from, the
    first time a view asks for it (`trace.as_called`)."""
    try:
        closed, (out_shape, vjp_shape) = jax.make_jaxpr(
            lambda *a: jax.vjp(flat_fn, *a), return_shape=True
        )(*leaves)
        linear = jc.linear_program(vjp_shape, len(leaves))
        forward = jc.open_jaxpr(closed)
        num_res = len(tree_flatten(vjp_shape)[0])
    except (RematError, Cancelled):
        raise
    except Exception as exc:
        raise _failed(target, config, exc) from None

    def inputs() -> BackwardInputs:
        return backward_inputs(flat_fn, leaves, vjp_shape, out_shape, forward, here)

    return forward, linear, num_res, inputs


def _residuals(t: Trace, flat: FlatArguments, prefer_dir: str | None) -> list[FoundResidual]:
    """JAX's residual list of `t`, each with its origin and per-device bytes.
    Arguments are named as JAX names the traced leaves (a carried one is no input)."""
    arg_names = jc.residual_words.arg_names(t.target.fn, *flat.traced())
    origins = Origins(prefer_dir, t.sites)
    return find_residuals(
        t.forward,
        t.num_residuals,
        arg_names,
        lambda var: origins.of(t.forward, var),
        per_device_bytes,
    )


def placed_over(leaves: list) -> int:
    """The most devices an argument sharded automatically spans (1: none is
    placed over several): a mesh's size, abstract or not. An argument over a
    mesh of explicit axes is left out: its aval carries its sharding, so
    every residual's per-device bytes are known (`trace.residuals`)."""
    spans = [1]
    for leaf in leaves:
        sharding = getattr(leaf, "sharding", None)
        axis_types = getattr(getattr(sharding, "mesh", None), "axis_types", ())
        if axis_types and all(t == jax.sharding.AxisType.Explicit for t in axis_types):
            continue
        n = getattr(sharding, "num_devices", 1)
        spans.append(n if isinstance(n, int) else 1)
    return max(spans)


def _has_user_checkpoint(t: Trace) -> bool:
    """Whether the linear program (or, where JAX keeps none, the backward pass)
    re-enters a checkpoint the user wrote: every differentiated site leaves a
    remat equation there. (Asked only with no outer policy: under one, the
    primal program is traced anyway.)"""
    program = t.linear.jaxpr if t.linear is not None else t.backward()
    return any(jc.is_remat(eqn) for eqn, _ in jc.nested_eqns(program))


def _failed(target: Target, config: Config, exc: Exception) -> RematError:
    return RematError(
        f"{target.label}: tracing under {config.label()} failed: "
        f"{describe(exc)}{_hashing_hint(exc)}\n{user_traceback(exc)}"
    )


def _hashing_hint(exc: Exception) -> str:
    """jax.checkpoint hashes the callable it wraps; say so when that is what failed."""
    if isinstance(exc, TypeError) and "unhashable" in str(exc):
        return (
            "\njax.checkpoint (and jax.jit) hash the callable they wrap to cache its "
            "trace, and this one is not hashable (an Equinox module instance, or a "
            "dataclass with array fields, say). Wrap a function instead: "
            "jax.checkpoint(lambda *a: module(*a)), or use eqx.filter_checkpoint."
        )
    return ""


def _require_differentiable(target: Target, leaves: list) -> None:
    import jax.numpy as jnp

    dtypes = [_dtype_of(x) for x in leaves]
    if not any(d is not None and jnp.issubdtype(d, jnp.inexact) for d in dtypes):
        kinds = ", ".join(sorted({str(d) for d in dtypes})) or "no arguments"
        raise RematError(
            f"{target.label}: no argument is a floating-point array ({kinds}), so "
            "there is nothing to differentiate. Give at least one float input, "
            "e.g. jnp.ones((4,), jnp.float32)."
        )


def _dtype_of(leaf: Any) -> Any:
    """An argument's dtype; Python scalars count (JAX differentiates 1.0)."""
    dtype = getattr(leaf, "dtype", None)
    if dtype is not None:
        return dtype
    try:
        return np.result_type(leaf)
    except TypeError:
        return None
