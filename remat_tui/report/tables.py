"""Provides the table helpers every report format shares: plain-text columns
and Markdown cells."""

from __future__ import annotations


def text_table(rows: list[tuple[str, ...]], indent: str = "") -> list[str]:
    """Rows as lines of left-aligned columns two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def md_cell(text: str) -> str:
    """A Markdown table cell: the characters Markdown would read as syntax escaped."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
