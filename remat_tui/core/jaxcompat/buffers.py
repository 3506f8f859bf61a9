"""Provides what XLA wrote about one compiled program's memory, read into plain
Python data: the schedule, every value's live range, how values share
allocations, and each instruction's op, shape and metadata.

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


class DumpUnreadable(Exception):
    """XLA's dump is missing or laid out in a way this module does not know."""


def dump_options(directory: str) -> dict:
    """Compiler options (for `Lowered.compile(compiler_options=...)`) that make
    XLA write this compile's memory files into `directory`."""
    return {"xla_dump_to": directory, **_DUMP_OPTIONS}


# --- plain data ------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str | None = None


@dataclass(frozen=True)
class Instruction:
    name: str
    opcode: str
    shape: str  # without layout: "f32[256,128]", "(f32[2], s32[])"
    computation: str
    operands: tuple[str, ...] = ()
    op_name: str | None = None
    stack: tuple[Frame, ...] = ()  # innermost first; empty when XLA carries none


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
class Module:
    name: str
    entry: str
    instructions: dict[str, Instruction]
    root: str | None


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

    def close():
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

_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(ROOT\s+)?%?([\w.\-]+) = (.*)$")
_META = re.compile(r"metadata=\{([^}]*)\}")
_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def parse_hlo(text: str) -> Module:
    lines = text.splitlines()
    if not lines or not lines[0].startswith("HloModule "):
        raise DumpUnreadable("the optimized HLO to start 'HloModule NAME'")
    name = lines[0].split()[1].rstrip(",")
    frames = _stack_frames(lines)
    instructions: dict[str, Instruction] = {}
    entry = root = None
    computation = None
    for line in lines[1:]:
        if computation is None:
            if (m := _COMPUTATION.match(line)) and not line.startswith(" "):
                computation = m.group(2)
                if m.group(1):
                    entry = computation
            continue
        if line.startswith("}"):
            computation = None
            continue
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        is_root, iname, rest = m.groups()
        shape, after = _split_shape(rest)
        opcode, operands = _call(after)
        op_name, stack = _metadata(line, frames)
        instructions[iname] = Instruction(
            name=iname, opcode=opcode, shape=strip_layout(shape), computation=computation,
            operands=operands, op_name=op_name, stack=stack,
        )  # fmt: skip
        if is_root and computation == entry:
            root = iname
    if entry is None or not instructions:
        raise DumpUnreadable("an ENTRY computation in the optimized HLO")
    return Module(name=name, entry=entry, instructions=instructions, root=root)


def _split_shape(rest: str) -> tuple[str, str]:
    """'(f32[2]{0}, s32[]) tuple(%a, %b), ...' -> the shape and what follows."""
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                return rest[: i + 1], rest[i + 1 :].lstrip()
        return rest, ""
    shape, _, after = rest.partition(" ")
    return shape, after


def _call(after: str) -> tuple[str, tuple[str, ...]]:
    opcode, _, args = after.partition("(")
    depth, end = 1, len(args)
    for i, ch in enumerate(args):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            end = i
            break
    # Operands print as '%name' (JAX 0.10, 0.12) or, in newer text, as
    # 'f32[2]{0} %name' or a bare name; constants print their literal.
    operands = tuple(re.findall(r"%([\w.\-]+)", args[:end]))
    return opcode.strip(), operands


def strip_layout(shape: str) -> str:
    """'f32[256,128]{1,0:T(8,128)S(1)}' -> 'f32[256,128]'; tuples element-wise;
    the '/*index=5*/' markers XLA puts in long tuples are dropped."""
    shape = re.sub(r"/\*[^*]*\*/", "", shape)
    out, depth = [], 0
    for ch in shape:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return re.sub(r"\s+", " ", "".join(out)).strip()


def _metadata(line: str, frames: dict[int, tuple[Frame, ...]]):
    m = _META.search(line)
    if not m:
        return None, ()
    fields = {k: v.strip('"') for k, v in _FIELD.findall(m.group(1))}
    op_name = fields.get("op_name")
    if "stack_frame_id" in fields:
        stack = frames.get(int(fields["stack_frame_id"]), ())
    elif "source_file" in fields and fields.get("source_line", "").isdigit():
        stack = (Frame(fields["source_file"], int(fields["source_line"])),)
    else:
        stack = ()
    return op_name, stack


def _stack_frames(lines: list[str]) -> dict[int, tuple[Frame, ...]]:
    """The module's stack-frame table (FileNames, FunctionNames, FileLocations,
    StackFrames, printed between the HloModule line and the first computation),
    each frame id mapped to its stack, innermost first."""
    tables: dict[str, dict[int, str]] = {}
    current = None
    for line in lines[1:]:
        if not line.strip():
            continue
        if line.strip() in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = tables.setdefault(line.strip(), {})
            continue
        m = re.match(r"^(\d+) (.*)$", line)
        if current is None or not m:
            if tables or line.startswith(("%", "ENTRY")) or line.rstrip().endswith("{"):
                break
            continue
        current[int(m.group(1))] = m.group(2)
    if "StackFrames" not in tables:
        return {}

    def num(text: str, key: str) -> int:
        m = re.search(rf"\b{key}=(\d+)", text)
        return int(m.group(1)) if m else 0

    files = {i: v.strip('"') for i, v in tables.get("FileNames", {}).items()}
    functions = {i: v.strip('"') for i, v in tables.get("FunctionNames", {}).items()}
    locations = {
        i: Frame(
            files.get(num(v, "file_name_id"), "?"),
            num(v, "line"),
            functions.get(num(v, "function_name_id")),
        )
        for i, v in tables.get("FileLocations", {}).items()
    }
    raw = {
        i: (num(v, "file_location_id"), num(v, "parent_frame_id"))
        for i, v in tables["StackFrames"].items()
    }
    # The proto's ids are 1-based with 0 for "none"; XLA's text printer writes
    # each parent one higher (a root frame shows itself as its parent). A frame
    # printed as its own parent can only mean the shifted form.
    shift = 1 if any(parent == i for i, (_, parent) in raw.items()) else 0
    stacks: dict[int, tuple[Frame, ...]] = {}
    for i in raw:
        chain, seen, at = [], set(), i
        while at and at in raw and at not in seen:
            seen.add(at)
            location, parent = raw[at]
            if location in locations:
                chain.append(locations[location])
            at = parent - shift
        stacks[i] = tuple(chain)
    return stacks


# --- JAX's name stack in op_name -------------------------------------------------

_BACKWARD = re.compile(r"(?:^|[/(])transpose\(")
_FORWARD = re.compile(r"(?:^|[/(])jvp\(")


def phase(op_name: str | None) -> str | None:
    """'forward' for JAX's jvp(...) work, 'backward' for transpose(...) work
    (what autodiff adds), None for what neither names (arguments, the ones
    cotangent, XLA's own copies)."""
    if not op_name:
        return None
    if _BACKWARD.search(op_name):
        return "backward"
    if _FORWARD.search(op_name):
        return "forward"
    return None


def recomputes(op_name: str | None) -> bool:
    """Backward work that repeats forward work: inside a checkpoint's
    rematted computation (remat2 puts it after the transpose, as
    '.../checkpoint/rematted_computation/...'; remat3 inside it, as
    'transpose(jvp(rematted_computation))/...')."""
    return phase(op_name) == "backward" and "rematted_computation" in op_name
