"""Provides the notebook displays of suggest, diff and compiled results, and
where a compiled peak goes (Contract 7) as a chart of live bytes over XLA's
schedule beside the buffers live at the peak. Inline-styled HTML, charts as
<img> (notebook/style.py says why); the words are the reports'."""

from __future__ import annotations

from typing import TYPE_CHECKING

from remat_tui.core.units import human_bytes, human_flops
from remat_tui.notebook import compare_html, style, words
from remat_tui.notebook.style import tag, text
from remat_tui.report import compiled as compiled_words
from remat_tui.report import memory as memory_view
from remat_tui.report.comparisons import config_label
from remat_tui.report.phrases import signed
from remat_tui.report.suggest import render_suggest

if TYPE_CHECKING:
    from remat_tui.core.search.diff import Diff
    from remat_tui.core.search.suggest.pipeline import Suggestion
    from remat_tui.core.xla.compile.compiled import Compiled
    from remat_tui.core.xla.verify.runs import Verification


def _root(title: str, body: str) -> str:
    return tag("div", tag("div", title, style.TITLE) + body, style.ROOT, class_="remat-tui")


# ---- suggest ---------------------------------------------------------------------------


def suggestion(s: Suggestion) -> str:
    """The answer in the text report's words, the code to paste, and the
    suggested row beside the code as written."""
    head, _, rest = render_suggest(s, "text").partition("\n")
    words, _, _ = rest.partition("\npaste:\n")
    paste = tag("div", "paste:", style.HEADING) + tag("pre", text(s.best.python), style.PRE)
    notes = "".join(tag("div", "note: " + text(n), style.MUTED) for n in s.best.notes)
    rows = [s.baseline, s.best] if s.baseline is not s.best else [s.best]
    numbers = ["as written", "suggested"] if len(rows) == 2 else ["suggested"]
    body = (
        tag("div", text(head), "font-weight: bold")
        + "".join(tag("div", text(line)) for line in words.strip().splitlines() if line)
        + paste
        + notes
        + compare_html.table(rows, numbers)
    )
    return _root("remat-tui suggest · budget " + text(human_bytes(s.budget)), body)


# ---- verify ----------------------------------------------------------------------------


def verification(v: Verification) -> str:
    """The verdict in the report's words, and the leaves that differ."""
    from remat_tui.report.verify import leaf_line, verdict_line

    bold = "font-weight: bold"
    body = tag("div", text(verdict_line(v)), bold) + "".join(
        tag("div", text(leaf_line(leaf)), style.MUTED) for leaf in v.differing
    )
    return _root("remat-tui verify · " + text(v.config), body)


# ---- diff ------------------------------------------------------------------------------


def diff(d: Diff) -> str:
    """What A saves that B does not, and back, and what both save; B − A deltas."""
    deltas = (
        f"device bytes B − A: {signed(d.bytes_delta, human_bytes)} · host bytes B − A: "
        f"{signed(d.host_bytes_delta, human_bytes)} · recompute B − A: "
        f"{signed(d.recompute_flops_delta, human_flops)}"
    )
    sides = tag("div", "A: " + tag("code", text(config_label(d.a)), style.CODE)) + tag(
        "div", "B: " + tag("code", text(config_label(d.b)), style.CODE)
    )
    groups = "".join(
        tag("div", f"{text(title)} ({len(entries)})", style.HEADING) + _entries(entries)
        for title, entries in (
            ("only in A", d.only_a), ("only in B", d.only_b), ("in both", d.both),
        )
    )  # fmt: skip
    return _root("remat-tui diff", sides + tag("div", text(deltas), "font-weight: bold") + groups)


def _entries(entries: list[dict]) -> str:
    if not entries:
        return tag("div", "(none)", style.MUTED)
    rows = [
        [text(human_bytes(e["bytes"])), tag("span", text(e["text"]), style.CODE),
         text(e.get("origin") or "")]
        for e in entries
    ]  # fmt: skip
    return style.table(["bytes", "residual (JAX's words)", "computed at"], rows, {0})


# ---- compiled, and where its peak goes ---------------------------------------------------


def compiled(c: Compiled) -> str:
    """A Compiled alone: XLA's numbers and where the peak goes."""
    rows = [[text(label), text(value)] for label, value in words.compiled_rows(c)]
    body = (
        style.table(["", "XLA says"], rows, {1})
        + tag("div", text(compiled_words.EXPLAINED), style.MUTED)
        + memory_section(c.memory, c.memory_note)
    )
    return _root("remat-tui compiled · " + text(words.headline(c)), body)


def memory_section(memory: dict | None, note: str | None = None) -> str:
    """Live bytes over the schedule (the reports' chart), the categories at the
    peak, and the largest buffers live there."""
    if memory is None:
        if not note:
            return ""
        return tag("div", f"Where the peak goes: not available ({text(note)})", style.MUTED)
    chart = style.svg_image(
        memory_view.curve_svg(memory),
        "live bytes over XLA's schedule, the peak and the start of the backward part marked",
    )
    explanation = tag("div", text(memory["explanation"])) if memory.get("explanation") else ""
    rows = [[text(cell) for cell in row] for row in memory_view.buffer_rows(memory)]
    more = len(memory["at_peak"]) - memory_view.TOP
    rest = tag("div", f"… {more} smaller buffers (every one in .memory['at_peak'])", style.MUTED)
    return (
        tag("div", "Where the peak goes", style.HEADING)
        + tag("div", text(memory_view.summary(memory)))
        + explanation
        + chart
        + style.table(list(memory_view.BUFFER_COLUMNS), rows, {0})
        + (rest if more > 0 else "")
    )
