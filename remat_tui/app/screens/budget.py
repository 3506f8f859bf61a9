"""Provides what the suggest and fit screens share about a memory budget:
`parse_budget` (2GiB, 512MiB, 1.5e9 or 4096 bytes, or why the text is not
one) and `BudgetTyped`, the message that tells the App the budget typed last,
which either screen offers again the next time it opens."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

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
