"""Provides `Stories`: each residual's story in the jaxprs (Contract 14), the rule
that saved it (`trace.rules`) and the backward equations that read it,
with their lines in the backward pane. The equation that made it is its
origin (Contract 5); what XLA made of it is `xla.fates.residuals`'s.

The readers are the equations of the backward jaxpr that use the residual's
input variable, followed into the bodies of calls (a checkpoint's
recomputation reads a residual inside its body): the same walk the pane's
marks come from (`trace.linemap`'s `Readers`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from remat_tui.core import jaxcompat as jc
from remat_tui.core.jaxcompat import callbacks
from remat_tui.core.jaxcompat.gathers import gathered_bytes
from remat_tui.core.runtime import collector
from remat_tui.core.stories import Made, Reader, Story
from remat_tui.core.trace import linemap, recomputation
from remat_tui.core.trace.configured import target_dir
from remat_tui.core.trace.origins import Origins
from remat_tui.core.trace.residuals import FoundResidual
from remat_tui.core.trace.rules import Governors, rule_of

if TYPE_CHECKING:
    from remat_tui.core.trace.traced import Trace


class Stories:
    """The residuals' stories of one full analysis (its trace `t`, `bwd` the
    backward jaxpr, `readers` the readers of its values on its printed
    layout, `recompute` its Recomputation: which readers re-run forward
    work), told on first read (`at`, `all`): the app's first paint and a
    search's analyses never read them; the story panel, the reports, `check`
    and the compiled fates do.

    Holds only what telling needs, and lets go of it once told: both
    jaxprs, the residuals found and the lines each backward equation was
    printed on; not the Trace (its linear and primal programs) nor the
    panes' readers with their caches and the printed layout's regions. Until
    told, an analysis of the 24-layer unrolled transformer holds 1.4 MiB
    more than told (4.6 MiB against 3.2; 7.4 if it kept the readers). Told
    once, under a lock: an analysis made in the app's worker thread is read
    on its UI thread."""

    def __init__(
        self,
        t: Trace,
        bwd: jc.Jaxpr,
        readers: linemap.Readers,
        recompute: recomputation.Recomputation,
    ) -> None:
        # Governors and Origins read the Trace's config and sites: made now.
        drawn = linemap.PrintedJaxpr(lines=[], regions=[], by_eqn=readers.lay.by_eqn)
        self._inputs: tuple | None = (
            t.forward, t.found, t.backward_positions, Governors(t),
            Origins(target_dir(t.target), t.sites), bwd, drawn, recompute,
        )  # fmt: skip
        self._told: list[Story] | None = None
        self._lock = threading.Lock()

    def at(self, index: int) -> Story:
        """Residual `index`'s story."""
        return self.all()[index]

    def all(self) -> list[Story]:
        """Every residual's story, in the residuals' order."""
        told = self._told
        if told is None:
            with self._lock:
                if self._told is None:
                    inputs = self._inputs
                    assert inputs is not None  # dropped only once told
                    with collector.paused():  # as while the analysis traced
                        self._told = _tell(*inputs)
                    self._inputs = None  # the jaxprs may go
                told = self._told
        return told


def _tell(
    forward: jc.Jaxpr,
    found: list[FoundResidual],
    positions: list[int | None],
    governors: Governors,
    origins: Origins,
    bwd: jc.Jaxpr,
    bwd_lay: linemap.PrintedJaxpr,
    recompute: recomputation.Recomputation,
) -> list[Story]:
    readers = linemap.Readers(bwd_lay)  # the backward equations reading each value
    first: dict = {}  # a value (Computed.value) -> the first residual's index holding it
    # Each value's computing equation, looked up once: alike residuals and
    # neighbouring ones walk back through the same inputs.
    computed: dict = {}
    made = [_made(fr, forward, origins, first, i, computed) for i, fr in enumerate(found)]
    made = _placed_among_alike(forward, made)
    rerun = bool(callbacks.rerun_callbacks(bwd, recompute.eqn_ids))  # most programs: none
    out = []
    for fr, (m, _) in zip(found, made, strict=True):
        rule = rule_of(fr, origins, forward, governors)
        read = []
        inputs = backward_inputs(fr, bwd, positions)
        for invar in inputs:
            read.extend(readers.equations(bwd, invar))
        again = _runs_again(bwd, inputs, recompute) if rerun else ()
        out.append(Story(rule, m, tuple(_reader(e, bwd_lay, recompute) for e in read), None, again))
    return out


def _runs_again(bwd: jc.Jaxpr, inputs: list, recompute: recomputation.Recomputation) -> tuple:
    """`pure_callback at model.py:39` for each call back to Python that
    recomputing from the backward inputs `inputs` runs again, once each."""
    fed = callbacks.callbacks_fed_by(bwd, inputs, recompute.eqn_ids)
    return tuple(dict.fromkeys(f"{jc.primitive_name(e)} at {callbacks.where_of(e)}" for e in fed))


def _placed_among_alike(forward: jc.Jaxpr, made: list) -> list:
    """Each (Made, place of its computing equation) with the Made's place among
    every equation of the forward jaxpr alike (the same primitive, aval and
    frames, saved or not: one layer's line for each layer), in program
    order: what tells XLA's alike values apart where it keeps more of them
    than are saved. A body shared by calls counts once for each call."""
    wanted = {(m.primitive, m.shape) for m, place in made if place is not None}
    primitives = {primitive for primitive, _ in wanted}  # read before each equation's type
    alike: dict[tuple, list] = {}
    for eqn, frames, place in _nested_with_frames(forward):
        primitive = jc.primitive_name(eqn)
        if primitive not in primitives:
            continue
        what = (primitive, jc.short(eqn.outvars[0].aval) if eqn.outvars else None)
        if what in wanted:
            where = tuple((f.file, f.line) for f in frames)
            alike.setdefault((*what, where), []).append(place)
    out = []
    for m, place in made:
        if place is not None:
            group = alike.get((m.primitive, m.shape, tuple((f.file, f.line) for f in m.frames)), [])
            at = next((k for k, p in enumerate(group) if p == place), None)
            if at is not None:
                m = replace(m, ordinal=at, alike=len(group))
        out.append((m, place))
    return out


def _nested_with_frames(jaxpr: jc.Jaxpr, entered: tuple = (), calls: tuple = ()) -> Iterator[tuple]:
    """Every equation of `jaxpr` and of the bodies it holds (as
    jc.nested_eqns walks them), with the user's frames behind it (its own,
    or those of the innermost call into its body that has some:
    Origins.computing's) and its place (Computed.place)."""
    for eqn in jaxpr.eqns:
        frames = jc.users_frames(eqn.source_info) or entered
        yield eqn, frames, (*calls, id(eqn))
        for body in jc.bodies(eqn):
            yield from _nested_with_frames(body.jaxpr, frames, (*calls, id(eqn)))


# Equations that only re-lay a value: XLA turns them into layouts and bitcasts,
# so the value a compiled buffer holds is their operand's.
_LAYOUTS = frozenset({"reshape", "transpose", "squeeze", "expand_dims", "copy", "copy_p"})


def _made(
    fr: FoundResidual, forward: jc.Jaxpr, origins: Origins, first: dict, index: int, computed: dict
) -> tuple:
    """(the Made of residual `index`, the place of its computing equation or
    None): the equation that computed it (its origin's), the equations
    behind it that it only re-lays, and whether an earlier residual holds
    the same value; `computed` keeps `_computing`'s answers for the next
    residual."""
    if fr.var in forward.invars:
        return Made(None, argument=forward.invars.index(fr.var)), None
    found = origins.computing(forward, fr.var)
    eqn, jaxpr, frames = found.eqn, found.jaxpr, found.frames
    if eqn is None:
        return Made(None), None
    same_as = first.setdefault(found.value, index)
    assert jaxpr is not None  # found with its equation
    relaid = []
    behind = eqn
    while jc.primitive_name(behind) in _LAYOUTS and behind.invars:
        producer = origins.producer(jaxpr, behind.invars[0])
        if producer is None:
            break
        behind = producer
        relaid.append(_what(behind, frames))
    primitive, shape, _ = _what(eqn)
    inputs, from_one = _inputs(eqn, jaxpr, frames, origins, computed)
    made = Made(
        primitive,
        frames,
        shape,
        None if same_as == index else same_as,
        relaid=tuple(relaid),
        inputs=inputs,
        from_one=from_one,
        gathered_bytes=gathered_bytes(eqn),
    )
    return made, found.place


_INPUT_STEPS, _MAX_INPUTS = 5, 32


def _inputs(
    eqn: jc.JaxprEqn, jaxpr: jc.Jaxpr, frames: tuple, origins: Origins, computed: dict
) -> tuple[tuple, bool]:
    """((primitive, aval, frames) of the equations `eqn` (in `jaxpr`, with
    the user's `frames`) is computed from, breadth first, up to
    `_INPUT_STEPS` back, each followed into the bodies of calls to the
    equation computing it (jnp.where's select_n, inside a jitted `_where`);
    whether it reads one value only, besides literals and constants)."""
    out: list[tuple] = []
    seen = {id(eqn)}
    direct = [v for v in eqn.invars if isinstance(v, jc.Var)]
    layer = [_computing(origins, jaxpr, v, frames, computed) for v in direct]
    from_one = len(direct) == 1 and layer[0][0] is not None
    for _ in range(_INPUT_STEPS):
        following = []
        for e, body, what in layer:
            if e is None or id(e) in seen or len(out) >= _MAX_INPUTS:
                continue
            seen.add(id(e))
            if e.outvars:
                out.append(what)
            following += [_computing(origins, body, v, what[2], computed)
                          for v in e.invars if isinstance(v, jc.Var)]  # fmt: skip
        layer = following
    return tuple(out), from_one


def _computing(
    origins: Origins, jaxpr: jc.Jaxpr, var: jc.Atom, around: tuple, computed: dict
) -> tuple:
    """(the equation computing `var`, the jaxpr holding it, its `_what`):
    inside a library's jitted body, which keeps no frame of the user's, the
    frames of the call that entered it (`around`: those of the equation
    reading `var`, where the call was entered before), as XLA's metadata
    has them. Kept in `computed` by the value (the jaxprs outlive it, so
    their ids hold)."""
    key = (id(jaxpr), id(var), around)
    if (known := computed.get(key)) is None:
        eqn, body, frames, _, _ = origins.computing(jaxpr, var)
        known = (None, None, None) if eqn is None else (eqn, body, _what(eqn, frames or around))
        computed[key] = known
    return known


def _what(eqn: jc.JaxprEqn, entered: tuple = ()) -> tuple:
    """(primitive, output aval, the user's frames) of an equation: its own
    frames, else `entered` (those of the call into the body holding it)."""
    shape = jc.short(eqn.outvars[0].aval) if eqn.outvars else None
    return jc.primitive_name(eqn), shape, jc.users_frames(eqn.source_info) or entered


def recomputed(t: Trace) -> list[tuple]:
    """(primitive, output aval, the user's frames) of each equation the
    backward pass re-runs (forward work a checkpoint recomputes): what
    `xla.fates.residuals` looks for among the forward values XLA keeps, where
    XLA merged the recomputation with the forward computation (CSE)."""
    bwd = t.backward()
    split = t.backward_residuals
    again = recomputation.recomputation(bwd, set(bwd.invars[:split]), set(bwd.invars[split:]))
    return [_what(eqn) for eqn, _ in jc.nested_eqns(bwd) if id(eqn) in again.eqn_ids]


def backward_inputs(fr: FoundResidual, bwd: jc.Jaxpr, positions: list[int | None]) -> list:
    """The backward jaxpr's input variables holding the residual `fr` (none
    where JAX bakes it into the backward pass as a constant)."""
    out = []
    for fwd_pos in fr.outvar_positions:
        pos = positions[fwd_pos] if fwd_pos < len(positions) else None
        if pos is not None and pos < len(bwd.invars):
            out.append(bwd.invars[pos])
    return out


def _reader(
    eqn: jc.JaxprEqn, lay: linemap.PrintedJaxpr, recompute: recomputation.Recomputation
) -> Reader:
    lines = lay.by_eqn.get(id(eqn), ())
    return Reader(
        primitive=jc.primitive_name(eqn),
        line=lines[0] if lines else -1,
        source=jc.user_source(eqn.source_info),
        recomputes=id(eqn) in recompute.eqn_ids,
    )
