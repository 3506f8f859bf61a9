"""Provides `render`: `remat-tui check`'s result (core/search/check.py) in
every format: what changed against the baseline, or that nothing did."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

from remat_tui.core.units import count, human_bytes, human_seconds
from remat_tui.report.tables import md_cell

if TYPE_CHECKING:
    from remat_tui.core.search.check import Check, Found


@dataclass(frozen=True)
class Group:
    """Residuals found alike (the same words: line, name, kind, aval): how
    many, and their bytes on a device together."""

    words: str
    count: int
    bytes: int


def grouped(found: list[Found]) -> list[Group]:
    """`found` as groups of the same words, in the order first met."""
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for f in found:
        counts[f.words] += 1
        sizes[f.words] += f.bytes
    return [Group(words, n, sizes[words]) for words, n in counts.items()]


def lines(c: Check) -> list[str]:
    """The comparison, one finding a line."""
    out = [
        f"check  {c.target}  ({c.config})",
        f"jax    {c.jax_before or '?'} (baseline) -> {c.jax_after} (now)",
    ]
    out += [f"  because {cause}" for cause in c.causes]
    out += _residuals("+", "saved now, not in the baseline", c.appeared)
    out += _residuals("-", "in the baseline, not saved now", c.disappeared)
    if c.peak_before is not None and c.peak_after is not None:
        mark = "exceeded" if c.peak_changed else "within"
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


def _residuals(sign: str, said: str, found: list[Found]) -> list[str]:
    """Residuals on one side only: alike ones (the same line, name, kind and
    aval) a line each, with their count and bytes; a total line above them
    where there are several lines."""
    if not found:
        return []
    groups = grouped(found)
    if len(groups) == 1:
        return [f"  {sign} {said}: {_group(groups[0])}"]
    total = sum(f.bytes for f in found)
    head = f"  {sign} {said}: {count(len(found), 'residual')}, {human_bytes(total)}"
    return [head, *(f"      {_group(g)}" for g in groups)]


def _group(g: Group) -> str:
    """`3 × f32[16,32] tanh in attention at model.py:7 (6.0 KiB)`."""
    times = f"{g.count} × " if g.count > 1 else ""
    return f"{times}{g.words} ({human_bytes(g.bytes)})"


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
