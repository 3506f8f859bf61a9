"""Provides the line maps of the two jaxpr panes.

From the printer's source map (see jaxcompat.format_jaxpr) we know which
equation each printed line belongs to. From that: which forward lines define
residuals, which backward lines read them, which backward lines recompute
forward work and which bring an offloaded residual back from host memory (the
equations core/trace/recomputation.py finds), and the user's
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


def layout(jaxpr) -> tuple[str, PrintedJaxpr]:
    text, regions = jc.format_jaxpr(jaxpr)
    lay = PrintedJaxpr(text.split("\n"), regions)
    for i, line_regions in enumerate(regions):
        for start, end, ref in line_regions:
            if len(ref.path) == 1:  # a top-level equation's own text (not a sub-jaxpr's)
                lay.own.setdefault(ref.path[0], []).append((i, start, end))
    _read_header(lay)
    return text, lay


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
    innermost = [
        max((ref for _, _, ref in r), key=lambda ref: len(ref.path)) if r else None
        for r in lay.regions
    ]
    recompute_lines = {
        i for i, ref in enumerate(innermost) if ref is not None and id(ref.eqn) in recompute.eqn_ids
    }
    transfer_lines = {
        i
        for i, ref in enumerate(innermost)
        if ref is not None and id(ref.eqn) in recompute.transfer_ids
    }
    return JaxprView(
        text=text,
        lines=lay.lines,
        residual_lines=residual_lines,
        recompute_lines=recompute_lines,
        transfer_lines=transfer_lines,
        recompute_eqns=recompute.count,
        source_lookup=_SourceLookup([ref.eqn.source_info if ref else None for ref in innermost]),
    )


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
