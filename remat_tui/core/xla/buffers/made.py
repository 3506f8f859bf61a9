"""Provides `forward_values`: what the compiled step's forward work makes, one
record (`ForwardValue`) per value, for `xla.fates.residuals` to tie each jaxpr residual
to the compiled value that holds it, and to say what XLA did with it.

What ties them: JAX lowers each jaxpr equation with its primitive in the
instruction's op_name (`jvp(...)/tanh` for forward work) and the user's
frames in its metadata; XLA keeps both through fusion (a fusion carries its
root's). So a compiled value is known by the instruction that really
computes it (`jaxcompat.hlo_values` looks through a loop's stacking, a
fusion's root and parameters, bitcasts and copies): its primitive, dtype,
element count (per iteration, for a scan's stacked value) and the user's
frames, which are the jaxpr equation's own.

A record's `where` says what the value is to the backward part:
- `forward`: made by the forward part, in a buffer of its own; `kept` when
  that buffer (with the values XLA keeps in the same bytes after it: a
  loop's carry, an in-place update) is still live when the backward part
  starts;
- `backward`: forward work XLA placed in the backward part: computed again
  there (`remat` when XLA's rematerialization pass cloned it);
- `fused`: forward work inside a fusion of the backward part, with no buffer
  of its own: XLA recomputes it where it is read;
- `argument`: an entry parameter, `number` its position.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from remat_tui.core.jaxcompat import hlo_text, xla_remat_pass
from remat_tui.core.jaxcompat import hlo_values as hv
from remat_tui.core.jaxcompat.hlo_text import primitive
from remat_tui.core.runtime import usercode
from remat_tui.core.xla.buffers.occupancy import Placed

FORWARD, BACKWARD, FUSED, ARGUMENT = "forward", "backward", "fused", "argument"


@dataclass(frozen=True)
class ForwardValue:
    """One value of the compiled step, known by what computes it."""

    key: str  # the value's name in XLA's records: "fusion.3{}", "while.43{5}"
    instruction: str  # the instruction that computes it
    primitive: str | None  # JAX's primitive, from its op_name
    dtype: str  # "f32"
    elements: int  # its element count (per iteration for a loop's stacked value)
    frames: tuple[tuple[str, int], ...]  # the user's (file, line), innermost first
    where: str  # FORWARD, BACKWARD, FUSED or ARGUMENT
    # (primitive, dtype, elements, frames) of each instruction that computes it:
    # the one above, and the re-layouts XLA kept with JAX's op_name (an einsum's
    # transpose, a reshape's copy), any of which a jaxpr equation may be.
    aliases: tuple[tuple, ...] = ()
    start: int = 0  # its live range in the schedule (its buffer's chain)
    end: int = 0
    kept: bool = False  # live into the backward part
    remat: bool = False  # a clone XLA's rematerialization pass made
    same_bytes: tuple[str, ...] = ()  # keys of the values XLA keeps in its bytes
    values: tuple[str, ...] = ()  # keys of the values it computes (a copy XLA keeps too)
    number: int | None = None  # an entry parameter's position
    # (primitive, file, line) of the backward part's instructions reading it
    # (inside the fusions that take it, the ops that read it there), sorted: a
    # tuple, as the compile store's JSON gives it back
    readers: tuple[tuple, ...] = ()
    # (primitive, elements, frames) of the forward work the backward part
    # computes from it (inside its fusions, or scheduled there), sorted
    recomputes: tuple[tuple, ...] = ()


def forward_values(
    module: hlo_text.Module, placed: list[Placed], context: Any
) -> tuple[ForwardValue, ...]:
    """The records of one compile: `placed` are its values in their
    allocations, `context` `xla.buffers.kinds`'s Context (chains, where
    the backward part starts). Buffers of one forward computation (a loop's
    carry and its output, a copy XLA keeps) make one record."""
    calls = hv.Calls(module)
    b = context.backward_from
    out: list[ForwardValue] = []
    forward: dict[str, ForwardValue] = {}  # computing instruction -> its record
    defined: dict[str, int] = {}  # instruction -> the step it runs
    for p in sorted(placed, key=lambda p: (p.start, -p.end)):
        defined.setdefault(p.value.instruction, p.start)
        instruction = module.instructions.get(p.value.instruction)
        if instruction is None:
            continue
        if instruction.opcode == "parameter" and instruction.computation == module.entry:
            out.append(
                _made(p.value.key, instruction, p.value.shape, ARGUMENT, number=instruction.number)
            )
            continue
        path = hv.computing(module, calls, p.value.instruction, hv.value_index(p.value.index))
        named = [i for i in path if hlo_text.phase(i.op_name) == "forward"]
        if not named:
            continue
        computed = named[-1]
        chain = context.chain(p)
        if b is not None and p.start >= b:
            out.append(
                _made(
                    p.value.key,
                    computed,
                    computed.shape,
                    BACKWARD,
                    start=p.start,
                    end=p.end,
                    remat=xla_remat_pass.is_clone(p.value.instruction),
                    aliases=_aliases(named),
                )
            )
            continue
        known = forward.get(computed.name)
        kept = context.kept(p)
        same = tuple(q.value.key for q in chain.members)
        if known is None:
            forward[computed.name] = _made(
                p.value.key,
                computed,
                computed.shape,
                FORWARD,
                start=chain.start,
                end=chain.end,
                kept=kept,
                same_bytes=same,
                aliases=_aliases(named),
            )
        else:
            forward[computed.name] = replace(
                known,
                end=max(known.end, chain.end),
                kept=known.kept or kept,
                same_bytes=known.same_bytes + same,
                values=known.values + (p.value.key,),
            )
    readers = _Readers(module)

    def in_backward(name: str) -> bool:
        return b is not None and defined.get(name, -1) >= b

    for m in forward.values():
        names = {k.partition("{")[0] for k in (m.key, *m.same_bytes)}
        copies = {k.partition("{")[0] for k in m.values}
        again = readers.recomputed_from(names | copies, in_backward) if m.kept else ()
        out.append(replace(m, readers=readers.of(names), recomputes=again))
    for instruction in module.instructions.values():
        fusion = calls.fused_in(instruction)
        if fusion is None or hlo_text.phase(instruction.op_name) != "forward":
            continue
        at = defined.get(fusion.name)
        root = module.roots.get(instruction.computation) == instruction.name
        if b is not None and at is not None and at >= b and not root:
            out.append(
                _made(fusion.name + "{}", instruction, instruction.shape, FUSED, start=at, end=at)
            )
    return tuple(out)


class _Readers:
    """The backward instructions reading a value, indexed once per module."""

    def __init__(self, module: hlo_text.Module):
        self.module = module
        self.users: dict[str, list[tuple[hlo_text.Instruction, int]]] = {}
        self.parameters: dict[tuple[str, int], str] = {}
        # a fused computation's root -> the fusion returning it (TPU wraps a
        # bitcast in a fusion of its own: its value goes on past the fusion)
        self.returned_by: dict[str, str] = {}
        for instruction in module.instructions.values():
            for k, operand in enumerate(instruction.operands):
                self.users.setdefault(operand, []).append((instruction, k))
            if instruction.opcode == "parameter" and instruction.number is not None:
                self.parameters[(instruction.computation, instruction.number)] = instruction.name
            if instruction.opcode == "fusion" and instruction.called:
                root = module.roots.get(instruction.called[0])
                if root is not None:
                    self.returned_by[root] = instruction.name

    def of(self, names: set[str]) -> tuple[tuple, ...]:
        """(primitive, file, line) of what reads any of `names` in the
        backward part: a backward instruction, or inside a backward fusion
        (nested fusions too) any op reading it, forward work XLA recomputes
        there included; (primitive, None, None) for one without the user's
        frames (XLA's folded constants)."""
        out: set[tuple] = set()
        todo = [(name, False) for name in names]
        seen: set[str] = set()
        while todo and len(seen) < 512:
            name, inside = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in self.returned_by:
                todo.append((self.returned_by[name], inside))
            for user, k in self.users.get(name, ()):
                backward = inside or hlo_text.phase(user.op_name) == "backward"
                if user.opcode in hv.MOVES or user.opcode in _PASSING:
                    todo.append((user.name, inside))
                elif user.opcode == "fusion" and user.called:
                    inner = self.parameters.get((user.called[0], k))
                    if inner is not None:
                        todo.append((inner, backward))
                elif backward:
                    frames = _frames(user)
                    out.add((primitive(user.op_name), *(frames[0] if frames else (None, None))))
        return tuple(sorted(out, key=str))

    def recomputed_from(
        self, names: set[str], in_backward: Callable[[str], bool]
    ) -> tuple[tuple, ...]:
        """(primitive, elements, frames) of the forward work the backward part
        computes from any of `names` (`in_backward`: whether a top-level
        instruction runs in the backward part): forward instructions reading
        them inside backward fusions (nested ones too) or scheduled in the
        backward part, and the forward work those feed in turn."""
        out: set[tuple] = set()
        todo = [(name, False) for name in names]
        seen: set[tuple] = set()
        while todo and len(seen) < 1024:
            name, inside = todo.pop()
            if (name, inside) in seen:
                continue
            seen.add((name, inside))
            if name in self.returned_by:
                todo.append((self.returned_by[name], inside))
            for user, k in self.users.get(name, ()):
                if user.opcode in hv.MOVES or user.opcode in _PASSING:
                    todo.append((user.name, inside))
                    continue
                phase = hlo_text.phase(user.op_name)
                backward = inside or in_backward(user.name) or phase == "backward"
                if backward and phase == "forward" and user.opcode != "tuple":
                    out.add((primitive(user.op_name), _elements(user.shape), _frames(user)))
                    todo.append((user.name, inside))  # and what it feeds
                if user.opcode == "fusion" and user.called and backward:
                    inner = self.parameters.get((user.called[0], k))
                    if inner is not None:
                        todo.append((inner, True))
        return tuple(sorted(out, key=str))


# Ops that pass a value on unchanged in what it means: followed to their readers.
_PASSING = frozenset({"get-tuple-element", "broadcast", "copy-start"})


def _made(
    key: str, instruction: hlo_text.Instruction, shape: str, where: str, **more: Any
) -> ForwardValue:
    more.setdefault("aliases", _aliases([instruction]))
    return ForwardValue(
        key=key,
        instruction=instruction.name,
        primitive=primitive(instruction.op_name),
        dtype=hv.dtype(shape),
        elements=_elements(shape),
        frames=_frames(instruction),
        where=where,
        **more,
    )


def _aliases(instructions: list[hlo_text.Instruction]) -> tuple[tuple, ...]:
    return tuple(
        (primitive(i.op_name), hv.dtype(i.shape), _elements(i.shape), _frames(i))
        for i in instructions
    )


def _elements(shape: str) -> int:
    return hv.elements(shape) if not shape.startswith("(") else 0


def _frames(instruction: hlo_text.Instruction) -> tuple[tuple[str, int], ...]:
    return tuple((f.file, f.line) for f in instruction.stack if usercode.is_users(f.file))


def clones(module: hlo_text.Module) -> list[str]:
    """`tanh at model.py:12`: each forward value XLA's rematerialization pass
    recomputes in the compiled module, once per clone."""
    out = []
    for instruction in module.instructions.values():
        if not xla_remat_pass.is_clone(instruction.name) or instruction.computation != module.entry:
            continue
        frame = instruction.stack[0] if instruction.stack else None
        at = f" at {os.path.basename(frame.file)}:{frame.line}" if frame else ""
        out.append(f"{primitive(instruction.op_name) or instruction.opcode}{at}")
    return out
