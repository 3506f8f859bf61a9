"""Provides `pareto_svg`: compare's rows as memory against recompute FLOPs,
one dot per row, the Pareto front joined by a line, as inline SVG (no
script, no network): for the HTML report and the notebook's display."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from remat_tui.core.units import human_bytes, human_flops
from remat_tui.report.labels import config_label

if TYPE_CHECKING:
    from remat_tui.core.search.rows import Row


def pareto_svg(
    rows: Sequence[Row], width: int = 640, height: int = 360, numbered: bool = False
) -> str:
    """Memory (x) against recompute FLOPs (y), one dot per row, the Pareto
    front joined by a line; every label escaped. `numbered`: each dot also
    carries its row's number (1-based), for a view where the <title>
    tooltips do not show (an SVG in an <img>)."""
    drawn = [r for r in rows if not r.refused]  # a row JAX refused has no numbers
    if not drawn:
        return ""
    pad = 56
    xs = [r.weighed_bytes for r in drawn]
    ys = [r.recompute_flops for r in drawn]
    x0, x1 = min(xs), max(xs) or 1
    y0, y1 = min(ys), max(ys) or 1

    def px(v: float, lo: float, hi: float, size: float, flip: bool = False) -> float:
        t = 0.5 if hi == lo else (v - lo) / (hi - lo)
        return pad + (1 - t if flip else t) * (size - 2 * pad)

    points = []
    at: dict[tuple[int, int], list] = {}  # {spot: [x, y, row numbers drawn there]}
    for number, r in enumerate(rows, 1):
        if r.refused:
            continue
        cx, cy = px(r.weighed_bytes, x0, x1, width), px(r.recompute_flops, y0, y1, height, True)
        colour = "#d33" if r.pareto else "#789"
        points.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{colour}">'
            f"<title>{escape(config_label(r))}: {human_bytes(r.weighed_bytes)}, "
            f"{human_flops(r.recompute_flops)}</title></circle>"
        )
        # dots closer than about 10 px share one label: 4 overlapping numbers read as none
        at.setdefault((round(cx / 10), round(cy / 10)), [cx, cy]).append(str(number))
    if numbered:
        for cx, cy, *numbers in at.values():
            # right of the dot, or left of it near the right edge
            x, anchor = (cx + 6, "start") if cx < width * 0.7 else (cx - 6, "end")
            points.append(
                f'<text x="{x:.1f}" y="{cy - 5:.1f}" font-size="11" text-anchor="{anchor}">'
                f"{','.join(numbers)}</text>"
            )
    front = sorted((r for r in rows if r.pareto), key=lambda r: r.weighed_bytes)
    line = " ".join(
        f"{px(r.weighed_bytes, x0, x1, width):.1f},"
        f"{px(r.recompute_flops, y0, y1, height, True):.1f}"
        for r in front
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="memory against recompute FLOPs" '
        'font-family="system-ui, sans-serif">'
        f'<rect width="{width}" height="{height}" fill="#fafafa"/>'
        f'<polyline points="{line}" fill="none" stroke="#d33" stroke-width="1.5"/>'
        + "".join(points)
        + f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle" font-size="12">'
        f"memory ({human_bytes(x0)} – {human_bytes(x1)})</text>"
        f'<text x="14" y="{height / 2}" font-size="12" transform="rotate(-90 14 {height / 2})" '
        f'text-anchor="middle">recompute FLOPs ({human_flops(y0)} – {human_flops(y1)})</text>'
        "</svg>"
    )
