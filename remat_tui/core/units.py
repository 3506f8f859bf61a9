"""Provides human-readable sizes, FLOPs and times, and size parsing: pure
formatting that the core's own sentences (notes) and every view share.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from remat_tui.errors import RematError


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 configuration`, `2 configurations`, `1 batch`, `3 batches`: a count
    with its noun agreeing (`plural` where adding s is wrong)."""
    if n == 1:
        return f"1 {noun}"
    return f"{n} {plural or noun + 's'}"


def human_bytes(n: int) -> str:
    """1023 B, 1.2 KiB, 3.4 MiB, ... (binary units, as accelerator memory is sold)."""
    return _with_digits(n, 1)


def told_apart(*sizes: int) -> list[str]:
    """The sizes in human_bytes' units with as many decimals as it takes to
    tell apart the ones that differ (up to 3; beyond, in bytes): a budget of
    2.25e9 B and a smallest of 2.21e9 B are `2.10 GiB` and `2.06 GiB`, not
    both `2.1 GiB`."""
    for digits in (1, 2, 3):
        shown = [_with_digits(n, digits) for n in sizes]
        if len(set(shown)) == len(set(sizes)):
            return shown
    return [f"{n:,} B" for n in sizes]


def _with_digits(n: int, digits: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.{digits}f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


_SIZE_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip


def parse_size(text: str) -> int:
    """`512MiB`, `2GiB`, `1.5e9`, `4096` -> bytes; a RematError says what was expected."""
    if text.strip().startswith("-"):
        raise RematError(f"size {text!r}: a size cannot be negative; give bytes, e.g. 512MiB.")
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _SIZE_UNITS:
        raise RematError(
            f"size {text!r}: expected a number of bytes with an optional unit, "
            "e.g. 512MiB, 2GiB, 1.5e9 or 4096 (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)."
        )
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


def human_flops(n: float) -> str:
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


def axis_unit(largest: float, units: Sequence[tuple[str, float]]) -> tuple[str, float]:
    """(unit, its size) that shows `largest` as a number below 1024 (bytes) or
    1000 (FLOPs): a chart's axis in GiB or TFLOP, never 144971.3 MiB."""
    chosen = units[0]
    for unit in units:
        if largest >= unit[1]:
            chosen = unit
    return chosen


def human_seconds(s: float) -> str:
    """`850 µs`, `12.3 ms`, `4.56 s`: a duration with three figures or so."""
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"
