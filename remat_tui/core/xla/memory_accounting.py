"""Provides the accounting behind core/xla/memory.py (Contract 7): from XLA's
record of one compile (jaxcompat/buffers.py), the bytes live at each step, the
buffers live at the peak with their categories, and the bytes by category.

How the bytes are counted, so that the figures add up and stay at or under
the compiled peak of Contract 6:
- The figures above count the default memory space alone (device HBM; RAM
  on CPU), the memory a device budget is spent on. Every other space (TPU
  VMEM and SMEM, host memory holding offloaded values) is counted apart, by
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

Categories (Contract 7): `argument` and `output` are the entry parameters and
the values the program returns, with the bytes of their own allocations;
`recomputed` is backward work inside a checkpoint's rematted computation
(forward work done again); `residual` is forward work still live when the
backward part starts; everything else is `temporary`. Forward and backward
come from JAX's name stack in each instruction's op_name (`jvp(...)` and
`transpose(...)`); an instruction XLA added (a copy, a bitcast) takes its
operand's. The backward part starts at the split of the schedule into a
forward then a backward part that the most instructions agree with (a
backward op XLA hoists early does not move it). A value is judged with the
buffer it belongs to: the values XLA keeps in the same bytes one after
another with no gap (an in-place update; a loop's init, body parameter, body
result and output), so a scan's stacked residual, live at a peak inside the
forward loop as the body's parameter, is a residual, and a gradient
accumulated in the output's buffer is output from its zeros on.

What the metadata cannot tell: when XLA merges a forward computation with
its recomputation (common subexpressions), one instruction carries one of
the two op_names, and its buffer goes to that one's category.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

from remat_tui.core import usercode
from remat_tui.core.jaxcompat import buffers as xla
from remat_tui.core.jaxcompat import hlo_text
from remat_tui.core.jaxcompat.hlo_text import DumpUnreadable, Frame
from remat_tui.core.model import MEMORY_CATEGORIES
from remat_tui.core.xla.occupancy import Placed, occupancy, thin, union

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

    space: str  # "vmem", "smem", "host", or "space N"
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
    # The other memory spaces (TPU VMEM and SMEM, host memory of offloaded
    # values), each at its own peak: not in the figures above.
    other_spaces: tuple[OtherSpace, ...] = ()

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

    def placed(allocations, whole: bool) -> list[Placed]:
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

    phases = _phases(module)
    backward_from = _backward_from(dump.live.sequence, phases)
    live_out = _live_out(module)
    everything = held_values + temp_values + [p for ps in space_values.values() for p in ps]
    context = _Context(module, phases, backward_from, live_out, last, everything)
    at_peak = _at_peak(peak_step, held, held_values, temp_values, context)
    by_category = {c: 0 for c in CATEGORIES}
    for b in at_peak:
        by_category[b.category] += b.bytes
    others = []
    for color in sorted(spaces):
        space_curve = occupancy(space_values[color], steps)
        step = _peak_step(space_curve)
        buffers = _at_peak(step, [], [], space_values[color], context)
        others.append(OtherSpace(
            space=xla.space_name(color, platform),
            peak_bytes=space_curve[step],
            peak_step=step,
            allocated_bytes=sum(a.size for a in spaces[color]),
            at_peak=_largest_first(buffers),
        ))  # fmt: skip
    return Memory(
        peak_bytes=peak,
        peak_step=peak_step,
        steps=steps,
        backward_from=backward_from,
        curve=thin(curve, peak_step),
        at_peak=_largest_first(at_peak),
        by_category=by_category,
        other_spaces=tuple(others),
    )


def _peak_step(curve: list[int]) -> int:
    """The first step at the curve's highest."""
    return max(range(len(curve)), key=lambda t: (curve[t], -t))


def _largest_first(buffers: list[Buffer]) -> tuple[Buffer, ...]:
    return tuple(sorted(buffers, key=lambda b: (-b.bytes, b.live[0], b.instruction)))


def _counted(a: xla.Allocation) -> bool:
    return a.color == 0 and not a.constant and not a.thread_local


# --- phases and categories ---------------------------------------------------------


def _phases(module: hlo_text.Module) -> dict[str, tuple[str | None, str | None]]:
    """Each instruction's (phase, op_name): its own op_name's, else (for what
    XLA added with no metadata: copies, bitcasts, tuples) its first operand's."""
    memo: dict[str, tuple[str | None, str | None]] = {}

    def of(name: str, depth: int = 0) -> tuple[str | None, str | None]:
        if name in memo:
            return memo[name]
        instruction = module.instructions.get(name)
        if instruction is None:
            return None, None
        found = (hlo_text.phase(instruction.op_name), instruction.op_name)
        if found[0] is None and instruction.opcode != "parameter" and depth < 32:
            for operand in instruction.operands:
                inherited = of(operand, depth + 1)
                if inherited[0] is not None:
                    found = inherited
                    break
        memo[name] = found
        return found

    for name in module.instructions:
        of(name)
    return memo


def _backward_from(sequence: tuple[str, ...], phases) -> int | None:
    """The first step of the backward part: the split of the schedule into a
    forward then a backward part that agrees with the most instructions'
    phases (so a backward op XLA hoists early, a weight's transpose, does not
    move it), at a backward instruction."""
    marks = [phases.get(name, (None, None))[0] for name in sequence]
    backward = [i for i, m in enumerate(marks) if m == "backward"]
    if not backward:
        return None
    forward_before = [0]
    for m in marks:
        forward_before.append(forward_before[-1] + (m == "forward"))
    total_backward = len(backward)
    best, best_score = None, -1
    for k, i in enumerate(backward):
        score = forward_before[i] + (total_backward - k)
        if score > best_score:
            best, best_score = i, score
    return best


def _live_out(module: hlo_text.Module) -> set[str]:
    """Names of the instructions the entry computation returns (through its
    root tuple)."""
    root = module.instructions.get(module.root) if module.root else None
    if root is None:
        return set()
    out = {root.name}
    if root.opcode == "tuple":
        out.update(root.operands)
    return out


@dataclass(frozen=True)
class _Chain:
    """Values XLA keeps in the same bytes one after another with no gap: a
    buffer updated in place, or carried through a loop (the init, the body's
    parameter, the body's result and the loop's output share one slice)."""

    members: tuple[Placed, ...]  # by start

    @property
    def start(self) -> int:
        return self.members[0].start

    @property
    def end(self) -> int:
        return max(p.end for p in self.members)


class _Context:
    def __init__(self, module, phases, backward_from, live_out, last, placed):
        self.module, self.phases, self.live_out, self.last = module, phases, live_out, last
        self.backward_from = backward_from
        self.chain_of: dict[tuple[int, int], _Chain] = {}
        slices: dict[tuple[int, int, int], list[Placed]] = defaultdict(list)
        for p in placed:
            slices[(p.allocation.index, p.value.offset, p.value.size)].append(p)
        for members in slices.values():
            members.sort(key=lambda p: (p.start, p.end))
            run: list[Placed] = []
            for p in members:
                if run and p.start > max(q.end for q in run):
                    self._close(run)
                    run = []
                run.append(p)
            self._close(run)

    def _close(self, run: list[Placed]) -> None:
        chain = _Chain(tuple(run))
        for p in run:
            self.chain_of[(p.allocation.index, p.value.id)] = chain

    def chain(self, p: Placed) -> _Chain:
        return self.chain_of.get((p.allocation.index, p.value.id)) or _Chain((p,))

    def nearest(self, p: Placed, has) -> Placed | None:
        """p itself if `has(p)`, else the closest earlier member of its chain
        that has it, else the closest later one."""
        if has(p):
            return p
        members = self.chain(p).members
        at = members.index(p) if p in members else 0
        for q in [*reversed(members[:at]), *members[at + 1 :]]:
            if has(q):
                return q
        return None

    def phase(self, p: Placed) -> tuple[str | None, str | None]:
        q = self.nearest(p, lambda q: self.phases.get(q.value.instruction, (None,))[0] is not None)
        return self.phases.get((q or p).value.instruction, (None, None))

    def stack(self, p: Placed) -> tuple[Frame, ...]:
        def has(q):
            instruction = self.module.instructions.get(q.value.instruction)
            return bool(instruction and instruction.stack)

        q = self.nearest(p, has)
        return self.module.instructions[q.value.instruction].stack if q else ()

    def category(self, p: Placed) -> str:
        v, a, module = p.value, p.allocation, self.module
        instruction = module.instructions.get(v.instruction)
        if (
            a.parameter is not None
            and instruction is not None
            and instruction.opcode == "parameter"
            and instruction.computation == module.entry
        ):
            return "argument"
        chain = self.chain(p)
        if a.maybe_live_out and (chain.end >= self.last or v.instruction in self.live_out):
            return "output"
        phase, op_name = self.phase(p)
        if hlo_text.recomputes(op_name):
            return "recomputed"
        b = self.backward_from
        if phase == "forward" and b is not None and chain.start < b <= chain.end:
            return "residual"
        return "temporary"


def _at_peak(step: int, held, held_values, temp_values, context: _Context) -> list[Buffer]:
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


def _owner(members: list[Placed], context: _Context) -> Placed:
    """Whose an argument's or output's allocation is when no value is in it:
    the parameter's, else the returned value's, else the last one placed."""

    def rank(p: Placed):
        instruction = context.module.instructions.get(p.value.instruction)
        is_parameter = instruction is not None and instruction.opcode == "parameter"
        returned = p.value.instruction in context.live_out or p.end >= context.last
        return (is_parameter, returned, p.start)

    return max(members, key=rank)
