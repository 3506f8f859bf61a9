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
    from remat_tui.core.setup.structure_specs import Structure


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


# ---- whose bytes a figure counts: one device's, or the arrays' global sizes ----------
#
# Every byte figure is one device's unless it says in words that it is not
# (Contract 17). A residual's bytes on one device are known when its aval
# carries its sharding (explicit sharding: Residual.bytes_per_device,
# Analysis.sharded); the totals are then one device's, and the global array
# sizes are shown beside, called so. Under automatic sharding the arguments
# span several devices (the compiled program says how many) but the avals
# carry none: only the global array sizes are known, and they are called so.
# A global array size is one array's whole size, not a sum over devices (a
# replicated array is held whole on each).

SHARDED, GLOBAL, ONE = "sharded", "global", "one"
GLOBAL_SIZES = "global array sizes"
PER_DEVICE_UNKNOWN = "per device unknown: the avals carry no sharding"


def byte_scope(a: Analysis, devices: int | None = None) -> str:
    """SHARDED: per-device bytes known (some residual's aval is sharded), the
    global array sizes beside; GLOBAL: the program spans `devices` > 1
    devices but no aval says how the residuals split, so only the global
    array sizes are known; ONE: a single device (or nothing says otherwise):
    the bytes are that device's."""
    if a.sharded:
        return SHARDED
    if devices is not None and devices > 1:
        return GLOBAL
    return ONE


def spanned_devices(a: Analysis) -> int | None:
    """How many devices the compiled program spans; not compiled, how many
    the automatically sharded arguments are placed over where that is
    several; else None."""
    if a.compiled is not None:
        return a.compiled.devices
    return a.auto_sharded_devices if a.auto_sharded_devices > 1 else None


def in_global_sizes(nbytes: int) -> str:
    """`429.2 MiB in global array sizes`: a figure that is not one device's."""
    return f"{human_bytes(nbytes)} in {GLOBAL_SIZES}"


def whose(a: Analysis, nbytes: int) -> str:
    """`9.0 KiB per device`, or where only the global array sizes are known
    (automatic sharding over several devices), `36.0 KiB in global array
    sizes`: a total of `a`'s, saying whose it is."""
    if byte_scope(a, spanned_devices(a)) == GLOBAL:
        return in_global_sizes(nbytes)
    return f"{human_bytes(nbytes)} per device"


def residual_measure(auto_sharded_devices: int, sharded: bool) -> str:
    """What a residual budget is checked against, in words: one device's
    bytes, or, where the arguments are placed over several devices but no
    aval says how the residuals split (automatic sharding), their global
    array sizes (Contract 17: a figure that is not one device's says so)."""
    if auto_sharded_devices > 1 and not sharded:
        return f"residual bytes in {GLOBAL_SIZES}; {PER_DEVICE_UNKNOWN}"
    return "residual bytes per device"


def per_device_totals(a: Analysis) -> tuple[int, int, int]:
    """(device, host, excluding arguments): the bytes one device holds, each
    residual counted by its share (its whole bytes when it is not split)."""
    t = a.totals
    return (t.device_bytes, t.host_bytes, t.bytes_excluding_arguments)


def residual_bytes_heading(a: Analysis) -> str:
    """What the bytes of a residual table count, for its heading: empty on one
    device (they are that device's)."""
    scope = byte_scope(a, spanned_devices(a))
    if scope == SHARDED:
        return "bytes: global array size, then per device"
    if scope == GLOBAL:
        return f"bytes: global array size; {PER_DEVICE_UNKNOWN}"
    return ""


def summary(a: Analysis) -> str:
    """`5 residuals · 36.0 KiB device · 24.0 KiB excluding arguments · no
    recompute`; sharded, the per-device figures first, then the global array
    sizes; over several devices with no per-device figures, the global array
    sizes called so."""
    t = a.totals
    scope = byte_scope(a, spanned_devices(a))
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

    whole = figures(t.global_device_bytes, t.global_host_bytes, t.global_bytes_excluding_arguments)
    if scope == SHARDED:
        return (
            f"{count(t.count, 'residual')} · per device: {figures(*per_device_totals(a))} · "
            f"{GLOBAL_SIZES}: {whole} · {recompute}"
        )
    return (
        f"{count(t.count, 'residual')} · {GLOBAL_SIZES} ({PER_DEVICE_UNKNOWN}): "
        f"{whole} · {recompute}"
    )


def total_words(a: Analysis, lead: str = "") -> str:
    """`total: 36.0 KiB on device, 24.0 KiB excluding arguments` (after
    `lead`); sharded, one device's figures, then the global array sizes;
    over several devices with no per-device figures, the global array sizes
    called so."""
    t = a.totals
    scope = byte_scope(a, spanned_devices(a))

    def part(device: int, host: int, excluding: int) -> str:
        on_host = f" + {human_bytes(host)} on host" if t.host_bytes else ""
        excluding_words = f"{human_bytes(excluding)} excluding arguments"
        return f"{human_bytes(device)} on device{on_host}, {excluding_words}"

    if scope == ONE:
        return f"total: {lead}{part(*per_device_totals(a))}"
    whole = part(t.global_device_bytes, t.global_host_bytes, t.global_bytes_excluding_arguments)
    if scope == SHARDED:
        return f"total: {lead}per device: {part(*per_device_totals(a))}; {GLOBAL_SIZES}: {whole}"
    return f"total: {lead}{GLOBAL_SIZES} ({PER_DEVICE_UNKNOWN}): {whole}"


def structure_of(a: Analysis) -> Structure | None:
    """The structure an analysis's configuration rebuilds a scan with
    (`nested(4)`), or None."""
    return getattr(a.config, "structure", None)
