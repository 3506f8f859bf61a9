"""Provides the HelpScreen: every key, generated from the key table
(app/keys.py), then what the marks mean. Two columns: a description that
wraps stays in its column."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from remat_tui.app.keys import KEYS, Key

# What the help says beside the keys (app/keys.py): moving about, the palette,
# hot reload, and what the marks mean.
MORE_KEYS = [
    ("↑ ↓ / enter", "move in a list; select a residual row or a policy"),
    ("tab", "move between panes"),
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


def key_table(keys: Sequence[Key] = KEYS) -> Table:
    """Every key of the table, those the footer shows first, then MORE_KEYS."""
    ordered = [k for k in keys if k.show] + [k for k in keys if not k.show]
    table = Table.grid(padding=(0, 2))
    table.add_column(justify="right", style="bold", no_wrap=True)
    table.add_column(ratio=1)  # wraps within its own column
    for key, text in [(k.shown_as, k.help) for k in ordered] + MORE_KEYS:
        table.add_row(Text(key), Text(text))
    return table


class HelpScreen(ModalScreen[None]):
    """Every key, generated from the key table so it cannot drift."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def __init__(self, keys: Sequence[Key] = KEYS):
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Label("[b]remat-tui keys[/b]")
            yield Static(key_table(self.keys), id="keys")
            yield Label("[dim]escape closes · ctrl+p opens the command palette[/dim]")
