"""Provides what our Line-API widgets (CodeView, ResidualTable) share: a
ScrollView base that looks styles up once per frame, and a way to change the
scrollable size without a layout pass of the whole screen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.widget import Widget

if TYPE_CHECKING:
    from textual.geometry import Region
    from textual.strip import Strip


class LineView(ScrollView):
    """A ScrollView drawn line by line, with `self.frame_styles` holding the base
    style and every component class's style for the frame being drawn."""

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self.frame_styles: dict[str, Style] = {}

    def render_lines(self, crop: Region) -> list[Strip]:
        # Once per frame, not once per line: each style lookup walks the CSS.
        self.frame_styles = {
            name: self.get_component_rich_style(name) for name in self.COMPONENT_CLASSES
        }
        self.frame_styles["base"] = self.rich_style
        return super().render_lines(crop)

    def resize_virtual(self, size: Size) -> None:
        """Set the scrollable size. Setting `virtual_size` asks Textual for a full
        layout, which re-renders every widget: half the cost of a policy switch.
        These widgets never change their own size with their content and their
        scrollbars are always shown (app.tcss), so updating the scrollbars is
        all a new virtual size needs."""
        if size == self.virtual_size:
            return
        if not self.container_size.area:  # not laid out yet: the normal path
            self.virtual_size = size
            return
        self.set_reactive(Widget.virtual_size, size)
        # Textual's own update of scrollbars and scroll limits after a resize
        # (a private method: textual is pinned to <9 in pyproject.toml).
        self._scroll_update(size)
        self.refresh()
