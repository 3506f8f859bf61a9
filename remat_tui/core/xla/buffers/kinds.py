"""Provides what each buffer of a compiled program is, for the accounting of
`xla.buffers.accounting` (Contract 7's categories): the phase each
instruction belongs to (forward or backward, from JAX's name stack in its
op_name), the step where the backward part starts, the values the entry
computation returns, and the chains of values XLA keeps in the same bytes one
after another (an in-place update; a loop's carried value), judged as one.

Categories (Contract 7): `argument` and `output` are the entry parameters and
the values the program returns, with the bytes of their own allocations;
`recomputed` is backward work inside a checkpoint's rematted computation
(forward work done again); `residual` is forward work still live when the
backward part starts; everything else is `temporary`. Forward and backward
come from JAX's name stack in each instruction's op_name (`jvp(...)` and
`transpose(...)`); an instruction XLA added (a copy, a bitcast) takes its
operand's. The backward part starts at the split of the schedule into a
forward then a backward part that the most instructions agree with (a
backward op XLA hoists early does not move it), counting neither backward
work that reads no forward value (a weight's transpose) nor a checkpoint's
recomputation: XLA on CPU runs those from the first steps on. A value is
judged with the buffer it belongs to: the values XLA keeps in the same
bytes one after another with no gap (an in-place update; a loop's init, body parameter, body
result and output), so a scan's stacked residual, live at a peak inside the
forward loop as the body's parameter, is a residual, and a gradient
accumulated in the output's buffer is output from its zeros on.

What the metadata cannot tell: when XLA merges a forward computation with
its recomputation (common subexpressions), one instruction carries one of
the two op_names, and its buffer goes to that one's category.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from remat_tui.core.jaxcompat import hlo_text
from remat_tui.core.jaxcompat.hlo_text import Frame
from remat_tui.core.xla.buffers.occupancy import Placed


def phases_of(module: hlo_text.Module) -> dict[str, tuple[str | None, str | None]]:
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


def own_phases(module: hlo_text.Module) -> dict[str, tuple[str | None, str | None]]:
    """Each instruction's (phase, op_name) from its own op_name alone. An
    instruction without one (a slice, a copy, TPU's ConcatBitcast) runs when
    its reader needs it, whatever phase its operand has (a forward value's
    slices run in the backward part)."""
    return {n: (hlo_text.phase(i.op_name), i.op_name) for n, i in module.instructions.items()}


def start_marks(
    module: hlo_text.Module, sequence: tuple[str, ...]
) -> dict[str, tuple[str | None, str | None]]:
    """Each instruction's own phase (`own_phases`) in the schedule
    `sequence`, as evidence of where the backward part starts: backward work
    that reads no forward value, directly or through other work (a weight's
    transpose, the cotangent's broadcast), runs wherever XLA likes (XLA on
    CPU runs it first, before any forward work), so it is no evidence (None),
    unless the program has no other backward work."""
    phases = own_phases(module)
    reads_forward: dict[str, bool] = {}

    def depends(name: str) -> bool:
        # Iterative: a long program's chains are deeper than Python's stack.
        todo = [name]
        while todo:
            current = todo[-1]
            if current in reads_forward:
                todo.pop()
                continue
            instruction = module.instructions.get(current)
            phase, op_name = phases.get(current, (None, None))
            if instruction is None or instruction.opcode == "parameter":
                # A loop body's parameter carries what the loop was given: unknown, so yes.
                known = instruction is not None and instruction.computation != module.entry
            elif phase == "forward" and not hlo_text.recomputes(op_name):
                known = True
            else:
                waiting = [o for o in instruction.operands if o not in reads_forward]
                if waiting:
                    todo.extend(waiting)
                    continue
                known = any(reads_forward[o] for o in instruction.operands)
            reads_forward[current] = known
            todo.pop()
        return reads_forward[name]

    marks = {name: phases.get(name, (None, None)) for name in sequence}
    backward = [name for name, mark in marks.items() if _mark(*mark) == "backward"]
    free = [name for name in backward if not depends(name)]
    if len(free) == len(backward):
        return marks  # nothing else to go by
    for name in free:
        marks[name] = (None, marks[name][1])
    return marks


def backward_from(sequence: tuple[str, ...], phases: Any) -> int | None:
    """The first step of the backward part: the split of the schedule into a
    forward then a backward part that agrees with the most instructions'
    phases (so a backward op XLA hoists early, a weight's transpose, does not
    move it), at a backward instruction. A checkpoint's recomputation is
    forward work XLA may run as soon as its inputs exist (XLA on CPU runs it
    beside the forward work it repeats): it places the split only where it
    runs right before the backward work it is found at, with no forward work
    between (the backward part of a program whose forward part computes
    nothing the backward part needs begins with it)."""
    marks = [_mark(*phases.get(name, (None, None))) for name in sequence]
    backward = [i for i, m in enumerate(marks) if m == "backward"]
    if not backward:
        return _first_recomputation(sequence, phases, len(sequence))
    forward_before = [0]
    for m in marks:
        forward_before.append(forward_before[-1] + (m == "forward"))
    total_backward = len(backward)
    best, best_score = backward[0], -1
    for k, i in enumerate(backward):
        score = forward_before[i] + (total_backward - k)
        if score > best_score:
            best, best_score = i, score
    earlier = _first_recomputation(sequence, phases, best)
    return best if earlier is None else earlier


def _first_recomputation(sequence: tuple[str, ...], phases: Any, before: int) -> int | None:
    """The first of the recomputation's steps that run right before step
    `before`, with no forward or backward work between; None if none do."""
    first = None
    for i in range(before - 1, -1, -1):
        phase, op_name = phases.get(sequence[i], (None, None))
        if hlo_text.recomputes(op_name):
            first = i
        elif phase is not None:
            break
    return first


def _mark(phase: str | None, op_name: str | None) -> str | None:
    """An instruction's phase as evidence of the split: none for a
    checkpoint's recomputation."""
    return None if hlo_text.recomputes(op_name) else phase


def live_out(module: hlo_text.Module) -> set[str]:
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
class Chain:
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


class Context:
    def __init__(
        self,
        module: hlo_text.Module,
        phases: Any,
        backward_from: int | None,
        live_out: Any,
        last: int,
        placed: list[Placed],
        sequence: tuple[str, ...] = (),
    ) -> None:
        self.module, self.phases, self.live_out, self.last = module, phases, live_out, last
        self.backward_from = backward_from
        self.sequence = sequence
        # built on first need: each instruction's readers in the schedule,
        # each computation's instructions, whether a computation holds backward work
        self._readers: dict[str, list[tuple[str, int]]] | None = None
        self._inside: dict[str, list[hlo_text.Instruction]] = {}
        self._backward_inside: dict[str, bool] = {}
        self.chain_of: dict[tuple[int, int], Chain] = {}
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
        chain = Chain(tuple(run))
        for p in run:
            self.chain_of[(p.allocation.index, p.value.id)] = chain

    def chain(self, p: Placed) -> Chain:
        return self.chain_of.get((p.allocation.index, p.value.id)) or Chain((p,))

    def nearest(self, p: Placed, has: Callable[[Placed], bool]) -> Placed | None:
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
        def has(q: Placed) -> bool:
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
        if phase == "forward" and self.kept(p):
            return "residual"
        return "temporary"

    def kept(self, p: Placed) -> bool:
        """Whether the value `p` (with its buffer's chain) is kept from the
        forward part into the backward part: live when it starts, and read
        from then on by something other than forward work. A forward value
        that only forward work XLA scheduled late reads after the backward
        part started (the loss's value, computed beside the first backward
        work) is not kept for the backward part. Where a reader's part is
        not told (no op_name of its own), it is kept."""
        b, chain = self.backward_from, self.chain(p)
        if b is None or not chain.start < b <= chain.end:
            return False
        # Its own readers and those of the values after it in its bytes (an
        # update in place, a loop's carry); the values before it there are others.
        members = chain.members
        after = members[members.index(p) :] if p in members else members
        readers = self._reading()
        late = [r for q in after for r, at in readers.get(q.value.instruction, ()) if at >= b]
        return not late or not all(self._forward_work(r) for r in late)

    def _reading(self) -> dict[str, list[tuple[str, int]]]:
        """Instruction -> (reader, its step) of each instruction of the schedule reading it."""
        if self._readers is None:
            self._readers = defaultdict(list)
            for at, reader in enumerate(self.sequence):
                instruction = self.module.instructions.get(reader)
                for operand in instruction.operands if instruction else ():
                    self._readers[operand].append((reader, at))
        return self._readers

    def _forward_work(self, name: str) -> bool:
        """Whether instruction `name` is forward work through and through: its
        own op_name says so, and no instruction XLA fused into it is
        backward work."""
        instruction = self.module.instructions.get(name)
        if instruction is None or hlo_text.phase(instruction.op_name) != "forward":
            return False
        if hlo_text.recomputes(instruction.op_name):
            return False
        return not any(self._has_backward(c) for c in instruction.called)

    def _has_backward(self, computation: str) -> bool:
        """Whether a computation (a fusion's, nested ones included) holds backward work."""
        if not self._inside:
            for i in self.module.instructions.values():
                self._inside.setdefault(i.computation, []).append(i)
        known = self._backward_inside.get(computation)
        if known is None:
            self._backward_inside[computation] = False  # a guard against cycles
            known = any(
                hlo_text.phase(i.op_name) == "backward"
                or any(self._has_backward(c) for c in i.called)
                for i in self._inside.get(computation, ())
            )
            self._backward_inside[computation] = known
        return known
