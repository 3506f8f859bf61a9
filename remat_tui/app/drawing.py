"""Provides Drawing: what the widgets need from one Analysis, computed once.

Switching back to a cached policy must be instant even for a 7,000-line
backward pass with 900 residuals, so the gutter marks, table cells and column
widths are kept per analysis instead of being rebuilt on every switch.
"""

from __future__ import annotations

from dataclasses import dataclass

from remat_tui.core.model import Analysis, JaxprView
from remat_tui.report.units import human_bytes, what, where

TABLE_COLUMNS = ("#", "aval", "bytes", "memory", "kind", "source", "what")


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


def _pane(view: JaxprView) -> PaneDrawing:
    marks = {line: f"R{rs[0] + 1}" for line, rs in view.residual_lines.items()}
    for line in view.recompute_lines:
        marks.setdefault(line, "↻")
    longest = max(map(len, view.lines), default=0)
    return PaneDrawing(marks, set(view.residual_lines), set(view.recompute_lines), longest)


def draw(a: Analysis) -> Drawing:
    rows = [
        (f"R{i}", r.aval, human_bytes(r.bytes), r.memory, r.kind, where(r), what(r))
        for i, r in enumerate(a.residuals, 1)
    ]
    widths = [max([len(c)] + [len(row[i]) for row in rows]) for i, c in enumerate(TABLE_COLUMNS)]
    return Drawing(
        forward=_pane(a.forward),
        backward=_pane(a.backward),
        rows=rows,
        host_rows={i for i, r in enumerate(a.residuals) if r.memory == "host"},
        widths=widths,
    )
