"""Provides Drawing: what the widgets need from one Analysis, computed once.

Switching back to a cached policy must be instant even for a 7,000-line
backward pass with 900 residuals, so the gutter marks, table cells and column
widths are kept per analysis instead of being rebuilt on every switch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from remat_tui.core.model import Analysis, JaxprView
from remat_tui.report.units import human_bytes, what, where

_WORD = re.compile(r"[A-Za-z_]\w*")
TABLE_COLUMNS = ("#", "aval", "bytes", "kind", "what", "source")


@dataclass(frozen=True)
class PaneDrawing:
    marks: dict[int, str]  # gutter mark per line: R<n> for residual lines, ↻ for recompute
    marked: set[int]  # residual lines
    recompute: set[int]
    longest: int  # length of the longest line


@dataclass(frozen=True)
class Drawing:
    forward: PaneDrawing
    backward: PaneDrawing
    rows: list[tuple[str, ...]]
    host_rows: set[int]
    widths: list[int]
    source_lines: dict[str, set[int]]  # file -> 0-based lines that produce residuals


def _pane(view: JaxprView, var_of: list[str | None]) -> PaneDrawing:
    """Residual lines get a background; the gutter mark Rn goes only on the lines
    that name residual n's variable (not on every line of a long equation)."""
    marks = {}
    for line, indices in view.residual_lines.items():
        words = set(_WORD.findall(view.lines[line]))
        named = [i for i in indices if var_of[i] in words]
        if named:
            marks[line] = f"R{named[0] + 1}"
    for line in view.recompute_lines:
        marks.setdefault(line, "↻")
    longest = max(map(len, view.lines), default=0)
    return PaneDrawing(marks, set(view.residual_lines), set(view.recompute_lines), longest)


def draw(a: Analysis) -> Drawing:
    rows = [
        (f"R{i}", r.aval, human_bytes(r.bytes), r.kind, what(r), where(r))
        for i, r in enumerate(a.residuals, 1)
    ]
    widths = [max([len(c)] + [len(row[i]) for row in rows]) for i, c in enumerate(TABLE_COLUMNS)]
    return Drawing(
        forward=_pane(a.forward, [r.forward_var for r in a.residuals]),
        backward=_pane(a.backward, [r.backward_var for r in a.residuals]),
        rows=rows,
        host_rows={i for i, r in enumerate(a.residuals) if r.memory == "host"},
        widths=widths,
        source_lines=_source_lines(a),
    )


def _source_lines(a: Analysis) -> dict[str, set[int]]:
    lines: dict[str, set[int]] = {}
    for r in a.residuals:
        if r.source:
            lines.setdefault(r.source.file, set()).add(r.source.line - 1)
    return lines
