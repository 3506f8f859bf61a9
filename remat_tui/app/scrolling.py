"""Provides resize_virtual: change a ScrollView's scrollable size without a
layout pass of the whole screen.

Setting `virtual_size` asks Textual for a full layout, which re-renders every
widget: half the cost of a policy switch. Our panes and table never change
their own size with their content, and their scrollbars are always shown
(app.tcss), so updating the scrollbars is all a new virtual size needs.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.widget import Widget


def resize_virtual(widget: Widget, size: Size) -> None:
    if size == widget.virtual_size:
        return
    if not widget.container_size.area:  # not laid out yet: the normal path
        widget.virtual_size = size
        return
    widget.set_reactive(Widget.virtual_size, size)
    # Textual's own update of scrollbars and scroll limits after a resize
    # (a private method: textual is pinned to <9 in pyproject.toml).
    widget._scroll_update(size)
    widget.refresh()
