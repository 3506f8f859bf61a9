"""Provides the structures a search weighs (Contract 15), beside the policies:
for each scan of the program that a structure can rebuild, `nested(G)` for
the G worth trying and `split(K, saving, cheap)` for a grid of K, and the
notes that say why a scan gets none.

`split` puts the policy that saves more first: K is then the number of
layers that save (measured on tests/models/scan_stack.py, 16 layers: the
order changes the compiled peak by under 0.1%). The pairs tried are those a
budget just too small for the saving one asks for: everything saved against
the layer as written, and the layer as written against nothing saved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.structures import nested, split
from remat_tui.core.trace.configured import program_scans
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.trace.found_scan import FoundScan

AS_WRITTEN, EVERYTHING, NOTHING = policies.BUILTINS[0], policies.EVERYTHING, policies.NOTHING
COARSE, FINE = 4, 8  # the K grid: quarters of N (compare, fit), eighths (suggest)


def structure_candidates(target: Target, base: Config, fractions: int = COARSE) -> list[Config]:
    """`base` with each structure worth weighing on each scan that takes one:
    nested(G) for the scan's G (FoundScan.groups), split(K, a, b) for K at
    each 1/`fractions` of its layers and each pair of policies (`pairs`)."""
    if base.structure is not None:
        return []
    out = []
    for scan in program_scans(target, base):
        if scan.why_not:
            continue
        structures = [nested(g, scan.id) for g in scan.groups()]
        for first, rest in pairs(scan):
            structures += [split(k, first, rest, scan.id) for k in k_grid(scan.length, fractions)]
        out += [base.with_structure(s) for s in structures]
    return out


def pairs(scan: FoundScan) -> list[tuple[policies.PolicySpec, policies.PolicySpec]]:
    """The (saving, cheap) policy pairs split tries on `scan`: the layer as
    written between everything saved and nothing saved, where it is neither;
    a layer with no checkpoint saves everything as written."""
    if not scan.checkpointed:
        return [(AS_WRITTEN, NOTHING)]
    written = scan.checkpoint_policy
    if written == NOTHING.canonical:
        return [(EVERYTHING, AS_WRITTEN)]
    if written == EVERYTHING.canonical:
        return [(AS_WRITTEN, NOTHING)]
    return [(EVERYTHING, AS_WRITTEN), (AS_WRITTEN, NOTHING)]


def k_grid(length: int, fractions: int) -> list[int]:
    """K at each 1/`fractions` of `length` layers (rounded), 1 to length - 1."""
    return sorted({min(max(round(length * i / fractions), 1), length - 1)
                   for i in range(1, fractions)})  # fmt: skip


def structure_notes(target: Target, base: Config) -> list[str]:
    """Why each scan of at least MIN_LENGTH layers gets no structure, or no
    nested one (its layers make no equal groups)."""
    notes = []
    for scan in program_scans(target, base):
        name = f"scan {scan.id} ({scan.function}, {scan.length} layers"
        name += f", {scan.source.short()})" if scan.source else ")"
        if scan.why_not:
            notes.append(f"{name}: no structure offered: {scan.why_not}.")
        elif not scan.groups():
            notes.append(
                f"{name}: no nested structure: {scan.length} layers make no equal groups "
                "of at least two; split is offered."
            )
    return notes
