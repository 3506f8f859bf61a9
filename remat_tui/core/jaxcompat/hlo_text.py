"""Provides the optimized HLO module XLA dumped (`*after_optimizations.txt`,
`jaxcompat.buffers` finds it), read into plain Python data: each
instruction's op, shape without layout, operands and metadata (op_name, and
the stack of source frames where XLA prints one), and what an op_name says of
the pass it came from (`phase`, `recomputes`).

Everything here depends on XLA's text format, so it lives in jaxcompat; every
parser checks the layout it reads and raises `DumpUnreadable` with what it
expected rather than guessing.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, field


class DumpUnreadable(Exception):
    """XLA's dump is missing or laid out in a way this module does not know."""


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
    # The computations it runs (a fusion's, a loop's body and condition, a
    # conditional's branches), and its number: a parameter's position, a
    # get-tuple-element's index.
    called: tuple[str, ...] = ()
    number: int | None = None


@dataclass(frozen=True)
class Module:
    name: str
    entry: str
    instructions: dict[str, Instruction]
    root: str | None
    roots: dict[str, str] = field(default_factory=dict)  # computation -> its root


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
    roots: dict[str, str] = {}
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
            called=_called(after), number=_number(opcode, after),
        )  # fmt: skip
        if is_root:
            roots[computation] = iname
        if is_root and computation == entry:
            root = iname
    if entry is None or not instructions:
        raise DumpUnreadable("an ENTRY computation in the optimized HLO")
    _tuple_elements(instructions)
    return Module(name=name, entry=entry, instructions=instructions, root=root, roots=roots)


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
    # 'f32[2]{0} %name' or a bare name; constants print their literal. JAX
    # 0.12's dumps write a tuple's element as '%name#2', with no
    # get-tuple-element instruction (`_tuple_elements` makes one).
    operands = tuple(re.findall(r"%([\w.\-]+(?:#\d+)?)", args[:end]))
    return opcode.strip(), operands


def _tuple_elements(instructions: dict[str, Instruction]) -> None:
    """A get-tuple-element for each `name#k` operand (JAX 0.12's dumps name
    a tuple's element so, where 0.10's read it with a get-tuple-element of
    its own), named as the operand is, so that every reader of the module
    follows one form."""
    for instruction in list(instructions.values()):
        for operand in instruction.operands:
            tuple_name, sep, k = operand.partition("#")
            if not sep or operand in instructions:
                continue
            whole = instructions.get(tuple_name)
            instructions[operand] = Instruction(
                name=operand, opcode="get-tuple-element",
                shape=tuple_element(whole.shape, int(k)) if whole else "",
                computation=instruction.computation, operands=(tuple_name,), number=int(k),
            )  # fmt: skip


def tuple_element(shape: str, k: int) -> str:
    """'(s32[], f32[2,3])', 1 -> 'f32[2,3]' (a shape without layout); ''
    where there is no such element."""
    inner = shape[1:-1] if shape.startswith("(") else ""
    parts, depth, at = [], 0, 0
    for i, ch in enumerate(inner):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(inner[at:i].strip())
            at = i + 1
    parts.append(inner[at:].strip())
    return parts[k] if inner and k < len(parts) else ""


_CALLED = re.compile(r"\b(?:calls|body|condition|to_apply)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")


def _called(after: str) -> tuple[str, ...]:
    """The computations an instruction runs, as its attributes name them."""
    names = _CALLED.findall(after)
    for listed in _BRANCHES.findall(after):
        names += [n.strip().lstrip("%") for n in listed.split(",") if n.strip()]
    return tuple(names)


def _number(opcode: str, after: str) -> int | None:
    """A parameter's position (`parameter(2)`), a get-tuple-element's index."""
    m = None
    if opcode == "parameter":
        m = re.match(r"parameter\((\d+)\)", after)
    elif opcode == "get-tuple-element":
        m = re.search(r"\bindex=(\d+)", after)
    return int(m.group(1)) if m else None


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


def _metadata(
    line: str, frames: dict[int, tuple[Frame, ...]]
) -> tuple[str | None, tuple[Frame, ...]]:
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
    callers = _callers()
    stacks: dict[int, tuple[Frame, ...]] = {}
    for i in raw:
        chain, seen, at = [], set(), i
        while at and at in raw and at not in seen:
            seen.add(at)
            location, parent = raw[at]
            frame = locations.get(location)
            if frame is not None and (frame.file, frame.line) not in callers:
                chain.append(frame)
            at = parent - shift
        stacks[i] = tuple(chain)
    return stacks


def _callers() -> frozenset[tuple[str, int]]:
    """(file, line) of each frame on the Python stack as the program is read:
    the code that called remat-tui (a test, a notebook cell, the console
    script). JAX records them in the stack of an op remat-tui's own code made
    (its frames are excluded from JAX's), where the op's innermost frame
    outside JAX would otherwise be the caller's line; a worker process has
    no such frames. They are never the traced function's: it has returned
    before its program is read."""
    return frozenset((f.f_code.co_filename, line) for f, line in traceback.walk_stack(None))


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


def primitive(op_name: str | None) -> str | None:
    """JAX's primitive at the end of an op_name (`jit(step)/jvp()/tanh` ->
    `tanh`); the first, where XLA joined several with `;`."""
    if not op_name:
        return None
    return op_name.split(";")[0].rsplit("/", 1)[-1] or None


def recomputes(op_name: str | None) -> bool:
    """Backward work that repeats forward work: inside a checkpoint's
    rematted computation (remat2 puts it after the transpose, as
    '.../checkpoint/rematted_computation/...'; remat3 inside it, as
    'transpose(jvp(rematted_computation))/...')."""
    return (
        phase(op_name) == "backward" and op_name is not None and "rematted_computation" in op_name
    )


_WHILE = re.compile(r"\swhile\(")


def has_loops(text: str) -> bool:
    """Whether a compiled module's HLO text (`Compiled.as_text()`) runs a
    `while` loop (a scan, a fori_loop): XLA's cost analysis then counts the
    loop's body once, whatever its trip count."""
    return _WHILE.search(text) is not None
