"""Provides the layout for the terminal's width, and the sidebar toggle.

Three widths (classes on the App, styled in app.tcss):
- 120 columns and more: sidebar, both jaxpr panes, residuals and source.
- `-narrow` (100-119): a narrower sidebar; every pane stays.
- `-compact` (under 100): the sidebar is hidden so the jaxpr panes keep a
  readable width; `l` shows it (and `n`/`s` show it to focus its lists).
`l` hides or shows the sidebar at any width; that choice then sticks.
"""

from __future__ import annotations

from textual.app import App

NARROW, COMPACT = 120, 100


class Layout:
    def __init__(self, app: App):
        self.app = app  # Textual's: its classes (app.tcss styles the widths) and footers
        self.width = 0
        self.sidebar_wanted: bool | None = None  # None: as the width suggests

    def resize(self, width: int) -> None:
        # The footers make themselves compact (app/widgets/footer.py).
        self.width = width
        self.app.set_class(COMPACT <= width < NARROW, "-narrow")
        self.app.set_class(width < COMPACT, "-compact")
        self._apply()

    @property
    def sidebar_shown(self) -> bool:
        if self.sidebar_wanted is not None:
            return self.sidebar_wanted
        return self.width >= COMPACT

    def toggle_sidebar(self) -> None:
        self.sidebar_wanted = not self.sidebar_shown
        self._apply()

    def reveal_sidebar(self) -> None:
        """Show the sidebar (before focusing one of its lists)."""
        if not self.sidebar_shown:
            self.sidebar_wanted = True
            self._apply()

    def _apply(self) -> None:
        self.app.set_class(not self.sidebar_shown, "-no-sidebar")
