"""Provides `count_collectives`: the collectives of a compiled program
(`Compiled.as_text()`, the HLO after SPMD partitioning), with the bytes each
device sends over the interconnect, for the collective part of the step-time
estimate (`xla.estimates.step_time`).

After SPMD partitioning the shapes in the HLO are one device's: an
all-gather's operand is the device's shard, its result the gathered array.
What one device sends, in the ring algorithm over a group of N devices:

    all-gather          (N - 1) x its shard            ((N-1)/N of the gathered array)
    reduce-scatter      (N - 1)/N x its operand
    all-reduce          2 (N - 1)/N x its operand       (a reduce-scatter, then an all-gather)
    all-to-all          (N - 1)/N x its operand
    collective-permute  its operand

An asynchronous collective (`all-gather-start` ... `all-gather-done`) is
counted once, at its start; one wrapped in `async-start` is counted in the
computation it runs. A collective inside a while loop's body counts once per
iteration: by the loop's `known_trip_count` where XLA prints one (the CPU),
else read from its condition (`i < N`, TPU prints no trip count) with the
counter's start from the loop's initial tuple; a loop neither tells counts
once, and the count says it is not exact.

Everything here depends on XLA's text format, so it lives in jaxcompat.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

from remat_tui.core.jaxcompat.hlo_text import strip_layout, tuple_element

# Each kind's bytes sent per device, as a multiple of its operands' bytes,
# for a group of n devices.
_SENT = {
    "all-gather": lambda n: n - 1,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "collective-permute": lambda n: 1.0,
}
KINDS = tuple(_SENT)

_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(ROOT\s+)?%?([\w.\-]+) = (.*)$")
_OPCODE = re.compile(r"^([\w\-]+)\(")
_OPERAND = re.compile(r"%([\w.\-]+(?:#\d+)?)")
_CALLS = re.compile(r"\b(calls|body|condition|to_apply)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")
_TRIP = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')
_PARTITIONS = re.compile(r"\bnum_partitions=(\d+)")
_MESH_GROUPS = re.compile(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}")
_IOTA_GROUPS = re.compile(r"replica_groups=\[(\d+),(\d+)\]<=")
_LISTED_GROUPS = re.compile(r"replica_groups=\{(\{[^}]*\})?")
_AXIS = re.compile(r"'([^']+)'\s*=\s*(\d+)")
_ARRAY = re.compile(r"\b(pred|[a-z]+\d+(?:e\d+m\d+\w*)?)\[([\d,]*)\]")
# Opcodes whose `calls=` is not run again (the start already ran it).
_NOT_CALLING = ("async-done", "async-update")

_BITS = {"pred": 8}


@dataclass(frozen=True)
class Kind:
    """One kind of collective in a program: how many run in a step, the
    bytes of their operands and what one device sends for them."""

    count: int = 0
    operand_bytes: float = 0.0
    sent_bytes: float = 0.0


@dataclass(frozen=True)
class Collectives:
    """The collectives one step of a compiled program runs, per device.

    Attributes:
        sent_bytes: what one device sends over the interconnect in a step,
            every kind together (the ring factors above).
        count: how many collectives run in a step (a loop's x its trips).
        kinds: per kind (`all-gather`, ...), its count and bytes.
        exact: False where a loop without a known trip count holds one
            (counted once).
    """

    sent_bytes: float = 0.0
    count: int = 0
    kinds: dict[str, Kind] = field(default_factory=dict)
    exact: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Op:
    name: str
    opcode: str
    shape: str
    rest: str
    computation: str
    root: bool = False


def count_collectives(text: str | None, devices: int = 1) -> Collectives:
    """The collectives of `Compiled.as_text()`; `devices`: the program's
    device count, the group of a collective whose replica groups are empty."""
    if not text:
        return Collectives()
    partitions = _PARTITIONS.search(text.split("\n", 1)[0])
    everyone = int(partitions.group(1)) if partitions else devices
    ops, entry = _read(text)
    times, exact = _times(ops, entry)
    shapes = {op.name: op.shape for op in ops}
    kinds: dict[str, Kind] = {}
    for op in ops:
        kind = op.opcode.removesuffix("-start")
        if kind not in _SENT or op.opcode.endswith("-done") or not times.get(op.computation):
            continue
        n = group_size(op.rest, everyone)
        operand = sum(_bytes(_shape_of(name, shapes)) for name in _operands(op))
        runs = times[op.computation]
        before = kinds.get(kind, Kind())
        kinds[kind] = Kind(
            count=before.count + runs,
            operand_bytes=before.operand_bytes + runs * operand,
            sent_bytes=before.sent_bytes + runs * operand * _SENT[kind](max(n, 1)),
        )
    return Collectives(
        sent_bytes=sum(k.sent_bytes for k in kinds.values()),
        count=sum(k.count for k in kinds.values()),
        kinds=dict(sorted(kinds.items())),
        exact=exact,
    )


def group_size(rest: str, everyone: int) -> int:
    """How many devices a collective's replica groups put together: XLA
    prints them as a mesh's axes (`mesh['x'=4,'y'=2] {'x'}`), an iota
    (`[2,4]<=[8]`: 2 groups of 4) or listed (`{{0,1},{2,3}}`; `{}`: all)."""
    if m := _MESH_GROUPS.search(rest):
        sizes = {name: int(size) for name, size in _AXIS.findall(m.group(1))}
        named = re.findall(r"'([^']+)'", m.group(2))
        return math.prod(sizes.get(name, 1) for name in named)
    if m := _IOTA_GROUPS.search(rest):
        return int(m.group(2))
    if m := _LISTED_GROUPS.search(rest):
        first = m.group(1)
        return len(re.findall(r"\d+", first)) if first else everyone
    return everyone  # collective-permute: pairs, no groups


def _read(text: str) -> tuple[list[_Op], str | None]:
    ops: list[_Op] = []
    entry = computation = None
    for line in text.splitlines()[1:]:
        if computation is None:
            if (m := _COMPUTATION.match(line)) and not line.startswith(" "):
                computation = m.group(2)
                entry = computation if m.group(1) else entry
            continue
        if line.startswith("}"):
            computation = None
            continue
        if m := _INSTRUCTION.match(line):
            shape, after = _split_shape(m.group(3))
            opcode = _OPCODE.match(after)
            code = opcode.group(1) if opcode else ""
            ops.append(_Op(m.group(2), code, shape, after, computation, bool(m.group(1))))
    return ops, entry


def _split_shape(rest: str) -> tuple[str, str]:
    """'(f32[2]{0}, s32[]) tuple(%a), ...' -> its shape without layout, and
    what follows."""
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                return strip_layout(rest[: i + 1]), rest[i + 1 :].lstrip()
    shape, _, after = rest.partition(" ")
    return strip_layout(shape), after


def _times(ops: list[_Op], entry: str | None) -> tuple[dict[str, int], bool]:
    """How many times each computation runs in one step: the entry once, a
    loop's body its trip count times its loop's."""
    calls: dict[str, list[tuple[str, int]]] = {}  # callee -> [(caller, times per call)]
    by_name = {op.name: op for op in ops}
    roots = {op.computation: op for op in ops if op.root}
    exact = True
    for op in ops:
        if op.opcode in _NOT_CALLING:
            continue
        trip = _trip_count(op, by_name, roots) if op.opcode == "while" else None
        exact = exact and (op.opcode != "while" or trip is not None)
        for what, callee in _CALLS.findall(op.rest):
            per = (trip or 1) if op.opcode == "while" and what == "body" else 1
            calls.setdefault(callee, []).append((op.computation, per))
        for listed in _BRANCHES.findall(op.rest):
            for callee in (n.strip().lstrip("%") for n in listed.split(",")):
                calls.setdefault(callee, []).append((op.computation, 1))
    memo: dict[str, int] = {}

    def times(name: str, seen: frozenset[str]) -> int:
        if name == entry:
            return 1
        if name not in memo:
            memo[name] = sum(
                times(caller, seen | {name}) * per
                for caller, per in calls.get(name, ())
                if caller not in seen
            )
        return memo[name]

    return {op.computation: times(op.computation, frozenset()) for op in ops}, exact


_CONSTANT = re.compile(r"^constant\((-?\d+)\)")
_LIMIT = re.compile(r"\bdirection=(LT|GT)\b")


def _trip_count(loop: _Op, ops: dict[str, _Op], roots: dict[str, _Op]) -> int | None:
    """A while loop's trips: XLA's `known_trip_count`, else, for a
    condition `counter < N` (a JAX loop counts up by one), N less the
    counter's start in the loop's initial tuple; None where neither reads."""
    if m := _TRIP.search(loop.rest):
        return int(m.group(1))
    condition = re.search(r"\bcondition=%?([\w.\-]+)", loop.rest)
    root = roots.get(condition.group(1)) if condition else None
    if root is None or root.opcode != "compare" or not (d := _LIMIT.search(root.rest)):
        return None
    sides = [ops.get(name) for name in _operands(root)[:2]]
    if len(sides) != 2 or None in sides:
        return None
    if d.group(1) == "GT":  # N > counter
        sides.reverse()
    counter, limit = sides
    end = _constant(limit, ops)
    if end is None or counter is None or counter.opcode != "get-tuple-element":
        return None
    index = re.search(r"\bindex=(\d+)", counter.rest)
    init = ops.get(_operands(loop)[0]) if _operands(loop) else None
    if index is None or init is None or init.opcode != "tuple":
        return None
    elements = _operands(init)
    k = int(index.group(1))
    start = _constant(ops.get(elements[k]), ops) if k < len(elements) else None
    return end - start if start is not None and end >= start else None


def _constant(op: _Op | None, ops: dict[str, _Op]) -> int | None:
    """An integer constant, through the copies and bitcasts XLA puts before it."""
    for _ in range(8):
        if op is None:
            return None
        if m := _CONSTANT.match(op.rest):
            return int(m.group(1))
        if op.opcode not in ("copy", "bitcast", "convert") or not (names := _operands(op)):
            return None
        op = ops.get(names[0])
    return None


def _operands(op: _Op) -> list[str]:
    """A collective's array operands (a collective-permute's first: the
    others of its in-place form are buffers and offsets)."""
    depth, end = 0, len(op.rest)
    start = op.rest.find("(")
    for i in range(start, len(op.rest)):
        depth += {"(": 1, ")": -1}.get(op.rest[i], 0)
        if depth == 0:
            end = i
            break
    names = _OPERAND.findall(op.rest[start:end])
    return names[:1] if op.opcode.startswith("collective-permute") else names


def _shape_of(name: str, shapes: dict[str, str]) -> str:
    """An operand's shape; `t#2` (JAX 0.12's name for a tuple's element) read
    from the tuple's."""
    if name in shapes:
        return shapes[name]
    whole, _, k = name.partition("#")
    return tuple_element(shapes.get(whole, ""), int(k)) if k.isdigit() else ""


def array_bytes(shape: str) -> int:
    """The bytes of a shape without layout, a tuple's elements together:
    'f32[4,64]' -> 1024."""
    return _bytes(shape)


def _bytes(shape: str) -> int:
    total = 0
    for dtype, dims in _ARRAY.findall(shape):
        bits = _BITS.get(dtype) or int(re.sub(r"\D.*", "", re.sub(r"^[a-z]+", "", dtype)) or 8)
        total += math.prod(int(d) for d in dims.split(",") if d) * max(bits, 8) // 8
    return total
