"""Provides the phrases a report says an analysis in: a residual's what,
where and origin, a site's row, the marks beside a line, whose bytes the
totals are, the one-line summary, a change with its sign and a share. The
formats of sizes, FLOPs and times are core/units.py's."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from remat_tui.core.model import Analysis, JaxprView, Residual, Site
from remat_tui.core.units import count, human_bytes, human_flops

if TYPE_CHECKING:
    from remat_tui.core.setup.structures import Structure


def signed(n: int, human: Callable[[int], str]) -> str:
    """A change with its sign: `+24.0 MiB`, `-12.9 GFLOP` (`human` formats the size)."""
    return f"{'+' if n >= 0 else '-'}{human(abs(n))}"


def percent(part: float, whole: float) -> str:
    """`35%`, `3.5%`, `0.4%`, `<0.1%`: a share, with its precision where it matters."""
    share = 100 * part / whole
    if share == 0:
        return "0%"
    if share < 0.1:
        return "<0.1%"
    return f"{share:.1f}%" if share < 10 else f"{share:.0f}%"


def recompute_summary(a: Analysis) -> str:
    """`recompute 1.2 GFLOP (35% of forward)`, or `no recompute`: the forward
    work the backward pass does again. `≈` marks a count with a while loop's
    body counted once (its trip count is unknown)."""
    flops = a.flops["recompute"]
    if not flops and not a.backward.recompute_eqns:
        return "no recompute"
    approx = "" if a.flops_exact else "≈"
    forward = a.flops["forward"]
    share = f" ({percent(flops, forward)} of forward)" if forward else ""
    return f"recompute {approx}{human_flops(flops)}{share}"


def what(r: Residual) -> str:
    """The residual's origin in a few words: primitive, name or argument."""
    if r.kind == "named":
        return f"name '{r.name}'"
    if r.kind == "argument":
        return r.argument or "argument"
    if r.kind in ("literal", "constant"):
        return r.kind
    return r.primitive or r.kind


def where(r: Residual) -> str:
    return r.source.short() if r.source else ""


def origin(r: Residual) -> str:
    """Where the value was really computed: `name 'qkv' ×4  model.py:45`."""
    return r.origin.label() if r.origin else ""


SITE_HEADERS = (
    "site",
    "function",
    "line",
    "policy in the code",
    "×",
    "analysed with",
    "forward FLOPs",
    "recompute FLOPs",
)


def site_row(site: Site) -> tuple[str, ...]:
    """One site as every report tabulates it (SITE_HEADERS): its body's forward
    FLOPs (x its trip count) and what the backward pass re-runs there
    (core/costs/site_flops.py) last."""
    f = site.flops
    if f is None:
        costs = ("", "")
    else:
        again = "unknown" if f.recompute is None else human_flops(f.recompute)
        costs = (human_flops(f.forward), again)
    return (
        str(site.id),
        site.function,
        site.source.short() if site.source else "",
        site.policy,
        str(site.trip_count) if site.trip_count else "",
        site.override if site.override is not None else "(as in the code)",
        *costs,
    )


RECOMPUTE_MARK = "↻"
FROM_HOST_MARK = "⇠ from host"  # a transfer of an offloaded residual, not recomputation


def line_marks(view: JaxprView, line: int) -> str:
    """What the reports write after a jaxpr line: `◀ R1,R2` where it defines
    (forward) or reads (backward) residuals, `↻` where it recomputes, `⇠ from
    host` where it brings an offloaded residual back from host memory. Only
    where an equation begins (`view.mark_lines`): a remat equation spans its
    body's lines, and marking each of them repeated `◀ Rn` down the pane."""
    if line not in view.mark_lines:
        return ""
    marks = []
    if line in view.residual_lines:
        marks.append("◀ " + ",".join(f"R{k + 1}" for k in view.residual_lines[line]))
    if line in view.recompute_lines:
        marks.append(RECOMPUTE_MARK)
    if line in view.transfer_lines:
        marks.append(FROM_HOST_MARK)
    return " ".join(marks)


# ---- whose bytes a figure counts: one device's, or all devices' ------------------------
#
# A residual's bytes on one device are known only when its aval carries its
# sharding (explicit sharding: Residual.bytes_per_device, Analysis.sharded).
# Under automatic sharding the arguments span several devices (the compiled
# program says how many) but the avals carry none: only the global figures are
# known. Every view that puts residual bytes beside a per-device figure (the
# compiled peak) says which they are, by these helpers.

SHARDED, GLOBAL, ONE = "sharded", "global", "one"
PER_DEVICE_UNKNOWN = "per device unknown: the avals carry no sharding"


def byte_scope(a: Analysis, devices: int | None = None) -> str:
    """SHARDED: per-device bytes known (some residual's aval is sharded), the
    global ones beside; GLOBAL: the program spans `devices` > 1 devices but no
    aval says how the residuals split, so only global bytes are known; ONE:
    a single device (or nothing says otherwise): the bytes are that device's."""
    if a.sharded:
        return SHARDED
    if devices is not None and devices > 1:
        return GLOBAL
    return ONE


def spanned_devices(a: Analysis) -> int | None:
    """How many devices the compiled program spans; None when not compiled."""
    return None if a.compiled is None else a.compiled.devices


def all_devices(devices: int | None) -> str:
    """`across all 4 devices`, or `across all devices` when the count is unknown."""
    return f"across all {devices} devices" if devices and devices > 1 else "across all devices"


def per_device_totals(a: Analysis) -> tuple[int, int, int]:
    """(device, host, excluding arguments): the bytes one device holds, each
    residual counted by its share (its whole bytes when it is not split)."""
    rs = a.residuals
    return (
        a.totals.device_bytes_per_device,
        sum(r.device_share for r in rs if r.memory == "host"),
        sum(r.device_share for r in rs if r.kind != "argument"),
    )


def residual_bytes_heading(a: Analysis) -> str:
    """What the bytes of a residual table count, for its heading: empty on one
    device (they are that device's)."""
    devices = spanned_devices(a)
    scope = byte_scope(a, devices)
    if scope == SHARDED:
        return f"bytes {all_devices(devices)}, then per device"
    if scope == GLOBAL:
        return f"bytes {all_devices(devices)}; {PER_DEVICE_UNKNOWN}"
    return ""


def summary(a: Analysis) -> str:
    """`5 residuals · 36.0 KiB device · 24.0 KiB excluding arguments · no
    recompute`; sharded, the per-device figures first, then those across all
    devices; over several devices with no per-device figures, the global ones
    labelled as such."""
    t = a.totals
    devices = spanned_devices(a)
    scope = byte_scope(a, devices)
    recompute = recompute_summary(a)
    if scope == ONE:
        host = f" + {human_bytes(t.host_bytes)} host" if t.host_bytes else ""
        return (
            f"{count(t.count, 'residual')} · {human_bytes(t.device_bytes)} device{host} · "
            f"{human_bytes(t.bytes_excluding_arguments)} excluding arguments · {recompute}"
        )

    def figures(device: int, host: int, excluding: int) -> str:
        host_part = [f"{human_bytes(host)} host"] if t.host_bytes else []
        return ", ".join(
            [f"{human_bytes(device)} device", *host_part,
             f"{human_bytes(excluding)} excluding arguments"]
        )  # fmt: skip

    everywhere = figures(t.device_bytes, t.host_bytes, t.bytes_excluding_arguments)
    if scope == SHARDED:
        return (
            f"{count(t.count, 'residual')} · per device: {figures(*per_device_totals(a))} · "
            f"{all_devices(devices)}: {everywhere} · {recompute}"
        )
    return (
        f"{count(t.count, 'residual')} · {all_devices(devices)} ({PER_DEVICE_UNKNOWN}): "
        f"{everywhere} · {recompute}"
    )


def structure_of(a: Analysis) -> Structure | None:
    """The structure an analysis's configuration rebuilds a scan with
    (`nested(4)`), or None."""
    return getattr(a.config, "structure", None)
