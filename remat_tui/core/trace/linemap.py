"""Provides the line maps of the two jaxpr panes.

From the printer's source map (see jaxcompat.format_jaxpr) we know which
equation each printed line belongs to. From that: which forward lines define
residuals, which backward lines read them, which backward lines recompute
forward work and which bring an offloaded residual back from host memory (the
equations `trace.recomputation` finds), and the user's
source line behind every equation line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from remat_tui.core import jaxcompat as jc
from remat_tui.core.model import JaxprView, Source
from remat_tui.core.trace.recomputation import Recomputation

_BINDER = re.compile(r"([A-Za-z_]\w*):\S+")


@dataclass
class PrintedJaxpr:
    """Where each top-level equation and input variable was printed."""

    lines: list[str]
    regions: list[list[jc.Region]]  # per line: (start, end, equation) drawn there
    # top-level equation index -> its own regions (line, start, end), in order
    own: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    header: dict[str, int] = field(default_factory=dict)  # binder name -> line
    constvar_names: list[str] = field(default_factory=list)
    invar_names: list[str] = field(default_factory=list)
    # per line, the innermost equation drawn there (None: a header or binding line)
    innermost: list[jc.EqnRef | None] = field(default_factory=list)
    # id() of an equation (at any depth) -> the lines it is the innermost one on
    by_eqn: dict[int, list[int]] = field(default_factory=dict)
    unclaimed: list[int] = field(default_factory=list)  # lines no equation drew (headers)

    def span_lines(self, eqn_index: int) -> tuple[int, ...]:
        """Every line from the equation's first to its last (sub-jaxprs printed
        inline included)."""
        own = self.own.get(eqn_index)
        return tuple(range(own[0][0], own[-1][0] + 1)) if own else ()

    def outvar_names(self, eqn_index: int) -> list[str]:
        """Printed names of a top-level equation's outputs (its left-hand side)."""
        text = " ".join(self.lines[line][a:b] for line, a, b in self.own.get(eqn_index, ()))
        lhs, eq, _ = text.partition(" = ")
        return _BINDER.findall(lhs) if eq else []


def layout(jaxpr: jc.Jaxpr) -> tuple[str, PrintedJaxpr]:
    text, regions = jc.format_jaxpr(jaxpr)
    lay = PrintedJaxpr(text.split("\n"), regions)
    own, by_eqn, innermost = lay.own, lay.by_eqn, lay.innermost
    for i, line_regions in enumerate(regions):
        inner, deepest = None, 0  # the first of the deepest equations drawn on the line
        for start, end, ref in line_regions:
            depth = ref.depth
            if depth == 1:  # a top-level equation's own text (not a sub-jaxpr's)
                own.setdefault(ref.path[0], []).append((i, start, end))
            if depth > deepest:
                inner, deepest = ref, depth
        innermost.append(inner)
        if inner is not None:
            by_eqn.setdefault(id(inner.eqn), []).append(i)
        else:
            lay.unclaimed.append(i)
    _read_header(lay)
    return text, lay


# ---- the lines that make and read a value -----------------------------------------
#
# A residual's lines are its equations', not the whole of every equation that
# touches it: a remat, scan or jit equation prints its body inline (a remat2
# of 25 lines), and only the body's lines that make or read the value say
# anything. So a call equation contributes its first and last lines (its
# binders, and its operands), and the search goes on inside its bodies.


def making_lines(lay: PrintedJaxpr, eqn: jc.JaxprEqn, var: jc.Atom) -> set[int]:
    """The lines of `eqn` that make its output `var`: all of a leaf equation's;
    of a call, its binders and operands lines and, inside its bodies, the
    lines making the body output bound to `var`."""
    calls = jc.bodies(eqn)
    if not calls:
        return set(lay.by_eqn.get(id(eqn), ()))
    out = _ends(lay, eqn)
    position = next((k for k, o in enumerate(eqn.outvars) if o is var), None)
    for body in calls:
        if not body.outputs or position is None:
            continue
        inner = body.jaxpr.outvars[position]
        maker = next((e for e in body.jaxpr.eqns if any(o is inner for o in e.outvars)), None)
        if maker is not None:
            out |= making_lines(lay, maker, inner)
    return out


class Readers:
    """The lines of the equations reading a value, followed into bodies, and
    those equations; each jaxpr's readers indexed once (var -> its
    equations), each call's bodies' inputs once (the equation's operand ->
    the body's inputs bound to it), and each value's answer kept: the panes'
    marks and the residuals' stories (`trace.story`) ask for the same
    values."""

    def __init__(self, lay: PrintedJaxpr):
        self.lay = lay
        self._index: dict[int, dict] = {}  # id(jaxpr) -> {var: [equations reading it]}
        self._bound: dict[tuple, dict] = {}  # (id(eqn), slot) -> {operand: [body inputs]}
        self._found: dict[tuple, tuple] = {}  # (id(jaxpr), var) -> (lines, equations)

    def lines(self, jaxpr: jc.Jaxpr, var: jc.Atom) -> set[int]:
        """The lines reading `var` (an input or value of `jaxpr`): all of each
        leaf equation reading it; of a call, its binders and operands lines and,
        inside its bodies, the lines reading the input bound to `var`."""
        return self._walk(jaxpr, var)[0]

    def equations(self, jaxpr: jc.Jaxpr, var: jc.Atom) -> list:
        """The equations reading `var`, followed into the bodies of calls as
        `lines` is: the leaf equations that use the value itself, in
        program order."""
        return self._walk(jaxpr, var)[1]

    def _walk(self, jaxpr: jc.Jaxpr, var: jc.Atom) -> tuple[set[int], list]:
        key = (id(jaxpr), var)
        found = self._found.get(key)
        if found is not None:
            return found
        lines: set[int] = set()
        eqns: list = []
        for eqn in self._readers(jaxpr).get(var, ()):
            calls = jc.bodies(eqn)
            if not calls:
                lines.update(self.lay.by_eqn.get(id(eqn), ()))
                eqns.append(eqn)
                continue
            lines |= _ends(self.lay, eqn)
            for body in calls:
                for inner in self._inputs_bound(eqn, body).get(var, ()):
                    inner_lines, inner_eqns = self._walk(body.jaxpr, inner)
                    lines |= inner_lines
                    eqns.extend(inner_eqns)
        found = self._found[key] = (lines, eqns)
        return found

    def _readers(self, jaxpr: jc.Jaxpr) -> dict:
        index = self._index.get(id(jaxpr))
        if index is None:
            index = self._index[id(jaxpr)] = {}
            for eqn in jaxpr.eqns:
                for v in eqn.invars:
                    if isinstance(v, jc.Var):
                        index.setdefault(v, []).append(eqn)
        return index

    def _inputs_bound(self, eqn: jc.JaxprEqn, body: jc.Body) -> dict:
        """The equation's operand -> the inputs of `body` bound to it, in order."""
        key = (id(eqn), body.slot)
        bound = self._bound.get(key)
        if bound is None:
            bound = self._bound[key] = {}
            for inner, outer in zip(body.jaxpr.invars, body.inputs or (), strict=False):
                if isinstance(outer, jc.Var):
                    bound.setdefault(outer, []).append(inner)
        return bound


def _ends(lay: PrintedJaxpr, eqn: jc.JaxprEqn) -> set[int]:
    """A call equation's first and last own lines: its binders and its operands."""
    own = lay.by_eqn.get(id(eqn), ())
    return {own[0], own[-1]} if own else set()


def _read_header(lay: PrintedJaxpr) -> None:
    """Names of the top-level jaxpr's constants and inputs, and their lines."""
    first_eqn = min((own[0][0] for own in lay.own.values()), default=len(lay.lines) - 1)
    start = next((i for i in range(first_eqn, -1, -1) if lay.lines[i].startswith("{ lambda ")), 0)
    header_lines: list[tuple[int, str]] = []
    for i in range(start, len(lay.lines)):
        line = lay.lines[i]
        cut = line.find(". let")
        header_lines.append((i, line if cut < 0 else line[:cut]))
        if cut >= 0:
            break
    in_consts = True
    for i, line in header_lines:
        if i == start:
            line = line[len("{ lambda ") :]
        before, semi, after = line.partition(";")
        parts = ((before, in_consts), (after, False)) if semi else ((line, in_consts),)
        for part, is_const in parts:
            for name in _BINDER.findall(part):
                (lay.constvar_names if is_const else lay.invar_names).append(name)
                lay.header.setdefault(name, i)
        if semi:
            in_consts = False


def make_view(
    text: str,
    lay: PrintedJaxpr,
    residual_lines: dict[int, list[int]],
    recompute: Recomputation | None = None,
) -> JaxprView:
    """The pane model: text, residual and recomputation lines, lazy sources."""
    recompute = recompute or Recomputation()
    innermost = lay.innermost
    return JaxprView(
        text=text,
        lines=lay.lines,
        residual_lines=residual_lines,
        recompute_lines=_lines_of(lay, recompute.eqn_ids),
        transfer_lines=_lines_of(lay, recompute.transfer_ids),
        recompute_eqns=recompute.count,
        mark_lines={own[0] for own in lay.by_eqn.values()} | set(lay.unclaimed),
        source_lookup=_SourceLookup([ref.eqn.source_info if ref else None for ref in innermost]),
    )


def _lines_of(lay: PrintedJaxpr, eqn_ids: set[int]) -> set[int]:
    """The lines on which one of the equations `eqn_ids` is the innermost."""
    lines: set[int] = set()
    for key in eqn_ids:
        lines.update(lay.by_eqn.get(key, ()))
    return lines


class _SourceLookup:
    """Per-line user sources, computed once per equation on first request.

    It keeps each line's source_info (a traceback and a name stack), never the
    equation: an equation holds its sub-jaxprs, and through them what JAX's
    own caches keep per jaxpr, for as long as the app caches the analysis."""

    def __init__(self, source_infos: list):
        self._infos = source_infos
        self._by_info: dict[int, Source | None] = {}

    def __call__(self, line: int) -> Source | None:
        info = self._infos[line] if 0 <= line < len(self._infos) else None
        if info is None:
            return None
        key = id(info)
        if key not in self._by_info:
            self._by_info[key] = jc.user_source(info)
        return self._by_info[key]
