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
from remat_tui.core.setup.structure_specs import SPLIT, nested, split
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


def saves_at_least(config: Config, other: Config) -> bool:
    """Whether `config` is a split that saves, layer by layer, at least what
    `other` saves (`other` the same configuration as written or under a
    split of the same scan): its policy at every layer saves everything
    `other`'s does (everything saved over the layer as written over
    nothing saved). A budget `other` compiled over, `config` is taken not to
    fit (what a layer holds grows with what it saves). Layers are compared
    in runs between the splits' boundaries, each run taken to hold a layer
    (the scan's length is not needed: a run that is empty only asks more)."""
    mine = config.structure
    if (
        mine is None
        or mine.kind != SPLIT
        or config.with_structure(None) != other.with_structure(None)
    ):
        return False
    theirs = other.structure
    if theirs is None:
        runs_other = [(0, AS_WRITTEN)]
    elif theirs.kind == SPLIT and theirs.scan == mine.scan:
        runs_other = [(0, theirs.parts[0]), (theirs.count, theirs.parts[1])]
    else:
        return False
    runs_mine = [(0, mine.parts[0]), (mine.count, mine.parts[1])]
    starts = sorted({start for start, _ in (*runs_mine, *runs_other)})

    def at(runs: list[tuple[int, policies.PolicySpec]], layer: int) -> int | None:
        spec = [s for start, s in runs if start <= layer][-1]
        return _SAVING.get(spec.canonical)

    for layer in starts:
        ours, other_saves = at(runs_mine, layer), at(runs_other, layer)
        if ours is None or other_saves is None or ours < other_saves:
            return False
    return True


# How much each policy a split pairs saves, in order (any layer's policy lies
# between saving everything and saving nothing).
_SAVING = {NOTHING.canonical: 0, AS_WRITTEN.canonical: 1, EVERYTHING.canonical: 2}
