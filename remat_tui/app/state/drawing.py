"""Provides Drawing: what the widgets need from one Analysis, computed once.

Switching back to a cached policy must be instant even for a 7,000-line
backward pass with 900 residuals, so the gutter marks, table cells and column
widths are kept per analysis instead of being rebuilt on every switch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from remat_tui.core.model import Analysis, JaxprView, Residual
from remat_tui.core.units import human_bytes
from remat_tui.report.phrases import what, where

_WORD = re.compile(r"[A-Za-z_]\w*")
# `what`, `×` and `source` say where the value was computed (its origin: inside
# a scan body, or the user's line beneath a library's); `kind` stays JAX's word.
TABLE_COLUMNS = ("#", "aval", "bytes", "kind", "what", "×", "source")


@dataclass(frozen=True)
class PaneDrawing:
    marks: dict[int, str]  # gutter mark per line: R<n> residual, ↻ recompute, ⇠ from host
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
    sizes: list[int]  # each residual's bytes, for the table's sort
    source_lines: dict[str, set[int]]  # file -> 0-based lines that produce residuals


def _pane(view: JaxprView, var_of: list[str | None]) -> PaneDrawing:
    """Residual lines get a background; the gutter mark Rn goes only on the lines
    that name residual n's variable, or (inside a body, where it has another
    name) begin an equation reading it: not on every line of a long equation."""
    marks = {}
    for line, indices in view.residual_lines.items():
        words = set(_WORD.findall(view.lines[line]))
        named = [i for i in indices if var_of[i] in words]
        if not named and line in view.mark_lines:
            named = indices
        if named:
            marks[line] = f"R{named[0] + 1}"
    for line in view.recompute_lines:
        marks.setdefault(line, "↻")
    for line in view.transfer_lines:
        marks.setdefault(line, "⇠")  # brought back from host memory: no recompute
    longest = max(map(len, view.lines), default=0)
    return PaneDrawing(marks, set(view.residual_lines), set(view.recompute_lines), longest)


def draw(a: Analysis) -> Drawing:
    rows: list[tuple[str, ...]] = [
        (f"R{i}", r.aval, _size(r), r.kind, *_computed(r)) for i, r in enumerate(a.residuals, 1)
    ]
    widths = [max([len(c)] + [len(row[i]) for row in rows]) for i, c in enumerate(TABLE_COLUMNS)]
    return Drawing(
        forward=_pane(a.forward, [r.forward_var for r in a.residuals]),
        backward=_pane(a.backward, [r.backward_var for r in a.residuals]),
        rows=rows,
        host_rows={i for i, r in enumerate(a.residuals) if r.memory == "host"},
        widths=widths,
        sizes=[r.bytes for r in a.residuals],
        source_lines=_source_lines(a),
    )


def _computed(r: Residual) -> tuple[str, str, str]:
    """(what, ×trip count, source) from the residual's origin, else JAX's own."""
    o = r.origin
    if o is None or (o.primitive is None and o.name is None):
        return what(r), "", where(r)
    label = f"name '{o.name}'" if o.name else o.primitive or ""
    times = f"×{o.trip_count}" if o.trip_count else ""
    return label, times, o.source.short() if o.source else where(r)


def _size(r: Residual) -> str:
    """Bytes; a device's share first when the residual is sharded, its
    global array size beside, called so (Contract 17)."""
    if r.bytes_per_device is None:
        return human_bytes(r.bytes)
    return f"{human_bytes(r.bytes_per_device)}/dev ({human_bytes(r.bytes)} global)"


def _source_lines(a: Analysis) -> dict[str, set[int]]:
    """Lines that produce residuals: JAX's line and the line that computed the value."""
    lines: dict[str, set[int]] = {}
    for r in a.residuals:
        for src in (r.source, r.origin.source if r.origin else None):
            if src:
                lines.setdefault(src.file, set()).add(src.line - 1)
    return lines
