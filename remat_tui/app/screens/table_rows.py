"""Provides `highlighted_config`: the configuration of the row under a
table's cursor, for the screens whose tables list configurations (compare,
fit), each row keyed by its index in the screen's rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.coordinate import Coordinate
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

if TYPE_CHECKING:
    from remat_tui.core.setup.config import Config


def keyed_index(key: RowKey) -> int:
    """The index in the screen's rows a table row is keyed by."""
    assert key.value is not None  # each row is keyed by its index
    return int(key.value)


def highlighted_config(table: DataTable, rows: list) -> Config | None:
    """The `config` of the row under `table`'s cursor, or None when there is
    none (no rows yet, or no cursor)."""
    if not rows or table.cursor_row is None or not table.row_count:
        return None
    key = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key
    return rows[keyed_index(key)].config
