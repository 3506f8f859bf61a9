"""Provides each residual's story (Contract 14) in words, for every report
format and the app's panel: why it is saved (the rule), what made it (the
equation and the user's frames around it), what reads it in the backward
pass, and, once compiled, what XLA made of it, with a mark where the jaxpr
and the compile disagree.
"""

from __future__ import annotations

import os

from remat_tui.core.model import Analysis, Residual, Source
from remat_tui.core.units import human_bytes

READERS_SHOWN = 4  # readers named in a line, then "and N more"
DISAGREES = "jaxpr ≠ XLA"  # the mark where the jaxpr saves what the compile does not keep


def made_words(r: Residual) -> str | None:
    """`tanh at mlp.py:34 (layer) ← mlp.py:40 (loss)`: the equation that made
    it and the calls that led there; None for an argument or a constant."""
    made = r.story.made if r.story is not None else None
    if made is None or made.primitive is None:
        return None
    if not made.frames:
        return made.primitive
    first, *rest = made.frames
    chain = "".join(f" ← {_where(f)} ({f.function})" for f in rest)
    return f"{made.primitive} at {_where(first)} ({first.function}){chain}"


def reader_words(r: Residual) -> str:
    """`mul at line 51 (mlp.py:34), ↻ sin at line 7`: the backward equations
    reading it, `↻` where one re-runs forward work."""
    readers = r.story.readers if r.story is not None else ()
    if not readers:
        return (
            "nothing in the backward jaxpr (JAX saves it, but the backward pass does not read it)"
        )
    shown = []
    for reader in readers[:READERS_SHOWN]:
        where = f" ({_where(reader.source)})" if reader.source else ""
        again = "↻ " if reader.recomputes else ""
        shown.append(f"{again}{reader.primitive} at line {reader.line + 1}{where}")
    more = len(readers) - READERS_SHOWN
    return ", ".join(shown) + (f", and {more} more" if more > 0 else "")


def fate_words(r: Residual) -> str | None:
    """What XLA made of it, marked where the jaxpr and the compile disagree;
    None before a compile."""
    fate = r.story.xla if r.story is not None else None
    if fate is None:
        return None
    mark = f" [{DISAGREES}]" if fate.disagrees else ""
    return f"{fate.what}: {fate.words}{mark}"


def lines(r: Residual, index: int) -> list[tuple[str, str]]:
    """(label, words) rows of residual `index`'s story."""
    if r.story is None:
        return []
    rows = [("saved", r.story.rule.words)]
    made = made_words(r)
    if made:
        rows.append(("made by", made))
    rows.append(("read by", reader_words(r)))
    gathered = r.story.made.gathered_bytes if r.story.made is not None else None
    if gathered:
        rows.append(("gathered", gathered_words(gathered)))
    if r.story.runs_again:
        rows.append(("again", runs_again_words(r.story.runs_again)))
    fate = fate_words(r)
    if fate:
        rows.append(("XLA", fate))
    return rows


def runs_again_words(callbacks: tuple[str, ...]) -> str:
    """What recomputing from a residual runs again (issue 43)."""
    return (
        f"recomputation runs them again: {' and '.join(callbacks)}, recomputed from it in the "
        "backward pass, calls back to Python a second time"
    )


def effect_lines(a: Analysis) -> list[str]:
    """`pure_callback at model.py:39 runs again in the backward pass: ...`:
    each call back to Python this configuration runs again."""
    return [e.words() for e in getattr(a, "effects", ()) if e.reruns]


EFFECTS_HEADING = "effects under a checkpoint (recomputation runs them again)"


def gathered_words(per_device: int) -> str:
    """What a residual gathered from the devices' shards costs again when
    recomputed (core/jaxcompat/gathers.py)."""
    return (
        "a gathered value (the devices' shards put together, an all-gather): recomputing "
        f"it gathers it again ({human_bytes(per_device)} per device)"
    )


def applied_lines(a: Analysis) -> list[str]:
    """`name 'typo' in the outer policy: no checkpoint_name('typo') runs ...`:
    each part of the configuration that changes nothing, and why."""
    return [f"{v.what}: {v.why}" for v in getattr(a, "applied", ())]


APPLIED_HEADING = "changes nothing (did it apply?)"


def disagreements(residuals: list[Residual]) -> int:
    return sum(
        1 for r in residuals if r.story is not None and r.story.xla and r.story.xla.disagrees
    )


HOW_TO_READ = (
    "saved: the rule of the policy in effect that saved it (or why no policy decides); "
    "made by: the equation that computed it, and the calls that led there; read by: the "
    "backward equations that use it (↻: they re-run forward work); XLA: what the compiled "
    f"step did with it. [{DISAGREES}] marks a residual the jaxpr saves but the compiled step "
    "keeps no buffer of into its backward part (XLA recomputes it, fuses it into what reads "
    "it, or removed it): its bytes are not in the compiled peak."
)


def _where(source: Source) -> str:
    return f"{os.path.basename(source.file)}:{source.line}"
