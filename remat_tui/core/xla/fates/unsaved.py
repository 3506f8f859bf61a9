"""Provides what the forward values the compiled step keeps for its backward
part hold where they hold no residual's own value (`xla.fates.residuals` ties
the rest), for their buffers at the peak to say:

- the input of residuals XLA recomputes from it (`kept_inputs`): the jaxpr
  saves the softmax's outputs, XLA keeps the masked scores they are computed
  from and computes them again inside the backward fusions that read them.
  A buffer names such a residual only where the compiled program shows it:
  the residual is computed from this value in the jaxpr (a few equations
  back), the compiled step keeps no value of the residual's own, and either
  the backward part computes the residual's equation from this buffer, or
  the residual is a function of this value alone (and constants) whose
  computation XLA folded into the backward work that reads this buffer;
- a recomputation XLA merged with the forward computation (common
  subexpression elimination: the jaxpr recomputes it, XLA keeps it);
- one of several alike values whose residual XLA does not tell apart;
- a value autodiff saves none of, kept rather than recomputed.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import TYPE_CHECKING, Protocol

from remat_tui.core.model import Residual
from remat_tui.core.stories import (
    FUSED,
    INPUT_KEPT,
    KEPT,
    MERGED,
    RECOMPUTED,
    REMOVED,
    Fate,
    Reader,
    Story,
)
from remat_tui.core.units import human_bytes
from remat_tui.core.xla.fates.value_keys import (
    as_xla_names,
    keys,
    matches,
    per_device,
    same_frames,
    shown,
    sig,
    signature,
    signatures,
    unique,
)

if TYPE_CHECKING:
    from remat_tui.core.xla.buffers.made import ForwardValue

ALIKE = "one of several alike values: which residual it holds, XLA does not say"


class Linking(Protocol):
    """What this module reads and fills of a fates.Linked (which imports
    this module, so it is named by its shape here)."""

    residuals: list[Residual]
    recomputed: list[tuple]
    merged_recompute: list[dict]
    fates: list[Fate | None]
    exact: dict[str, int]
    named: dict[str, int]
    unnamed: dict[str, str]
    inputs: dict[str, int]
    devices: int

    def peak_bytes_of(self, m: ForwardValue) -> int: ...


def explain(linked: Linking, forward: dict) -> None:
    """Why each kept forward value `linked` (a fates.Linked) names no
    residual's own value, or the residual whose input it holds."""
    told = linked.exact.keys() | linked.named.keys()
    # (primitive, elements) -> the keys of the residuals no buffer is tied to
    # yet: a kept value alike to those may hold one of them
    by_key: dict[tuple, set] = defaultdict(set)
    for r, fate in zip(linked.residuals, linked.fates, strict=True):
        if r.story is None or (fate is not None and fate.what in (KEPT, MERGED)):
            continue
        sigs = tuple(signatures(r.story.made))
        for key in sigs:
            for count in per_device(key[2], linked.devices):
                by_key[(key[0], count)].add(sigs)
    plain = []
    for m in unique(m for records in forward.values() for m in records):
        if not m.kept or any(k in told for k in (m.key, *m.values)):
            continue
        if any(matches(sigs, m, linked.devices) for key in keys(m) for sigs in by_key.get(key, ())):
            _say(linked, m, ALIKE)
        elif matches(linked.recomputed, m, linked.devices):
            _merged_recompute(linked, m)
        else:
            plain.append(m)
    tied = kept_inputs(linked, plain)
    for m in plain:
        if id(m) not in tied:
            _say(linked, m, tied.get(("alike", id(m))) or _no_residual(m))


def _no_residual(m: ForwardValue) -> str:
    return (
        f"no residual: XLA keeps this forward value ({_at(m)}) for the backward part, "
        "where autodiff saves none of it (XLA keeps it rather than recompute it from "
        "what autodiff saves)"
    )


def _say(linked: Linking, m: ForwardValue, why: str) -> None:
    for k in (m.key, *m.values):
        linked.unnamed[k] = why


def _at(m: ForwardValue) -> str:
    where = f" at {os.path.basename(m.frames[0][0])}:{m.frames[0][1]}" if m.frames else ""
    return f"{m.primitive}{where}"


def _merged_recompute(linked: Linking, m: ForwardValue) -> None:
    """A kept forward value the backward jaxpr recomputes: XLA merged the
    recomputation with the forward computation (common subexpression
    elimination) and keeps the forward value instead."""
    _say(
        linked,
        m,
        f"no residual: the jaxpr recomputes this value ({_at(m)}) in the backward "
        "part, and XLA merged that recomputation with the forward computation (common "
        "subexpression elimination): it keeps the forward value instead",
    )
    linked.merged_recompute.append({
        "value": _at(m),
        "instruction": shown(m.key),
        "bytes_at_peak": linked.peak_bytes_of(m),
    })  # fmt: skip


# ---- inputs kept instead of residuals ------------------------------------------------

_NOT_KEPT = (FUSED, RECOMPUTED, REMOVED)


def kept_inputs(linked: Linking, values: list) -> dict:
    """Tie kept values to the residuals whose input they hold (see the
    module's docstring): their buffers name the residual (`linked.inputs`)
    and the residuals' fates say so. Returns {id(value): True} for each value
    tied, and {("alike", id(value)): why} for one among alike values and
    residuals in unequal numbers."""
    # Alike residuals (one layer's for each layer) are keyed once, as a group.
    groups: dict[tuple, tuple[_Keyed, list[int]]] = {}
    for i, r in enumerate(linked.residuals):
        fate = linked.fates[i]
        made = r.story.made if r.story is not None else None
        if fate is None or fate.what not in _NOT_KEPT or made is None or not made.inputs:
            continue
        alike = (signature(made), made.inputs, made.from_one, fate.what == REMOVED)
        if alike not in groups:
            groups[alike] = (_Keyed(r.story, fate, linked.devices), [])
        groups[alike][1].append(i)
    # (primitive, elements) of an input -> the groups computed from such a value
    wanted: dict[tuple, list[tuple]] = defaultdict(list)
    for alike, (keyed, _) in groups.items():
        for key in keyed.inputs:
            wanted[key].append(alike)
    blocks: dict[tuple, list] = defaultdict(list)  # (value's group, residuals' key) -> links
    for m in values:
        for alike in unique(g for key in keys(m) for g in wanted.get(key, ())):
            keyed, indices = groups[alike]
            how = keyed.made_from(m)
            if how:
                group = (m.primitive, m.elements, m.frames)
                blocks[(group, alike[0])].extend((m, i, how) for i in indices)
    tied: dict = {}
    by_value: dict[int, list] = defaultdict(list)
    for links in blocks.values():
        values_in = sorted(unique(m for m, _, _ in links), key=lambda m: m.start)
        residuals_in = sorted({i for _, i, _ in links}, key=lambda i: _place(linked, i))
        how_of = {(id(m), i): how for m, i, how in links}
        if len(values_in) != len(residuals_in):
            names = ", ".join(f"R{i + 1}" for i in residuals_in[:4])
            for m in values_in:
                tied[("alike", id(m))] = (
                    f"holds what one of {len(residuals_in)} alike residuals ({names}"
                    f"{', ...' if len(residuals_in) > 4 else ''}) is computed from, "
                    f"against {len(values_in)} such values: which, XLA does not say"
                )
            continue
        for m, i in zip(values_in, residuals_in, strict=True):
            if (id(m), i) in how_of:
                by_value[id(m)].append((m, i, how_of[(id(m), i)]))
    _name(linked, by_value, tied)
    return tied


def _index(sigs: list[tuple], devices: int) -> dict[tuple, list]:
    """(primitive, elements on one device of `devices`) -> the frames of each
    key in `sigs` with them."""
    out: dict[tuple, list] = defaultdict(list)
    for s in sigs:
        for count in per_device(s[2], devices):
            out[(s[0], count)].append(s[3])
    return out


def _found(index: dict, p: str, n: int, frames: tuple) -> bool:
    return any(same_frames(ours, frames) for ours in index.get((p, n), ()))


class _Keyed:
    """A residual with no buffer of its own, keyed once: the keys of the
    values it is computed from (its first operand's apart), and its own."""

    def __init__(self, story: Story, fate: Fate, devices: int):
        made = story.made
        assert made is not None  # kept_inputs keys only residuals with their Made
        self.story, self.fate = story, fate
        self.inputs = _index(as_xla_names([sig(*what) for what in made.inputs]), devices)
        self.own = _index(signatures(made), devices)
        alone = made.from_one and fate.what == REMOVED
        self.first = _index(as_xla_names([sig(*made.inputs[0])]), devices) if alone else {}

    def made_from(self, m: ForwardValue) -> str | None:
        """How the compiled step makes this residual from the kept value `m`
        (computed from it in the jaxpr): `recomputed` where the backward
        part computes the residual's equation from it, `folded` where the
        residual is a function of it alone that XLA removed, the backward
        part reading `m` where the jaxpr reads the residual; else None."""
        if not any(_found(self.inputs, a[0], a[2], a[3]) for a in m.aliases):
            return None
        if any(_found(self.own, p, n, frames) for p, n, frames in m.recomputes):
            return "recomputed"
        alone = any(_found(self.first, a[0], a[2], a[3]) for a in m.aliases)
        if alone and _read_as(self.story.readers, m):
            return "folded"
        return None


def _read_as(readers: tuple[Reader, ...], m: ForwardValue) -> bool:
    """Whether the backward part reads `m` where the backward jaxpr reads the
    residual (`readers`): on one of their lines, or, where XLA kept no line
    (a folded constant), with one of their primitives."""
    lines = {(r.source.file, r.source.line) for r in readers if r.source is not None}
    primitives = {r.primitive for r in readers}
    return any(
        (file, line) in lines if file is not None else p in primitives
        for p, file, line in m.readers
    )


def _place(linked: Linking, i: int) -> tuple:
    made = linked.residuals[i].story.made
    return (made.ordinal if made.ordinal is not None else i, i)


def _name(linked: Linking, by_value: dict, tied: dict) -> None:
    """Each tied value's buffer names the first residual it is the input of;
    each of those residuals says which kept values it is computed from."""
    inputs_of: dict[int, list] = defaultdict(list)  # residual -> (value, how)
    for links in by_value.values():
        m = links[0][0]
        tied[id(m)] = True
        first = min(i for _, i, _ in links)
        for k in (m.key, *m.values, *m.same_bytes):
            linked.inputs.setdefault(k, first)
        for _, i, how in links:
            inputs_of[i].append((m, how))
    for i, held in inputs_of.items():
        held.sort(key=lambda mh: -linked.peak_bytes_of(mh[0]))
        at_peak = sum(linked.peak_bytes_of(m) for m, _ in held)
        said = ", ".join(f"{_at(m)} ({shown(m.key)})" for m, _ in held[:3])
        more = f" and {len(held) - 3} more" if len(held) > 3 else ""
        if all(how == "folded" for _, how in held):
            words = (
                f"no buffer of its own: XLA keeps the value it is computed from ({said}{more}) "
                "and folds its computation into the backward work that reads that"
            )
        else:
            words = (
                f"no buffer of its own: XLA keeps values it is computed from ({said}{more}) "
                "and computes it again from them in the backward part"
            )
        peak = f"; {human_bytes(at_peak)} of those live at the peak" if at_peak else ""
        linked.fates[i] = Fate(
            INPUT_KEPT,
            words + peak,
            shown(held[0][0].key),
            at_peak,
            disagrees=True,
        )
