"""Provides an Analysis as one notebook display (what `remat_tui.show` shows):
the saved residuals as `print_saved_residuals` words them, with their bytes
and where each was computed, the totals, and the forward and backward jaxprs
side by side, the lines that define or read a residual highlighted and
marked `◀ Rn`, recomputed work marked `↻`. Self-contained inline-styled HTML
(see notebook/style.py for why)."""

from __future__ import annotations

from remat_tui.core.model import Analysis, JaxprView, Residual
from remat_tui.core.units import human_bytes
from remat_tui.notebook import style
from remat_tui.notebook.style import tag, text
from remat_tui.registry import target_label
from remat_tui.report import compiled
from remat_tui.report.phrases import (
    FROM_HOST_MARK,
    RECOMPUTE_MARK,
    origin,
    residual_bytes_heading,
    summary,
    total_words,
)

# A pane shows at most this many lines: a 24-layer model prints 10,000, which
# would make a saved notebook megabytes heavier (`analysis.forward.text` has all).
MAX_PANE_LINES = 2000
PANE_HEIGHT = "max-height: 640px"


def render(a: Analysis) -> str:
    """The whole display, one <div>."""
    parts = [
        _title(a),
        tag("div", text(summary(a))),
        *(
            tag("div", "warning: " + text(w), f"background: {style.WARN_BG}; padding: 2px 6px")
            for w in a.warnings
        ),  # fmt: skip
        compiled_section(a),
        _residuals(a),
        _snippet(a),
        panes(a),
    ]
    return tag("div", "".join(parts), style.ROOT, class_="remat-tui")


def _title(a: Analysis) -> str:
    device = compiled.device_name(a.device)
    label = target_label(a.target_file, a.target_name)
    return tag(
        "div",
        "remat-tui · "
        + tag("code", text(label), style.CODE)
        + " · policy "
        + tag("code", text(a.policy), style.CODE)
        + f" · {text(device)}",
        style.TITLE,
    )


def _residuals(a: Analysis) -> str:
    """One row per residual in JAX's order: R-number, bytes, JAX's own line
    (its aval, what it is and its source line), and where it was really
    computed when that says more."""
    sharded = a.sharded
    computed = [origin(r) if origin_says_more(r) else "" for r in a.residuals]
    headers = ["", *(["global array size", "per device"] if sharded else ["bytes"]),
               # short enough for the table to fit a 900 px notebook (headers do not wrap)
               "saved residual, as print_saved_residuals prints it",
               *(["computed at"] if any(computed) else [])]  # fmt: skip
    rows = []
    for i, (r, where) in enumerate(zip(a.residuals, computed, strict=True), 1):
        host = " (host)" if r.memory == "host" else ""
        rows.append([
            tag("span", f"R{i}", f"color: {style.MARK}; font-weight: bold"),
            text(human_bytes(r.bytes) + host),
            *([text(human_bytes(r.device_share))] if sharded else []),
            tag("span", text(r.text), style.CODE),
            *([text(where)] if any(computed) else []),
        ])  # fmt: skip
    scope = residual_bytes_heading(a)
    heading = f"Saved residuals ({len(a.residuals)})" + (f" · {scope}" if scope else "")
    total = tag("div", text(total_words(a)), style.MUTED)
    numeric = {1, 2} if sharded else {1}
    return tag("div", text(heading), style.HEADING) + style.table(headers, rows, numeric) + total


def origin_says_more(r: Residual) -> bool:
    """Whether the origin adds to JAX's words: a scan's stacked value, or a
    line other than the one JAX names (as the text report decides)."""
    return bool(r.origin and (r.origin.trip_count or r.origin.source != r.source))


def _snippet(a: Analysis) -> str:
    return tag("div", "to get this configuration:", style.HEADING) + tag(
        "pre", text(a.python), style.PRE
    )


def panes(a: Analysis) -> str:
    """The two jaxprs side by side (a two-cell table: grid and flex are not in
    the sanitisers' allow-lists), each scrolling on its own."""
    legend = tag(
        "div",
        tag("span", "amber", f"background: {style.RESIDUAL_BG}; padding: 0 3px")
        + " lines make (forward) or read (backward) the residual marked ◀ Rn; "
        + tag("span", "blue ↻", f"background: {style.RECOMPUTE_BG}; padding: 0 3px")
        + " lines recompute forward work (with an amber edge where they also read a"
        + " residual); "
        + _mark(FROM_HOST_MARK, style.TRANSFER_MARK)
        + " brings an offloaded residual back from host memory.",
        style.MUTED,
    )
    # transparent rows: JupyterLab's stylesheet stripes and hover-shades table rows
    cell = "width: 50%; vertical-align: top; padding: 0 4px 0 0; text-align: left"
    row = "background: transparent"
    heads = tag(
        "tr", tag("th", "forward (vjp)", style.HEAD) + tag("th", "backward", style.HEAD), row
    )
    body = tag("tr", tag("td", pane(a.forward), cell) + tag("td", pane(a.backward), cell), row)
    grid = tag("table", heads + body, "width: 100%; table-layout: fixed; border-collapse: collapse")
    return tag("div", "Forward and backward jaxprs", style.HEADING) + legend + grid


def pane(view: JaxprView) -> str:
    """A jaxpr's lines, each a block that wraps (a hanging indent under its
    start) so no line or mark is cut off in a narrow notebook: residual lines
    amber, recomputed ones blue, marks once per equation (not on each of its
    printed lines)."""
    out = []
    for i, line in enumerate(view.lines[:MAX_PANE_LINES]):
        out.append(tag("span", text(line or " ") + _marks(view, i), _line_style(view, i)))
    hidden = len(view.lines) - MAX_PANE_LINES
    if hidden > 0:
        more = f"… {hidden:,} more lines (the analysis's .forward.text / .backward.text)"
        out.append(tag("span", text(more), style.PANE_LINE))
    return tag("pre", "".join(out), f"{style.PANE}; {PANE_HEIGHT}")


def _line_style(view: JaxprView, i: int) -> str:
    residual, recompute = i in view.residual_lines, i in view.recompute_lines
    if recompute:
        edge = f"; border-left: 3px solid {style.MARK}" if residual else ""
        return f"{style.PANE_LINE}; background: {style.RECOMPUTE_BG}{edge}"
    if residual:
        return f"{style.PANE_LINE}; background: {style.RESIDUAL_BG}"
    return style.PANE_LINE


def _marks(view: JaxprView, i: int) -> str:
    """`◀ R1,R2`, `↻`, `⇠ from host` where an equation begins (or on a header
    line naming inputs), never again on its continuation lines."""
    if i not in view.mark_lines:
        return ""
    parts = []
    if i in view.residual_lines:
        rs = ",".join(f"R{k + 1}" for k in view.residual_lines[i])
        parts.append(_mark("◀ " + rs, style.MARK))
    if i in view.recompute_lines:
        parts.append(_mark(RECOMPUTE_MARK, style.RECOMPUTE_MARK))
    if i in view.transfer_lines:
        parts.append(_mark(FROM_HOST_MARK, style.TRANSFER_MARK))
    return "  " + " ".join(parts) if parts else ""


def _mark(words: str, colour: str) -> str:
    return tag("span", text(words), f"color: {colour}; font-weight: bold")


def compiled_section(a: Analysis) -> str:
    """The compiled peak and XLA's numbers, and where the peak goes, when compiled."""
    head = compiled.headline(a)
    if head is None:
        return ""
    from remat_tui.notebook import results_html

    rows = [[text(label), text(value)] for label, value in compiled.details(a)]
    return (
        tag("div", "Compiled: " + text(head), style.HEADING)
        + style.table(["", "XLA says"], rows, {1})
        + tag("div", text(compiled.EXPLAINED), style.MUTED)
        + results_html.memory_section(a.compiled.memory, a.compiled.memory_note)
    )
