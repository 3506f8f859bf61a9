"""Provides the rich renderables of every result, what `__rich__` returns and
`remat_tui.show` prints in a terminal: an analysis as the forward and backward
jaxprs in two columns (as JAX's notebook's `print_fwd_bwd` prints them), the
residual lines highlighted and marked, then the residual list in
`print_saved_residuals`' words with bytes and a total; the searches as the
text reports' tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from remat_tui.core.model import Analysis, JaxprView
from remat_tui.core.units import count, human_bytes
from remat_tui.notebook import words
from remat_tui.notebook.analysis_html import MAX_PANE_LINES, origin_says_more
from remat_tui.registry import target_label
from remat_tui.report import compiled as compiled_words
from remat_tui.report import memory as memory_view
from remat_tui.report.comparisons import (
    any_measured,
    columns,
    comparison_legend,
    measured_ranks,
    render_diff,
    row_cells,
)
from remat_tui.report.fit import render_fit
from remat_tui.report.phrases import line_marks, origin, summary, total_words
from remat_tui.report.suggest import render_suggest

if TYPE_CHECKING:
    from remat_tui.core.search.compare import Comparison
    from remat_tui.core.search.diff import Diff
    from remat_tui.core.search.fit.results import Fit
    from remat_tui.core.search.suggest.pipeline import Suggestion
    from remat_tui.core.xla.compile.compiled import Compiled

RESIDUAL = "on #5a4500"  # a dark amber behind residual lines (the app's colour, dimmed)
RECOMPUTE = "on #1f2f5a"
MARK = "bold yellow"


def analysis(a: Analysis) -> Group:
    title = Text.assemble(
        ("remat-tui  ", "bold"),
        (target_label(a.target_file, a.target_name), "bold cyan"),
        "  policy ",
        (a.policy, "bold"),
        f"  {compiled_words.device_name(a.device)}",
    )
    panes = Table(show_header=True, header_style="bold green", box=None, padding=(0, 2, 0, 0),
                  expand=True)  # fmt: skip
    panes.add_column("forward computation (vjp):", ratio=1)
    panes.add_column("backward computation:", ratio=1)
    panes.add_row(pane(a.forward), pane(a.backward))
    parts: list[RenderableType] = [
        title,
        Text(summary(a)),
        *(Text(f"warning: {w}", "red") for w in a.warnings),
    ]
    head = compiled_words.headline(a)
    if head is not None:
        parts.append(Text("compiled: " + head, "bold"))
    parts += [Text(""), panes, Text(""), residuals(a), Text("paste: " + a.python, "dim")]
    return Group(*parts)


def pane(view: JaxprView) -> Text:
    out = Text(no_wrap=False, overflow="fold")
    for i, line in enumerate(view.lines[:MAX_PANE_LINES]):
        background = (
            RECOMPUTE if i in view.recompute_lines
            else RESIDUAL if i in view.residual_lines
            else ""
        )  # fmt: skip
        out.append(line, background)
        # once per equation, not on each of its printed lines
        marks = line_marks(view, i)
        if marks:
            out.append("  " + marks, MARK)
        out.append("\n")
    hidden = len(view.lines) - MAX_PANE_LINES
    if hidden > 0:
        out.append(f"… {hidden:,} more lines\n", "dim")
    out.rstrip()
    return out


def residuals(a: Analysis) -> Group:
    """JAX's words for each residual, its bytes, where it was computed; the total."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  title="saved residuals (as jax.ad_checkpoint.print_saved_residuals prints them)",
                  title_justify="left", title_style="bold")  # fmt: skip
    table.add_column("", style=MARK)
    # sharded: one device's share, then the global array size, each called so
    for head in ("per device", "global array size") if a.sharded else ("bytes",):
        table.add_column(head, justify="right")
    table.add_column("residual", overflow="fold")
    table.add_column("computed at", style="dim", overflow="fold")
    for i, r in enumerate(a.residuals, 1):
        host = " host" if r.memory == "host" else ""
        said = origin(r) if origin_says_more(r) else ""
        sizes = [human_bytes(r.device_share) + host]
        if a.sharded:
            sizes.append(human_bytes(r.bytes) + host)
        table.add_row(f"R{i}", *sizes, Text(r.text), Text(said))
    total = Text(total_words(a, f"{count(a.totals.count, 'residual')}, "), "bold")
    return Group(table, total)


def comparison(c: Comparison) -> Group:
    title = Text(
        f"compare  {target_label(c.target_file, c.target_name)}  "
        f"({count(len(c.rows), 'configuration')}, {c.seconds:.1f} s)"
    )
    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left")
    rank = measured_ranks(c.rows) if any_measured(c.rows) else None
    cells = [row_cells(r, rank) for r in c.rows]
    heads = columns(c.rows)
    shown = [i for i, h in enumerate(heads) if i == 0 or any(row[i] for row in cells)]
    table.add_column("#", justify="right")
    for i in shown:
        table.add_column(heads[i] or "★", overflow="fold")
    for k, (row, text) in enumerate(zip(c.rows, cells, strict=True), 1):
        table.add_row(str(k), *(Text(text[i]) for i in shown), style="bold" if row.pareto else "")
    return Group(table, Text(comparison_legend(c), "dim"))


def suggestion(s: Suggestion) -> Text:
    return Text(render_suggest(s, "text").rstrip("\n"))


def diff(d: Diff) -> Text:
    return Text(render_diff(d, "text").rstrip("\n"))


def fit(f: Fit) -> Text:
    return Text(render_fit(f, "text").rstrip("\n"))


def compiled(c: Compiled) -> Group:
    table = Table(box=box.SIMPLE_HEAD, show_header=False, title=Text(words.headline(c)),
                  title_justify="left", title_style="bold")  # fmt: skip
    table.add_column("")
    table.add_column("", justify="right")
    for label, value in words.compiled_rows(c):
        table.add_row(Text(label), Text(value))
    lines = memory_view.text_lines(c.memory, c.memory_note, memory_view.judged_peak(c))
    return Group(table, *(Text(line) for line in lines))
