"""Provides the keys that tie a jaxpr residual to the compiled values that may
hold it (`xla.fates.residuals`): a residual's key, (primitive, dtype, elements,
the user's frames), read off its `Made` (`trace.story`); a compiled
value's, (primitive, elements) per instruction computing it
(`xla.buffers.made`); whether the two match; and how the memory view spells a
value (`fusion.2`, `while.4{3}`).

A residual has several keys: its equation's, those of the equations it only
re-lays (XLA may keep the value before the reshape), and, for a primitive
JAX lowers by composing others, the same with the composition's root, which
is what XLA's op_name names (jaxcompat.hlo_values.hlo_primitives).

Over a mesh the jaxpr's avals are global and the compiled values one
device's: a residual's elements match a value's where the value holds the
whole of it or an even share of it over some of the program's devices
(`per_device`). The jaxpr does not say how XLA split what it left open
(a mesh's Auto axes), so every share is a candidate; the primitive and the
user's frames must match too. A value inside a `shard_map` body has its
aval per device already: its whole count is one of the candidates.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from remat_tui.core.jaxcompat.hlo_values import hlo_dtype, hlo_primitives

if TYPE_CHECKING:
    from remat_tui.core import stories
    from remat_tui.core.xla.buffers.made import ForwardValue


def signature(made: stories.Made | None) -> tuple | None:
    """A residual's `Made` as the compiled side's key: (primitive, dtype,
    elements, frames); None where its equation is not known."""
    if made is None or made.primitive is None or made.shape is None:
        return None
    return sig(made.primitive, made.shape, made.frames)


def signatures(made: stories.Made | None) -> list[tuple]:
    """Every key a compiled value holding the residual may have: its own,
    those of the equations it only re-lays, each also as XLA names a
    composed primitive."""
    first = signature(made)
    if first is None or made is None:  # (made is not: it has a signature)
        return []
    return as_xla_names([first, *(sig(*r) for r in made.relaid if r[1] is not None)])


def as_xla_names(sigs: list[tuple]) -> list[tuple]:
    """Each key, and the same under each name XLA's op_name may give its
    primitive (the root of a composition JAX lowers it to)."""
    return [(name, *rest) for primitive, *rest in sigs for name in hlo_primitives(primitive)]


@functools.lru_cache(maxsize=8192)
def sig(primitive: str, shape: str, frames: tuple) -> tuple:
    """(primitive, dtype as XLA spells it, elements, ((file, line), ...)).
    Remembered: one layer's equations recur in every layer of a model."""
    dtype, _, dims = shape.partition("[")
    dtype = dtype.split("<")[0]
    count = 1
    # `f32[2,16]{V:data}`: a shard_map body's aval names the axes it varies
    # over; `f32[8@data,32]`: an explicitly sharded one, the mesh axis of a
    # dimension (its size is the global one)
    for d in dims.partition("]")[0].split(","):
        size = d.strip().partition("@")[0]
        if size.isdigit():
            count *= int(size)
    where = tuple((f.file, f.line) for f in frames)
    return (primitive, hlo_dtype(dtype), count, where)


@functools.lru_cache(maxsize=4096)
def per_device(elements: int, devices: int) -> tuple[int, ...]:
    """The element counts one device may hold of a value of `elements` over a
    program of `devices` devices: the whole (replicated), or an even share
    over any number of them that divides both."""
    shares = [d for d in range(1, devices + 1) if devices % d == 0 and elements % d == 0]
    return tuple(elements // d for d in shares)


def keys(m: ForwardValue) -> set[tuple]:
    """The (primitive, elements) of each instruction computing the compiled
    value `m`. Not its dtype: XLA may keep a value narrower than the
    jaxpr's (TPU keeps an f32 dot's output in bf16 when what reads it
    multiplies in bf16)."""
    return {(alias[0], alias[2]) for alias in m.aliases}


def matches(sigs: list[tuple], m: ForwardValue, devices: int = 1) -> bool:
    """Whether any of a residual's keys is any of the value's, on one device
    of `devices` (`per_device`)."""
    return any(
        alias[0] == s[0] and alias[2] in per_device(s[2], devices) and same_frames(s[3], alias[3])
        for s in sigs
        for alias in m.aliases
    )


def same_frames(ours: tuple, theirs: tuple) -> bool:
    """Whether two frame lists are one call path: equal as far as both go (the
    frames outside the target's code, its caller's, differ between the
    trace and the compile)."""
    n = min(len(ours), len(theirs))
    return n > 0 and ours[:n] == theirs[:n]


def shown(key: str) -> str:
    """A value key as the memory view shows the instruction: `fusion.2`, `while.4{3}`."""
    return key[:-2] if key.endswith("{}") else key


def value_key(instruction: str) -> str:
    """An at_peak entry's instruction (`while.4{3}`, `fusion.2`) as XLA's
    value key (`while.4{3}`, `fusion.2{}`)."""
    return instruction if instruction.endswith("}") else instruction + "{}"


def bytes_by_key(at_peak: list[dict]) -> dict[str, int]:
    """Value key -> its bytes among the buffers `at_peak`."""
    out: dict[str, int] = defaultdict(int)
    for b in at_peak:
        out[value_key(b["instruction"])] += b["bytes"]
    return out


def unique(records: Iterable) -> list:
    """`records` without repeats (by identity), in order."""
    seen, out = set(), []
    for m in records:
        if id(m) not in seen:
            seen.add(id(m))
            out.append(m)
    return out


def dims(shape: str | None) -> tuple[int, ...]:
    """`f32[2,16]{V:data}`, `f32[8@data,16]{1,0}` -> (2, 16), (8, 16); () for
    none, a scalar or a tuple."""
    if not shape or shape.startswith("("):
        return ()
    inside = shape.partition("[")[2].partition("]")[0]
    sizes = [d.strip().partition("@")[0] for d in inside.split(",") if d.strip()]
    return tuple(int(d) for d in sizes) if all(d.isdigit() for d in sizes) else ()


def held_in(m: ForwardValue, peak_bytes: dict[str, int]) -> str:
    """The value that names the buffer keeping `m` for the backward part: the
    one of its bytes at the peak (the memory view's), else the output of the
    forward loop it leaves (`while.4{3}`, where the first value computing it
    is the loop body's parameter), else the value that computes it."""
    held = [k for k in (m.key, *m.same_bytes) if peak_bytes.get(k)]
    if held:
        return max(held, key=lambda k: peak_bytes[k])
    return next((k for k in m.same_bytes if k.startswith("while.")), m.key)
