"""Provides the Markdown report: totals, snippet, residual table, both jaxprs."""

from __future__ import annotations

from remat_tui.core.model import Analysis, JaxprView
from remat_tui.core.units import human_bytes
from remat_tui.registry import target_label
from remat_tui.report import compiled, story
from remat_tui.report import memory as memory_view
from remat_tui.report.phrases import (
    SITE_HEADERS,
    line_marks,
    origin,
    residual_bytes_heading,
    site_row,
    structure_of,
    summary,
    what,
    where,
)
from remat_tui.report.tables import md_cell
from remat_tui.report.verify import report_lines

MARK_RESIDUAL, MARK_RECOMPUTE = "◀ R", "↻"


def _fence(body: str) -> str:
    fence = "```"
    while fence in body:
        fence += "`"
    return f"{fence}\n{body}\n{fence}"


def marked_lines(view: JaxprView) -> list[str]:
    """The jaxpr lines with residual (◀ R1,R2) and recomputation (↻) marks."""
    width = max((len(line) for line in view.lines), default=0)
    out = []
    for i, line in enumerate(view.lines):
        marks = line_marks(view, i)
        out.append(f"{line:<{width}}  {marks}" if marks else line)
    return out


def _compiled(a: Analysis) -> list[str]:
    """The compiled headline, XLA's numbers and why they differ from the residuals."""
    head = compiled.headline(a)
    if head is None:
        return []
    return [
        f"## Compiled: {md_cell(head)}",
        "",
        "| | |",
        "|---|---:|",
        *(f"| {md_cell(label)} | {md_cell(value)} |" for label, value in compiled.details(a)),
        "",
        compiled.EXPLAINED,
        "",
        *memory_view.markdown_lines(
            a.compiled.memory, a.compiled.memory_note, memory_view.judged_peak(a.compiled)
        ),
    ]


def render(a: Analysis) -> str:
    target = target_label(a.target_file, a.target_name)
    parts = [
        f"# remat-tui report: `{md_cell(a.target_name)}` under `{md_cell(a.policy)}`",
        "",
        f"- target: `{md_cell(target)}`",
        *([f"- structure: `{md_cell(str(structure_of(a)))}`"] if structure_of(a) else []),
        f"- device: {md_cell(compiled.device_name(a.device))} "
        f"({md_cell(compiled.device_details(a.device))})",
        f"- jax {a.jax_version}, remat-tui {a.tool_version}",
        f"- **{summary(a)}**",
        *(f"- {md_cell(line.strip())}" for line in report_lines(a)),
        "",
        *_compiled(a),
        "Paste to get this policy:",
        "",
        _fence(a.python),
        "",
    ]
    if a.warnings:
        parts += [*(f"> **warning:** {md_cell(w)}" for w in a.warnings), ""]
    if story.applied_lines(a):
        parts += [f"## {story.APPLIED_HEADING[:1].upper()}{story.APPLIED_HEADING[1:]}", ""]
        parts += [*(f"- {md_cell(line)}" for line in story.applied_lines(a)), ""]
    if story.effect_lines(a):
        parts += [f"## {story.EFFECTS_HEADING[:1].upper()}{story.EFFECTS_HEADING[1:]}", ""]
        parts += [*(f"- {md_cell(line)}" for line in story.effect_lines(a)), ""]
    if a.sites:
        parts += [
            "## Checkpoint sites",
            "",
            "| " + " | ".join(SITE_HEADERS) + " |",
            "|---:|---|---|---|---:|---|---:|---:|",
            *("| " + " | ".join(md_cell(c) for c in site_row(s)) + " |" for s in a.sites),
            "",
        ]
    parts += _residual_lines(a)
    parts += [
        "## Forward (vjp) jaxpr",
        "",
        f"Lines marked `{MARK_RESIDUAL}n` define residual n.",
        "",
        _fence("\n".join(marked_lines(a.forward))),
        "",
    ]
    parts += [
        "## Backward jaxpr",
        "",
        f"Lines marked `{MARK_RESIDUAL}n` read residual n; `{MARK_RECOMPUTE}` "
        "re-runs forward work (recomputation).",
        "",
        _fence("\n".join(marked_lines(a.backward))),
        "",
    ]
    return "\n".join(parts)


def _residual_lines(a: Analysis) -> list[str]:
    """The saved residuals: a table, then as print_saved_residuals prints them."""
    parts: list[str] = []
    scope = residual_bytes_heading(a)
    parts += ["## Saved residuals", ""]
    if scope:
        parts += [f"{md_cell(scope[:1].upper() + scope[1:])}.", ""]
    # sharded: the global array size, then one device's share, each called so
    size = "global array size | per device" if a.sharded else "bytes"
    parts += [
        f"| # | aval | {size} | memory | kind | what | source | computed at |",
        "|---:|---|---:|" + ("---:|" if a.sharded else "") + "---|---|---|---|---|",
    ]
    for i, r in enumerate(a.residuals, 1):
        share = f" {human_bytes(r.device_share)} |" if a.sharded else ""
        parts.append(
            f"| R{i} | `{md_cell(r.aval)}` | {human_bytes(r.bytes)} |{share} {r.memory} | "
            f"{r.kind} | {md_cell(what(r))} | {md_cell(where(r))} | {md_cell(origin(r))} |"
        )
    parts += [
        "",
        "As `jax.ad_checkpoint.print_saved_residuals` prints them:",
        "",
        _fence("\n".join(r.text for r in a.residuals)),
        "",
    ]
    return parts + _stories(a)


def _stories(a: Analysis) -> list[str]:
    """Each residual's story, a list item each."""
    if not any(r.story for r in a.residuals):
        return []
    parts = ["## Each residual's story", "", md_cell(story.HOW_TO_READ), ""]
    for i, r in enumerate(a.residuals, 1):
        rows = story.lines(r, i)
        parts.append(f"- **R{i}** " + "; ".join(f"*{label}*: {md_cell(w)}" for label, w in rows))
    return [*parts, ""]
