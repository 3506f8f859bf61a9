"""Provides `render`: `remat-tui check`'s result (core/search/check.py) in
every format: what changed against the baseline, or that nothing did."""

from __future__ import annotations

import json
from html import escape
from typing import TYPE_CHECKING

from remat_tui.core.units import human_bytes, human_seconds
from remat_tui.report.tables import md_cell

if TYPE_CHECKING:
    from remat_tui.core.search.check import Check


def lines(c: Check) -> list[str]:
    """The comparison, one finding a line."""
    out = [
        f"check  {c.target}  ({c.config})",
        f"jax    {c.jax_before or '?'} (baseline) -> {c.jax_after} (now)",
    ]
    for r in c.appeared:
        out.append(f"  + saved now, not in the baseline: {r}")
    for r in c.disappeared:
        out.append(f"  - in the baseline, not saved now: {r}")
    if c.peak_before is not None and c.peak_after is not None:
        mark = "changed" if c.peak_changed else "within"
        out.append(
            f"  peak {human_bytes(c.peak_before)} -> {human_bytes(c.peak_after)} "
            f"({c.peak_moved:+.1%}; {mark} the tolerance of {c.tolerance:.1%})"
        )
    if c.time_before and c.time_after:
        out.append(
            f"  estimate {human_seconds(c.time_before)} -> {human_seconds(c.time_after)} "
            f"({c.time_after / c.time_before - 1:+.1%}; compared, not judged)"
        )
    out += [f"  note: {n}" for n in c.notes]
    out.append("changed" if c.changed else "unchanged")
    return out


def render(c: Check, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(c.to_dict(), indent=2) + "\n"
    if fmt == "text":
        return "\n".join(lines(c)) + "\n"
    if fmt == "md":
        head, *rest = lines(c)
        return f"# remat-tui {md_cell(head)}\n\n" + "".join(f"- {md_cell(x)}\n" for x in rest)
    if fmt == "html":
        head, *rest = lines(c)
        items = "".join(f"<li>{escape(x)}</li>" for x in rest)
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>remat-tui {escape(head)}</title></head><body>"
            f"<h1>remat-tui {escape(head)}</h1><ul>{items}</ul></body></html>\n"
        )
    raise ValueError(f"unknown format {fmt!r}")
