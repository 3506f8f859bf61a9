"""Provides the PickScreen: choose a target from a list."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList


class PickScreen(ModalScreen[str | None]):
    """Choose one of several strings (a target of the file)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, title: str, choices: list[str], current: str | None = None):
        super().__init__()
        self.title_text = title
        self.choices = choices
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"[b]{escape(self.title_text)}[/b]")
            yield OptionList(*(Content(c) for c in self.choices), id="choices")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.current in self.choices:
            options.highlighted = self.choices.index(self.current)
        options.focus()

    @on(OptionList.OptionSelected)
    def chosen(self, event: OptionList.OptionSelected) -> None:
        # A second enter typed before the first closed the list selects again;
        # dismissing then would pop the screen beneath (Textual: ScreenStackError).
        if self.is_current:
            self.dismiss(self.choices[event.option_index])
