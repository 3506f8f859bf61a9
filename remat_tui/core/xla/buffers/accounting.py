"""Provides the accounting behind `xla.buffers.memory` (Contract 7): from XLA's
record of one compile (`jaxcompat.buffers`), the bytes live at each step, the
buffers live at the peak with their categories, and the bytes by category.

How the bytes are counted, so that the figures add up and stay at or under
the compiled peak of Contract 6:
- The figures above count the default memory space alone (device HBM; RAM
  on CPU), the memory a device budget is spent on. Every other space (TPU
  VMEM, SMEM and sync flags, host memory holding offloaded values; named by
  jaxcompat/buffers.space_name) is counted apart, by
  the same rules, at its own peak (`Memory.other_spaces`): a VMEM temporary
  is never weighed against HBM. TPU's own `peak_memory_in_bytes` adds VMEM's
  peak to HBM's (measured on a deviceless v5e compile: 56 + 74 MiB).
- Entry parameters and outputs have allocations of their own, made before the
  program starts and kept to its end: they count at every step, whether or
  not the value is there yet (an output not yet written is memory already
  held). XLA may lend such an allocation to another value for a while (on
  CPU the first layer's tanh output can live in the input gradient's buffer);
  at the peak those bytes are that value's.
- Temporaries count while live, by the bytes their offsets cover (two values
  sharing bytes at one step, as an in-place op's input and output do, count
  once; the bytes go to the later one). Tuple index tables in temporaries (a
  few hundred bytes each, which TPU's own peak leaves out) and constants
  (compiled into the program) are left out.

Categories (Contract 7) are told by `xla.buffers.kinds`.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from remat_tui.core.jaxcompat import buffers as xla
from remat_tui.core.jaxcompat.hlo_text import DumpUnreadable, Frame
from remat_tui.core.model import MEMORY_CATEGORIES
from remat_tui.core.runtime import usercode
from remat_tui.core.xla.buffers import kinds as buffer_kinds
from remat_tui.core.xla.buffers.kinds import Context
from remat_tui.core.xla.buffers.made import ForwardValue, clones, forward_values
from remat_tui.core.xla.buffers.occupancy import Placed, occupancy, thin, union

CATEGORIES = MEMORY_CATEGORIES


@dataclass(frozen=True)
class Buffer:
    """Bytes live at the peak, all held for one HLO value.

    `bytes` is what this value holds at the peak (at most `size`, the value's
    own: less where a value defined at the same step shares its memory).
    `reserved` marks an argument's or output's allocation that holds no value
    at the peak (an output not yet written): its `live` is then the
    allocation's, the whole program. `source` is the innermost frame XLA
    carries for the instruction (JAX's own or a library's as often as the
    user's); `stack` is the whole chain, innermost first, and `op_name` JAX's
    name stack, for a caller that maps it to the user's own line."""

    bytes: int
    shape: str
    instruction: str
    op: str
    live: tuple[int, int]
    category: str
    size: int
    op_name: str | None = None
    source: Frame | None = None
    stack: tuple[Frame, ...] = ()
    residual: str | None = None  # the jaxpr residual it holds, where known
    reserved: bool = False
    memory_space: int = 0

    @property
    def user_source(self) -> Frame | None:
        """The innermost frame in the user's own code (the rule of
        `origin.source`: never JAX's or a library's line), if any."""
        return next((f for f in self.stack if usercode.is_users(f.file)), None)

    def to_dict(self) -> dict:
        source = self.user_source
        return {
            "bytes": self.bytes,
            "shape": self.shape,
            "instruction": self.instruction,
            "op": self.op,
            "live": [self.live[0], self.live[1]],
            "category": self.category,
            "residual": self.residual,
            "source": None
            if source is None
            else {"file": source.file, "line": source.line, "function": source.function},
        }


@dataclass(frozen=True)
class OtherSpace:
    """One memory space besides the main one, at its own peak."""

    space: str  # "vmem", "sflag", "smem", "host", or "unnamed space N"
    peak_bytes: int
    peak_step: int
    allocated_bytes: int  # the sizes of its allocations, which XLA's own peak may count
    at_peak: tuple[Buffer, ...]  # largest first

    def to_dict(self) -> dict:
        return {
            "space": self.space,
            "peak_bytes": self.peak_bytes,
            "at_peak": [b.to_dict() for b in self.at_peak],
        }


@dataclass(frozen=True)
class Memory:
    peak_bytes: int
    peak_step: int
    steps: int
    backward_from: int | None
    curve: tuple[tuple[int, int], ...]  # (step, bytes), at most 512, the peak among them
    at_peak: tuple[Buffer, ...]  # largest first
    by_category: dict[str, int]  # every category, summing to peak_bytes
    # The other memory spaces (TPU VMEM, SMEM and sync flags, host memory of offloaded
    # values), each at its own peak: not in the figures above.
    other_spaces: tuple[OtherSpace, ...] = ()
    # What the forward work makes (`xla.buffers.made`), for naming residuals
    # (`xla.fates.residuals`): not in the JSON.
    made: tuple[ForwardValue, ...] = ()
    # What XLA's rematerialization pass recomputes (`tanh at model.py:12`, per
    # clone; `xla.fates.remat_pass`): empty where it did not act.
    xla_rematerialized: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "peak_bytes": self.peak_bytes,
            "peak_step": self.peak_step,
            "steps": self.steps,
            "backward_from": self.backward_from,
            "curve": [[step, size] for step, size in self.curve],
            "at_peak": [b.to_dict() for b in self.at_peak],
            "by_category": dict(self.by_category),
            "other_spaces": [space.to_dict() for space in self.other_spaces],
            "xla_rematerialized": list(self.xla_rematerialized),
        }


# --- the accounting ---------------------------------------------------------------


def from_dump(dump: xla.Dump, platform: str | None = None) -> Memory:
    """The accounting of one compile's dump; `platform` names its memory
    spaces (jaxcompat/buffers.space_name)."""
    steps = len(dump.live.sequence)
    if steps == 0:
        raise DumpUnreadable("a schedule with at least one instruction")
    last = steps - 1
    module = dump.module
    held = [a for a in dump.allocations if _counted(a) and a.whole_program]
    temps = [a for a in dump.allocations if _counted(a) and not a.whole_program]
    elsewhere = [
        a for a in dump.allocations if a.color != 0 and not a.constant and not a.thread_local
    ]

    def placed(allocations: list, whole: bool) -> list[Placed]:
        return _placed(dump, allocations, whole, last)

    held_values = placed(held, whole=True)
    temp_values = placed(temps, whole=False)
    spaces = defaultdict(list)
    for a in elsewhere:
        spaces[a.color].append(a)
    space_values = {color: placed(allocs, whole=False) for color, allocs in spaces.items()}
    base = sum(a.size for a in held)
    curve = [base + b for b in occupancy(temp_values, steps)]

    peak_step = _peak_step(curve)
    peak = curve[peak_step]

    phases = buffer_kinds.phases_of(module)
    backward_from = buffer_kinds.backward_from(
        dump.live.sequence, buffer_kinds.start_marks(module, dump.live.sequence)
    )
    live_out = buffer_kinds.live_out(module)
    everything = held_values + temp_values + [p for ps in space_values.values() for p in ps]
    context = Context(module, phases, backward_from, live_out, last, everything, dump.live.sequence)
    at_peak = _at_peak(peak_step, held, held_values, temp_values, context)
    by_category = {c: 0 for c in CATEGORIES}
    for b in at_peak:
        by_category[b.category] += b.bytes
    others = [
        _other_space(spaces[color], space_values[color], steps, context, platform)
        for color in sorted(spaces)
    ]
    return Memory(
        peak_bytes=peak,
        peak_step=peak_step,
        steps=steps,
        backward_from=backward_from,
        curve=thin(curve, peak_step),
        at_peak=_largest_first(at_peak),
        by_category=by_category,
        other_spaces=tuple(others),
        made=forward_values(module, everything, context),
        xla_rematerialized=tuple(clones(module)),
    )


def _placed(dump: xla.Dump, allocations: list, whole: bool, last: int) -> list[Placed]:
    """The values of `allocations` with their live ranges in the schedule; an
    argument's or output's (`whole`) live throughout where XLA gives none."""
    out = []
    for a in allocations:
        for v in a.values:
            if not whole and v.shape.startswith("("):
                continue  # a tuple's index table
            span = dump.live.ranges.get(v.key)
            if span is None:
                if not whole:
                    continue  # never live in the flattened schedule
                span = (0, last)
            start, end = max(0, min(span[0], last)), max(0, min(span[1], last))
            out.append(Placed(v, a, start, min(max(end, start), last)))
    return out


def _other_space(
    allocations: list, values: list, steps: int, context: Context, platform: str | None
) -> OtherSpace:
    """One memory space besides the main one, at its own peak."""
    curve = occupancy(values, steps)
    step = _peak_step(curve)
    return OtherSpace(
        space=xla.space_name(allocations[0].color, platform),
        peak_bytes=curve[step],
        peak_step=step,
        allocated_bytes=sum(a.size for a in allocations),
        at_peak=_largest_first(_at_peak(step, [], [], values, context)),
    )


def _peak_step(curve: list[int]) -> int:
    """The first step at the curve's highest."""
    return max(range(len(curve)), key=lambda t: (curve[t], -t))


def _largest_first(buffers: list[Buffer]) -> tuple[Buffer, ...]:
    return tuple(sorted(buffers, key=lambda b: (-b.bytes, b.live[0], b.instruction)))


def _counted(a: xla.Allocation) -> bool:
    return a.color == 0 and not a.constant and not a.thread_local


def _at_peak(
    step: int, held: Any, held_values: Any, temp_values: Any, context: Context
) -> list[Buffer]:
    last = context.last

    def buffer(p: Placed, nbytes: int, reserved: bool = False) -> Buffer:
        instruction = context.module.instructions.get(p.value.instruction)
        stack = context.stack(p)
        index = p.value.index
        return Buffer(
            bytes=nbytes,
            shape=p.value.shape,
            instruction=p.value.instruction + ("" if index == "{}" else index),
            op=instruction.opcode if instruction else "?",
            live=(0, last) if reserved else (p.start, p.end),
            category=context.category(p),
            size=p.value.size,
            op_name=context.phase(p)[1],
            source=stack[0] if stack else None,
            stack=stack,
            reserved=reserved,
            memory_space=p.value.color,
        )

    groups: dict[int, list[Placed]] = defaultdict(list)
    for p in [*held_values, *temp_values]:
        groups[p.allocation.index].append(p)
    out = []
    held_indices = {a.index: a for a in held}
    for a in held:
        if not groups.get(a.index):  # an allocation XLA lists with no value in it
            out.append(Buffer(
                bytes=a.size, shape="?", instruction=f"allocation {a.index}", op="?",
                live=(0, last), category="argument" if a.parameter is not None else "output",
                size=a.size, reserved=True,
            ))  # fmt: skip
    for index, members in groups.items():
        live = [p for p in members if p.start <= step <= p.end]
        # Shared bytes go to the value defined later (an in-place op's output).
        live.sort(key=lambda p: (-p.start, -p.end, p.value.offset))
        covered: list[tuple[int, int]] = []
        for p in live:
            lo, hi = p.value.offset, p.value.offset + p.value.size
            own = (hi - lo) - _covered_within(covered, lo, hi)
            if own > 0:
                out.append(buffer(p, own))
            bisect.insort(covered, (lo, hi))
        a = held_indices.get(index)
        if a is not None:
            spare = a.size - union(covered)
            if spare > 0:
                out.append(buffer(_owner(members, context), spare, True))
    return out


def _covered_within(covered: list[tuple[int, int]], lo: int, hi: int) -> int:
    clipped = [(max(a, lo), min(b, hi)) for a, b in covered if a < hi and b > lo]
    return union(clipped)


def _owner(members: list[Placed], context: Context) -> Placed:
    """Whose an argument's or output's allocation is when no value is in it:
    the parameter's, else the returned value's, else the last one placed."""

    def rank(p: Placed) -> tuple:
        instruction = context.module.instructions.get(p.value.instruction)
        is_parameter = instruction is not None and instruction.opcode == "parameter"
        returned = p.value.instruction in context.live_out or p.end >= context.last
        return (is_parameter, returned, p.start)

    return max(members, key=rank)
