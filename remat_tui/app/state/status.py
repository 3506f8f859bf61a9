"""Provides the words of the status line: what the app is doing while it waits
(importing JAX, importing the target, building example arguments, tracing),
with a spinner and an honest clock per stage, and the summary of an analysis.

The summary uses the reports' own figures (report/phrases.py): the change from
`as_written` is of the bytes excluding arguments, which are in memory anyway.
Beside a per-device figure (the compiled peak, or a sharded residual's share)
every byte figure says whose it is: `/device` when one device's bytes are
known, `in global array sizes` when only those are (arguments sharded
automatically: the avals carry no sharding, report/phrases.py byte_scope).
"""

from __future__ import annotations

import functools
import time

from remat_tui.core.model import Analysis
from remat_tui.core.units import count, human_bytes, human_seconds
from remat_tui.report.phrases import (
    GLOBAL,
    GLOBAL_SIZES,
    SHARDED,
    in_global_sizes,
    per_device_totals,
    recompute_summary,
)

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


def change(a: Analysis, base: Analysis | None) -> float | None:
    """The change in bytes excluding arguments from `base` (as_written), or None."""
    if base is None or a is base or not base.totals.bytes_excluding_arguments:
        return None
    was = base.totals.bytes_excluding_arguments
    return (a.totals.bytes_excluding_arguments - was) / was


PLAIN, ONE_DEVICE = "plain", "one device"


def summary(
    a: Analysis,
    base: Analysis | None,
    show_timings: bool,
    compiled: str | None = None,
    devices: int | None = None,
) -> str:
    """`15 residuals · 318.2 KiB device · 145.2 KiB excluding arguments (-60% vs
    as_written) · recompute 2.7 MFLOP (100% of forward) · traced in 0.03 s`; with
    `compiled` (the compiled peak per device, or that it is compiling) that leads
    instead, and the residual bytes say whose they are. `devices`: how many
    devices the compiled program spans (Compiled.devices) when the caller knows;
    else one when the device's set has one device, and unknown otherwise."""
    t = a.totals
    scope = residual_scope(a, compiled, devices)
    delta = change(a, base)
    versus = f" ({delta:+.0%} vs as_written)" if delta is not None else ""
    lead = [compiled] if compiled is not None else [count(t.count, "residual")]
    saved = " saved by autodiff" if compiled is not None else ""
    if scope == PLAIN:
        parts = [*lead, f"{human_bytes(t.device_bytes)} device{saved}"]
        if t.host_bytes:
            parts.append(f"{human_bytes(t.host_bytes)} host")
        parts.append(f"{human_bytes(t.bytes_excluding_arguments)} excluding arguments{versus}")
    elif scope == GLOBAL:  # several devices, and no per-device residual bytes
        figures = [human_bytes(t.device_bytes) + (" device" if t.host_bytes else "")]
        if t.host_bytes:
            figures.append(f"{human_bytes(t.host_bytes)} host")
        figures.append(f"{human_bytes(t.bytes_excluding_arguments)} excluding arguments{versus}")
        where = f"{saved} in {GLOBAL_SIZES}".strip()
        parts = [*lead, f"{where}: " + ", ".join(figures)]
    else:  # one device's bytes known: sharded avals, or a program on one device
        device, host, excluding = per_device_totals(a)
        whole = ""
        if scope == SHARDED:
            whole = f" ({in_global_sizes(t.global_device_bytes)})"
        parts = [*lead, f"{human_bytes(device)}/device{saved}{whole}"]
        if t.host_bytes:
            parts.append(f"{human_bytes(host)}/device host")
        parts.append(f"{human_bytes(excluding)}/device excluding arguments{versus}")
    parts.append(recompute_summary(a))
    if show_timings:
        parts.append(f"traced in {a.trace_seconds:.2f} s")
    return " · ".join(parts)


def estimate_parts(t: dict | None) -> str | None:
    """`est. ~12.3 ms (compute 9.1 ms, memory 1.2 ms, collectives 2.0 ms for
    1.2 MiB/device)`: the step-time estimate (core/xla/estimates/step_time.py's
    StepTime, as a dict) in its parts, for a program whose devices send
    collectives: on a mesh the network's share is what remat costs beyond
    FLOPs (a recomputed layer gathers its weights again). None where no
    collective is sent, so a one-device headline stays short."""
    if not t or not t.get("collective_bytes"):
        return None
    parts = [
        ("compute", t["compute_seconds"]),
        ("transcendentals", t["transcendental_seconds"]),
        ("memory", t["memory_seconds"]),
        ("host", t["host_seconds"]),
    ]
    words = [f"{name} {_seconds(s)}" for name, s in parts if s]
    timed = (t.get("interconnect") or {}).get("bytes_per_second")
    sent = human_bytes(int(t["collective_bytes"]))
    collectives = _seconds(t["collective_seconds"]) if timed else "not timed"
    words.append(f"collectives {collectives} for {sent}/device")
    if t.get("overhead_seconds"):
        words.append(f"overhead {_seconds(t['overhead_seconds'])}")
    return f"est. ~{_seconds(t['seconds'])} ({', '.join(words)})"


def _seconds(s: float) -> str:
    """human_seconds, with a part under a microsecond in nanoseconds (a small
    program's collectives): `0 µs` would hide that there is one."""
    return f"{s * 1e9:.3g} ns" if 0 < s < 1e-6 else human_seconds(s)


def residual_scope(a: Analysis, compiled: str | None, devices: int | None) -> str:
    """SHARDED: the avals say what each device holds; PLAIN: no per-device
    figure is shown, so bytes need no label; ONE_DEVICE: beside the compiled
    peak, on one device (its bytes are the global ones); GLOBAL: beside the
    compiled peak, over several devices (or possibly several) with no
    per-device residual bytes known, or, not compiled, with arguments
    sharded automatically over several devices (the residual bytes are
    global array sizes)."""
    if a.sharded:
        return SHARDED
    if compiled is None:
        return GLOBAL if a.auto_sharded_devices > 1 else PLAIN
    if devices is None:
        devices = 1 if device_count(a.device) == 1 else None
    return ONE_DEVICE if devices == 1 else GLOBAL


def device_count(device: dict) -> int | None:
    """How many devices a target on `device` could span: a topology's chips,
    or the local devices of its platform (what an args factory's `devices`
    receives); None when that cannot be told."""
    if device.get("chips"):
        return device["chips"]
    platform = device.get("platform")
    return _local_devices(platform) if platform else None


@functools.lru_cache(maxsize=8)
def _local_devices(platform: str) -> int | None:
    from remat_tui.core.setup.devices import local_device_count

    return local_device_count(platform)


def nothing_shown(reloading: bool) -> str:
    """The status line when the first analysis failed: nothing is stale or loading."""
    how = "save the file to reload it" if reloading else "fix the file and start again"
    return f"Nothing analysed: the trace failed (above) · {how}, or press 0-9 for another policy"
