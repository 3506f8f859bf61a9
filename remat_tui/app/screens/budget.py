"""Provides what the suggest and fit screens share about a memory budget:
`parse_budget` (2GiB, 512MiB, 1.5e9 or 4096 bytes, or why the text is not
one), `BudgetTyped`, the message that tells the App the budget typed last,
which either screen offers again the next time it opens, and `BudgetScreen`,
the dialog suggest's budget is typed in."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from remat_tui.core.units import parse_size
from remat_tui.errors import RematError


def parse_budget(text: str) -> tuple[int | None, str | None]:
    """(bytes, None) for a budget, or (None, why `text` is not one)."""
    if not text.strip():
        return None, "type a budget: try 2GiB"
    try:
        return parse_size(text), None
    except RematError:
        return None, f"{text.strip()!r} does not parse: try 2GiB (or 512MiB, 1.5e9, 4096)"


@dataclass
class BudgetTyped(Message):
    """A budget typed for a search: what f offers next (the App keeps it)."""

    text: str


class BudgetScreen(ModalScreen[tuple[int, str] | None]):
    """A memory budget; returns (bytes, the text typed). A budget that does not
    parse is refused here, the dialog kept open."""

    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, measure: str, looks_for: str, typed: str = "", hint: str = ""):
        """`measure`: the memory that must fit; `looks_for`: what suggest
        looks for among the rows that fit, in words (`the least recompute`)."""
        super().__init__()
        self.looks_for = looks_for
        self.measure = measure
        self.typed = typed
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"[b]Suggest: {self.looks_for} that fits a budget[/b]")
            yield Static(f"[dim]Memory measured as the {self.measure}. {self.hint}[/dim]")
            yield Input(value=self.typed, placeholder="e.g. 2GiB, 512MiB, 1.5e9", id="budget")
            yield Static("", id="budget-error")
            yield Label("[dim]enter searches · escape cancels[/dim]")

    def on_mount(self) -> None:
        # Focused now, not at the next refresh (focus() waits for it): keys typed
        # straight after `f` land in the field (the opener awaits this mount).
        self.set_focus(self.query_one("#budget", Input))

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        if not self.is_current:  # a second enter typed before the first closed it
            return
        budget, error = parse_budget(event.value)
        if error is not None:
            self.query_one("#budget-error", Static).update(Content.styled(error, "$text-error"))
            return
        assert budget is not None  # it parsed
        self.dismiss((budget, event.value.strip()))
