"""Provides `link`: the jaxpr's residuals tied to the compiled step's values
(Contract 14): each buffer at the compiled peak that holds a residual names
it, and each residual says what XLA did with it (a `Fate`: kept to the
backward part, recomputed, fused away, merged with another, removed).

How a residual is tied to a compiled value: by what computed it. The jaxpr
side is the residual's `Made` (`trace.story`: the equation's
primitive, its output's dtype and element count, the user's frames behind
it); the compiled side is `xla.buffers.made`'s records, read off the
instruction that computes each value. Equal on all four, they are the same
computation. Where several residuals are alike on all four (one layer's
code run for every layer of an unrolled loop), they are told apart by order:
the jaxpr's order and the schedule's agree for computations that depend on
one another, as a layer on the one before does. Where the counts differ and
order cannot tell (XLA kept one of three alike values), the residual's fate
is `unknown` and says so, and the buffer stays unnamed with the reason.

The jaxpr and the compile disagree where the jaxpr saves a value and the
compiled step keeps no buffer of it into the backward part (XLA recomputes
it, fuses it into its reader, removed it, or keeps what it is computed from
instead), and where the compiled step keeps a forward value the jaxpr saves
under no residual: `xla.fates.unsaved` says what those values hold.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from remat_tui.core.model import Residual
from remat_tui.core.stories import (
    FUSED,
    KEPT,
    MERGED,
    RECOMPUTED,
    REMOVED,
    UNKNOWN,
    Fate,
)
from remat_tui.core.units import human_bytes
from remat_tui.core.xla.buffers import made as mk
from remat_tui.core.xla.fates import unsaved

if TYPE_CHECKING:
    from remat_tui.core.xla.compile.compiled import Compiled

from remat_tui.core.xla.fates.value_keys import (
    as_xla_names,
    bytes_by_key,
    dims,
    held_in,
    keys,
    matches,
    per_device,
    shown,
    sig,
    signature,
    signatures,
    unique,
    value_key,
)


class Linked:
    """A residual list tied to one compile: `fates` (one `Fate` or None per
    residual) and `named` (value key -> the residual index its buffer holds)."""

    def __init__(
        self,
        residuals: list[Residual],
        made: tuple,
        at_peak: list[dict],
        recomputed: Iterable[tuple] = (),
        devices: int = 1,
        other_spaces: Iterable[dict] = (),
    ) -> None:
        self.residuals = residuals
        # the devices the program spans: a residual's aval is global, the
        # compiled values one device's (value_keys.per_device)
        self.devices = devices
        # (primitive, aval, frames) of what the backward jaxpr re-runs (`trace.story`)
        self.recomputed = as_xla_names([sig(*w) for w in recomputed if w[1] is not None])
        self.merged_recompute: list[dict] = []  # recomputations XLA merged into the forward part
        self.fates: list[Fate | None] = [None] * len(residuals)
        # value key -> the residual index its buffer holds: `exact` for the
        # values the residual's computation makes, `named` for the values XLA
        # keeps in the same bytes before or after (a loop's carry, an in-place
        # update), which a value of their own named exactly overrides.
        self.exact: dict[str, int] = {}
        self.named: dict[str, int] = {}
        self.unnamed: dict[str, str] = {}  # value key -> why its buffer names no residual
        self.inputs: dict[str, int] = {}  # value key -> the residual whose input it holds
        self._peak_bytes = bytes_by_key(at_peak)
        # the buffers at each memory's peak (TPU's VMEM too), by value key
        self._peak_shapes = {
            value_key(b["instruction"]): b.get("shape")
            for b in [*at_peak, *(b for space in other_spaces for b in space["at_peak"])]
        }
        forward: defaultdict[tuple, list[mk.ForwardValue]] = defaultdict(list)
        elsewhere: defaultdict[tuple, list[mk.ForwardValue]] = defaultdict(list)
        arguments: dict[int, mk.ForwardValue] = {}
        for m in made:
            if m.where == mk.ARGUMENT:
                if m.number is not None:
                    arguments[m.number] = m
                continue
            for made_key in keys(m):
                (forward if m.where == mk.FORWARD else elsewhere)[made_key].append(m)
        self._arguments(arguments)
        groups: defaultdict[tuple | None, list[int]] = defaultdict(list)
        for i, r in enumerate(residuals):
            made_r = r.story.made if r.story is not None else None
            if made_r is None or made_r.argument is not None or made_r.same_as is not None:
                continue
            if r.memory != "device":
                continue  # offloaded: its buffer is in host memory, another story
            groups[signature(made_r)].append(i)
        for key, indices in groups.items():
            if key is None:
                for i in indices:
                    self.fates[i] = Fate(UNKNOWN, "its computation is not known to the jaxpr")
                continue
            sigs = signatures(residuals[indices[0]].story.made)
            alike = self._records(sigs, forward)
            other = self._records(sigs, elsewhere)
            self._group(
                indices, sorted(alike, key=lambda m: m.start), sorted(other, key=lambda m: m.start)
            )
        self._untold_again(groups, forward)
        self._merged()
        unsaved.explain(self, forward)

    # ---- the residuals ------------------------------------------------------------

    def _records(
        self, sigs: list[tuple], index: dict[tuple, list[mk.ForwardValue]]
    ) -> list[mk.ForwardValue]:
        """The records of `index` ((primitive, elements) -> records) a
        residual with keys `sigs` may be, on one device."""
        return unique(
            m
            for sig in sigs
            for count in per_device(sig[2], self.devices)
            for m in index.get((sig[0], count), [])
            if matches(sigs, m, self.devices)
        )

    def _arguments(self, arguments: dict[int, mk.ForwardValue]) -> None:
        """Argument residuals in the step's parameters: the gradient step takes
        the flat arguments in order (checked by size: a parameter jit drops
        as unused shifts the rest, and a training step takes them otherwise)."""
        for i, r in enumerate(self.residuals):
            made_r = r.story.made if r.story is not None else None
            if made_r is None or made_r.argument is None:
                continue
            m = arguments.get(made_r.argument)
            elements = 1
            for d in r.shape:
                elements *= d
            shares = {_per_device(r, elements), *per_device(elements, self.devices)}
            if m is None or m.elements not in shares:
                continue
            self._keep(i, m, "the step's argument, in its buffer for the whole step")

    def _group(self, indices: list[int], forward: list, elsewhere: list) -> None:
        kept = [m for m in forward if m.kept]
        n = len(indices)
        chosen = kept if len(kept) == n else forward if len(forward) == n else None
        if chosen is None:
            chosen = self._by_place(indices, forward)
        if chosen is None and kept:
            indices, chosen = self._by_readers(indices, kept)
        if chosen is None:
            for j, i in enumerate(indices):
                self.fates[i] = self._not_told(n, forward, kept, _nth(elsewhere, j, n))
            return
        for j, (i, m) in enumerate(zip(indices, chosen, strict=True)):
            if m.kept:
                self._keep(i, m, "a buffer holds it from the forward part into the backward part")
            else:
                self.fates[i] = self._not_kept(m, _nth(elsewhere, j, n))

    def _untold_again(self, groups: dict, forward: dict) -> None:
        """Alike residuals that order could not tell apart, tied again
        without the values other residuals' equations were tied to, and, one
        residual at a time, by the dimensions of the buffers at the peak: a
        reshape's value and its operand's (`attn` named on the reshape of
        an attention's second dot, where the first dot is saved too, on one
        line) are one primitive, size and line to XLA, a bitcast apart; the
        stacked buffer of each ends in the dimensions of its own."""
        for _ in range(len(groups)):
            progress = False
            for key, indices in groups.items():
                if key is None or not all(
                    (f := self.fates[i]) is not None and f.what == UNKNOWN for i in indices
                ):
                    continue
                sigs = signatures(self.residuals[indices[0]].story.made)
                left = [
                    m
                    for m in self._records(sigs, forward)
                    if not any(k in self.exact for k in (m.key, *m.values))
                ]
                if len(indices) in (len(left), sum(m.kept for m in left)):
                    self._group(indices, sorted(left, key=lambda m: m.start), [])
                elif len(indices) == 1:
                    shaped = [m for m in left if m.kept and self._shaped_as(indices[0], m)]
                    if len(shaped) != 1:
                        continue
                    self._keep(
                        indices[0],
                        shaped[0],
                        "a buffer holds it from the forward part into the backward part",
                    )
                else:
                    continue
                progress = progress or self.fates[indices[0]].what != UNKNOWN
            if not progress:
                return

    def _shaped_as(self, i: int, m: mk.ForwardValue) -> bool:
        """Whether a buffer at the peak holding `m` ends in the dimensions of
        residual i's value (per iteration, for a loop's stacked one), each
        whole or an even share over the devices."""
        made = self.residuals[i].story.made
        ours = dims(made.shape if made is not None else None)
        for k in (m.key, *m.same_bytes):
            theirs = dims(self._peak_shapes.get(k))
            if ours and theirs and len(theirs) >= len(ours):
                tail = theirs[len(theirs) - len(ours) :]
                if all(
                    b and r % b == 0 and self.devices % (r // b) == 0
                    for r, b in zip(ours, tail, strict=True)
                ):
                    return True
        return False

    def _by_place(self, indices: list[int], forward: list) -> list | None:
        """Alike residuals tied by their place among every alike equation of
        the forward jaxpr, saved or not, where XLA made a value for each of
        those equations (as many, in the schedule's order): the layer1 of
        three alike layers is the second value."""
        places = [self.residuals[i].story.made for i in indices]
        if any(m.ordinal is None or m.alike != len(forward) for m in places):
            return None
        return [forward[m.ordinal] for m in places]

    def _by_readers(self, indices: list[int], kept: list) -> tuple[list[int], list | None]:
        """Alike residuals and kept values in unequal numbers, told apart by
        what reads them in the backward part: the residuals whose readers
        (their lines) read some kept value, or the kept values some
        residual's readers read, when that leaves as many of each. Else
        (`indices`, None)."""

        def read(i: int) -> set:
            story = self.residuals[i].story
            return {(rd.source.file, rd.source.line) for rd in story.readers if rd.source}

        # By line alone: XLA folds a transposition's ops together, under one op_name.
        lines = {id(m): {(file, line) for _, file, line in m.readers} for m in kept}
        reads = {i: read(i) for i in indices}
        if len(kept) < len(indices):
            chosen = [i for i in indices if any(reads[i] & lines[id(m)] for m in kept)]
            if len(chosen) == len(kept):
                for i in indices:
                    if i not in chosen:
                        self.fates[i] = Fate(
                            UNKNOWN,
                            "alike values XLA keeps are read as other "
                            "residuals are: XLA keeps none of this one "
                            "in a buffer of its own",
                        )
                return chosen, kept
        elif len(kept) > len(indices):
            values = [m for m in kept if any(reads[i] & lines[id(m)] for i in indices)]
            if len(values) == len(indices):
                return indices, values
        return indices, None

    def _keep(self, i: int, m: mk.ForwardValue, words: str) -> None:
        at_peak = sum(self._peak_bytes.get(k, 0) for k in {m.key, *m.same_bytes})
        peak = f"; {human_bytes(at_peak)} of it live at the peak" if at_peak else ""
        buffer = shown(held_in(m, self._peak_bytes))
        self.fates[i] = Fate(KEPT, f"{words} ({buffer}){peak}", buffer, at_peak)
        for k in {m.key, *m.values}:
            self.exact.setdefault(k, i)
        for k in m.same_bytes:
            self.named.setdefault(k, i)

    def _not_kept(self, m: mk.ForwardValue, elsewhere: list) -> Fate:
        """A residual whose forward value dies before the backward part."""
        again = [e for e in elsewhere if e.where == mk.BACKWARD]
        fused = [e for e in elsewhere if e.where == mk.FUSED]
        if again:
            by = "XLA's rematerialization pass" if any(e.remat for e in again) else "XLA"
            return Fate(
                RECOMPUTED,
                f"its forward buffer ({m.instruction}) is freed before the "
                f"backward part, which {by} computes it again for ({again[0].instruction})",
                shown(again[0].key),
                disagrees=True,
            )
        if fused:
            return Fate(
                FUSED,
                f"its forward buffer ({m.instruction}) is freed before the "
                f"backward part; XLA recomputes it inside {shown(fused[0].key)}, "
                "the backward fusion that reads it",
                shown(fused[0].key),
                disagrees=True,
            )
        return Fate(
            REMOVED,
            f"its forward buffer ({m.instruction}) is freed before the "
            "backward part, and nothing in the backward part computes it again: "
            "the compiled step does not read it there",
            shown(m.key),
            disagrees=True,
        )

    def _not_told(self, n: int, forward: list, kept: list, elsewhere: list) -> Fate:
        """A residual among `n` alike whose compiled values order cannot tell apart,
        or that has none."""
        if forward:
            return Fate(
                UNKNOWN,
                f"one of {n} alike residuals (the same primitive, size and "
                f"line), against {len(forward)} such values in the compiled step, "
                f"{len(kept)} of them kept: which holds which, XLA does not say",
            )
        if any(e.where == mk.BACKWARD for e in elsewhere):
            e = next(e for e in elsewhere if e.where == mk.BACKWARD)
            by = "XLA's rematerialization pass" if e.remat else "XLA"
            return Fate(
                RECOMPUTED,
                f"no forward buffer holds it: {by} computes it in the "
                f"backward part ({e.instruction})",
                shown(e.key),
                disagrees=True,
            )
        if any(e.where == mk.FUSED for e in elsewhere):
            e = next(e for e in elsewhere if e.where == mk.FUSED)
            return Fate(
                FUSED,
                f"no buffer of its own: XLA computes it inside {shown(e.key)}, "
                "the backward fusion that reads it",
                shown(e.key),
                disagrees=True,
            )
        return Fate(
            REMOVED,
            "no value of the compiled step is computed by its equation: XLA "
            "removed it (nothing the compiled step returns needs it) or rewrote it "
            "past recognition",
            disagrees=True,
        )

    def _merged(self) -> None:
        for i, r in enumerate(self.residuals):
            made_r = r.story.made if r.story is not None else None
            if made_r is None or made_r.same_as is None:
                continue
            first = self.fates[made_r.same_as]
            where = f" ({first.buffer})" if first is not None and first.buffer else ""
            self.fates[i] = Fate(
                MERGED,
                f"the same value as R{made_r.same_as + 1}, in one buffer{where}",
                first.buffer if first else None,
                merged_with=f"R{made_r.same_as + 1}",
            )

    # ---- the buffers ----------------------------------------------------------------

    def peak_bytes_of(self, m: mk.ForwardValue) -> int:
        """The bytes at the peak of the buffers holding the value `m`."""
        return sum(self._peak_bytes.get(k, 0) for k in {m.key, *m.values, *m.same_bytes})

    def at_peak(self, buffers: list[dict]) -> list[dict]:
        """The buffers at the peak, each naming the residual it holds (`R#`)
        where it holds one, or whose input it holds (`holds: "input"`), and,
        for a residual buffer that names none, why."""
        out = []
        for b in buffers:
            key = value_key(b["instruction"])
            i = self.exact.get(key, self.named.get(key) if key not in self.unnamed else None)
            entry = {**b, "residual": None if i is None else f"R{i + 1}"}
            if i is None and key in self.inputs:
                entry.update(residual=f"R{self.inputs[key] + 1}", holds="input")
            elif i is None and b["category"] == "residual":
                entry["unnamed"] = self.unnamed.get(key) or (
                    f"no forward computation found for it: XLA's metadata ties its {b['op']} "
                    "to no jaxpr equation (an op of XLA's own, such as a TPU kernel)"
                )
            out.append(entry)
        return out


def _nth(records: list, j: int, n: int) -> list:
    """The records made by the j-th of n alike residuals, where each kind
    counts n: the backward part runs the forward part's layers last to first,
    so the j-th from the end of the schedule. Else all of them."""
    out = []
    for where in (mk.BACKWARD, mk.FUSED):
        kind = [m for m in records if m.where == where]
        out += [kind[n - 1 - j]] if len(kind) == n else kind
    return out


def _per_device(r: Residual, elements: int) -> int:
    """A sharded residual's elements on one device."""
    if not r.bytes or r.bytes_per_device is None:
        return elements
    return elements * r.bytes_per_device // r.bytes


def link(
    residuals: list[Residual], compiled: Compiled, recomputed: Iterable[tuple] = ()
) -> tuple[list[Residual], dict | None]:
    """(`residuals` with what XLA made of each, `compiled`'s memory breakdown
    with each buffer at the peak naming the residual it holds): the jaxpr
    tied to one compile of its configuration (a `Compiled` with its memory
    breakdown). As given where the compile has no breakdown. `recomputed`:
    what the backward jaxpr re-runs (`trace.story` `recomputed`), to
    tell where XLA merged that with the forward computation."""
    memory = getattr(compiled, "memory", None)
    if memory is None or not getattr(compiled, "made", ()):
        return residuals, memory
    made = compiled.made
    if compiled.step == "train":  # its parameters are (params, opt_state, batch): no argument order
        made = tuple(m for m in made if m.where != mk.ARGUMENT)
    devices = getattr(compiled, "devices", 1) or 1
    linked = Linked(
        residuals, made, memory["at_peak"], recomputed, devices, memory.get("other_spaces", ())
    )
    at_peak = linked.at_peak(memory["at_peak"])
    # The other memories' buffers too (TPU VMEM keeps a small program's residuals).
    spaces = [
        {**space, "at_peak": linked.at_peak(space["at_peak"])}
        for space in memory.get("other_spaces", [])
    ]
    told = [
        r if r.story is None else replace(r, story=r.story.with_fate(fate))
        for r, fate in zip(residuals, linked.fates, strict=True)
    ]
    held = [b for b in at_peak if b["category"] == "residual" and b["residual"]]
    return told, {
        **memory,
        "at_peak": at_peak,
        "other_spaces": spaces,
        "residual_bytes_named": sum(b["bytes"] for b in held),
        # of those, the buffers holding what their residual is computed from
        "residual_bytes_inputs": sum(b["bytes"] for b in held if b.get("holds") == "input"),
        "merged_recompute": linked.merged_recompute,
    }
