"""Provides the HelpScreen: every key, generated from the bindings."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static


class HelpScreen(ModalScreen[None]):
    """Every key, generated from the bindings so it cannot drift."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def __init__(self, rows: list[tuple[str, str]]):
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        width = max(len(k) for k, _ in self.rows)
        body = "\n".join(f"[b]{k:>{width}}[/b]  {d}" for k, d in self.rows)
        with Vertical(id="dialog"):
            yield Label("[b]remat-tui keys[/b]")
            yield Static(body, markup=True)
            yield Label("[dim]escape closes · ctrl+p opens the command palette[/dim]")
