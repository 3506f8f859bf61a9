"""Provides the PickScreen: choose a target from a list."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static


class PickScreen(ModalScreen[str | None]):
    """Choose one of several strings (a target of the file)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(
        self, title: str, choices: list[str], current: str | None = None, error: str | None = None
    ):
        """`error`: why the user is asked (a target name that is not in the
        file), said in the dialog until a choice closes it."""
        super().__init__()
        self.title_text = title
        self.choices = choices
        self.current = current
        self.error = error

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            if self.error:
                yield Static(Content.styled(self.error, "$text-error"), id="pick-error")
            yield Label(f"[b]{escape(self.title_text)}[/b]")
            yield OptionList(*(Content(c) for c in self.choices), id="choices")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.current in self.choices:
            options.highlighted = self.choices.index(self.current)
        self.set_focus(options)  # now: keys typed ahead move in the list

    @on(OptionList.OptionSelected)
    def chosen(self, event: OptionList.OptionSelected) -> None:
        # A second enter typed before the first closed the list selects again;
        # dismissing then would pop the screen beneath (Textual: ScreenStackError).
        if self.is_current:
            self.dismiss(self.choices[event.option_index])
