"""Provides the words of the status line: what the app is doing while it waits
(importing JAX, importing the target, building example arguments, tracing),
with a spinner and an honest clock per stage, and the summary of an analysis.

The summary uses the reports' own figures (report/units.py): the change from
`as_written` is of the bytes excluding arguments, which are in memory anyway.
"""

from __future__ import annotations

import time

from remat_tui.report.units import human_bytes, recompute_summary

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Activity:
    """The stage a worker reported last, and since when; None when idle."""

    def __init__(self) -> None:
        self.what: str | None = None
        self.since = 0.0

    def begin(self, what: str) -> None:
        if what != self.what:
            self.what, self.since = what, time.monotonic()

    def end(self) -> None:
        self.what = None

    def text(self, show_timings: bool, showing_last: bool) -> str | None:
        """`⠹ building example arguments 1.2 s`: the stage and the time spent in it
        (not since the key press: each stage is timed on its own)."""
        if self.what is None:
            return None
        elapsed = time.monotonic() - self.since
        spinner = SPINNER[int(elapsed * 10) % 10] if show_timings else "…"
        clock = f" {elapsed:.1f} s" if show_timings else ""
        last = "  (showing the last result until then)" if showing_last else ""
        return f"{spinner} {self.what}{clock}{last}"


def change(a, base) -> float | None:
    """The change in bytes excluding arguments from `base` (as_written), or None."""
    if base is None or a is base or not base.totals.bytes_excluding_arguments:
        return None
    was = base.totals.bytes_excluding_arguments
    return (a.totals.bytes_excluding_arguments - was) / was


def summary(a, base, show_timings: bool, compiled: str | None = None) -> str:
    """`15 residuals · 318.2 KiB device · 145.2 KiB excluding arguments (-60% vs
    as_written) · recompute 2.7 MFLOP (100% of forward) · traced in 0.03 s`; with
    `compiled` (the compiled peak, or that it is compiling) that leads instead."""
    t = a.totals
    per_device = f" ({human_bytes(t.device_bytes_per_device)}/device)" if a.sharded else ""
    parts = [f"{t.count} residuals", f"{human_bytes(t.device_bytes)} device{per_device}"]
    if compiled is not None:  # the compiled peak leads; residuals are what autodiff saves
        parts = [compiled, f"{human_bytes(t.device_bytes)}{per_device} saved by autodiff"]
    if t.host_bytes:
        parts.append(f"{human_bytes(t.host_bytes)} host")
    excluding = f"{human_bytes(t.bytes_excluding_arguments)} excluding arguments"
    delta = change(a, base)
    if delta is not None:
        excluding += f" ({delta:+.0%} vs as_written)"
    parts.append(excluding)
    parts.append(recompute_summary(a))
    if show_timings:
        parts.append(f"traced in {a.trace_seconds:.2f} s")
    return " · ".join(parts)


def nothing_shown(reloading: bool) -> str:
    """The status line when the first analysis failed: nothing is stale or loading."""
    how = "save the file to reload it" if reloading else "fix the file and start again"
    return f"Nothing analysed: the trace failed (above) · {how}, or press 0-9 for another policy"
