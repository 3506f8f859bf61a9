"""Provides the notebook display of fit's answer: what the search did, the
best row and the code to paste, examples per second against batch as an <img>
chart, and the rows as a table, in the text report's words (report/fit.py).
Inline-styled HTML, as every display (notebook/style.py says why)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from remat_tui.notebook import style
from remat_tui.notebook.style import tag, text
from remat_tui.report.fit import COLUMNS, cells, chart_svg, headline, legend, searched, verdict

if TYPE_CHECKING:
    from remat_tui.core.search.fit.results import Fit

NUMERIC = {1, 2, 3, 4}  # batch, peak, step, examples/s


def render(f: Fit) -> str:
    best = verdict(f)[0]
    paste = ""
    if f.best is not None and f.best.python:
        paste = tag("div", "paste:", style.HEADING) + tag("pre", text(f.best.python), style.PRE)
    chart = style.svg_image(
        chart_svg(f.rows), "estimated examples per second against batch, a line per configuration"
    )
    rows = [[text(c) for c in cells(r)] for r in f.rows]
    row_styles = [f"background: {style.PARETO_BG}" if r.best else "" for r in f.rows]
    table = style.table([text(h or "★") for h in COLUMNS], rows, NUMERIC, row_styles)
    body = (
        tag("div", text(searched(f)), style.MUTED)
        + tag("div", text(best), "font-weight: bold")
        + paste
        + chart
        + table
        + tag("div", text(legend(f)), f"{style.MUTED}; font-size: 12px")
    )
    title = tag("div", "remat-tui " + text(headline(f)), style.TITLE)
    return tag("div", title + body, style.ROOT, class_="remat-tui")
