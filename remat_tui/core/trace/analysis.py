"""Provides `analyze` (Contracts 4 and 5): one target, one Config -> Analysis,
and the views of one Trace (`trace.traced`) every caller reads:

- `full_view`: the Analysis with both panes and their line maps (the app,
  the reports);
- `costs_view`: the same without the panes (diff, the transposition FLOPs);
- `row_view`: what a row of compare or suggest needs, the backward pass traced
  only when the recompute FLOPs cannot be read from the linear program
  (`trace.recomputation`), or when the program calls back to Python
  (only the backward pass says which calls a configuration runs again: its
  `effects`, issue 43); otherwise `flops["backward"]` is None and the sites
  carry no FLOPs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import jax

from remat_tui.core import jaxcompat as jc
from remat_tui.core.costs import flops, site_flops
from remat_tui.core.costs.flops import count_dots
from remat_tui.core.jaxcompat.callbacks import calls_back
from remat_tui.core.model import Analysis, Deferred, Flops, JaxprView, Residual
from remat_tui.core.runtime import collector
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import describe_device, device_set
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.trace import applied, effects, linemap, recomputation, story, structure_code
from remat_tui.core.trace.call_code import checkpoints_code
from remat_tui.core.trace.configured import as_target, check_cancelled, target_dir
from remat_tui.core.trace.names import named_values
from remat_tui.core.trace.rebuilt_scans import scan_of
from remat_tui.core.trace.residuals import FoundResidual
from remat_tui.core.trace.traced import Trace, trace
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
) -> Analysis:
    """The full analysis of `fn` (a Target or a callable with `args`) under
    `policy` on `device`, with `sites` ({site id or function name: spec})
    overriding checkpoints in the code. A `config` replaces policy, sites and
    device at once. A deviceless TPU topology (`tpu:v5e:2x2`) is traced on a
    local CPU device; `xla.compiled_analysis` adds what XLA says of the
    compiled gradient.

    `cancelled`, if given, is polled between the expensive steps so a caller
    (the app's worker) can abandon a superseded analysis early.

    Python's automatic garbage collection is paused while it traces
    (`runtime.collector`: full collections over a heap the trace only adds to
    free nothing and cost up to a third of the call)."""
    target = as_target(fn, args, kwargs)
    config, dev = resolve(target, policy, sites, device, config)
    arguments = resolve_arguments(target, device_set(dev))
    with collector.paused():
        return full_view(trace(target, config, dev, arguments, cancelled), cancelled)


def resolve(
    target: Target,
    policy: str | policies.PolicySpec,
    sites: dict | None,
    device: str | Any | None,
    config: Config | None = None,
) -> tuple[Config, Any]:
    """The Config asked for (canonical; `config` as given) and the device it
    names, resolved once: (Config, jax.Device or a topology's device)."""
    if config is None:
        config = Config.make(policy, sites, device, target.policies)
    return config, config.jax_device


def full_view(t: Trace, cancelled: Callable[[], bool] | None = None) -> Analysis:
    """Every cost, and both panes with the residuals placed on their lines."""
    begun = _clock(t)
    bwd = t.backward(cancelled)
    recompute = _recompute_in(t, bwd)
    fwd_text, fwd_lay = linemap.layout(t.forward)
    check_cancelled(cancelled)
    bwd_text, bwd_lay = linemap.layout(bwd)
    readers = linemap.Readers(bwd_lay)
    stories = story.Stories(t, bwd, readers, recompute)  # told when first read
    residuals, fwd_marks, bwd_marks = _place_residuals(
        t.found, t.forward, bwd, fwd_lay, readers, t.backward_positions, stories
    )
    forward = linemap.make_view(fwd_text, fwd_lay, fwd_marks)
    backward = linemap.make_view(bwd_text, bwd_lay, bwd_marks, recompute)
    a = _analysis(t, bwd, recompute, residuals, forward, backward, begun)
    a.applied = applied.verdicts(t, {n.name for n in a.names}, a.totals.host_bytes)
    a.effects = effects.effects(t, bwd, recompute)
    return a


def costs_view(t: Trace, cancelled: Callable[[], bool] | None = None) -> Analysis:
    """Every cost (the backward pass traced), no panes."""
    begun = _clock(t)
    bwd = t.backward(cancelled)
    recompute = _recompute_in(t, bwd)
    return _analysis(t, bwd, recompute, *_without_panes(t, recompute), begun)


def row_view(t: Trace, cancelled: Callable[[], bool] | None = None) -> Analysis:
    """What a row of compare or suggest needs: residuals, bytes, recompute
    FLOPs and the calls back to Python it runs again (`effects`), read from
    the linear program when it tells them exactly (the backward pass then
    never traced), no panes. A program with no call back to Python (one walk
    of the forward program says so) runs none again; one with a call has
    its backward pass traced, which says whether this configuration
    recomputes it."""
    begun = _clock(t)
    read = recomputation.from_linear(t.linear) if t.linear is not None else None
    if read is not None and not calls_back(t.forward):
        return _analysis(t, None, read, *_without_panes(t, read), begun)
    bwd = t.backward(cancelled)
    recompute = _recompute_in(t, bwd)
    a = _analysis(t, bwd, recompute, *_without_panes(t, recompute), begun)
    a.effects = effects.effects(t, bwd, recompute)
    return a


def _clock(t: Trace) -> tuple[float, float]:
    """When a view begins: (seconds spent tracing before it, the clock). The
    view's Analysis counts both, and the backward pass once if it traces it."""
    return t.seconds, time.perf_counter()


def _recompute_in(t: Trace, bwd: jc.Jaxpr) -> recomputation.Recomputation:
    """The forward work the backward pass does again (inside remat equations)."""
    return recomputation.recomputation(
        bwd, set(bwd.invars[: t.backward_residuals]), set(bwd.invars[t.backward_residuals :])
    )


def _without_panes(
    t: Trace, recompute: recomputation.Recomputation
) -> tuple[list[Residual], JaxprView, JaxprView]:
    """(residuals, forward pane, backward pane) for a view with no panes."""
    return (
        [fr.residual for fr in t.found],
        JaxprView("", [], {}),
        JaxprView("", [], {}, recompute_eqns=recompute.count),
    )


def _analysis(
    t: Trace,
    bwd: jc.Jaxpr | None,
    recompute: recomputation.Recomputation,
    residuals: list[Residual],
    forward: JaxprView,
    backward: JaxprView,
    begun: tuple,
) -> Analysis:
    """The Analysis of `t` with the backward pass `bwd` (None when the view
    did without it) and the panes given."""
    fwd_flops = flops.count(t.forward)
    bwd_flops = flops.count(bwd) if bwd is not None else None
    # Without a backward pass, a name only recomputed is found in the linear
    # program, where the recomputation comes from; sites get no FLOPs.
    read_from = bwd
    if read_from is None:
        assert t.linear is not None  # a view without the backward pass reads the linear program
        read_from = t.linear.jaxpr
    names = named_values(t.forward, read_from)
    target = t.target
    shown_sites = [
        replace(f.site, override=t.plan[f.site.id].canonical, effective_spec=t.plan[f.site.id])
        if f.site.id in t.plan
        else f.site
        for f in t.sites
    ]
    if bwd is not None:
        shown_sites = site_flops.attach(
            shown_sites, t.primal, bwd, recompute, target_dir(target), target.policies
        )
    return Analysis(
        target_file=target.file,
        target_name=target.name,
        policy=t.config.spec.canonical,
        python=_snippet(target, t.config.spec, shown_sites, t.plan, _structure_code(t)),
        device=describe_device(t.device) | ({"mesh": dict(t.mesh)} if t.mesh else {}),
        residuals=residuals,
        names=names,
        forward=forward,
        backward=backward,
        warnings=t.config.spec.warnings({n.name for n in names}),
        trace_seconds=begun[0] + time.perf_counter() - begun[1],
        jax_version=jax.__version__,
        tool_version=__version__,
        sites=shown_sites,
        config=t.config,
        dots=count_dots(t.forward),
        flops=Flops(
            forward=fwd_flops.flops,
            backward=bwd_flops.flops if bwd_flops is not None else None,
            recompute=recompute.flops,
        ),
        flops_exact=fwd_flops.exact
        and (bwd_flops is None or bwd_flops.exact)
        and recompute.flops_exact,
        auto_sharded_devices=t.auto_sharded_devices,
    )


def _structure_code(t: Trace) -> tuple[str, str] | None:
    """The code to write for the config's structure, and its helper, if it
    has one (`trace.structure_code`)."""
    structure = t.config.structure
    if structure is None:
        return None
    assert t.primal is not None  # a structure is built from the primal program
    return structure_code.code_for(scan_of(t.primal.scans, structure), structure)


def _snippet(
    target: Target, spec: policies.PolicySpec, sites: list, plan: dict, structure: tuple | None
) -> str:
    """What to paste: the structure's call, if any; at each overridden
    site's line, its new checkpoint (`trace.wrappers`: for a library's
    wrapper, its policy or the config string it reads); the outer wrap only
    when an outer policy is set; last, the structure's helper."""
    if not plan and structure is None:
        return spec.python(target.name)
    lines = [structure[0]] if structure is not None else []
    lines += checkpoints_code(sites, plan)
    if spec.kind != policies.AS_WRITTEN:
        lines.append(f"# around {target.name}\n{spec.python(target.name)}")
    if structure is not None:
        lines.append(f"\n{structure[1]}")
    return "\n".join(lines)


def _place_residuals(
    found: list[FoundResidual],
    fwd: jc.Jaxpr,
    bwd: jc.Jaxpr,
    fwd_lay: linemap.PrintedJaxpr,
    readers: linemap.Readers,
    positions: list[int | None],
    stories: story.Stories,
) -> tuple[list[Residual], dict[int, list[int]], dict[int, list[int]]]:
    """Attach to each residual its lines and variable names in both panes
    (`positions`: forward residual output -> backward input, Trace.backward_positions),
    and its story (`stories`, told when first read: `Deferred`): the lines that make it
    (forward) and read it (backward: `readers`, on the backward pane's
    layout), followed into the bodies of calls rather than the whole of each
    (linemap.making_lines, Readers)."""
    fwd_marks: dict[int, list[int]] = {}
    bwd_marks: dict[int, list[int]] = {}
    bwd_lay = readers.lay
    # Input names are read off the printed header; use them only if all were found.
    bwd_names_ok = len(bwd_lay.invar_names) == len(bwd.invars)
    out = []
    for idx, fr in enumerate(found):
        r = fr.residual
        fwd_lines: tuple[int, ...] = ()
        fwd_var = None
        if fr.eqn_index is not None:
            eqn = fwd.eqns[fr.eqn_index]
            # the line defining it first (a body bound by `let` prints above it)
            head = fwd_lay.span_lines(fr.eqn_index)[:1]
            made = linemap.making_lines(fwd_lay, eqn, fr.var) - set(head)
            fwd_lines = (*head, *sorted(made))
            outs = fwd_lay.outvar_names(fr.eqn_index)
            if fr.var in eqn.outvars and len(outs) == len(eqn.outvars):
                fwd_var = outs[eqn.outvars.index(fr.var)]
        elif r.kind in ("argument", "constant"):
            names = fwd_lay.invar_names if r.kind == "argument" else fwd_lay.constvar_names
            pool = fwd.invars if r.kind == "argument" else fwd.constvars
            if fr.var in pool and len(names) == len(pool):
                fwd_var = names[pool.index(fr.var)]
                fwd_lines = (fwd_lay.header[fwd_var],)
        bwd_header: tuple[int, ...] = ()  # the line declaring it, first
        bwd_lines: set[int] = set()
        bwd_var = None
        for fwd_pos in fr.outvar_positions:
            pos = positions[fwd_pos] if fwd_pos < len(positions) else None
            if pos is None or pos >= len(bwd.invars):
                continue  # baked into the backward pass as a constant
            invar = bwd.invars[pos]
            if bwd_var is None and bwd_names_ok:
                bwd_var = bwd_lay.invar_names[pos]
                bwd_header = (bwd_lay.header[bwd_var],)
            bwd_lines |= readers.lines(bwd, invar)
        bwd_lines -= set(bwd_header)
        for line in fwd_lines:
            fwd_marks.setdefault(line, []).append(idx)
        for line in (*bwd_header, *bwd_lines):
            bwd_marks.setdefault(line, []).append(idx)
        out.append(
            replace(
                r,
                forward_lines=fwd_lines,
                forward_var=fwd_var,
                backward_lines=(*bwd_header, *sorted(bwd_lines)),
                backward_var=bwd_var,
                story=Deferred(stories, idx),
            )
        )
    return out, fwd_marks, bwd_marks
