"""Provides where a compiled program's memory goes (Contract 7): the bytes live
at each step of XLA's schedule, the step where the backward part starts, and
the buffers live at the peak, each with its bytes, shape, instruction, live
range, category and the source line XLA carries for it.

Steps are positions in XLA's flattened schedule (HloLiveRange's): every
instruction of the entry computation and of the loop bodies and branches it
calls, a loop's body once however many times it runs.

The source is XLA's own record of the compile (see
`jaxcompat.buffers` for what it is and why): its schedule and each value's
live range (HloLiveRange), and how buffer assignment placed every value in an
allocation (offsets, sizes, memory spaces). An executable only has that record
if it was compiled with XLA's dump turned on, which `compile_with_memory` does
(per compile, no global flag); `memory_of` then reads it.

The figures themselves, how bytes are counted and how a buffer's category is
told, are `xla.buffers.accounting`'s.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import TYPE_CHECKING

from remat_tui.core.jaxcompat import buffers as xla
from remat_tui.core.jaxcompat.hlo_text import DumpUnreadable
from remat_tui.core.xla.buffers.accounting import (  # noqa: F401 (re-exported: the API's types)
    CATEGORIES,
    Buffer,
    Memory,
    from_dump,
)
from remat_tui.core.xla.buffers.occupancy import MAX_CURVE_POINTS  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    import jax

# --- compiling with XLA's record, and reading it ------------------------------

# Executables compiled here, each with what was read from its dump (a Dump, or
# the reason there is none). Weak: the entry goes with the executable.
_records: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compile_with_memory(
    lowered: jax.stages.Lowered, compiler_options: dict | None = None
) -> jax.stages.Compiled:
    """`lowered.compile(...)` with XLA's dump written to a temporary directory
    for this compile alone, read, and removed; `memory_of` on the executable
    it returns then has something to read. Compile errors propagate as from
    `lowered.compile`."""
    directory = tempfile.mkdtemp(prefix="remat-tui-xla-")
    try:
        options = {**(compiler_options or {}), **xla.dump_options(directory)}
        executable = lowered.compile(compiler_options=options)
        try:
            # The directory is this compile's alone: its one module is ours.
            record: xla.Dump | str = xla.read_dump(directory)
        except (DumpUnreadable, OSError) as exc:
            record = f"XLA's dump could not be read: {exc}"
            if not os.listdir(directory) and _persistent_cache():
                record = (
                    "XLA wrote no dump for this compile: it came from JAX's persistent "
                    f"compilation cache ({_persistent_cache()}), which keeps no dump"
                )
        _records[executable] = record
        return executable
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def memory_of(
    executable: jax.stages.Compiled | jax.stages.Lowered, platform: str | None = None
) -> Memory | None:
    """Where the compiled memory of `executable` goes; None when there is
    nothing to read (`memory_and_reason` says why). `executable` is one
    `compile_with_memory` returned, or a `jax.stages.Lowered`, compiled here
    for the purpose; `platform` ("tpu", "cpu", ...) names its memory spaces."""
    return memory_and_reason(executable, platform)[0]


def memory_and_reason(
    executable: jax.stages.Compiled | jax.stages.Lowered, platform: str | None = None
) -> tuple[Memory | None, str | None]:
    if not hasattr(executable, "memory_analysis") and hasattr(executable, "compile"):
        executable = compile_with_memory(executable)
    try:
        record = _records.get(executable)
    except TypeError:
        record = None
    if record is None:
        return None, (
            "this executable was compiled without XLA's dump, which holds the schedule "
            "and buffer assignment: compile it with "
            "remat_tui.core.xla.buffers.memory.compile_with_memory"
        )
    if isinstance(record, str):
        return None, record
    try:
        return from_dump(record, platform), None
    except DumpUnreadable as exc:
        return None, f"XLA's dump could not be read: {exc}"


def _persistent_cache() -> str | None:
    import jax

    return getattr(jax.config, "jax_compilation_cache_dir", None) or None
