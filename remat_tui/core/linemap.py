"""Provides the line maps of the two jaxpr panes.

From the printer's source map (see jax_internals.format_jaxpr) we know which
equation each printed line belongs to. From that: which forward lines define
residuals, which backward lines read them, which backward lines recompute
forward work, and the user's source line behind every equation line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from remat_tui.core import jax_internals as ji
from remat_tui.core.model import JaxprView, Source

_BINDER = re.compile(r"([A-Za-z_]\w*):\S+")


@dataclass
class Layout:
    """Where each top-level equation and input variable was printed."""

    lines: list[str]
    refs: list[list[Any]]  # per line: EqnRefs, outermost first
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)  # eqn index -> lines
    header: dict[str, int] = field(default_factory=dict)  # binder name -> line
    constvar_names: list[str] = field(default_factory=list)
    invar_names: list[str] = field(default_factory=list)

    def span_lines(self, eqn_index: int) -> tuple[int, ...]:
        first, last = self.spans.get(eqn_index, (0, -1))
        return tuple(range(first, last + 1))

    def outvar_names(self, eqn_index: int) -> list[str]:
        """Printed names of a top-level equation's outputs (its left-hand side)."""
        first, last = self.spans[eqn_index]
        text = " ".join(self.lines[first : last + 1])
        lhs, eq, _ = text.partition(" = ")
        return _BINDER.findall(lhs) if eq else []


def layout(jaxpr) -> tuple[str, Layout]:
    text, refs = ji.format_jaxpr(jaxpr)
    lines = text.split("\n")
    lay = Layout(lines, refs)
    for i, line_refs in enumerate(refs):
        if line_refs and len(line_refs[0].path) == 1:
            k = line_refs[0].path[0]
            first, _ = lay.spans.get(k, (i, i))
            lay.spans[k] = (first, i)
    _read_header(lay)
    return text, lay


def _read_header(lay: Layout) -> None:
    """Names of the top-level jaxpr's constants and inputs, and their lines."""
    first_eqn = min((s[0] for s in lay.spans.values()), default=len(lay.lines) - 1)
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
    text: str, lay: Layout, residual_lines: dict[int, list[int]], recompute: set[int] | None = None
) -> JaxprView:
    """The pane model: text, residual and recomputation lines, lazy sources."""
    recompute = recompute or set()
    innermost = [max(r, key=lambda ref: len(ref.path)) if r else None for r in lay.refs]
    recompute_lines = {
        i for i, ref in enumerate(innermost) if ref is not None and id(ref.eqn) in recompute
    }
    return JaxprView(
        text=text,
        lines=lay.lines,
        residual_lines=residual_lines,
        recompute_lines=recompute_lines,
        recompute_eqns=len(recompute),
        source_lookup=_SourceLookup(innermost),
    )


class _SourceLookup:
    """Per-line user sources, computed once per equation on first request."""

    def __init__(self, innermost: list):
        self._refs = innermost
        self._by_eqn: dict[int, Source | None] = {}

    def __call__(self, line: int) -> Source | None:
        ref = self._refs[line] if 0 <= line < len(self._refs) else None
        if ref is None:
            return None
        key = id(ref.eqn)
        if key not in self._by_eqn:
            frame = ji.user_frame(ref.eqn.source_info)
            self._by_eqn[key] = None if frame is None else Source(*frame)
        return self._by_eqn[key]


def recomputed_eqns(jaxpr, residual_invars: set, cotangent_invars: set) -> set[int]:
    """ids of backward equations that re-run forward work: those computed from
    residuals alone, without touching a cotangent (inside sub-jaxprs too)."""
    out: set[int] = set()
    _mark(jaxpr, set(residual_invars), set(cotangent_invars), out)
    return out


def _mark(jaxpr, primal: set, ct: set, out: set[int]) -> None:
    for eqn in jaxpr.eqns:
        ins = [v for v in eqn.invars if isinstance(v, ji.Var)]
        uses_ct = any(v in ct for v in ins)
        uses_primal = any(v in primal for v in ins)
        if uses_ct:
            ct.update(eqn.outvars)
        elif uses_primal:
            primal.update(eqn.outvars)
            out.add(id(eqn))
        for sub in ji.sub_jaxprs(eqn):
            pairs = _bind_inputs(sub, eqn)
            if pairs is None:  # unknown calling convention: be conservative
                sub_ct = set(sub.invars) if uses_ct else set()
                sub_primal = set() if uses_ct else set(sub.invars) if uses_primal else set()
            else:
                pairs = [(s, o) for s, o in pairs if isinstance(o, ji.Var)]
                sub_ct = {s for s, o in pairs if o in ct}
                sub_primal = {s for s, o in pairs if o in primal}
            _mark(sub, sub_primal, sub_ct, out)


def _bind_inputs(sub, eqn):
    """Pair a sub-jaxpr's inputs with the equation's (call-like primitives pass
    them through one to one; cond drops its predicate)."""
    n, m = len(sub.invars), len(eqn.invars)
    if n == m:
        return list(zip(sub.invars, eqn.invars, strict=True))
    if n == m - 1:
        return list(zip(sub.invars, eqn.invars[1:], strict=True))
    return None
