"""Provides fit's reports (Contract 10): text, Markdown, HTML (with examples
per second against batch as inline SVG: no script, no network) and JSON; and
`progress_line`, the line the CLI and the app show while fit searches."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from remat_tui.core.search.rows import CostSource
from remat_tui.core.units import count, human_bytes, human_seconds
from remat_tui.registry import target_label
from remat_tui.report.compiled import rates_words
from remat_tui.report.tables import md_cell, text_table

if TYPE_CHECKING:
    from remat_tui.core.search.fit.results import Fit, FitProgress, FitRow
    from remat_tui.core.setup.config import Config

COLUMNS = ("", "batch", "peak", "step", "examples/s", "configuration", "notes")
COLOURS = ("#d33", "#268bd2", "#2aa198", "#b58900", "#6c71c4", "#cb4b16", "#859900", "#d33682")


def row_label(config: Config) -> str:
    """A row's configuration, short: its outer policy (a names policy as the
    names it saves and offloads), its site overrides and its structure."""
    sites = [f"site {k}: {spec.short()}" for k, spec in config.site_specs]
    if config.structure is not None:
        sites.append(str(config.structure))
    if sites and config.policy == "as_written":
        return "; ".join(sites)
    return "; ".join([config.spec.short(), *sites])


def progress_count(p: FitProgress) -> str:
    """`2/14`: the configuration among all; for fit --optimize, `search 3`,
    the exact searches begun (a batch each: how many the bracket takes is
    not known ahead)."""
    if p.optimized:
        return (
            f"search {p.index + 1}"
            if p.trying is not None
            else count(p.index, "search", "searches")
        )
    return f"{p.index + 1}/{p.total}"


def progress_line(p: FitProgress) -> str:
    """`fit nothing_saveable: fits 64, not 128 -> trying 96` (a FitProgress);
    `fit --optimize: fits 4, not 8 -> trying 6`."""
    known = [f"fits {p.fits}"] if p.fits else []
    if p.not_fit is not None:
        known.append(f"not {p.not_fit}")
    where = ", ".join(known)
    label = "--optimize" if p.optimized else row_label(p.config)
    if p.trying is None:
        found = f"largest batch {p.fits}" if p.fits else "nothing fits"
        return f"fit {label}: {found}" + (f" ({where})" if where else "")
    return f"fit {label}: " + (f"{where} -> " if where else "") + f"trying {p.trying}"


def examples_rate(value: float | None) -> str:
    if value is None:
        return ""
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e4:
        return f"{value / 1e3:.1f}k"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def batch_cell(row: FitRow) -> str:
    if row.error and not row.batch:
        return "compile failed"
    if not row.batch and row.search is not None and row.not_fit is not None:
        return f"✗ {row.not_fit}"  # fit --optimize: a row per batch, this one's
    if not row.batch:
        return "✗ none"
    more = "+" if row.capped else ("?" if not row.complete else "")
    return f"{row.batch}{more}"


def peak_cell(row: FitRow) -> str:
    peak = row.peak_bytes  # known at a batch that fits
    if row.batch and peak is not None:
        return human_bytes(peak)
    needed = row.needed_bytes
    return f"needs {human_bytes(needed)}" if needed else ""


def step_cell(row: FitRow) -> str:
    seconds = row.step_seconds
    if row.cost_source == "measured" and seconds is not None:  # a measured row has it
        return human_seconds(seconds)
    return f"~{human_seconds(seconds)}" if seconds else ""


def notes(row: FitRow) -> list[str]:
    out = []
    if row.error:
        out.append("compile failed: " + row.error.splitlines()[-1].strip())
    elif not row.batch and row.not_fit is not None and row.search is not None:
        out.append(f"nothing fits at batch {row.not_fit}, whatever the decisions")
    elif not row.batch and row.not_fit is not None:
        out.append(f"not even batch {row.not_fit} fits")
    if row.capped:
        out.append("the largest batch allowed: more may fit (--max-batch)")
    elif not row.complete and not row.error:
        beyond = f" and {row.not_fit}" if row.not_fit is not None else ""
        out.append(f"search stopped between {row.batch}{beyond}" if beyond
                   else f"search stopped at {row.batch}")  # fmt: skip
    elif row.batch and row.not_fit is not None:
        out.append(f"{row.not_fit} does not fit")
    measured = row.measured
    if measured and measured.error:
        out.append(measured.error.replace("\n", " ").strip())
    if measured and measured.min_seconds is not None and row.time:
        out.append(f"estimated ~{human_seconds(row.time.seconds)}")
    return out + list(row.notes)


def cells(row: FitRow) -> tuple[str, ...]:
    return (
        "★" if row.best else "",
        batch_cell(row),
        peak_cell(row),
        step_cell(row),
        examples_rate(row.examples_per_second),
        row_label(row.config),
        "; ".join(notes(row)),
    )


def headline(f: Fit) -> str:
    title = target_label(f.target_file, f.target_name)
    topology = f.device.get("topology")
    device = f"tpu:{topology}" if topology else f"{f.device['platform']}:{f.device['id']}"
    steps = f", batches in steps of {f.multiple}" if f.multiple > 1 else ""
    cap = f", at most {f.max_batch}" if f.max_batch else ""
    if f.optimized:
        return (
            f"fit --optimize {title}: per batch, the best decisions within "
            f"{human_bytes(f.budget)} per device on {device}{steps}{cap}"
        )
    return (
        f"fit {title}: the largest batch within {human_bytes(f.budget)} per device on "
        f"{device}{steps}{cap}"
    )


def compiles_words(f: Fit) -> str:
    """`30 programs compiled, 4 answered without compiling (2 by the compile
    cache, 2 by the same program compiled for another configuration or batch)`."""
    said = f"{count(f.compiles, 'program')} compiled"
    if not f.reused:
        return said
    same = f.reused - f.stored
    parts = [f"{f.stored} by the compile cache"] if f.stored else []
    if same:
        parts.append(f"{same} by the same program compiled for another configuration or batch")
    return f"{said}, {f.reused} answered without compiling ({', '.join(parts)})"


def searched(f: Fit) -> str:
    probes = sum(len(r.probes) for r in f.rows)
    stopped = " (cancelled: the rows found so far)" if f.cancelled else ""
    if f.optimized:
        return (
            f"{count(len(f.rows), 'batch', 'batches')} searched exactly (every decision at "
            f"each), {compiles_words(f)}, {f.seconds:.1f} s{stopped}"
        )
    return (
        f"{count(len(f.rows), 'configuration')}, {count(probes, 'batch', 'batches')} tried, "
        f"{compiles_words(f)}, {f.seconds:.1f} s{stopped}"
    )


def verdict(f: Fit) -> list[str]:
    """What the best row buys, and the code to paste."""
    best = f.best
    if best is None:
        return ["nothing fits: not even the smallest batch, under any configuration"]
    how = "measured" if best.cost_source is CostSource.MEASURED else "estimated"
    rate = examples_rate(best.examples_per_second)
    lines = [
        f"best: {row_label(best.config)} at batch {best.batch}"
        + (f", {rate} examples/s ({how})" if rate else "")
    ]
    return [*lines, "", "paste:", best.python] if best.python else lines


LEGEND = (
    "batch: the largest that fits the budget (+: the largest allowed; ?: the search was "
    "stopped); peak: the compiled step's peak per device at that batch (the training step "
    "where the target trains, else the gradient keeping the loss); step: the measured step "
    "time where it was run, else ~ the roofline estimate; examples/s = batch / step; ★ the "
    "most examples per second."
)


OPTIMIZED_LEGEND = (
    "--optimize: a row per batch size tried, each with the least step time whose compiled "
    "peak fits the budget at that batch (the exact search, as suggest --compiled: its gap "
    "in the notes); batch: that size (✗ B: nothing fits batch B); peak, step and "
    "examples/s as below; ★ the most examples per second. "
)


def legend(f: Fit) -> str:
    """LEGEND, and where the estimate's rates came from when a row has one."""
    timed = next((r.time for r in f.rows if r.time), None)
    rates = rates_words(timed) if timed else ""
    lead = OPTIMIZED_LEGEND if f.optimized else ""
    return lead + LEGEND + (f" The estimate's rates: {rates}." if rates else "")


def render_fit(f: Fit, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(f.to_dict(), indent=2) + "\n"
    rows = [cells(r) for r in f.rows]
    if fmt == "text":
        lines = [headline(f), searched(f), ""]
        lines += text_table([COLUMNS, *rows]) + ["", *verdict(f), "", legend(f)]
        return "\n".join(lines) + "\n"
    if fmt == "md":
        lines = [f"# remat-tui {md_cell(headline(f))}", "", searched(f), "", legend(f), ""]
        lines.append("| " + " | ".join(COLUMNS) + " |")
        lines.append("|" + "---|" * len(COLUMNS))
        lines += ["| " + " | ".join(md_cell(x) for x in row) + " |" for row in rows]
        best = verdict(f)
        lines += ["", best[0]]
        if f.best and f.best.python:
            lines += ["", "```python", f.best.python, "```"]
        return "\n".join(lines) + "\n"
    if fmt == "html":
        head = "".join(f"<th>{escape(h)}</th>" for h in COLUMNS)
        body = "\n".join(
            "<tr>" + "".join(f"<td>{escape(x)}</td>" for x in row) + "</tr>" for row in rows
        )
        best = verdict(f)
        paste = f"<pre>{escape(f.best.python)}</pre>" if f.best and f.best.python else ""
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>remat-tui {escape(headline(f))}</title>"
            "<style>body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:110em;"
            "padding:0 1em}table{border-collapse:collapse}th,td{border-bottom:1px solid #ddd;"
            "padding:.25em .6em;text-align:left}pre{background:#f6f8fa;padding:.8em}</style>"
            f"</head><body><h1>remat-tui {escape(headline(f))}</h1>"
            f"<p>{escape(searched(f))}</p><p>{escape(best[0])}</p>{paste}{chart_svg(f.rows)}"
            f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>"
            f"<p>{escape(legend(f))}</p></body></html>\n"
        )
    raise ValueError(f"unknown format {fmt!r}")


def curve(row: FitRow) -> list[tuple[int, float]]:
    """(batch, estimated examples per second) at each batch that fits, by batch."""
    return sorted((p.batch, p.examples_per_second) for p in row.probes if p.examples_per_second)


def chart_svg(rows: Sequence[FitRow], width: int = 720, height: int = 380) -> str:
    """Estimated examples per second against batch, a line per configuration
    with a point per batch tried that fits; every label escaped."""
    lines = [(r, curve(r)) for r in rows if curve(r)]
    if not lines:
        return ""
    pad, right = 60, 260
    xs = [b for _, c in lines for b, _ in c]
    ys = [e for _, c in lines for _, e in c]
    x1, y1 = max(xs) or 1, max(ys) or 1

    def px(b: float) -> float:
        return pad + b / x1 * (width - right - pad)

    def py(e: float) -> float:
        return height - pad - e / y1 * (height - 2 * pad)

    parts = []
    for i, (row, points) in enumerate(lines):
        colour = COLOURS[i % len(COLOURS)]
        label = escape(row_label(row.config))
        path = " ".join(f"{px(b):.1f},{py(e):.1f}" for b, e in points)
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5">'
            f"<title>{label}</title></polyline>"
        )
        parts += [
            f'<circle cx="{px(b):.1f}" cy="{py(e):.1f}" r="3" fill="{colour}"><title>{label}: '
            f"batch {b}, {examples_rate(e)} examples/s</title></circle>"
            for b, e in points
        ]
        y = pad + 16 * i
        parts.append(
            f'<text x="{width - right + 12}" y="{y}" font-size="11" fill="{colour}">'
            f"{'★ ' if row.best else ''}{label}</text>"
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        'aria-label="estimated examples per second against batch">'
        f'<rect width="{width}" height="{height}" fill="#fafafa"/>'
        + "".join(parts)
        + f'<text x="{(width - right) / 2}" y="{height - 16}" text-anchor="middle" '
        f'font-size="12">batch (0 – {x1})</text>'
        f'<text x="16" y="{height / 2}" font-size="12" transform="rotate(-90 16 {height / 2})" '
        f'text-anchor="middle">examples/s, estimated (0 – {examples_rate(y1)})</text></svg>'
    )
