"""Provides human-readable sizes and FLOPs, and the one-line residual summary."""

from __future__ import annotations

from remat_tui.core.model import Analysis, JaxprView, Residual, Site


def human_bytes(n: int) -> str:
    """1023 B, 1.2 KiB, 3.4 MiB, ... (binary units, as accelerator memory is sold)."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


_SIZE_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip


def parse_size(text: str) -> int:
    """`512MiB`, `2GiB`, `1.5e9`, `4096` -> bytes; a RematError says what was expected."""
    import re

    from remat_tui.errors import RematError

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _SIZE_UNITS:
        raise RematError(
            f"size {text!r}: expected a number of bytes with an optional unit, "
            "e.g. 512MiB, 2GiB, 1.5e9 or 4096 (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)."
        )
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


def human_flops(n: int) -> str:
    """950 FLOP, 1.2 kFLOP, 3.4 GFLOP, ... (decimal units, as FLOP rates are quoted)."""
    size = float(n)
    for unit in ("FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"):
        if abs(size) < 1000 or unit == "EFLOP":
            return f"{int(size)} {unit}" if unit == "FLOP" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


BYTE_UNITS = (("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40))
FLOP_UNITS = (("FLOP", 1), ("kFLOP", 1e3), ("MFLOP", 1e6), ("GFLOP", 1e9), ("TFLOP", 1e12),
              ("PFLOP", 1e15))  # fmt: skip


def axis_unit(largest: float, units) -> tuple[str, float]:
    """(unit, its size) that shows `largest` as a number below 1024 (bytes) or
    1000 (FLOPs): a chart's axis in GiB or TFLOP, never 144971.3 MiB."""
    chosen = units[0]
    for unit in units:
        if largest >= unit[1]:
            chosen = unit
    return chosen


def signed(n: int, human) -> str:
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
    (core/site_flops.py) last."""
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


def line_marks(view: JaxprView, line: int) -> str:
    """What the reports write after a jaxpr line: `◀ R1,R2` where it defines
    (forward) or reads (backward) residuals, `↻` where it recomputes."""
    marks = []
    if line in view.residual_lines:
        marks.append("◀ " + ",".join(f"R{k + 1}" for k in view.residual_lines[line]))
    if line in view.recompute_lines:
        marks.append("↻")
    return " ".join(marks)


def summary(a: Analysis) -> str:
    t = a.totals
    host = f" + {human_bytes(t.host_bytes)} host" if t.host_bytes else ""
    per_device = f" ({human_bytes(t.device_bytes_per_device)} per device)" if a.sharded else ""
    return (
        f"{t.count} residuals · {human_bytes(t.device_bytes)} device{per_device}{host} · "
        f"{human_bytes(t.bytes_excluding_arguments)} excluding arguments · "
        f"{recompute_summary(a)}"
    )
