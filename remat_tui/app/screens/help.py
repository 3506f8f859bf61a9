"""Provides the HelpScreen: every key, generated from the bindings, then what
the marks mean. Two columns: a description that wraps stays in its column."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

MORE_KEYS = [
    ("↑ ↓ / enter", "move in a list; select a residual row or a policy"),
    ("tab", "move between panes"),
    ("n / s / r", "focus names / sites / residuals (n and s show a hidden sidebar)"),
    ("t", "open another target of the file"),
    (
        "h",
        "how big a batch fits a budget you type, for the shown configuration and every one "
        "compare weighs (args=lambda batch=32: ... makes a target scale): batch, peak, "
        "examples/s, a chart against batch",
    ),
    ("o", "sort the residuals by bytes, largest first (again: JAX's order)"),
    (
        "y",
        "why the selected residual is saved: the policy's rule that saved it, the equation "
        "and calls that made it, the backward equations reading it and (p) what XLA made "
        "of it; y again hides it",
    ),
    (
        "p",
        "compile every analysis shown (never run): the compiled peak per device "
        "leads the status line, residual bytes beside it (p again: off)",
    ),
    (
        "x",
        "run every analysis shown on its device and time it (p comes on with it; not "
        "a TPU topology): measured beside the estimate; compare and suggest rank by it",
    ),
    (
        "ctrl+p",
        "command palette: type any policy spec to apply it; a partial one "
        "(save_on) is completed, a misspelt one gets a 'did you mean'",
    ),
    ("", "saving the target file or a module it imports analyses it again"),
    ("", ""),
    ("Rn", "gutter: the line defines (forward) or reads (backward) residual n"),
    ("↻", "gutter: a backward line that re-runs forward work (recomputation)"),
    ("⇠", "gutter: a backward line that brings an offloaded residual back from host"),
    ("R S O ·", "names: recomputed, saved, offloaded; · the policy is not by name"),
]


def key_table(bindings: list[Binding]) -> Table:
    rows = [
        (b.key_display or b.key, b.tooltip or b.description)
        for b in bindings
        if b.description and b.show
    ]
    table = Table.grid(padding=(0, 2))
    table.add_column(justify="right", style="bold", no_wrap=True)
    table.add_column(ratio=1)  # wraps within its own column
    for key, text in rows + MORE_KEYS:
        table.add_row(Text(key), Text(text))
    return table


class HelpScreen(ModalScreen[None]):
    """Every key, generated from the bindings so it cannot drift."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def __init__(self, bindings: list[Binding]):
        super().__init__()
        self.bindings = bindings

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Label("[b]remat-tui keys[/b]")
            yield Static(key_table(self.bindings), id="keys")
            yield Label("[dim]escape closes · ctrl+p opens the command palette[/dim]")
