"""Provides the reports of compare, suggest and diff: text, Markdown, HTML
(with the Pareto chart as inline SVG: no script, no network) and JSON."""

from __future__ import annotations

import json
from html import escape

from remat_tui.registry import target_label
from remat_tui.report.memory import largest_category, summary
from remat_tui.report.tables import md_cell, text_table
from remat_tui.report.units import human_bytes, human_flops, human_seconds, signed

COLUMNS = (
    "", "device", "host", "recompute", "% fwd", "peak", "temp", "most at peak", "est. step",
    "configuration", "notes",
)  # fmt: skip


def spanned_devices(rows) -> int:
    """The most devices any row's compiled program spans (1 when none was
    compiled, or none over several devices)."""
    return max(((r.compiled or {}).get("devices") or 1 for r in rows), default=1)


def any_measured(rows) -> bool:
    return any(r.measured for r in rows)


def columns(rows) -> tuple[str, ...]:
    """COLUMNS (with `measured` after the estimate when a row was run),
    saying whose bytes each counts once the arguments are sharded over
    several devices: XLA's peak and temp are one device's, and the residual
    bytes (a row has no per-device split of them) all devices'."""
    n = spanned_devices(rows)
    heads = COLUMNS
    if any_measured(rows):
        at = COLUMNS.index("est. step") + 1
        heads = (*COLUMNS[:at], "measured", *COLUMNS[at:])
    if n <= 1:
        return heads
    names = {
        "device": f"device (all {n})",
        "host": f"host (all {n})",
        "peak": "peak/device",
        "temp": "temp/device",
    }
    return tuple(names.get(c, c) for c in heads)


def legend_devices(rows) -> str:
    """The legend's sentence on whose bytes the columns count, or ''."""
    n = spanned_devices(rows)
    if n <= 1:
        return ""
    return (
        f" The arguments are sharded over {n} devices: peak and temp are per device; "
        f"device (all {n}) and host (all {n}) are the residual bytes across all {n} devices."
    )


def short_spec(spec: str) -> str:
    """A names policy as the names it saves and offloads (`save qkv · offload h`);
    any other spec as it is. For tables: reports and JSON keep the canonical spec."""
    from remat_tui.core.setup import policies

    try:
        parsed = policies.parse(spec, policies.AnyName())
    except Exception:  # a custom:<name> policy read off the code
        return spec
    if parsed.kind not in ("save_only_these_names", policies.OFFLOAD_NAMES):
        return spec
    parts = []
    if parsed.names:
        parts.append("save " + ", ".join(parsed.names))
    if parsed.offloaded:
        parts.append("offload " + ", ".join(parsed.offloaded))
    return " · ".join(parts) or "save no names"


def config_label(row) -> str:
    parts = [] if row.config.policy == "as_written" and row.config.sites else [row.config.policy]
    parts = [short_spec(p) for p in parts]
    parts += [f"site {k}: {short_spec(v)}" for k, v in row.config.sites]
    return "; ".join(parts)


def peak_cell(row) -> str:
    """The compiled peak; for a compile that ran out of memory, what XLA said
    it needed; for one that failed otherwise, that it failed."""
    compiled = row.compiled or {}
    if row.error is not None:
        return "compile failed"
    if not compiled:
        return ""
    if not compiled.get("fits", True):
        needed = compiled.get("needed_bytes")
        return f"✗ needs {human_bytes(needed)}" if needed else "✗ out of memory"
    return human_bytes(compiled["peak_bytes"]) if compiled.get("peak_bytes") is not None else ""


def row_notes(row) -> list[str]:
    """The row's notes, with why it has no compiled peak when it has none."""
    compiled = row.compiled or {}
    out = list(row.notes)
    if row.error is not None:
        out.insert(0, "compile failed: " + row.error.splitlines()[-1].strip())
    elif compiled and not compiled.get("fits", True):
        out.insert(0, f"does not fit {compiled.get('device')}: {compiled.get('error')}")
    elif (row.measured or {}).get("error"):
        out.insert(0, row.measured["error"].replace("\n", " ").strip())
    return out


def notes_cell(row) -> str:
    """The row's notes in one cell: sentences joined by semicolons, each
    without its own full stop."""
    return "; ".join(note.rstrip().rstrip(".") for note in row_notes(row))


def most_at_peak(row) -> str:
    """The category holding the most of the compiled peak (`residual 48%`), or ''."""
    memory = (row.compiled or {}).get("memory")
    if not memory or not memory["peak_bytes"]:
        return ""
    category = largest_category(memory)
    return f"{category} {memory['by_category'][category] / memory['peak_bytes']:.0%}"


def time_cell(row) -> str:
    """The step-time estimate (`~12.3 ms`: an estimate, and it says so), or ''."""
    return f"~{human_seconds(row.time['seconds'])}" if row.time else ""


def time_parts(t: dict) -> str:
    """The estimate's parts: `compute 1.2 ms · transc. 0.3 ms · memory 0.5 ms`
    (host only when there is some)."""
    parts = [
        f"compute {human_seconds(t['compute_seconds'])}",
        f"transc. {human_seconds(t['transcendental_seconds'])}",
        f"memory {human_seconds(t['memory_seconds'])}",
    ]
    if t["host_seconds"]:
        parts.append(f"host {human_seconds(t['host_seconds'])}")
    return " · ".join(parts)


def measured_cell(row, rank: dict | None = None) -> str:
    """`#1 1.23 ms (median 1.25 ms)`: the measured minimum, its rank among the
    measured rows, and the median; `✗ did not fit when run`; `run failed`; or ''."""
    m = row.measured
    if not m:
        return ""
    if m.get("min_seconds") is not None:
        place = f"#{rank[id(row)]} " if rank and id(row) in rank else ""
        cell = f"{place}{human_seconds(m['min_seconds'])}"
        if m.get("median_seconds") is not None:
            cell += f" (median {human_seconds(m['median_seconds'])})"
        if m.get("peak_bytes") is not None:
            cell += f", peak {human_bytes(m['peak_bytes'])}"
        return cell
    return "✗ did not fit when run" if not m.get("fits", True) else "run failed"


def measured_ranks(rows) -> dict[int, int]:
    """1 for the fastest measured row, 2 for the next, ... (by id)."""
    timed = [r for r in rows if r.measured and r.measured.get("min_seconds") is not None]
    timed.sort(key=lambda r: r.measured["min_seconds"])
    return {id(r): i + 1 for i, r in enumerate(timed)}


def time_legend(rows) -> str:
    """The legend's sentences on the step-time estimate and the measured time,
    naming the chip, or ''."""
    timed = next((r.time for r in rows if r.time), None)
    text = ""
    if timed is not None:
        overlap = "plus" if timed["chip"] == "cpu" else "or, when slower,"
        text = (
            f" est. step: an estimate of one step's time on {timed['chip']} by a roofline "
            "model (XLA's FLOPs at peak FLOP/s, its transcendentals at the chip's rate for "
            f"them, {overlap} its bytes accessed at memory bandwidth, plus offloaded bytes "
            "out and back over the host link; remat_tui/core/xla/step_time.py); FLOPs stay "
            "beside it."
        )
    measured = [r.measured for r in rows if r.measured]
    if measured:
        runs = next((m["runs"] for m in measured if m.get("runs")), 0)
        text += (
            f" measured: the fastest and the median of {runs} runs of the compiled step on "
            "the device, after a warm-up (#1 the fastest), and the peak memory the device "
            "reached where it keeps statistics; where a row was measured, its fastest run is "
            "its cost."
        )
        # Said once for the table: on the CPU no row can have a measured peak.
        unpeaked = {m["peak_note"] for m in measured if m.get("peak_note") and "min_seconds" in m}
        if unpeaked and all(m.get("peak_bytes") is None for m in measured):
            text += f" No measured peak: {'; '.join(sorted(unpeaked))}."
    return text


def row_cells(row, rank: dict | None = None) -> tuple[str, ...]:
    """One row of the table, COLUMNS' cells (with the `measured` cell when
    `rank` is given: the rows were run)."""
    share = row.recompute_share
    compiled = row.compiled or {}
    fitting = compiled.get("fits", True)
    cells = [
        "★" if row.pareto else "",
        human_bytes(row.device_bytes),
        human_bytes(row.host_bytes) if row.host_bytes else "",
        human_flops(row.recompute_flops),
        "" if share is None else f"{share:.0%}",
        peak_cell(row),
        human_bytes(compiled["temp_bytes"]) if compiled and fitting else "",
        most_at_peak(row),
        time_cell(row),
        config_label(row),
        notes_cell(row),
    ]
    if rank is not None:
        cells.insert(COLUMNS.index("est. step") + 1, measured_cell(row, rank))
    return tuple(cells)


# ---- compare --------------------------------------------------------------------------


def compare_legend(rows) -> str:
    """What the compare table's marks and columns mean (every format prints it)."""
    return (
        (
            "★ Pareto-optimal: no other row needs no more memory at no more cost (the "
            "measured step time where the rows were run, else the estimated one once "
            "compiled, else recompute FLOPs; host bytes break ties; an offload slower than "
            "recomputing is never ★). "
            "device/host: residual bytes saved by autodiff; recompute: forward FLOPs the "
            "backward pass does again; peak/temp: the compiled gradient alone (no optimizer "
            "state), or the training step for a target that says what it trains, when "
            "compiled; ✗: it does not fit the device."
        )
        + time_legend(rows)
        + legend_devices(rows)
    )


def render_compare(c, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(c.to_dict(), indent=2) + "\n"
    rank = measured_ranks(c.rows) if any_measured(c.rows) else None
    cells = [row_cells(r, rank) for r in c.rows]
    heads = columns(c.rows)
    title = target_label(c.target_file, c.target_name)
    legend = compare_legend(c.rows)
    if fmt == "text":
        lines = [f"compare  {title}  ({len(c.rows)} configurations, {c.seconds:.1f} s)", ""]
        lines += text_table([heads, *cells]) + ["", legend]
        return "\n".join(lines) + "\n"
    if fmt == "md":
        lines = [f"# remat-tui compare: `{md_cell(title)}`", "", legend, ""]
        lines.append("| " + " | ".join(heads) + " |")
        lines.append("|" + "---|" * len(heads))
        lines += ["| " + " | ".join(md_cell(x) for x in row) + " |" for row in cells]
        return "\n".join(lines) + "\n"
    if fmt == "html":
        head = "".join(f"<th>{escape(h)}</th>" for h in heads)
        body = "\n".join(
            "<tr>" + "".join(f"<td>{escape(x)}</td>" for x in row) + "</tr>" for row in cells
        )
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>remat-tui compare: {escape(title)}</title>"
            "<style>body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:110em;"
            "padding:0 1em}table{border-collapse:collapse}th,td{border-bottom:1px solid #ddd;"
            "padding:.25em .6em;text-align:left}</style></head><body>"
            f"<h1>remat-tui compare: <code>{escape(title)}</code></h1>"
            f"<p>{escape(legend)}</p>{pareto_svg(c.rows)}"
            f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>"
            "</body></html>\n"
        )
    raise ValueError(f"unknown format {fmt!r}")


def pareto_svg(rows, width: int = 640, height: int = 360, numbered: bool = False) -> str:
    """Memory (x) against recompute FLOPs (y), one dot per row, the Pareto
    front joined by a line; every label escaped. `numbered`: each dot also
    carries its row's number (1-based), for a view where the <title>
    tooltips do not show (an SVG in an <img>)."""
    if not rows:
        return ""
    pad = 56
    xs = [r.weighed_bytes for r in rows]
    ys = [r.recompute_flops for r in rows]
    x0, x1 = min(xs), max(xs) or 1
    y0, y1 = min(ys), max(ys) or 1

    def px(v, lo, hi, size, flip=False):
        t = 0.5 if hi == lo else (v - lo) / (hi - lo)
        return pad + (1 - t if flip else t) * (size - 2 * pad)

    points = []
    at: dict[tuple[int, int], list] = {}  # {spot: [x, y, row numbers drawn there]}
    for number, r in enumerate(rows, 1):
        cx, cy = px(r.weighed_bytes, x0, x1, width), px(r.recompute_flops, y0, y1, height, True)
        colour = "#d33" if r.pareto else "#789"
        points.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{colour}">'
            f"<title>{escape(config_label(r))}: {human_bytes(r.weighed_bytes)}, "
            f"{human_flops(r.recompute_flops)}</title></circle>"
        )
        # dots closer than about 10 px share one label: 4 overlapping numbers read as none
        at.setdefault((round(cx / 10), round(cy / 10)), [cx, cy]).append(str(number))
    if numbered:
        for cx, cy, *numbers in at.values():
            # right of the dot, or left of it near the right edge
            x, anchor = (cx + 6, "start") if cx < width * 0.7 else (cx - 6, "end")
            points.append(
                f'<text x="{x:.1f}" y="{cy - 5:.1f}" font-size="11" text-anchor="{anchor}">'
                f'{",".join(numbers)}</text>'
            )
    front = sorted((r for r in rows if r.pareto), key=lambda r: r.weighed_bytes)
    line = " ".join(
        f"{px(r.weighed_bytes, x0, x1, width):.1f},"
        f"{px(r.recompute_flops, y0, y1, height, True):.1f}"
        for r in front
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="memory against recompute FLOPs" '
        'font-family="system-ui, sans-serif">'
        f'<rect width="{width}" height="{height}" fill="#fafafa"/>'
        f'<polyline points="{line}" fill="none" stroke="#d33" stroke-width="1.5"/>'
        + "".join(points)
        + f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle" font-size="12">'
        f"memory ({human_bytes(x0)} – {human_bytes(x1)})</text>"
        f'<text x="14" y="{height / 2}" font-size="12" transform="rotate(-90 14 {height / 2})" '
        f'text-anchor="middle">recompute FLOPs ({human_flops(y0)} – {human_flops(y1)})</text>'
        "</svg>"
    )


# ---- suggest --------------------------------------------------------------------------


def render_suggest(s, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(s.to_dict(), indent=2) + "\n"
    best, base = s.best, s.baseline
    saving = base.weighed_bytes - best.weighed_bytes
    lines = [
        suggest_headline(s),
        f"against as written: {human_bytes(saving)} less"
        if saving >= 0
        else f"against as written: {human_bytes(-saving)} more",
        search_words(s),
        "",
        "paste:",
        best.python,
    ]
    memory = (best.compiled or {}).get("memory")
    if memory and memory["peak_bytes"]:
        category = largest_category(memory)
        share = memory["by_category"][category] / memory["peak_bytes"]
        lines.insert(1, f"its peak is mostly {category} ({share:.0%}); {summary(memory)}")
    if s.budget_above_device:
        lines.insert(
            1,
            f"the budget is above the {human_bytes(s.device_memory)} the device has for the "
            "program: the device is the real limit",
        )
    if best.notes:
        lines += ["", *(f"note: {n}" for n in best.notes)]
    if fmt == "md":
        return (
            "\n".join(["# remat-tui suggest", "", *lines[:3], "", "```", best.python, "```"]) + "\n"
        )
    return "\n".join(lines) + "\n"


def search_words(s) -> str:
    """How suggest searched: exact or heuristic, how many it analysed,
    compiled and ran, and why the rest were not compiled."""
    how = (
        f"exact: all {s.searched} configurations analysed"
        if s.exact
        else "heuristic (greedy over names, see `remat_tui.core.search.suggest`): "
        f"{s.searched} analysed"
    )
    if s.measure == "compiled":
        how += f"; {s.compiled_count} compiled"
        if s.measured_count:
            how += f", {s.measured_count} that fit run on the device"
        if s.skipped:
            how += f", {s.skipped} not compiled ({s.skipped_why})"
    return how


def suggest_headline(s) -> str:
    """What fits and what it costs (measured, estimated or in FLOPs), or the
    smallest when nothing fits."""
    best = s.best
    measure = "compiled peak per device" if s.measure == "compiled" else "residual bytes on device"
    if not s.fits:
        head = (
            f"nothing fits {human_bytes(s.budget)} ({measure}); the smallest is "
            f"{config_label(best)} at {human_bytes(best.weighed_bytes)}"
        )
        if not best.fits:
            compiled = best.compiled or {}
            why = best.error or f"XLA says: {compiled.get('error')}"
            head += f" (it does not fit the device either; {why})"
        return head
    time = ""
    if best.cost_source == "measured":
        guess = f"; estimated ~{human_seconds(best.time['seconds'])}" if best.time else ""
        time = (
            f", {human_seconds(best.measured['min_seconds'])} a step measured on the "
            f"device{guess}"
        )
    elif best.time:
        time = (
            f", about {human_seconds(best.time['seconds'])} a step on {best.time['chip']} "
            "(estimated)"
        )
    return (
        f"fits {human_bytes(s.budget)}: {config_label(best)} uses "
        f"{human_bytes(best.weighed_bytes)} ({measure}), recomputing "
        f"{human_flops(best.recompute_flops)}{time}"
    )


# ---- diff -----------------------------------------------------------------------------


def render_diff(d, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(d.to_dict(), indent=2) + "\n"

    def listing(entries):
        return [
            f"  {human_bytes(e['bytes']):>10}  {e['text']}"
            + (f"  ← {e['origin']}" if e.get("origin") else "")
            for e in entries
        ] or ["  (none)"]

    lines = [
        f"A: {config_label(d.a)}",
        f"B: {config_label(d.b)}",
        f"device bytes B - A: {signed(d.bytes_delta, human_bytes)}; "
        f"recompute B - A: {signed(d.recompute_flops_delta, human_flops)}",
        "",
        f"only in A ({len(d.only_a)}):",
        *listing(d.only_a),
        f"only in B ({len(d.only_b)}):",
        *listing(d.only_b),
        f"in both ({len(d.both)}):",
        *listing(d.both),
    ]
    if fmt == "md":
        return "# remat-tui diff\n\n```\n" + "\n".join(lines) + "\n```\n"
    return "\n".join(lines) + "\n"
