"""Provides the DiffScreen: what the marked configuration (A) and the shown one
(B) save differently (core/search/diff.py): residuals only in A, only in B and in
both, and the byte and recompute-FLOP deltas, B - A.

Both analyses are already made (the App keeps them), so the diff is a match
of two residual lists, done here at once: nothing to trace. `a` closes the
screen with A's Config, which the App opens in the main screen.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Static

from remat_tui.app.widgets.footer import Footer
from remat_tui.core.model import Analysis
from remat_tui.core.setup.config import Config
from remat_tui.core.units import human_bytes, human_flops
from remat_tui.report.phrases import signed

# "both" is dim, not $text-muted: that is an `auto` colour, which has no
# background to contrast with inside a table cell and came out near-black.
SECTIONS = (
    ("only_a", "only A", "$text-error"),
    ("only_b", "only B", "$text-success"),
    ("both", "both", "dim"),
)


def short(text: str) -> str:
    """JAX's words with the working directory taken off its paths, to fit the table."""
    return text.replace(os.getcwd() + os.sep, "")


class DiffScreen(Screen[Config | None]):
    """Residuals of A (marked) against B (shown); the deltas in the header."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "back"),
        Binding("a", "open_a", "open A in main screen"),
    ]

    def __init__(
        self,
        a: Analysis,
        b: Analysis,
        a_reloaded: bool = False,
        memories: Sequence[dict | None] = (None, None),
    ) -> None:
        """The diff and its words are made here, before the screen is pushed:
        an error in them is said by the opener, over the main screen."""
        super().__init__()
        from remat_tui.core.search.diff import diff_analyses

        self.diff = diff_analyses(a, b)
        self.a_reloaded = a_reloaded  # A was marked before the code was loaded again
        # Where each side's compiled peak goes (Contract 7), when p compiled both.
        self.memories = memories
        self.saved_bytes = (a.totals.bytes_excluding_arguments, b.totals.bytes_excluding_arguments)
        self.header = self.heading()
        self.rows = [
            (
                Content.styled(title, style),
                Text(human_bytes(entry["bytes"]), justify="right"),
                entry["memory"],
                short(entry["text"]),
                entry.get("origin") or "",
            )
            for key, title, style in SECTIONS
            for entry in getattr(self.diff, key)
        ]

    def compose(self) -> ComposeResult:
        yield Static("", id="diff-status")
        yield DataTable(id="diff-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#diff-status", Static).update(self.header)
        table = self.query_one(DataTable)
        # Widths given: a column sized from its header alone would cut "only A".
        table.add_column("in", width=6)
        table.add_column("bytes", width=10)
        table.add_column("memory", width=6)
        table.add_column("residual (JAX's words)")
        table.add_column("computed at")
        for row in self.rows:
            table.add_row(*row)
        self.set_focus(table)  # now: arrows typed ahead move the cursor

    def heading(self) -> Content:
        """A and B, the deltas B - A, the counts in each section, and how the
        compiled peak changed."""
        from remat_tui.report.comparisons import config_label

        d = self.diff
        before = " (before the file was loaded again)" if self.a_reloaded else ""
        counts = " · ".join(
            f"{title}: {len(entries)} ({human_bytes(sum(e['bytes'] for e in entries))})"
            for title, entries in (
                ("only in A", d.only_a),
                ("only in B", d.only_b),
                ("in both", d.both),
            )
        )
        deltas = (
            f"device bytes B - A: {signed(d.bytes_delta, human_bytes)} · "
            f"host bytes B - A: {signed(d.host_bytes_delta, human_bytes)} · "
            f"recompute B - A: {signed(d.recompute_flops_delta, human_flops)}"
        )
        return Content.assemble(
            Content.styled("A", "bold $text-error"),
            f" (marked{before}): {config_label(d.a)}\n",
            Content.styled("B", "bold $text-success"),
            f" (shown): {config_label(d.b)}\n{deltas}\n{counts}",
            self.peak_change(),
        )

    def peak_change(self) -> str:
        """`\npeak A 14.0 MiB → B 14.0 MiB: residual 7.0 MiB → 0 B, recomputed 0 B →
        7.0 MiB`, and why the peak did not move when it did not; '' unless both
        sides were compiled with their breakdown."""
        from remat_tui.core.model import MEMORY_CATEGORIES as CATEGORIES
        from remat_tui.core.xla.buffers.peak_notes import peak_note

        a, b = self.memories
        if not a or not b:
            return ""
        moved = [
            f"{c} {human_bytes(a['by_category'][c])} → {human_bytes(b['by_category'][c])}"
            for c in CATEGORIES
            if a["by_category"][c] != b["by_category"][c]
        ]
        line = (
            f"\ncompiled peak A {human_bytes(a['peak_bytes'])} → B {human_bytes(b['peak_bytes'])}"
            + (": " + ", ".join(moved) if moved else ": the same make-up")
        )
        why = peak_note(a, b, *self.saved_bytes, "A")
        return line + (f"\n{why}" if why else "")

    def action_open_a(self) -> None:
        self.dismiss(self.diff.a.config)
