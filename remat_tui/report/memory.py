"""Provides where the compiled peak goes (Contract 7) as the reports show it:
one line of bytes by category, the buffers live at the peak (largest first),
the sentence on why the peak did not move with the residuals, and for HTML the
curve of live bytes over XLA's schedule as inline SVG (no script, no network).
Every view takes the JSON dict of `Compiled.memory`."""

from __future__ import annotations

import os
from html import escape
from typing import TYPE_CHECKING

from remat_tui.core.model import MEMORY_CATEGORIES as CATEGORIES
from remat_tui.core.model import Analysis
from remat_tui.core.units import human_bytes

if TYPE_CHECKING:
    from remat_tui.core.xla.compile.compiled import Compiled

TOP = 12  # buffers at the peak a report lists (the JSON has every one)
BUFFER_COLUMNS = ("bytes", "category", "line", "shape", "residual", "instruction")


def largest_category(memory: dict) -> str:
    """The category holding the most bytes at the peak."""
    return max(CATEGORIES, key=lambda c: memory["by_category"].get(c, 0))


def peak_make_up(memory: dict) -> str:
    """The category holding the most of the compiled peak, in words true to
    its share: `mostly residual (62%)` past half, else `largest part:
    recomputed (30%)` (the status line once said "mostly recomputed (30%)")."""
    category = largest_category(memory)
    share = memory["by_category"][category] / memory["peak_bytes"]
    if share > 0.5:
        return f"mostly {category} ({share:.0%})"
    return f"largest part: {category} ({share:.0%})"


def summary(memory: dict, judged: int | None = None) -> str:
    """`at the peak (step 812 of 2067; backward from step 640): 14.6 MiB live:
    residual 7.0 MiB (48%) · temporary ...`, categories largest first, empty
    ones left out. `judged`: the compiled peak budgets are judged by (where
    the caller has it), said beside the live bytes: the same figure, or
    another and why."""
    live = memory["peak_bytes"]
    parts = [
        f"{c} {human_bytes(n)} ({n / (live or 1):.0%})"
        for c, n in sorted(memory["by_category"].items(), key=lambda kv: -kv[1])
        if n
    ]
    backward = memory.get("backward_from")
    where = f"step {memory['peak_step']} of {memory['steps']}"
    if backward is not None:
        where += f"; backward from step {backward}"
    return f"at the peak ({where}): {live_words(live, judged)}: " + " · ".join(parts)


def live_words(live: int, judged: int | None) -> str:
    """`14.6 MiB live`, and how it stands to the compiled peak budgets are
    judged by, where that is known."""
    said = f"{human_bytes(live)} live"
    if judged is None:
        return said
    if judged == live:
        return f"{said}, the compiled peak budgets are judged by"
    why = (
        "XLA's allocations, which hold more than is live at one step"
        if judged > live
        else "XLA's allocation sizes, which leave some of what is live out"
    )
    return f"{said} (the compiled peak budgets are judged by, {human_bytes(judged)}, is {why})"


def buffer_rows(memory: dict, top: int = TOP) -> list[tuple[str, ...]]:
    """The largest buffers at the peak, in BUFFER_COLUMNS."""
    return [
        (
            human_bytes(b["bytes"]),
            b["category"],
            _line(b["source"]),
            b["shape"],
            (b["residual"] or "") + (" (input)" if b.get("holds") == "input" else ""),
            b["instruction"],
        )
        for b in memory["at_peak"][:top]
    ]


def _line(source: dict | None) -> str:
    if not source:
        return ""
    return f"{os.path.basename(source['file'])}:{source['line']}"


def space_title(space: dict) -> str:
    """`vmem: 74.0 MiB at its own peak (not device memory)`."""
    return (
        f"{space['space']}: {human_bytes(space['peak_bytes'])} at its own peak "
        "(another memory than the device's: not in the peak above)"
    )


def compiler_notes(memory: dict) -> list[str]:
    """What the breakdown says of the residuals and of XLA (Contract 14): the
    share of the residual bytes at the peak that name the residual they hold,
    and what XLA's rematerialization pass recomputed (and, asked with a
    memory limit, what it changed)."""
    notes = []
    residual, named = memory["by_category"].get("residual", 0), memory.get("residual_bytes_named")
    if residual and named is not None:
        inputs = memory.get("residual_bytes_inputs") or 0
        part = (
            f", {inputs / residual:.0%} holding what it is computed from, marked (input)"
            if inputs
            else ""
        )
        notes.append(
            f"{named / residual:.0%} of the residual bytes at the peak name the residual they "
            f"hold{part} (the JSON report's `unnamed` says why the rest do not)"
        )
    clones = memory.get("xla_rematerialized") or []
    if clones:
        shown = ", ".join(clones[:4]) + (", ..." if len(clones) > 4 else "")
        notes.append(f"XLA's rematerialization pass recomputes {len(clones)} value(s): {shown}")
    if memory.get("xla_remat"):
        notes.append(memory["xla_remat"]["words"])
    return notes


def text_lines(
    memory: dict | None, note: str | None = None, judged: int | None = None
) -> list[str]:
    """The breakdown for the text report (a note when there is none);
    `judged`: the compiled peak budgets are judged by (`summary`)."""
    from remat_tui.report.tables import text_table

    if memory is None:
        return [f"where the peak goes: not available ({note})"] if note else []
    lines = ["where the peak goes", "  " + summary(memory, judged)]
    if memory.get("explanation"):
        lines.append("  " + memory["explanation"])
    lines += ["  " + n for n in compiler_notes(memory)]
    lines += ["  " + row for row in text_table([BUFFER_COLUMNS, *buffer_rows(memory)])]
    more = len(memory["at_peak"]) - TOP
    if more > 0:
        lines.append(f"  ... {more} smaller buffers (every one in the JSON report)")
    for space in memory.get("other_spaces", []):
        lines += ["", "  " + space_title(space)]
        lines += ["  " + row for row in text_table([BUFFER_COLUMNS, *buffer_rows(space)])]
    return lines


def markdown_lines(
    memory: dict | None, note: str | None = None, judged: int | None = None
) -> list[str]:
    from remat_tui.report.tables import md_cell

    if memory is None:
        return [f"Where the peak goes: not available ({md_cell(note)})", ""] if note else []
    lines = ["### Where the peak goes", "", md_cell(summary(memory, judged)), ""]
    if memory.get("explanation"):
        lines += [md_cell(memory["explanation"]), ""]
    lines += [line for n in compiler_notes(memory) for line in (md_cell(n), "")]
    lines.append("| " + " | ".join(BUFFER_COLUMNS) + " |")
    lines.append("|" + "---|" * len(BUFFER_COLUMNS))
    lines += ["| " + " | ".join(md_cell(x) for x in row) + " |" for row in buffer_rows(memory)]
    for space in memory.get("other_spaces", []):
        lines += ["", md_cell(space_title(space)), ""]
        lines.append("| " + " | ".join(BUFFER_COLUMNS) + " |")
        lines.append("|" + "---|" * len(BUFFER_COLUMNS))
        lines += ["| " + " | ".join(md_cell(x) for x in row) + " |" for row in buffer_rows(space)]
    return [*lines, ""]


def html(memory: dict | None, note: str | None = None, judged: int | None = None) -> str:
    if memory is None:
        return f"<p>Where the peak goes: not available ({escape(note)})</p>" if note else ""
    explanation = f"<p>{escape(memory['explanation'])}</p>" if memory.get("explanation") else ""
    explanation += "".join(f"<p>{escape(n)}</p>" for n in compiler_notes(memory))
    spaces = "".join(
        f"<p>{escape(space_title(space))}</p>{_buffer_table(space)}"
        for space in memory.get("other_spaces", [])
    )
    return (
        f"<h3>Where the peak goes</h3><p>{escape(summary(memory, judged))}</p>{explanation}"
        f"{curve_svg(memory)}{_buffer_table(memory)}{spaces}"
    )


def _buffer_table(memory: dict) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in BUFFER_COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(x)}</td>" for x in row) + "</tr>"
        for row in buffer_rows(memory)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def curve_svg(memory: dict, width: int = 720, height: int = 240) -> str:
    """Live bytes over the schedule: the curve, the peak marked, and a dashed
    line where the backward part starts."""
    curve = memory["curve"]
    if not curve:
        return ""
    pad = 48
    last = max(memory["steps"] - 1, 1)
    top = max(size for _, size in curve) or 1

    def x(step: float) -> float:
        return pad + step / last * (width - 2 * pad)

    def y(size: float) -> float:
        return height - pad - size / top * (height - 2 * pad)

    points = " ".join(f"{x(s):.1f},{y(b):.1f}" for s, b in curve)
    peak_x, peak_y = x(memory["peak_step"]), y(memory["peak_bytes"])
    backward = memory.get("backward_from")
    boundary = (
        f'<line x1="{x(backward):.1f}" y1="{pad}" x2="{x(backward):.1f}" y2="{height - pad}" '
        'stroke="#888" stroke-dasharray="4 3"/>'
        f'<text x="{x(backward) + 4:.1f}" y="{pad + 12}" font-size="11">backward</text>'
        if backward is not None
        else ""
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="live bytes over the schedule" font-family="system-ui, sans-serif">'
        f'<rect width="{width}" height="{height}" fill="#fafafa"/>{boundary}'
        f'<polyline points="{points}" fill="none" stroke="#36c" stroke-width="1.5"/>'
        f'<circle cx="{peak_x:.1f}" cy="{peak_y:.1f}" r="4" fill="#d33">'
        f"<title>peak {escape(human_bytes(memory['peak_bytes']))} at step "
        f"{memory['peak_step']}</title></circle>"
        f'<text x="{peak_x + 6:.1f}" y="{peak_y - 6:.1f}" font-size="11">'
        f"peak {escape(human_bytes(memory['peak_bytes']))}</text>"
        f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle" font-size="12">'
        f"step of XLA's schedule (0 – {last})</text>"
        f'<text x="14" y="{height / 2}" font-size="12" transform="rotate(-90 14 {height / 2})" '
        f'text-anchor="middle">live bytes (0 – {escape(human_bytes(top))})</text>'
        "</svg>"
    )


# ---- the memory subcommand: this view alone ---------------------------------------------


def render(a: Analysis, fmt: str) -> str:
    """`remat-tui memory`: the compiled figure and where its peak goes, alone."""
    import json

    from remat_tui.registry import target_label
    from remat_tui.report import compiled

    c = a.compiled
    title = target_label(a.target_file, a.target_name)
    if fmt == "json":
        return (
            json.dumps(
                {
                    "schema": 1,
                    "target": {"file": a.target_file, "name": a.target_name},
                    "policy": {"spec": a.policy, "python": a.python},
                    "device": dict(a.device),
                    "compiled": c.to_dict(),
                },
                indent=2,
            )
            + "\n"
        )
    head = compiled.headline(a) or ""
    if fmt == "text":
        lines = [f"memory  {title}  ({a.config.label()})", head, ""]
        lines += text_lines(c.memory, c.memory_note or _not_fit(c), judged_peak(c))
        return "\n".join(lines) + "\n"
    if fmt == "md":
        from remat_tui.report.tables import md_cell

        lines = [f"# remat-tui memory: `{md_cell(title)}`", "", md_cell(head), ""]
        lines += markdown_lines(c.memory, c.memory_note or _not_fit(c), judged_peak(c))
        return "\n".join(lines) + "\n"
    if fmt == "html":
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>remat-tui memory: {escape(title)}</title>"
            "<style>body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:90em;"
            "padding:0 1em}table{border-collapse:collapse}th,td{border-bottom:1px solid #ddd;"
            "padding:.25em .6em;text-align:left}</style></head><body>"
            f"<h1>remat-tui memory: <code>{escape(title)}</code></h1>"
            f"<p>{escape(a.config.label())}</p><h2>{escape(head)}</h2>"
            f"{html(c.memory, c.memory_note or _not_fit(c), judged_peak(c))}</body></html>\n"
        )
    raise ValueError(f"unknown format {fmt!r}")


def judged_peak(c: Compiled | None) -> int | None:
    """The compiled peak budgets are judged by, where the compile fit."""
    return c.peak_bytes if c is not None and c.fits else None


def _not_fit(c: Compiled) -> str | None:
    """Why a compile that did not fit has no breakdown: XLA reports none."""
    if c.fits:
        return None
    return "it does not fit the device, and XLA reports no schedule for a program it refused"
