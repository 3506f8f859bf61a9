"""Provides the rows of a Compiled shown alone (`analysis.compiled` as a cell's
last line), without the analysis the reports' `report/compiled.details` reads
beside it (its FLOPs, step-time estimate and residual bytes): what XLA said of
the compiled program, in the reports' words."""

from __future__ import annotations

from typing import TYPE_CHECKING

from remat_tui.core.units import human_bytes, human_flops
from remat_tui.report import compiled as words

if TYPE_CHECKING:
    from remat_tui.core.xla.compile.compiled import Compiled


def headline(c: Compiled) -> str:
    where = c.device if c.devices == 1 else f"{c.device}, over {c.devices} devices"
    if not c.fits:
        return f"does not fit {where}: {words.needs(c)}"
    return f"peak {human_bytes(c.peak_bytes)} per device (compiled for {where})"


def compiled_rows(c: Compiled) -> list[tuple[str, str]]:
    """(label, value) rows of XLA's numbers for one compiled program."""
    if not c.fits:
        return [
            ("fits the device", f"no: {words.needs(c)}"),
            ("XLA says", c.error or ""),
            ("what was compiled", words.step_words(c)),
            ("compiled in", f"{c.seconds:.1f} s"),
        ]
    each = " per device" if c.devices > 1 else ""  # XLA's byte figures are one device's
    rows = [
        ("peak per device", f"{human_bytes(c.peak_bytes)} ({words.peak_words(c)})"),
        *words.allocations_row(c),
        *words.other_spaces(c),
        (f"temporaries{each}", human_bytes(c.temp_bytes)),
        (f"arguments{each}", human_bytes(c.argument_bytes)),
        (f"outputs{each}", human_bytes(c.output_bytes)),
        (f"aliased{each}", human_bytes(c.alias_bytes)),
        ("generated code", human_bytes(c.generated_code_bytes)),
    ]
    if c.host_temp_bytes:
        rows.append((f"host temporaries{each}", human_bytes(c.host_temp_bytes)))
    if c.flops is not None:
        rows.append(("FLOPs (XLA's count, a loop body once)", human_flops(int(c.flops))))
    return rows + [
        ("what was compiled", words.step_words(c)),
        ("compiled in", f"{c.seconds:.1f} s"),
    ]
