"""Provides structures (Contract 15) built from the traced program: the scans
a structure can rebuild (`find_scans`, each with why not where it cannot) and
the program with one of them rebuilt (`splice_for`, applied by
`trace.sites`'s rewrite with the site overrides, in one pass).

A scan is rebuilt by tracing, where the user's scan was written, the very
code `trace.structure_code` prints for the user (`nested_scan`,
`split_scan`), around the scan's own body run again: so the program
analysed and compiled is the program the printed code makes. A scan inside
a `shard_map` body runs once on each device, on local arrays: it is rebuilt
within the body, traced as JAX traces the body (`jaxcompat.shard_maps`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import jax

from remat_tui.core import jaxcompat as jc
from remat_tui.core.model import Source
from remat_tui.core.setup import policies
from remat_tui.core.setup.structure_specs import NESTED, Structure
from remat_tui.core.trace import sites as site_lib
from remat_tui.core.trace.found_scan import (  # noqa: F401 (sqrt_groups re-exported)
    FoundScan,
    sqrt_groups,
)
from remat_tui.core.trace.structure_code import nested_scan, split_scan
from remat_tui.errors import RematError

MIN_LENGTH = 4  # shorter loops have nothing to gain from a structure


def find_scans(jaxpr: jc.Jaxpr, found_sites: list, prefer_dir: str | None) -> list[FoundScan]:
    """Every scan of at least MIN_LENGTH layers in the primal program, in
    program order, reached through calls (jit, checkpoints, shard_map
    bodies); those inside another loop or a branch are listed with why they
    are not offered."""
    out: list[FoundScan] = []
    site_at = {(f.steps, f.index): f for f in found_sites}

    def walk(
        j: jc.Jaxpr, steps: tuple, enclosed: str | None, outer_source: Source | None, within: tuple
    ) -> None:
        for i, eqn in enumerate(j.eqns):
            held = jc.bodies(eqn)
            if not held:
                continue
            own = jc.own_source(eqn.source_info, prefer_dir, fallback=False) or outer_source
            loop = jc.scans.scan_loop(eqn)
            if loop is not None and loop.length >= MIN_LENGTH:
                where = (steps, i, own, enclosed, within)
                out.append(_found(len(out) + 1, eqn, loop, where, site_at))
            for body in held:
                inner, inside = enclosed, within
                if body.per_device and body.inputs is not None:
                    # a shard_map body: once on each device, its scans rebuilt within it
                    inside = (*within, jc.shard_maps.manual_body(eqn))
                elif inner is None and (body.runs != 1 or body.alternative or body.inputs is None):
                    inner = _enclosing_words(eqn, loop)
                walk(body.jaxpr, (*steps, (i, body.slot)), inner, own, inside)

    walk(jaxpr, (), None, None, ())
    return out


def _enclosing_words(eqn: jc.JaxprEqn, loop: jc.scans.ScanLoop | None) -> str:
    if loop is not None:
        return "it runs inside another scan"
    return f"it runs inside a {jc.primitive_name(eqn)} (a loop or a branch)"


def _found(
    id_: int,
    eqn: jc.JaxprEqn,
    loop: jc.scans.ScanLoop,
    where: tuple,
    site_at: dict[tuple, site_lib.FoundSite],
) -> FoundScan:
    """The scan of `eqn`; `where`: (steps, index, its own source, why an
    enclosing loop or branch keeps it from being rebuilt, the shard_map
    bodies holding it)."""
    steps, index, own, enclosed, within = where
    body_steps = (*steps, (index, jc.bodies(eqn)[0].slot))
    top = [site_at[(body_steps, k)] for k, e in enumerate(loop.open_body.eqns) if jc.is_remat(e)]
    site = top[0].site if top else None
    return FoundScan(
        id=id_,
        steps=steps,
        index=index,
        length=loop.length,
        function=jc.scans.step_name(loop) or (site.function if site else "step"),
        source=own or jc.user_source(eqn.source_info),
        checkpointed=bool(top),
        checkpoint_function=site.function if site else None,
        checkpoint_policy=site.policy if site else None,
        checkpoint_spec=site.spec if site else None,
        library=jc.scans.library_of(eqn),
        why_not=_why_not(loop, enclosed, len(top)),
        prevent_cse=jc.scans.checkpoint_prevent_cse(loop),
        within=within,
    )


def _why_not(loop: jc.scans.ScanLoop, enclosed: str | None, checkpoints: int) -> str | None:
    if enclosed:
        return f"{enclosed}: only a scan the function runs once can be rebuilt"
    if loop.effects:
        return (
            f"its body has side effects ({', '.join(loop.effects)}): a rebuilt loop would "
            "run them again when it recomputes a group, or in another order"
        )
    if loop.reverse:
        return "it runs in reverse (reverse=True), which the rebuilt scans do not do yet"
    if loop.unrolled:
        return "it is unrolled (unroll != 1), which the rebuilt scans would not keep"
    if checkpoints > 1:
        return "its body applies several checkpoints, so one policy per part would be ambiguous"
    return None


def scan_of(scans: list[FoundScan], structure: Structure) -> FoundScan:
    """The scan `structure` names, or RematError saying what there is."""
    by_id = {s.id: s for s in scans}
    scan = by_id.get(structure.scan)
    if scan is None:
        if not scans:
            raise RematError(
                f"structure {structure}: the function runs no jax.lax.scan of at least "
                f"{MIN_LENGTH} layers, so there is no loop to rebuild."
            )
        listed = ", ".join(f"{s.id} ({s.function}, {s.length} layers)" for s in scans)
        raise RematError(f"structure {structure}: no scan {structure.scan}. Scans: {listed}.")
    why = scan.why_not_structure(structure)
    if why:
        raise RematError(f"structure {structure} cannot be built: {why}.")
    return scan


def splice_for(scan: FoundScan, structure: Structure, declared: dict | None) -> site_lib.Splice:
    """The rewrite action (sites.Splice) that replaces the scan's equation by
    `structure` built around its body (its body already rewritten by the
    site overrides under it)."""

    def replace(eqn: jc.JaxprEqn) -> jc.Jaxpr:
        loop = jc.scans.scan_loop(eqn)
        assert loop is not None  # the splice replaces a scan
        rebuilt = _rebuilt(loop, structure, declared)
        with contextlib.ExitStack() as inside, jc.scans.traced_at(eqn):
            for body in scan.within:  # a shard_map body's: its axes, its local types
                inside.enter_context(body.entered())
            jaxpr, why = jc.scans.trace_abstract(rebuilt, list(eqn.invars))
        if jaxpr is None:
            raise RematError(f"structure {structure} cannot be built: {why}.")
        return jaxpr

    return site_lib.Splice(replace)


def _rebuilt(
    loop: jc.scans.ScanLoop, structure: Structure, declared: dict[str, Callable] | None
) -> Callable[..., list]:
    """The function of the scan's inputs (consts, carry, xs) computing what
    the scan does, as `structure` rebuilds it."""

    def rebuilt(*ins: Any) -> list:
        consts, carry, xs = loop.split_inputs(list(ins))
        if structure.kind == NESTED:
            step = jc.scans.body_step(loop, loop.body, consts)
            out, ys = nested_scan(
                step, tuple(carry), tuple(xs), structure.count, loop.length,
                prevent_cse=jc.scans.checkpoint_prevent_cse(loop),
            )  # fmt: skip
        else:
            first, rest = (_step_under(loop, part, consts, declared) for part in structure.parts)
            out, ys = split_scan(first, rest, tuple(carry), tuple(xs), structure.count, loop.length)
        return [*out, *ys]

    return rebuilt


def _step_under(
    loop: jc.scans.ScanLoop,
    spec: policies.PolicySpec,
    consts: list,
    declared: dict[str, Callable] | None,
) -> Callable:
    """The scan's step with its checkpoint under `spec` (or, where the body
    applies none, a checkpoint with `spec` around it); as_written: as is."""
    if spec.kind == policies.AS_WRITTEN:
        return jc.scans.body_step(loop, loop.body, consts)
    policy = policies.checkpoint_policy(spec, declared)
    if jc.scans.holds_checkpoint(loop):
        return jc.scans.body_step(loop, jc.scans.body_with_policies(loop, policy), consts)
    return jax.checkpoint(jc.scans.body_step(loop, loop.body, consts), policy=policy)
