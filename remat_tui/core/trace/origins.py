"""Provides origins (Contract 5): where a residual's value was really computed.

JAX names a residual by the top-level equation that outputs it: `output of
scan`, `output of jitted function`. The origin follows that output into the
scan, jit, call, remat and cond bodies down to the primitive that computed
it, through `checkpoint_name` (kept as the origin's name) and through the
copies JAX inserts (reduce_precision, device_put, shard_map's broadcast of a
scalar residual). A scan's stacked output is one value per iteration: its
trip count multiplies, and the per-iteration aval is the body's. A body
that only passes one of its inputs out (a checkpoint's forward part outputs
the input it saves) is followed back out, to what its caller passed; out
of a scan's body, a carry is followed to what the body computes for it (each
iteration's value but the first's).

A value computed inside a library (a Linen BatchNorm, an NNX layer) has no
frame of the user's but those that entered it: inside a library's jitted
body (jnp.take, jax.nn.log_softmax), which JAX traces once and shares
between all its calls, the line of the call that entered it. Where JAX copied the equation
out of its body (a checkpoint's forward part is evaluated in place, a site
whose checkpoint is removed is inlined, a scan's loop invariants are
hoisted), those frames are gone too: it is found, by its frames, in the body
of the checkpoint site it came from, and the line that runs that site stands
in.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from remat_tui.core import jaxcompat as jc
from remat_tui.core.model import Origin, Source

if TYPE_CHECKING:
    from remat_tui.core.trace.sites import FoundSite

_MAX_STEPS = 64  # a guard against carry cycles: each step descends or looks through


@dataclass(frozen=True)
class _Followed:
    """Where `Origins._follow` found a value computed."""

    eqn: jc.JaxprEqn | None  # the computing equation; None for an input
    name: str | None  # the checkpoint_name it passed through
    trip: int | None  # enclosing scans' lengths multiplied
    per_iteration: str | None  # the aval of one iteration's value
    outer: Source | None  # the user's line of the innermost body entered
    # the innermost call with a line of the user's whose body holds `eqn`,
    # entering neither a loop nor a checkpoint on the way (jit, custom_jvp)
    caller: jc.JaxprEqn | None
    jaxpr: jc.Jaxpr | None  # the jaxpr holding `eqn`
    frames: tuple[Source, ...]  # the user's frames of the innermost call entered with some
    calls: tuple[int, ...]  # ids of the call equations entered to reach `eqn`, outermost first
    output: int  # which of `eqn`'s outputs the value is


class Computed(NamedTuple):
    """What `Origins.computing` found: the equation that computed a value and
    which of its runs. JAX traces a function called alike once and shares
    the body (a checkpointed layer called in a loop, a library's jitted
    helper), so one equation is every call's: `place`, the calls entered to
    reach it, tells the calls' runs apart."""

    eqn: jc.JaxprEqn | None  # None for an input
    jaxpr: jc.Jaxpr | None  # the jaxpr holding `eqn`
    frames: tuple[Source, ...]  # the user's frames behind it
    place: tuple[int, ...]  # ids of the calls entered, outermost first, then of `eqn`
    output: int  # which of `eqn`'s outputs

    @property
    def value(self) -> tuple:
        """The same for two residuals exactly where they hold one value."""
        return self.place, self.output


class Origins:
    """Finds origins in one forward jaxpr; producer maps are built once per body."""

    def __init__(self, prefer_dir: str | None, sites: list[FoundSite]):
        self.prefer_dir = prefer_dir
        self.sites = sites  # FoundSite list, to tell which site computed a value
        self._producers: dict[int, dict[jc.Var, tuple[jc.JaxprEqn, int]]] = {}
        self._by_primitive: dict[tuple, dict] = {}  # (id(jaxpr), primitive) -> alike equations

    def of(self, jaxpr: jc.Jaxpr, var: jc.Atom) -> Origin:
        found = self._follow(jaxpr, var, carries=True)
        eqn = found.eqn
        if eqn is None:
            return Origin(None, found.name, None, found.trip, found.per_iteration, None)
        source, site, by = self._where(found)
        if site is None:
            site = self._site_told(by, jaxpr) or self._site_of(source, found.trip)
        return Origin(
            primitive=jc.primitive_name(eqn),
            name=found.name,
            source=source,
            trip_count=found.trip,
            per_iteration=found.per_iteration,
            site=site,
        )

    def _where(self, found: _Followed) -> tuple[Source | None, int | None, jc.JaxprEqn]:
        """(the user's line where the equation `found` was computed, the site
        that line runs when it is the line that ran a checkpoint the equation
        was copied out of, the equation whose frames tell its site: its own,
        or the call's whose line it is). Bodies traced inside libraries
        (jnp's own jitted helpers, nnx.scan) may carry no frame of the
        user's: the line that called the library's jitted body holding it
        (traced once and shared by every call, so its own frames cannot tell
        which call), else the line that ran the checkpoint it was copied out
        of, else the line that entered the body, stands in."""
        eqn = found.eqn
        assert eqn is not None
        source = jc.own_source(eqn.source_info, self.prefer_dir, fallback=False)
        if source is None and found.caller is not None:
            called = jc.own_source(found.caller.source_info, self.prefer_dir, fallback=False)
            return called, None, found.caller
        if source is None and (copied := self._copied_from(eqn)) is not None:
            return (*copied, eqn)
        return source or found.outer or jc.user_source(eqn.source_info), None, eqn

    def _site_told(self, eqn: jc.JaxprEqn, forward: jc.Jaxpr) -> int | None:
        """The site `site_by_frames` names, where it names one."""
        site = self.site_by_frames(eqn, forward)
        return site if type(site) is int else None

    def _copied_from(self, eqn: jc.JaxprEqn) -> tuple[Source, int | None] | None:
        """(the line that runs the innermost site whose body has an equation
        with `eqn`'s frames, that site's id or None if several run from that
        line), or None: no site has one, or sites run from different lines
        do, alike in output types too (one library layer checkpointed at two
        places, with the same shapes: nothing tells which)."""
        key = jc.frames_key(eqn.source_info)
        if key is None:
            return None
        held = [f for f in self.sites if f.site.called_at and f.holds(key)]
        held = [f for f in held if not any(encloses(f, inner) for inner in held)]
        if len({f.site.called_at for f in held}) > 1:
            # Told apart by output types: JAX's derivative rules change the
            # primitive (square's makes a mul), rarely the types.
            types = tuple(jc.short(v.aval) for v in eqn.outvars)
            held = [f for f in held if types in f.output_types(key)]
        lines = {f.site.called_at for f in held if f.site.called_at is not None}  # all of them
        if len(lines) != 1:
            return None
        return lines.pop(), held[0].site.id if len(held) == 1 else None

    def judged(self, jaxpr: jc.Jaxpr, var: jc.Atom) -> jc.JaxprEqn | None:
        """The equation a checkpoint policy was asked about for this value:
        the first one making it, followed into the bodies of calls (and back
        out of one where the body only passes an input through) and through
        the copies JAX inserts, that is no call (for a named value, its
        checkpoint_name's own equation); None for the function's input."""
        entered: list = []  # (jaxpr, Body): the bodies followed into, to step back out of
        for _ in range(_MAX_STEPS):
            if not isinstance(var, jc.Var):
                return None
            produced = self._producer(jaxpr, var)
            if produced is None:  # an input of this body: what its caller passed
                if not entered:
                    return None
                jaxpr, body = entered.pop()
                if body.inputs is None or var not in body.jaxpr.invars:
                    return None
                var = body.inputs[body.jaxpr.invars.index(var)]
                continue
            eqn, k = produced
            if jc.primitives.is_copy(eqn) or _jax_promotion(eqn):
                var = eqn.invars[0]
                continue
            inner = self._inner(eqn, k)
            if inner is None:
                return eqn
            entered.append((jaxpr, inner[0]))
            jaxpr, var = inner[0].jaxpr, inner[1]
        return None

    def site_by_frames(
        self, eqn: jc.JaxprEqn, forward: jc.Jaxpr | None = None
    ) -> int | None | bool:
        """The innermost checkpoint site whose body holds an equation with
        `eqn`'s frames (an equation JAX copied out of that body keeps them);
        None when no site's body does; False when the frames do not tell
        (none recorded, or several sites alike that `eqn`'s place in the
        jaxpr `forward` does not tell apart either)."""
        key = jc.frames_key(eqn.source_info)
        if key is None:
            return False
        held = [f for f in self.sites if f.holds(key)]
        if not held:
            return None
        held = [f for f in held if not any(encloses(f, inner) for inner in held)]
        if len(held) > 1:
            types = tuple(jc.short(v.aval) for v in eqn.outvars)
            held = [f for f in held if types in f.output_types(key)]
            if len(held) > 1 and forward is not None:
                return self._by_place(eqn, key, types, held, forward)
        return held[0].site.id if len(held) == 1 else False

    def _by_place(
        self, eqn: jc.JaxprEqn, key: Hashable, types: tuple[str, ...], held: list, forward: jc.Jaxpr
    ) -> int | bool:
        """Sites alike in frames share one traced body: JAX caches the trace
        of a function checkpointed at several places with the same argument
        types, so every site's body holds the first call's frames. The
        jaxpr `forward` evaluates each site's part in program order, the
        sites' own order: the k-th equation there with these frames and
        types is the k-th site's, where there are as many as sites."""
        alike = self._of_primitive(forward, eqn.primitive, types, key)
        at = next((k for k, e in enumerate(alike) if e is eqn), None)
        if at is None or len(alike) != len(held):
            return False
        return held[at].site.id

    def _of_primitive(
        self, forward: jc.Jaxpr, primitive: object, types: tuple[str, ...], key: Hashable
    ) -> list:
        """The equations of `forward` (nested, in order) with this primitive,
        output types and frames; indexed once per jaxpr and primitive."""
        index = self._by_primitive.get((id(forward), primitive))
        if index is None:
            index = {}
            for e, _ in jc.nested_eqns(forward):
                if e.primitive is primitive:
                    types_e = tuple(jc.short(v.aval) for v in e.outvars)
                    index.setdefault((types_e, jc.frames_key(e.source_info)), []).append(e)
            self._by_primitive[(id(forward), primitive)] = index
        return index.get((types, key), [])

    def computing(self, jaxpr: jc.Jaxpr, var: jc.Atom) -> Computed:
        """The equation that computed the value, as `of` follows it, with the
        jaxpr holding it, the user's frames behind it and its place among
        the calls' runs. The frames are the equation's own; inside a library's body
        that keeps none of the user's, those of the innermost call entered
        that has some (into a jitted library body, jax.nn.log_softmax's or
        jnp's indexing: XLA's metadata gives the compiled instruction the
        same), after the line `of` names where it is not among them (the
        line that ran the checkpoint the equation was copied out of)."""
        found = self._follow(jaxpr, var)
        if found.eqn is None:
            return Computed(None, None, (), (), 0)
        place = (*found.calls, id(found.eqn))
        own = jc.users_frames(found.eqn.source_info)
        if own:
            return Computed(found.eqn, found.jaxpr, own, place, found.output)
        source, _, _ = self._where(found)
        frames = found.frames
        if source is not None and _line(source) not in {_line(f) for f in frames}:
            frames = (source, *frames)
        return Computed(found.eqn, found.jaxpr, frames, place, found.output)

    def producer(self, jaxpr: jc.Jaxpr, var: jc.Atom) -> jc.JaxprEqn | None:
        """The equation of `jaxpr` defining `var`, or None."""
        produced = self._producer(jaxpr, var) if isinstance(var, jc.Var) else None
        return produced[0] if produced else None

    def _follow(self, jaxpr: jc.Jaxpr, var: jc.Atom, carries: bool = False) -> _Followed:
        """Where `var` of `jaxpr` was computed: into the bodies of the calls
        that output it, and back out of one that only passes its input
        through (a checkpoint's forward part outputs the input it saves as
        a residual; not a scan's, whose input is a carry or a constant).
        With `carries`, a scan body's carry input is followed to what the
        body computes for it: the line that computes each iteration's value
        but the first's (the input of a checkpointed layer, scanned). Not
        for the stories: that is the value of the iteration before, another
        buffer than the carry the scan stacks."""
        name, trip, per_iteration = None, None, None
        outer: Source | None = None
        caller: jc.JaxprEqn | None = None
        frames: tuple[Source, ...] = ()
        calls: tuple[int, ...] = ()  # ids of the call equations entered
        # (jaxpr, Body, outer, caller, frames, calls) of the bodies stepped into
        entered: list[tuple] = []
        loop: tuple[jc.Jaxpr, int, int] | None = None  # the innermost scan's body and layout
        for _ in range(_MAX_STEPS):
            if not isinstance(var, jc.Var):
                break
            produced = self._producer(jaxpr, var)
            if produced is None:  # an input of this body: what its caller passed, if known
                if not entered:
                    if not carries or loop is None or jaxpr is not loop[0]:
                        break
                    # A carry: each iteration's value is what the body
                    # computes for it (the previous iteration's), bar the first.
                    carried = self._through_carry(jaxpr, var, loop[1], loop[2])
                    if carried is var:
                        break
                    var = carried
                    continue
                jaxpr, body, outer, caller, frames, calls = entered.pop()
                if body.inputs is None or var not in body.jaxpr.invars:
                    break
                var = body.inputs[body.jaxpr.invars.index(var)]
                continue
            eqn, k = produced
            label = jc.checkpoint_name(eqn)
            if label is not None or jc.primitives.is_copy(eqn) or _jax_promotion(eqn):
                name = name or label
                var = eqn.invars[0]
                continue
            inner = self._inner(eqn, k)
            if inner is None:
                return _Followed(
                    eqn, name, trip, per_iteration, outer, caller, jaxpr, frames, calls, k
                )
            body, inner_var, length = inner
            line = jc.own_source(eqn.source_info, self.prefer_dir, fallback=False)
            layout = jc.scan_layout(eqn)
            if layout is None:
                entered.append((jaxpr, body, outer, caller, frames, calls))
            else:
                entered.clear()  # a loop's input is no value of one iteration, bar a carry's
                loop = (body.jaxpr, *layout)
            if layout is not None or jc.is_remat(eqn):
                # Their bodies hold what JAX hoisted or inlined there from
                # elsewhere; a checkpoint's body is its site's (`_copied_from`).
                caller = None
            elif line is not None:
                caller = eqn
            outer = line or outer
            frames = jc.users_frames(eqn.source_info) or frames
            calls = (*calls, id(eqn))
            if length is not None:
                trip = (trip or 1) * length
                per_iteration = per_iteration or jc.short(inner_var.aval)
            jaxpr, var = body.jaxpr, inner_var
        return _Followed(None, name, trip, per_iteration, outer, caller, None, frames, calls, 0)

    def _inner(self, eqn: jc.JaxprEqn, k: int) -> tuple[jc.Body, jc.Atom, int | None] | None:
        """(the Body, its variable for output k, scan length or None), or
        None when the equation computes the value itself."""
        held = jc.bodies(eqn)
        layout = jc.scan_layout(eqn)
        if layout is not None:
            (scan,) = held
            num_consts, num_carry = layout
            length = scan.iterations if k >= num_carry else None
            out = self._through_carry(scan.jaxpr, scan.jaxpr.outvars[k], num_consts, num_carry)
            return scan, out, length
        if held and all(b.alternative for b in held):
            # Every branch outputs it; the first that computes it (not just
            # passes an input through) says where.
            for branch in held:
                out = branch.jaxpr.outvars[k]
                if self._producer(branch.jaxpr, out) is not None:
                    return branch, out, None
            return None
        if len(held) == 1 and held[0].outputs:
            return held[0], held[0].jaxpr.outvars[k], None
        return None

    def _through_carry(
        self, body: jc.Jaxpr, var: jc.Atom, num_consts: int, num_carry: int
    ) -> jc.Atom:
        """A stacked scan output that is a carry input is the carry's value each
        iteration: what the body computes for that carry."""
        if isinstance(var, jc.Var) and var in body.invars:
            j = body.invars.index(var) - num_consts
            if 0 <= j < num_carry:
                return body.outvars[j]
        return var

    def _producer(self, jaxpr: jc.Jaxpr, var: jc.Var) -> tuple[jc.JaxprEqn, int] | None:
        table = self._producers.get(id(jaxpr))
        if table is None:
            table = {v: (e, k) for e in jaxpr.eqns for k, v in enumerate(e.outvars)}
            self._producers[id(jaxpr)] = table
        return table.get(var)

    def _site_of(self, source: Source | None, trip: int | None) -> int | None:
        """The innermost site whose body has this line, preferring one run as
        many times as the value was stacked."""
        if source is None or not self.sites:
            return None
        key = (source.file, source.line)
        holding = [f.site for f in self.sites if key in f.lines]
        if not holding:
            return None
        same_trip = [s for s in holding if s.trip_count == trip]
        return (same_trip or holding)[-1].id


def _line(source: Source) -> tuple[str, int]:
    return source.file, source.line


def _jax_promotion(eqn: jc.JaxprEqn) -> bool:
    """JAX's own broadcast of a scalar residual out of a shard_map body (the
    scalar a debug print reads, say): it holds the scalar's value."""
    return jc.primitives.is_scalar_promotion(eqn) and jc.user_source(eqn.source_info) is None


def encloses(outer: FoundSite, inner: FoundSite) -> bool:
    """Whether site `inner` (a FoundSite) is in the body of site `outer`."""
    depth = len(outer.steps)
    return (
        len(inner.steps) > depth
        and inner.steps[:depth] == outer.steps
        and inner.steps[depth][0] == outer.index
    )
