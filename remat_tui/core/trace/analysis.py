"""Provides `analyze` (Contracts 4 and 5): one target, one Config -> Analysis.

One trace of the forward `vjp` (with `return_shape=True`, as JAX's own
`saved_residuals` does) and one of the backward pass feed everything: the
residual list, both panes, their line maps, the names and the totals.

Checkpoint sites need the primal program (core/trace/sites.py). It is traced only
when the backward pass shows a checkpoint of the user's, or when a site is
overridden, and is cached per target and argument shapes: a target without
sites never pays for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jax.tree_util import tree_flatten, tree_unflatten

from remat_tui.core import jaxcompat as jc
from remat_tui.core.costs import flops, site_flops
from remat_tui.core.costs.flops import count_dots
from remat_tui.core.model import Analysis, JaxprView
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import describe_device, device_set, resolve_device, trace_device
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.setup.usererrors import describe, user_traceback
from remat_tui.core.trace import linemap
from remat_tui.core.trace import recompute as recompute_lib
from remat_tui.core.trace.configured import (
    Cancelled,
    as_target,
    check_cancelled,
    configured_function,
    target_dir,
)
from remat_tui.core.trace.names import named_values
from remat_tui.core.trace.origins import Origins
from remat_tui.core.trace.primal import primal_program
from remat_tui.core.trace.residuals import find_residuals, per_device_bytes
from remat_tui.errors import RematError
from remat_tui.registry import Target
from remat_tui.version import __version__


def analyze(
    fn: Target | Callable,
    args: tuple | None = None,
    kwargs: dict | None = None,
    policy: str | policies.PolicySpec = policies.AS_WRITTEN,
    device: str | Any | None = None,
    cancelled: Callable[[], bool] | None = None,
    sites: dict | None = None,
    config: Config | None = None,
    texts: bool = True,
    row_only: bool = False,
) -> Analysis:
    """Analyse `fn` (a Target or a callable with `args`) under `policy` on `device`,
    with `sites` ({site id or function name: spec}) overriding checkpoints in
    the code. A `config` replaces policy, sites and device at once. A
    deviceless TPU topology (`tpu:v5e:2x2`) is traced on a local CPU device;
    core/xla/compiled_analysis.py adds what XLA says of the compiled gradient.

    `cancelled`, if given, is polled between the expensive steps so a caller
    (the app's worker) can abandon a superseded analysis early. `texts=False`
    skips printing the jaxprs and mapping their lines (the panes stay empty):
    what compare, suggest and diff need is the residual list and the costs.

    `row_only=True` (implies `texts=False`) is what a row of compare or suggest
    needs: the backward pass is traced only when the recompute FLOPs cannot
    be read from the linear program (core/trace/recompute.py); when it is not,
    `flops["backward"]` is None and the sites carry no FLOPs.
    """
    target = as_target(fn, args, kwargs)
    config, dev = resolve(target, policy, sites, device, config)
    arguments = resolve_arguments(target, device_set(dev))
    return traced(target, config, dev, arguments, cancelled, texts=texts, row_only=row_only)


def resolve(target: Target, policy, sites, device, config: Config | None = None):
    """The Config asked for (canonical; `config` as given) and the device it
    names, resolved once: (Config, jax.Device or a topology's device)."""
    if config is None:
        given_device = device if device is None or isinstance(device, str) else None
        config = Config.make(policy, sites, given_device, target.policies)
        return config, resolve_device(device)
    return config, resolve_device(config.device)


def traced(
    target: Target,
    config: Config,
    dev,
    arguments: tuple[tuple, dict],
    cancelled: Callable[[], bool] | None = None,
    texts: bool = True,
    row_only: bool = False,
) -> Analysis:
    """The Analysis of `config`, already resolved (`resolve`), on the example
    arguments built for its device set: one trace, what every view reads."""
    call_args, call_kwargs = arguments
    spec = policies.parse(config.policy, target.policies)
    start = time.perf_counter()
    here = trace_device(dev)
    with jax.default_device(here):
        result = _trace(
            target,
            spec,
            config,
            call_args,
            call_kwargs,
            cancelled,
            here,
            texts=texts and not row_only,
            row_only=row_only,
        )
    seconds = time.perf_counter() - start
    return replace(result, trace_seconds=seconds, device=describe_device(dev), config=config)


def _trace(
    target: Target,
    spec,
    config: Config,
    args: tuple,
    kwargs: dict,
    cancelled,
    device,
    texts=True,
    row_only=False,
) -> Analysis:
    leaves, in_tree = tree_flatten((args, kwargs))
    _require_differentiable(target, leaves)
    prefer_dir = target_dir(target)
    flat_fn, primal, plan = configured_function(target, config, leaves, in_tree, device, spec)

    try:
        closed, (out_shape, vjp_shape) = jax.make_jaxpr(
            lambda *a: jax.vjp(flat_fn, *a), return_shape=True
        )(*leaves)
        check_cancelled(cancelled)
        res_shapes, res_tree = tree_flatten(vjp_shape)
        outvars = jc.open_jaxpr(closed).outvars
        res_avals = [v.aval for v in outvars[len(outvars) - len(res_shapes) :]]
        res_shapes = _keep_memory_space(res_shapes, res_avals, device)
        ct_shapes, ct_tree = tree_flatten(out_shape)

        def backward(*flat):
            vjp_fn = tree_unflatten(res_tree, flat[: len(res_shapes)])
            return vjp_fn(tree_unflatten(ct_tree, flat[len(res_shapes) :]))

        # A row of costs needs the backward pass only for its recompute FLOPs,
        # and the linear program often tells them exactly (core/trace/recompute.py).
        linear = jc.linear_program(vjp_shape, len(leaves))
        read = recompute_lib.from_linear(linear) if row_only and linear is not None else None
        backward_closed = (
            None if read is not None else jax.make_jaxpr(backward)(*res_shapes, *ct_shapes)
        )
    except (RematError, Cancelled):
        raise
    except Exception as exc:
        raise RematError(
            f"{target.label}: tracing under {config.label()} failed: "
            f"{describe(exc)}{_hashing_hint(exc)}\n{user_traceback(exc)}"
        ) from None
    check_cancelled(cancelled)
    fwd = jc.open_jaxpr(closed)
    bwd = jc.open_jaxpr(backward_closed) if backward_closed is not None else None
    # A checkpoint of the user's that is differentiated leaves a remat equation
    # in the linear program as it does in the backward pass (under remat2).
    # Under remat3 a checkpoint that saves everything leaves no trace in either
    # pass: only the primal program shows it.
    seen = jc.remat3_enabled() or _has_user_checkpoint(bwd if bwd is not None else linear.jaxpr)
    if primal is None and seen:
        primal = primal_program(target, leaves, in_tree, device, prefer_dir)
    found_sites = primal.sites if primal is not None else []
    arg_names = jc.residual_words.arg_names(target.fn, args, kwargs)
    found = find_residuals(fwd, len(res_shapes), arg_names)
    origins = Origins(prefer_dir, found_sites)
    for fr in found:
        fr.residual = replace(
            fr.residual,
            origin=origins.of(fwd, fr.var),
            bytes_per_device=per_device_bytes(fr.var.aval),
        )
    check_cancelled(cancelled)
    if bwd is None:
        recompute = read
    else:
        recompute = linemap.recomputation(
            bwd, set(bwd.invars[: len(res_shapes)]), set(bwd.invars[len(res_shapes) :])
        )
    fwd_flops = flops.count(fwd)
    bwd_flops = flops.count(bwd) if bwd is not None else None
    if texts:
        fwd_text, fwd_lay = linemap.layout(fwd)
        check_cancelled(cancelled)
        bwd_text, bwd_lay = linemap.layout(bwd)
        residuals, fwd_marks, bwd_marks = _place_residuals(
            found, fwd, bwd, fwd_lay, bwd_lay, len(res_shapes)
        )
        forward = linemap.make_view(fwd_text, fwd_lay, fwd_marks)
        backward = linemap.make_view(bwd_text, bwd_lay, bwd_marks, recompute)
    else:
        residuals = [fr.residual for fr in found]
        forward = JaxprView("", [], {})
        backward = JaxprView("", [], {}, recompute_eqns=recompute.count)
    # Without a backward pass, a name only recomputed is found in the linear
    # program, where the recomputation comes from; sites get no FLOPs.
    names = named_values(fwd, bwd if bwd is not None else linear.jaxpr)
    shown_sites = [
        replace(f.site, override=plan[f.site.id].canonical if f.site.id in plan else None)
        for f in found_sites
    ]
    if bwd is not None:
        shown_sites = site_flops.attach(
            shown_sites, primal, bwd, recompute, prefer_dir, target.policies
        )
    return Analysis(
        target_file=target.file,
        target_name=target.name,
        policy=spec.canonical,
        python=_snippet(target, spec, shown_sites, plan),
        device={},
        residuals=residuals,
        names=names,
        forward=forward,
        backward=backward,
        warnings=spec.warnings({n.name for n in names}),
        trace_seconds=0.0,
        jax_version=jax.__version__,
        tool_version=__version__,
        sites=shown_sites,
        dots=count_dots(fwd),
        flops={
            "forward": fwd_flops.flops,
            "backward": bwd_flops.flops if bwd_flops is not None else None,
            "recompute": recompute.flops,
        },
        flops_exact=fwd_flops.exact
        and (bwd_flops is None or bwd_flops.exact)
        and recompute.flops_exact,
    )


def _has_user_checkpoint(bwd) -> bool:
    """Whether the backward pass (or the linear program it transposes)
    re-enters a checkpoint the user wrote: every differentiated site leaves a
    remat equation there. (Asked only with no outer policy: under one, the
    primal program is traced anyway.)"""
    return any(jc.is_remat(eqn) for eqn, _ in jc.nested_eqns(bwd))


def _snippet(target: Target, spec, sites: list, plan: dict) -> str:
    """What to paste: at each overridden site's line, its new checkpoint; the
    outer wrap only when an outer policy is set."""
    if not plan:
        return spec.python(target.name)
    lines = []
    seen = set()
    for site in sites:
        if site.id not in plan:
            continue
        # No line of the user's when the checkpoint is applied outside their
        # code (a decorator of remat-tui's wrapping a jax.checkpoint, say).
        where = site.source.where() if site.source else "line not known"
        override = plan[site.id]
        code = (
            f"{site.function}  # call it directly: no jax.checkpoint"
            if override.kind == policies.AS_WRITTEN
            else override.python(site.function)
        )
        if (where, code) in seen:
            continue
        seen.add((where, code))
        lines.append(f"# {where} (site {site.id})\n{code}")
    if spec.kind != policies.AS_WRITTEN:
        lines.append(f"# around {target.name}\n{spec.python(target.name)}")
    return "\n".join(lines)


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


def _keep_memory_space(shapes: list, avals: list, device) -> list:
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


def _place_residuals(found, fwd, bwd, fwd_lay, bwd_lay, num_res):
    """Attach to each residual its lines and variable names in both panes."""
    fwd_marks: dict[int, list[int]] = {}
    bwd_marks: dict[int, list[int]] = {}
    # Input names are read off the printed header; use them only if all were found.
    bwd_names_ok = len(bwd_lay.invar_names) == len(bwd.invars)
    readers: dict[Any, list[int]] = {}  # backward input var -> top-level eqns reading it
    for k, eqn in enumerate(bwd.eqns):
        for v in eqn.invars:
            if isinstance(v, jc.Var):
                readers.setdefault(v, []).append(k)
    out = []
    for idx, fr in enumerate(found):
        r = fr.residual
        fwd_lines: tuple[int, ...] = ()
        fwd_var = None
        if fr.eqn_index is not None:
            fwd_lines = fwd_lay.span_lines(fr.eqn_index)
            eqn = fwd.eqns[fr.eqn_index]
            outs = fwd_lay.outvar_names(fr.eqn_index)
            if fr.var in eqn.outvars and len(outs) == len(eqn.outvars):
                fwd_var = outs[eqn.outvars.index(fr.var)]
        elif r.kind in ("argument", "constant"):
            names = fwd_lay.invar_names if r.kind == "argument" else fwd_lay.constvar_names
            pool = fwd.invars if r.kind == "argument" else fwd.constvars
            if fr.var in pool and len(names) == len(pool):
                fwd_var = names[pool.index(fr.var)]
                fwd_lines = (fwd_lay.header[fwd_var],)
        bwd_lines: set[int] = set()
        bwd_var = None
        for pos in fr.outvar_positions:
            if pos >= num_res or pos >= len(bwd.invars):
                continue
            invar = bwd.invars[pos]
            if bwd_var is None and bwd_names_ok:
                bwd_var = bwd_lay.invar_names[pos]
                bwd_lines.add(bwd_lay.header[bwd_var])
            for k in readers.get(invar, ()):
                bwd_lines.update(bwd_lay.span_lines(k))
        for line in fwd_lines:
            fwd_marks.setdefault(line, []).append(idx)
        for line in bwd_lines:
            bwd_marks.setdefault(line, []).append(idx)
        out.append(
            replace(
                r,
                forward_lines=fwd_lines,
                forward_var=fwd_var,
                backward_lines=tuple(sorted(bwd_lines)),
                backward_var=bwd_var,
            )
        )
    return out, fwd_marks, bwd_marks


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


def _dtype_of(leaf):
    """An argument's dtype; Python scalars count (JAX differentiates 1.0)."""
    dtype = getattr(leaf, "dtype", None)
    if dtype is not None:
        return dtype
    try:
        return np.result_type(leaf)
    except TypeError:
        return None
