"""Provides the ExportScreen: the path and format of an export."""

from __future__ import annotations

import os

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, Static

EXPORT_FORMATS = ("html", "md", "json", "svg")


class ExportScreen(ModalScreen[tuple[str, str] | None]):
    """Path and format for an export; returns (path, format)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, default_path: str):
        super().__init__()
        self.default_path = default_path

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("[b]Export[/b]  (written atomically; an existing file is replaced)")
            yield Input(value=self.default_path, id="path")
            chosen = os.path.splitext(self.default_path)[1].lstrip(".")
            chosen = chosen if chosen in EXPORT_FORMATS else EXPORT_FORMATS[0]
            with RadioSet(id="format"):
                for fmt in EXPORT_FORMATS:
                    label = "svg (screenshot)" if fmt == "svg" else fmt
                    yield RadioButton(label, value=fmt == chosen, name=fmt)
            yield Static("", id="export-error")
            with Horizontal(id="buttons"):
                yield Button("Export", variant="primary", id="export")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#path", Input).focus()

    @on(RadioSet.Changed)
    def format_changed(self, event: RadioSet.Changed) -> None:
        path_input = self.query_one("#path", Input)
        stem, _ = os.path.splitext(path_input.value)
        path_input.value = f"{stem}.{event.pressed.name}"

    @on(Input.Submitted)
    @on(Button.Pressed, "#export")
    def export(self) -> None:
        path = self.query_one("#path", Input).value.strip()
        pressed = self.query_one(RadioSet).pressed_button
        if not path:
            self.query_one("#export-error", Static).update("[red]give a file path[/red]")
            return
        self.dismiss((path, pressed.name if pressed else "html"))

    @on(Button.Pressed, "#cancel")
    def cancel(self) -> None:
        self.dismiss(None)
