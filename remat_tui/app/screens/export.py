"""Provides the ExportScreen (the path and format of an export) and
`write_export`, which writes it (app/controllers/opening.py opens the dialog again on the
typed path with the reason when the write fails).

The file name's extension picks the format (`x.md` is Markdown whatever button
is pressed); the buttons are a shortcut that rewrites the extension.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, Static

from remat_tui.core.model import Analysis

EXPORT_FORMATS = ("html", "md", "json", "svg")
EXTENSIONS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}
EXTENSIONS |= {".json": "json", ".svg": "svg"}


def format_for(path: str, pressed: str) -> tuple[str | None, str | None]:
    """(format, None) for `path`, or (None, why not). The extension decides; a
    name without one takes the pressed button's format."""
    ext = os.path.splitext(path)[1].lower()
    if not ext:
        return pressed, None
    if ext in EXTENSIONS:
        return EXTENSIONS[ext], None
    return None, (
        f"{os.path.basename(path)}: the extension picks the format, and {ext} is none of "
        ".html, .md, .json, .svg"
    )


def _format_of(button: RadioButton) -> str:
    assert button.name is not None  # each format's button is named by its format
    return button.name


class ExportScreen(ModalScreen[tuple[str, str] | None]):
    """Path and format for an export; returns (path, format). `error` says why the
    last attempt failed (the dialog reopens on its path)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, default_path: str, error: str | None = None):
        super().__init__()
        self.default_path = default_path
        self.error = error

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("[b]Export[/b]  (written atomically; an existing file is replaced)")
            yield Label("[dim]The file name's extension picks the format.[/dim]")
            yield Input(value=self.default_path, id="path")
            chosen = format_for(self.default_path, EXPORT_FORMATS[0])[0] or EXPORT_FORMATS[0]
            with RadioSet(id="format"):
                for fmt in EXPORT_FORMATS:
                    label = "svg (screenshot)" if fmt == "svg" else fmt
                    yield RadioButton(label, value=fmt == chosen, name=fmt)
            yield Static("", id="export-error")
            with Horizontal(id="buttons"):
                yield Button("Export", variant="primary", id="export")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.set_focus(self.query_one("#path", Input))  # now: keys typed ahead land in it
        if self.error:
            self.say(self.error)

    def say(self, error: str) -> None:
        self.query_one("#export-error", Static).update(Content.styled(error, "$text-error"))

    @on(RadioSet.Changed)
    def format_changed(self, event: RadioSet.Changed) -> None:
        path_input = self.query_one("#path", Input)
        pressed = _format_of(event.pressed)
        fmt, _ = format_for(path_input.value.strip(), pressed)
        if fmt != pressed:
            stem, _ = os.path.splitext(path_input.value.strip())
            path_input.value = f"{stem}.{pressed}"

    @on(Input.Submitted)
    @on(Button.Pressed, "#export")
    def export(self) -> None:
        if not self.is_current:  # a second enter typed before the first closed it
            return
        path = self.query_one("#path", Input).value.strip()
        pressed = self.query_one(RadioSet).pressed_button
        if not path:
            self.say("give a file path")
            return
        fmt, error = format_for(path, _format_of(pressed) if pressed else EXPORT_FORMATS[0])
        if error:
            self.say(error)
            return
        assert fmt is not None  # format_for gives a format or why not
        self.dismiss((path, fmt))

    @on(Button.Pressed, "#cancel")
    def cancel(self) -> None:
        if self.is_current:  # dismissing a screen beneath would pop another
            self.dismiss(None)


def write_export(path: str, fmt: str, analysis: Analysis, screenshot: Callable[[], str]) -> str:
    """Write `analysis` as `fmt` (html, md, json, as `remat-tui report` writes
    them), or for svg what `screenshot()` returns, to `path` atomically;
    the path written. A failure raises RematError saying why."""
    from remat_tui.report import render
    from remat_tui.report.write import write_atomic

    data = screenshot() if fmt == "svg" else render(analysis, fmt)
    return write_atomic(path, data)
