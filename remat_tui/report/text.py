"""Provides the plain-text report: what a terminal user reads first."""

from __future__ import annotations

import textwrap

from remat_tui.core.model import Analysis, Residual
from remat_tui.core.units import human_bytes
from remat_tui.registry import target_label
from remat_tui.report import compiled, story
from remat_tui.report import memory as memory_view
from remat_tui.report.phrases import (
    SITE_HEADERS,
    origin,
    residual_bytes_heading,
    site_row,
    structure_of,
    summary,
)
from remat_tui.report.tables import text_table
from remat_tui.report.verify import report_lines


def render(a: Analysis) -> str:
    lines = [
        f"target  {target_label(a.target_file, a.target_name)}",
        f"policy  {a.policy}",
        *([f"structure  {structure_of(a)}"] if structure_of(a) is not None else []),
        f"device  {compiled.device_name(a.device)}{compiled.mesh_said(a.device, ', ')}",
        f"python  {a.python}",
        *report_lines(a),
        "",
        *_compiled(a),
        *(f"warning: {w}" for w in a.warnings),
        *([""] if a.warnings else []),
        *_applied(a),
        *_effects(a),
    ]
    if a.sites:
        lines += [
            "checkpoint sites:",
            *text_table([SITE_HEADERS, *map(site_row, a.sites)], indent="  "),
            "",
        ]
    scope = residual_bytes_heading(a)
    lines.append(
        "saved residuals (as jax.ad_checkpoint.print_saved_residuals prints them"
        + (f"; {scope}" if scope else "")
        + "):"
    )
    sizes = [_bytes(r, a.sharded) for r in a.residuals]
    width = max((len(size) for size in sizes), default=0)
    for r, size in zip(a.residuals, sizes, strict=True):
        lines.append(f"  {size:>{width}}  {r.text}")
        if r.origin and (r.origin.trip_count or r.origin.source != r.source):
            lines.append(f"  {'':>{width}}    computed at: {origin(r)}")
    lines += _stories(a)
    lines += ["", summary(a)]
    return "\n".join(lines) + "\n"


def _applied(a: Analysis) -> list[str]:
    """What changes nothing in this configuration, and why."""
    said = story.applied_lines(a)
    if not said:
        return []
    out = [f"{story.APPLIED_HEADING}:"]
    for line in said:
        out += textwrap.wrap(line, 100, initial_indent="  - ", subsequent_indent="    ")
    return [*out, ""]


def _effects(a: Analysis) -> list[str]:
    """The calls back to Python this configuration runs again (issue 43)."""
    said = story.effect_lines(a)
    if not said:
        return []
    out = [f"{story.EFFECTS_HEADING}:"]
    for line in said:
        out += textwrap.wrap(line, 100, initial_indent="  - ", subsequent_indent="    ")
    return [*out, ""]


def _stories(a: Analysis) -> list[str]:
    """Each residual's story: why it is saved, what made it, what reads it,
    what XLA made of it."""
    if not any(r.story for r in a.residuals):
        return []
    out = ["", "each residual's story:"]
    for i, r in enumerate(a.residuals, 1):
        for k, (label, words) in enumerate(story.lines(r, i)):
            head = f"  {f'R{i}' if k == 0 else '':<5}{label:<8} "
            out += textwrap.wrap(words, 100, initial_indent=head,
                                 subsequent_indent=" " * len(head))  # fmt: skip
    return [*out, *textwrap.wrap(story.HOW_TO_READ, 100, initial_indent="  ",
                                 subsequent_indent="  ")]  # fmt: skip


def _bytes(r: Residual, sharded: bool) -> str:
    """A residual's bytes; with per-device bytes known, its share beside them."""
    if not sharded:
        return human_bytes(r.bytes)
    return f"{human_bytes(r.bytes)}  {human_bytes(r.device_share):>9}/device"


def _compiled(a: Analysis) -> list[str]:
    """The compiled headline, XLA's numbers and why they differ from the residuals."""
    head = compiled.headline(a)
    if head is None:
        return []
    rows = compiled.details(a)
    width = max(len(label) for label, _ in rows)
    return [
        head,
        *(f"  {label:<{width}}  {value}" for label, value in rows),
        *textwrap.wrap(compiled.EXPLAINED, 88),
        "",
        *memory_view.text_lines(
            a.compiled.memory, a.compiled.memory_note, memory_view.judged_peak(a.compiled)
        ),
        "",
    ]
