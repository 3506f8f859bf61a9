"""Provides an Analysis as one notebook display (what `remat_tui.show` shows):
the saved residuals as `print_saved_residuals` words them, with their bytes
and where each was computed, the totals, and the forward and backward jaxprs
side by side, the lines that define or read a residual highlighted and
marked `◀ Rn`, recomputed work marked `↻`. Self-contained inline-styled HTML
(see notebook/style.py for why)."""

from __future__ import annotations

from remat_tui.core.model import Analysis, JaxprView
from remat_tui.notebook import style
from remat_tui.notebook.style import tag, text
from remat_tui.registry import target_label
from remat_tui.report import compiled
from remat_tui.report.units import human_bytes, line_marks, origin, residual_bytes_heading, summary

# A pane shows at most this many lines: a 24-layer model prints 10,000, which
# would make a saved notebook megabytes heavier (`analysis.forward.text` has all).
MAX_PANE_LINES = 2000
PANE_HEIGHT = "max-height: 640px"


def render(a: Analysis) -> str:
    """The whole display, one <div>."""
    parts = [
        _title(a),
        tag("div", text(summary(a))),
        *(tag("div", "warning: " + text(w), f"background: {style.WARN_BG}; padding: 2px 6px")
          for w in a.warnings),  # fmt: skip
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
        "remat-tui · " + tag("code", text(label), style.CODE) + " · policy "
        + tag("code", text(a.policy), style.CODE) + f" · {text(device)}",
        style.TITLE,
    )


def _residuals(a: Analysis) -> str:
    """One row per residual in JAX's order: R-number, bytes, JAX's own line
    (its aval, what it is and its source line), and where it was really
    computed when that says more."""
    sharded = a.sharded
    computed = [origin(r) if origin_says_more(r) else "" for r in a.residuals]
    headers = ["", "bytes", *(["per device"] if sharded else []),
               "saved residual (as jax.ad_checkpoint.print_saved_residuals prints it)",
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
    total = tag(
        "div",
        f"total: {text(human_bytes(a.totals.device_bytes))} on device"
        + (f" + {text(human_bytes(a.totals.host_bytes))} on host" if a.totals.host_bytes else "")
        + f" · {text(human_bytes(a.totals.bytes_excluding_arguments))} excluding arguments",
        style.MUTED,
    )
    numeric = {1, 2} if sharded else {1}
    return tag("div", text(heading), style.HEADING) + style.table(headers, rows, numeric) + total


def origin_says_more(r) -> bool:
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
        tag("span", "highlighted", f"background: {style.RESIDUAL_BG}; padding: 0 3px")
        + " lines define (forward) or read (backward) the residuals marked ◀ Rn; "
        + tag("span", "blue ↻", f"background: {style.RECOMPUTE_BG}; padding: 0 3px")
        + " lines recompute forward work.",
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
    """A jaxpr's lines, residual and recompute lines highlighted and marked."""
    out = []
    for i, line in enumerate(view.lines[:MAX_PANE_LINES]):
        marks = line_marks(view, i)
        body = text(line)
        if marks:
            colour = style.RECOMPUTE_MARK if marks == "↻" else style.MARK
            body += tag("span", "  " + text(marks), f"color: {colour}; font-weight: bold")
        background = (
            style.RESIDUAL_BG if i in view.residual_lines
            else style.RECOMPUTE_BG if i in view.recompute_lines
            else None
        )  # fmt: skip
        out.append(tag("span", body, f"background: {background}") if background else body)
    hidden = len(view.lines) - MAX_PANE_LINES
    if hidden > 0:
        out.append(f"… {hidden:,} more lines (the analysis's .forward.text / .backward.text)")
    return tag("pre", "\n".join(out), f"{style.PRE}; {PANE_HEIGHT}")


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
