"""Provides `compile_program`: the one place every compile of remat-tui goes
through (Contract 13), and what it counts. report, compare, suggest, fit,
memory, the app's compile process, the notebook and the API all reach it
through `xla.compile.costs`.

A program is known by its key: the lowered StableHLO module's text, the
device or topology it is compiled for, whether XLA's breakdown of the peak
is read, the JAX, jaxlib and libtpu versions,
XLA_FLAGS and LIBTPU_INIT_ARGS, the host's CPU for a CPU compile, and
remat-tui's own code that reads XLA's numbers (a new version of it reads them
anew). The text is without debug information (source lines and op names are
metadata: they do not tell two programs apart; and the debug text names the
caller's frames, which differ between a command and a worker). A breakdown
also names the user's lines: its key adds `sources`, the user's files as
they are on disk (`xla.compile.costs` says which), so a line moved in the file is a
new breakdown. A breakdown's numbers answer a request without one. A known program is
answered without compiling: from this process's memo (SAME_PROGRAM), else
from the store on disk (STORED,
`xla.compile.store`). A changed file, argument shape, option or
version lowers to another key, so an answer is never stale by construction.

Otherwise it compiles (COMPILED), here or, inside a search that runs its
compiles in parallel, in a worker process or a Ray task
(`xla.run.pool` sets `dispatch` for its threads; IN_WORKER), and
remembers the numbers: never the executable. Two threads asking for one
program at once compile it once: the second waits for the first.

Stored: what was read, `Compiled.stored()` (the report's numbers and what the
forward work makes, for naming residuals at the peak); not a compile that raised (it
may fail differently next time, say for want of host memory), nor a result
whose breakdown was asked for and could not be read.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import jax

from remat_tui.core.runtime.lru import LRU
from remat_tui.core.xla.buffers.memory import compile_with_memory
from remat_tui.core.xla.compile.compiled import (
    Compiled,
    does_not_fit,
    out_of_memory,
    read,
    trim_message,
)
from remat_tui.core.xla.compile.store import Store
from remat_tui.errors import RematError

COMPILED, SAME_PROGRAM, STORED, IN_WORKER = "compiled", "same program", "stored", "in a worker"
NO_CACHE_ENV = "REMAT_TUI_NO_CACHE"  # "1": neither read nor write the store (--no-cache)
MEMO_SIZE = 1024  # programs' numbers kept in this process (a few KiB each)
# The code whose reading of XLA's output makes the stored numbers: a change to
# it is a new key.
_READING_CODE = ("core/xla", "core/jaxcompat")

_memo: LRU[Compiled] = LRU(MEMO_SIZE)  # by program key
_in_flight: dict[str, threading.Event] = {}
_lock = threading.Lock()
_store_setting: bool | None = None  # None: the environment decides
_stores: dict[str, Store] = {}  # folder -> its Store

# Set by `xla.run.pool` in the threads of a parallel search:
# (Program, memory, source, cancelled) -> Compiled, or None where the worker
# lowered another program (the target's file changed on disk meanwhile).
dispatch: contextvars.ContextVar = contextvars.ContextVar("dispatch", default=None)
# In a worker: the key the asking process lowered (`expecting`).
_expected: contextvars.ContextVar = contextvars.ContextVar("expected", default=None)


class OtherProgram(Exception):
    """A worker lowered another program than the asking process did (the
    target's file changed between, or the worker's versions, flags or host
    differ): `parts` says what its program is made of."""

    def __init__(self, parts: dict):
        super().__init__("another program")
        self.parts = parts


@contextlib.contextmanager
def expecting(key: str) -> Iterator[None]:
    """In a worker: compile only the program whose key is `key`; any other
    raises OtherProgram before compiling."""
    token = _expected.set(key)
    try:
        yield
    finally:
        _expected.reset(token)


@dataclass
class Counts:
    """What this process's compiles were: XLA compiles made here, in workers,
    answered by the same program in the memo, answered by the store, and
    compiled ahead by a parallel search that then had no use for them."""

    compiled: int = 0
    in_workers: int = 0
    same_program: int = 0
    stored: int = 0
    ahead: int = 0
    slowest: float = 0.0  # the longest compile made here, in seconds
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, how: str, n: int = 1) -> None:
        name = {COMPILED: "compiled", IN_WORKER: "in_workers", SAME_PROGRAM: "same_program",
                STORED: "stored"}.get(how, how)  # fmt: skip
        with self.lock:
            setattr(self, name, getattr(self, name) + n)

    def snapshot(self) -> dict:
        with self.lock:
            return {k: getattr(self, k) for k in ("compiled", "in_workers", "same_program",
                                                  "stored", "ahead")}  # fmt: skip


counts = Counts()


class Program(NamedTuple):
    """A program's key (hex), and what it is made of, in words."""

    key: str
    parts: dict


class Answer(NamedTuple):
    result: Compiled
    how: str  # COMPILED, IN_WORKER, SAME_PROGRAM or STORED
    # kept only where asked for (a run needs it) and compiled here
    executable: jax.stages.Compiled | None = None
    program: Program | None = None


def use_store(on: bool | None) -> None:
    """Read and write the store (True), neither (False, `--no-cache`), or as
    REMAT_TUI_NO_CACHE says (None)."""
    global _store_setting
    _store_setting = on


def store_enabled() -> bool:
    if _store_setting is not None:
        return _store_setting
    return os.environ.get(NO_CACHE_ENV, "").lower() not in ("1", "true", "yes")


def store() -> Store:
    """The store in the user's cache folder (as the environment says now)."""
    probe = Store()
    with _lock:
        return _stores.setdefault(str(probe.folder), probe)


def clear_memo() -> None:
    _memo.clear()


def program_of(
    lowered: jax.stages.Lowered,
    dev: jax.Device,
    label: str,
    memory: bool,
    sources: str = "",
    mesh: str = "",
) -> Program:
    """The key of `lowered` compiled for `dev` (labelled `label`), with XLA's
    breakdown of the peak read (`memory`; `sources`: the user's files it
    names, as on disk) or not, over the mesh `mesh` (`data=4,model=2`;
    Contract 17: what a configuration is compiled over)."""
    module = hashlib.sha256(lowered.as_text().encode()).hexdigest()
    return _program(module, dev.platform, label, memory, sources, mesh)


def _program(
    module: str, platform_name: str, label: str, memory: bool, sources: str, mesh: str = ""
) -> Program:
    parts = {
        "module": module,
        "device": label,
        "mesh": mesh,
        "platform": platform_name,
        "breakdown": memory,
        "sources": sources if memory else "",
        "versions": _versions(platform_name),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "libtpu_init_args": os.environ.get("LIBTPU_INIT_ARGS", ""),
        "host": _host() if platform_name == "cpu" else None,
    }
    text = json.dumps(parts, sort_keys=True)
    return Program(hashlib.sha256(text.encode()).hexdigest(), parts)


def compile_program(
    lowered: jax.stages.Lowered,
    dev: jax.Device,
    label: str,
    spanned: int,
    what: str,
    *,
    memory: bool = False,
    keep_executable: bool = False,
    source: Any = None,
    sources: str = "",
    mesh: str = "",
    cancelled: Callable[[], bool] | None = None,
) -> Answer:
    """XLA's numbers for `lowered` compiled for `dev`: known, or compiled now
    (module doc). `memory`: with where the peak goes; `keep_executable`:
    compile here whatever is known, and keep the executable (to run it);
    `source`: how a worker process rebuilds the target (`xla.run.pool`),
    None to compile here; `sources`: the user's files as on disk (a digest),
    which a breakdown names; `mesh`: the mesh it is compiled over, in words. A
    compile that fails other than for want of memory raises RematError with
    XLA's message."""
    program = program_of(lowered, dev, label, memory, sources, mesh)
    if _expected.get() not in (None, program.key):
        raise OtherProgram(program.parts)
    while not keep_executable:
        known = _known(program)
        if known is None and not memory:  # a result with the breakdown answers, without it
            known = _known(program_of(lowered, dev, label, True, sources, mesh))
            if known is not None:
                known = (_without_breakdown(known[0]), known[1])
        if known is not None:
            return Answer(known[0], known[1], program=program)
        with _lock:
            waiting = _in_flight.get(program.key)
            if waiting is None:
                _in_flight[program.key] = threading.Event()
                break
        waiting.wait()  # the same program, compiling in another thread: its answer
    try:
        answer = None
        sent = dispatch.get() if not keep_executable and source is not None else None
        if sent is not None:
            result = sent(program, memory, source, cancelled)
            if result is not None:
                answer = Answer(_normal(result), IN_WORKER, program=program)
        if answer is None:
            answer = _compile_here(lowered, dev, label, spanned, what, memory, program)
        counts.add(answer.how)
        remember(program, answer.result, memory)
        return answer
    finally:
        if not keep_executable:
            with _lock:
                _in_flight.pop(program.key).set()


def remember(program: Program, result: Compiled, memory: bool) -> None:
    """Keep `result` as `program`'s numbers, in the memo and, unless it lacks
    a breakdown that was asked for, in the store."""
    _memo.put(program.key, result)
    if memory and result.fits and result.memory is None:
        return
    if store_enabled():
        store().put(program.key, {"compiled": result.stored(), "program": program.parts})


def _known(program: Program) -> tuple[Compiled, str] | None:
    hit = _memo.get(program.key)
    if hit is not None:
        counts.add(SAME_PROGRAM)
        return hit, SAME_PROGRAM
    if not store_enabled():
        return None
    entry = store().get(program.key)
    if entry is None:
        return None
    try:
        result = Compiled.from_dict(entry["compiled"])
    except (KeyError, TypeError):  # written by a remat-tui whose Compiled had other fields
        return None
    _memo.put(program.key, result)
    counts.add(STORED)
    return result, STORED


def _compile_here(
    lowered: jax.stages.Lowered,
    dev: jax.Device,
    label: str,
    spanned: int,
    what: str,
    memory: bool,
    program: Program,
) -> Answer:
    # TPU's peak is read from XLA's dump, so a TPU compile always keeps it.
    dumped = memory or dev.platform == "tpu"
    start = time.perf_counter()
    try:
        executable = compile_with_memory(lowered) if dumped else lowered.compile()
    except Exception as exc:
        message = str(exc)
        if not out_of_memory(message):
            raise RematError(f"{what} failed: XLA says:\n{trim_message(message)}") from None
        result = does_not_fit(message, label, spanned, time.perf_counter() - start)
        return Answer(_normal(result), COMPILED, None, program)
    seconds = time.perf_counter() - start
    with counts.lock:
        counts.slowest = max(counts.slowest, seconds)
    result = read(executable, dev.platform, label, spanned, seconds, dumped, memory)
    return Answer(_normal(result), COMPILED, executable, program)


def _normal(result: Compiled) -> Compiled:
    """`result` as the store gives it back (JSON's lists for tuples), so that
    a first run and a run answered from the store hold equal values."""
    if isinstance(result, dict):
        return Compiled.from_dict(json.loads(json.dumps(result)))
    return Compiled.from_dict(json.loads(json.dumps(result.stored())))


def _without_breakdown(result: Compiled) -> Compiled:
    """A result with the breakdown as a compile without it reads it."""
    return replace(result, memory=None, memory_note=None, spaces_note=None)


@functools.cache
def _versions(platform_name: str) -> dict:
    import jaxlib

    versions = {
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", None) or importlib.metadata.version("jaxlib"),
        "remat_tui_code": _reading_code(),
    }
    if platform_name == "tpu":
        try:
            versions["libtpu"] = importlib.metadata.version("libtpu")
        except importlib.metadata.PackageNotFoundError:
            versions["libtpu"] = "unknown"
    return versions


@functools.cache
def _reading_code() -> str:
    """A digest of the code that turns XLA's output into our numbers."""
    return code_digest(Path(__file__).resolve().parents[3])  # remat_tui/, from core/xla/compile/


def code_digest(package: Path) -> str:
    """A digest of every module under `package`'s folders that read XLA's
    output (`_READING_CODE`), in subfolders too, each by its path there: a
    module changed, added or moved gives another digest, so the store never
    answers with numbers an older reading made."""
    digest = hashlib.sha256()
    for folder in _READING_CODE:
        root = package / folder
        for path in sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).parts):
            name = path.relative_to(root).as_posix()
            digest.update(name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def _host() -> str:
    """The host's CPU, which XLA's CPU compile targets."""
    model, flags = platform.processor() or platform.machine(), ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name") and ":" in line:
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and ":" in line:
                    flags = hashlib.sha256(line.split(":", 1)[1].encode()).hexdigest()[:12]
                if model and flags:
                    break
    except OSError:
        pass
    return f"{platform.machine()} {model} {flags}".strip()
