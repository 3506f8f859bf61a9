"""Provides the reports of compare and diff (suggest's are report/suggest.py):
text, Markdown, HTML (with the Pareto chart as inline SVG: no script, no
network) and JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from remat_tui.core.units import count, human_bytes, human_flops, human_seconds
from remat_tui.registry import target_label
from remat_tui.report.compiled import arguments_words, rates_words
from remat_tui.report.labels import config_label
from remat_tui.report.memory import largest_category
from remat_tui.report.pareto import pareto_svg  # noqa: F401 (also the notebook's)
from remat_tui.report.phrases import PER_DEVICE_UNKNOWN, signed
from remat_tui.report.tables import md_cell, text_table

if TYPE_CHECKING:
    from remat_tui.core.search.compare import Comparison
    from remat_tui.core.search.diff import Diff
    from remat_tui.core.search.rows import Row

COLUMNS = (
    "", "device", "host", "recompute", "% fwd", "peak", "temp", "most at peak", "est. step",
    "configuration", "notes",
)  # fmt: skip


def spanned_devices(rows: Sequence[Row]) -> int:
    """The most devices any row's compiled program spans (1 when none was
    compiled, or none over several devices)."""
    return max((r.compiled.devices or 1 if r.compiled else 1 for r in rows), default=1)


def any_measured(rows: Sequence[Row]) -> bool:
    return any(r.measured for r in rows)


def columns(rows: Sequence[Row]) -> tuple[str, ...]:
    """COLUMNS (with `measured` after the estimate when a row was run),
    saying whose bytes each counts where the arguments are sharded over
    several devices (Contract 17): XLA's peak and temp are one device's; the
    residual bytes are one device's where the avals say how they split, else
    (automatic sharding) the global array sizes, and called so."""
    n = spanned_devices(rows)
    heads: tuple[str, ...] = COLUMNS
    if any_measured(rows):
        at = COLUMNS.index("est. step") + 1
        heads = (*COLUMNS[:at], "measured", *COLUMNS[at:])
    names: dict[str, str] = {}
    if sharded(rows):
        names |= {"device": "device/device", "host": "host/device"}
    elif max(n, placed_over(rows)) > 1:
        names |= {"device": "device (global)", "host": "host (global)"}
    if n > 1:
        names |= {"peak": "peak/device", "temp": "temp/device"}
    return tuple(names.get(c, c) for c in heads)


def placed_over(rows: Sequence[Row]) -> int:
    """The most devices any row's automatically sharded arguments are placed
    over (1: none is): its residual bytes are then global array sizes."""
    return max((r.auto_sharded_devices for r in rows), default=1)


def sharded(rows: Sequence[Row]) -> bool:
    """Whether some row's residuals are sharded over several devices."""
    return any(r.sharded for r in rows)


def legend_devices(rows: Sequence[Row]) -> str:
    """The legend's sentence on whose bytes the columns count, or ''."""
    n = spanned_devices(rows)
    peak = f" The arguments are sharded over {n} devices: peak and temp are per device." if (
        n > 1) else ""  # fmt: skip
    if sharded(rows):
        return peak + (
            " The residuals are sharded over several devices: device/device and host/device "
            "are the bytes one device holds, as the Pareto front and suggest weigh them (their "
            "global array sizes are global_device_bytes and global_host_bytes in the JSON)."
        )
    if max(n, placed_over(rows)) > 1:
        return peak + (
            " device (global) and host (global) are the residuals' global array sizes "
            f"({PER_DEVICE_UNKNOWN})."
        )
    return ""


def peak_cell(row: Row) -> str:
    """The compiled peak; for a compile that ran out of memory, what XLA said
    it needed; for one that failed otherwise, that it failed."""
    compiled = row.compiled
    if row.refused:
        return "refused"
    if row.error is not None:
        return "compile failed"
    if compiled is None:
        return ""
    if not compiled.fits:
        needed = compiled.needed_bytes
        return f"✗ needs {human_bytes(needed)}" if needed else "✗ out of memory"
    return human_bytes(compiled.peak_bytes)


def row_notes(row: Row) -> list[str]:
    """The row's notes, with why it has no compiled peak when it has none."""
    compiled, measured = row.compiled, row.measured
    out = list(row.notes)
    if row.refused:
        out.insert(0, refusal_words(row))
    elif row.error is not None:
        out.insert(0, f"compile failed: {row.failure}")
    elif compiled and not compiled.fits:
        out.insert(0, f"does not fit {compiled.device}: {compiled.error}")
    elif measured and measured.error:
        out.insert(0, measured.error.replace("\n", " ").strip())
    return out


def refusal_words(row: Row) -> str:
    """Why a configuration has no numbers: what JAX said when it refused to
    trace it (Row.failure)."""
    return f"JAX refused it: {row.failure}"


def notes_cell(row: Row) -> str:
    """The row's notes in one cell: sentences joined by semicolons, each
    without its own full stop."""
    return "; ".join(note.rstrip().rstrip(".") for note in row_notes(row))


def most_at_peak(row: Row) -> str:
    """The category holding the most of the compiled peak (`residual 48%`), or ''."""
    memory = row.compiled.memory if row.compiled else None
    if not memory or not memory["peak_bytes"]:
        return ""
    category = largest_category(memory)
    return f"{category} {memory['by_category'][category] / memory['peak_bytes']:.0%}"


def time_cell(row: Row) -> str:
    """The step-time estimate (`~12.3 ms`: an estimate, and it says so), or ''."""
    return f"~{human_seconds(row.time.seconds)}" if row.time else ""


def measured_cell(row: Row, rank: dict | None = None) -> str:
    """`#1 1.23 ms (median 1.25 ms)`: the measured minimum, its rank among the
    measured rows, and the median; `✗ did not fit when run`; `run failed`; or ''."""
    m = row.measured
    if not m:
        return ""
    if m.min_seconds is not None:
        place = f"#{rank[id(row)]} " if rank and id(row) in rank else ""
        cell = f"{place}{human_seconds(m.min_seconds)}"
        if m.median_seconds is not None:
            cell += f" (median {human_seconds(m.median_seconds)})"
        if m.peak_bytes is not None:
            cell += f", peak {human_bytes(m.peak_bytes)}"
        return cell
    return "✗ did not fit when run" if not m.fits else "run failed"


def measured_ranks(rows: Sequence[Row]) -> dict[int, int]:
    """1 for the fastest measured row, 2 for the next, ... (by id)."""
    timed = [(m.min_seconds, r) for r in rows if (m := r.measured) and m.min_seconds is not None]
    timed.sort(key=lambda seconds_row: seconds_row[0])
    return {id(r): i + 1 for i, (_, r) in enumerate(timed)}


def time_legend(rows: Sequence[Row]) -> str:
    """The legend's sentences on the step-time estimate and the measured time,
    naming the chip, or ''."""
    timed = next((r.time for r in rows if r.time), None)
    text = ""
    if timed is not None:
        overlap = "plus" if timed.chip == "cpu" else "or, when slower,"
        text = (
            f" est. step: an estimate of one step's time on {timed.chip} by a roofline "
            "model (XLA's FLOPs at peak FLOP/s, its transcendentals at the chip's rate for "
            f"them, {overlap} its bytes accessed at memory bandwidth, plus offloaded bytes "
            "out and back over the host link, plus the bytes a device sends in collectives "
            "over the chip's interconnect; remat_tui/core/xla/estimates/step_time.py); FLOPs stay "
            "beside it."
        )
        rates = rates_words(timed)
        if rates:
            text += f" Its rates: {rates}."
    measured = [r.measured for r in rows if r.measured]
    if measured:
        runs = next((m.runs for m in measured if m.runs), 0)
        text += (
            f" measured: the fastest and the median of {runs} runs of the compiled step on "
            "the device, after a warm-up (#1 the fastest), and the peak memory the device "
            "reached where it keeps statistics; where a row was measured, its fastest run is "
            "its cost."
        )
        # Said once for the table: on the CPU no row can have a measured peak.
        unpeaked = {m.peak_note for m in measured if m.peak_note}
        if unpeaked and all(m.peak_bytes is None for m in measured):
            text += f" No measured peak: {'; '.join(sorted(unpeaked))}."
    return text


def row_cells(row: Row, rank: dict | None = None) -> tuple[str, ...]:
    """One row of the table, COLUMNS' cells (with the `measured` cell when
    `rank` is given: the rows were run)."""
    share = row.recompute_share
    compiled = row.compiled
    numbers = not row.refused  # a refused row has none: blanks, not zeros
    cells = [
        ("★" if row.pareto else "") + gradients_mark(row) + ("↻" if row.reruns_callbacks else ""),
        human_bytes(row.device_bytes) if numbers else "",
        human_bytes(row.host_bytes) if row.host_bytes else "",
        human_flops(row.recompute_flops) if numbers else "",
        "" if share is None else f"{share:.0%}",
        peak_cell(row),
        human_bytes(compiled.temp_bytes) if compiled and compiled.fits else "",
        most_at_peak(row),
        time_cell(row),
        config_label(row),
        notes_cell(row),
    ]
    if rank is not None:
        cells.insert(COLUMNS.index("est. step") + 1, measured_cell(row, rank))
    return tuple(cells)


def gradients_mark(row: Row) -> str:
    """With --verify: ✓ its gradients are the code as written's (bitwise or
    within tolerance), ≠ they differ, ? it could not be run; '' unverified."""
    verdict = row.gradients.verdict if row.gradients else None
    return {"equal": "✓", "agree": "✓", "differ": "≠", "not_run": "?"}.get(verdict or "", "")


def effects_legend(rows: Sequence[Row]) -> str:
    """The legend's sentence on ↻, where a row runs a call back to Python again."""
    if not any(r.reruns_callbacks for r in rows):
        return ""
    return (
        " ↻: its backward pass runs a call back to Python again (recomputed under a "
        "checkpoint; the notes say which): where the call reads Python state, its second "
        "value is not its first and the gradients move (remat-tui verify measures it)."
    )


def gradients_legend(rows: Sequence[Row]) -> str:
    """The legend's sentence on --verify's marks, where a row was verified."""
    if not any(r.gradients for r in rows):
        return ""
    return (
        " ✓: its step run on the device gives the code as written's loss and gradients "
        "(bitwise or within tolerance); ≠: they differ (never ★; the notes name the leaves); "
        "?: it could not be run (nothing claimed)."
    )


# ---- compare --------------------------------------------------------------------------


def compare_legend(rows: Sequence[Row]) -> str:
    """What the compare table's marks and columns mean (every format prints it)."""
    return (
        (
            "★ Pareto-optimal: no other row needs no more memory at no more cost (the "
            "measured step time where the rows were run, else the estimated one once "
            "compiled, else recompute FLOPs; host bytes break ties; an offload slower than "
            "recomputing is never ★, nor one with no host memory to go to). "
            "device/host: residual bytes saved by autodiff; recompute: forward FLOPs the "
            "backward pass does again; peak/temp: the compiled gradient alone (no optimizer "
            "state), or the training step for a target that says what it trains, when "
            "compiled; ✗: it does not fit the device."
        )
        + differentiated_legend(rows)
        + time_legend(rows)
        + legend_devices(rows)
        + gradients_legend(rows)
        + effects_legend(rows)
    )


def differentiated_legend(rows: Sequence[Row]) -> str:
    """The legend's sentence on what the compiled step differentiates, where
    that is not every argument as in the residual bytes; or ''."""
    d = next((r.compiled.differentiated for r in rows if r.compiled), None)
    if not d or d["every_argument"]:
        return ""
    return (
        f" The compiled step differentiates {arguments_words(d)} ({d['why']}); the residual "
        "bytes every argument, as jax.ad_checkpoint.print_saved_residuals differentiates them."
    )


def comparison_legend(c: Comparison) -> str:
    """A Comparison's legend: its marks and columns, its structures."""
    return compare_legend(c.rows) + structure_words(c.rows, c.structure_notes)


def structure_words(rows: Sequence[Row], notes: Sequence[str]) -> str:
    """After a legend: what a structure row is, where there is one, and why
    some scans get no structure."""
    words = ""
    if any(r.config.structure is not None for r in rows):
        words += (
            " nested(G): the scan as G checkpointed groups of its layers; split(K, a, b): "
            "its first K layers under policy a, the rest under b (each row's python is "
            "the code to write)."
        )
    return words + "".join(f" Structures: {n}" for n in notes)


def render_compare(c: Comparison, fmt: str, stopped_of: int | None = None) -> str:
    """`c` in format `fmt`; `stopped_of`: Ctrl-C stopped it, its rows being
    those made of this many planned (said in the header, and in the JSON as
    `cancelled` and `planned`)."""
    if fmt == "json":
        d = c.to_dict()
        if stopped_of is not None:
            d |= {"cancelled": True, "planned": stopped_of}
        return json.dumps(d, indent=2) + "\n"
    rank = measured_ranks(c.rows) if any_measured(c.rows) else None
    cells = [row_cells(r, rank) for r in c.rows]
    heads = columns(c.rows)
    title = target_label(c.target_file, c.target_name)
    legend = comparison_legend(c)
    made = count(len(c.rows), "configuration")
    if stopped_of is not None:
        done = f"{len(c.rows)} of {count(stopped_of, 'configuration')}"
        made = f"{done}: stopped by Ctrl-C"
        legend = f"Stopped by Ctrl-C after {done}. {legend}"
    if fmt == "text":
        lines = [f"compare  {title}  ({made}, {c.seconds:.1f} s)", ""]
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


# ---- diff -----------------------------------------------------------------------------


def render_diff(d: Diff, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(d.to_dict(), indent=2) + "\n"

    def listing(entries: list[dict]) -> list[str]:
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
