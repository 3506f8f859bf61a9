"""Provides what XLA wrote about one compiled program's memory, read into plain
Python data: the schedule, every value's live range, how values share
allocations, and the optimized module (its instructions read by
`jaxcompat.hlo_text`).

Everything here depends on XLA's own debug output, so it lives in jaxcompat.

The source is XLA's per-compile dump (`compiler_options={"xla_dump_to": dir}`,
see `dump_options`): for the optimized module it writes
- `*-live-range.txt`: HloLiveRange, the flattened schedule and each value's
  [start, end] in it;
- `*-buffer-assignment.txt`: every allocation (parameter, live-out, temp,
  constant, thread-local, its memory space) and the values placed in it, with
  size and offset;
- `*after_optimizations.txt`: the scheduled HLO, with op_name and either
  source_file/source_line or a stack frame id per instruction (JAX 0.10 and
  0.12 both emit stack frames, printed as a table at the top of the module).
The same three files come from CPU, GPU and deviceless TPU compiles, with JAX
0.10.2 and 0.12. What was measured of the other candidates (so they stay
unused): `memory_analysis().serialized_buffer_assignment_proto` is empty on
TPU and, on CPU, holds logical buffers and allocations but no heap-simulator
trace (so no live ranges) and names instructions only by unique id, which the
HLO text does not print; `as_text()` has the schedule and metadata but no
buffer assignment. Every parser here checks the layout it reads and raises
`DumpUnreadable` with what it expected rather than guessing.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field

from remat_tui.core.jaxcompat.hlo_text import DumpUnreadable, Module, parse_hlo, strip_layout

# Compiler options that make XLA write the three files for one compile, and
# nothing it can skip (no per-pass dumps, no HTML, no protos).
_DUMP_OPTIONS = {
    "xla_dump_hlo_as_text": True,
    "xla_dump_hlo_as_proto": False,
    "xla_dump_hlo_as_html": False,
    "xla_dump_hlo_as_dot": False,
    "xla_dump_include_timestamp": False,
    "xla_dump_hlo_pass_re": "",
}


def dump_options(directory: str) -> dict:
    """Compiler options (for `Lowered.compile(compiler_options=...)`) that make
    XLA write this compile's memory files into `directory`."""
    return {"xla_dump_to": directory, **_DUMP_OPTIONS}


# --- plain data ------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    """One HLO value as buffer assignment placed it."""

    id: int
    key: str  # "name{index}", the live-range file's spelling
    instruction: str
    index: str  # "{}" or "{0}" ...
    size: int
    offset: int
    shape: str  # without layout
    color: int  # memory space: 0 the default (HBM, host RAM)


@dataclass(frozen=True)
class Allocation:
    index: int
    size: int
    color: int
    parameter: int | None  # entry parameter number, if it holds one
    maybe_live_out: bool
    constant: bool
    thread_local: bool
    preallocated_temp: bool
    values: tuple[Value, ...]

    @property
    def whole_program(self) -> bool:
        """Held from the program's start to its end: entry parameters and
        outputs get allocations of their own, made before the program runs."""
        return self.parameter is not None or self.maybe_live_out


@dataclass(frozen=True)
class LiveRanges:
    sequence: tuple[str, ...]  # instruction names, the flattened schedule
    ranges: dict[str, tuple[int, int]]  # value key -> [start, end], inclusive
    end: int  # "max": the position after the last instruction
    peak_step: int | None  # XLA's own (logical) peak, when printed
    peak_bytes: int | None


@dataclass(frozen=True)
class Dump:
    module: Module
    live: LiveRanges
    allocations: tuple[Allocation, ...]
    files: dict[str, str] = field(default_factory=dict)  # kind -> path read


# --- finding and reading the files -----------------------------------------

_LIVE_SUFFIX = "-live-range.txt"
_ASSIGNMENT_SUFFIX = "-buffer-assignment.txt"


def read_dump(directory: str, module_name: str | None = None) -> Dump:
    """The memory files of the optimized module XLA dumped into `directory`
    (the one named `module_name` when several are there)."""
    lives = sorted(glob.glob(os.path.join(glob.escape(directory), "*" + _LIVE_SUFFIX)))
    if module_name is not None:
        named = [p for p in lives if _module_of(p) == module_name]
        lives = named or lives
    if not lives:
        raise DumpUnreadable(f"no *{_LIVE_SUFFIX} in XLA's dump ({_listing(directory)})")
    # Several compiles can land in one directory; the last module written wins.
    live_path = max(lives, key=lambda p: (os.path.getmtime(p), p))
    stem = live_path[: -len(_LIVE_SUFFIX)]
    assignment_path = stem + _ASSIGNMENT_SUFFIX
    hlo_path = stem + ".txt"
    for path in (assignment_path, hlo_path):
        if not os.path.exists(path):
            raise DumpUnreadable(f"XLA wrote {os.path.basename(live_path)} but not "
                                 f"{os.path.basename(path)}")  # fmt: skip
    return Dump(
        module=parse_hlo(_read(hlo_path)),
        live=parse_live_range(_read(live_path)),
        allocations=parse_buffer_assignment(_read(assignment_path)),
        files={"live_range": live_path, "buffer_assignment": assignment_path, "hlo": hlo_path},
    )


def _module_of(path: str) -> str | None:
    # module_0006.jit_g.cpu_after_optimizations-live-range.txt -> jit_g
    parts = os.path.basename(path).split(".")
    return parts[1] if len(parts) > 2 and parts[0].startswith("module_") else None


def _listing(directory: str) -> str:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return "the directory is missing"
    return f"{len(names)} files" if names else "it is empty"


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


# --- HloLiveRange ------------------------------------------------------------

_LIVE_HEADER = re.compile(r"^HloLiveRange \(max (\d+)\):")
_SEQ_LINE = re.compile(r"^\s+(\d+):(\S+)\s*$")
_RANGE_LINE = re.compile(r"^\s+(\S+?\{[\d,]*\}):(-?\d+)-(-?\d+)\s*$")
_PEAK_HEADER = re.compile(r"^\s+Live ranges at (\d+) \(peak\):")
_PEAK_LINE = re.compile(r"^\s+\S+: \d+ bytes \(cumulative: (\d+) bytes\)")


def parse_live_range(text: str) -> LiveRanges:
    lines = text.splitlines()
    if not lines or not (head := _LIVE_HEADER.match(lines[0])):
        raise DumpUnreadable("the live-range file to start 'HloLiveRange (max N):'")
    end = int(head.group(1))
    sequence: list[str] = []
    ranges: dict[str, tuple[int, int]] = {}
    peak_step = peak_bytes = None
    section = None
    for line in lines[1:]:
        stripped = line.strip()
        if stripped == "InstructionSequence:":
            section = "sequence"
        elif stripped == "BufferLiveRange:":
            section = "ranges"
        elif m := _PEAK_HEADER.match(line):
            section, peak_step = "peak", int(m.group(1))
        elif stripped.startswith("Stack trace breakdown"):
            section = None
        elif section == "sequence" and (m := _SEQ_LINE.match(line)):
            if int(m.group(1)) != len(sequence):
                raise DumpUnreadable("the live-range schedule numbered 0, 1, 2, ...")
            sequence.append(m.group(2))
        elif section == "ranges" and (m := _RANGE_LINE.match(line)):
            ranges[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        elif section == "peak" and (m := _PEAK_LINE.match(line)):
            peak_bytes = int(m.group(1))
    if not sequence or not ranges:
        raise DumpUnreadable("an InstructionSequence and a BufferLiveRange section "
                             "in the live-range file")  # fmt: skip
    return LiveRanges(tuple(sequence), ranges, end, peak_step, peak_bytes)


# --- BufferAssignment ----------------------------------------------------------

_ALLOC_HEADER = re.compile(r"^allocation (\d+): size (\d+)(.*):\s*$")
_VALUE_LINE = re.compile(
    r"^\s+value: <(\d+) (\S+?)(\{[\d,]*\})?(?: \(phi\))?(?: @(\d+))?> "
    r"\(size=(\d+),offset=(\d+)\): (.*)$"
)


def parse_buffer_assignment(text: str) -> tuple[Allocation, ...]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "BufferAssignment:":
        raise DumpUnreadable("the buffer-assignment file to start 'BufferAssignment:'")
    out: list[Allocation] = []
    head: re.Match | None = None
    values: list[Value] = []

    def close() -> None:
        if head is not None:
            out.append(_allocation(head, values))

    for line in lines[1:]:
        if m := _ALLOC_HEADER.match(line):
            close()
            head, values = m, []
        elif m := _VALUE_LINE.match(line):
            if head is None:
                raise DumpUnreadable("each value line under an 'allocation N:' line")
            name, index = m.group(2), m.group(3) or "{}"
            values.append(Value(
                id=int(m.group(1)), key=name + index, instruction=name, index=index,
                size=int(m.group(5)), offset=int(m.group(6)),
                shape=strip_layout(m.group(7)), color=int(m.group(4) or 0),
            ))  # fmt: skip
        elif not line.strip() or head is None:
            # The file goes on with per-allocation summaries and statistics.
            if head is not None and not line.startswith(" "):
                close()
                head = None
            continue
    close()
    if not out:
        raise DumpUnreadable("'allocation N: size S' lines in the buffer-assignment file")
    return tuple(out)


def _allocation(head: re.Match, values: list[Value]) -> Allocation:
    rest = head.group(3)
    # Shapes in the attributes (|...|) hold commas; drop them before splitting.
    flags = re.sub(r"\|[^|]*\|", "", rest)
    color = re.search(r", color (\d+)", flags)
    parameter = re.search(r", parameter (\d+)", flags)
    return Allocation(
        index=int(head.group(1)),
        size=int(head.group(2)),
        color=int(color.group(1)) if color else 0,
        parameter=int(parameter.group(1)) if parameter else None,
        maybe_live_out="maybe-live-out" in flags,
        constant=", constant" in flags,
        thread_local="thread-local" in flags,
        preallocated_temp="preallocated-temp" in flags,
        values=tuple(values),
    )


# --- HLO text ------------------------------------------------------------------


# XLA's memory spaces ("colors" in buffer assignment, `S(n)` in a layout):
# 0 is the device's main memory (HBM; RAM on CPU) and 5 host memory, where
# offloaded values live (xla::Layout::kHostMemorySpace). libtpu numbers its
# own; as read off deviceless compiles' dumps (libtpu 0.0.42.1, v5e, v5p and
# v6e alike): 1 holds the temporaries XLA keeps in VMEM; 2 the flags that
# asynchronous copies and slices signal completion with (every value there is
# a `*-start` instruction's u32 context element); 6 scalars in SMEM (loop
# counters, scalar operands of fusions; an operand a Pallas kernel takes with
# `memory_space=pltpu.SMEM` is copied there). Any other number is named as
# such: "unnamed space N".
_HOST_SPACE = 5
_TPU_SPACES = {1: "vmem", 2: "sflag", 6: "smem"}


def space_name(color: int, platform: str | None) -> str:
    """What a memory space is called: "host", on TPU "vmem", "sflag" or
    "smem", else `unnamed space N`, N the backend's number for it."""
    if color == _HOST_SPACE:
        return "host"
    if platform == "tpu" and color in _TPU_SPACES:
        return _TPU_SPACES[color]
    return f"unnamed space {color}"
