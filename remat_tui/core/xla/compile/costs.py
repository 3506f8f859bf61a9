"""Provides `compile_answer` (Contract 6, "compiled"): what XLA says the step a
training loop runs needs on a device, for a target as configured.

The step is the loss and its gradient of the configured function (site
overrides and the outer policy, the function `analyze` traces:
configured.configured_function): `jax.vjp` applied to a cotangent of ones,
its output kept, which for a scalar loss is `jax.value_and_grad`, with
respect to the first argument or the target's `params=`; or, for a
target that trains, its whole training step (`xla.compile.lowering`). It is
lowered with the example arguments' shapes (ShapeDtypeStructs: nothing is
allocated) and compiled for the chosen device, not run (`xla.run.measure`
runs it, when asked); `memory_analysis()` and `cost_analysis()` of the
executable are the numbers.

Where it compiles: an unsharded target for the chosen device alone (one chip
of a TPU topology); a target whose example arguments are sharded over several
devices (its args factory took `devices`, `setup.loading`) over those
devices, and the numbers are then per device. A deviceless TPU topology
(`tpu:v5e:2x2`, `setup.devices`) traces on a local CPU device and compiles
for its chips.

`peak_bytes` is the peak of the device's main memory (HBM; RAM on CPU), the
memory a budget is spent on. On CPU (and GPU) it is argument + output +
temp - alias, XLA's sizes of that memory's allocations (`peak_source`
"sum"). On TPU those sizes are not HBM's: JAX 0.10's libtpu leaves its
preallocated temporaries out of `temp_size_in_bytes` and JAX 0.12's counts
every memory's, VMEM included, and both count the temporaries' whole heap
(measured on bench/gpt_v5e.py's gpt_quick for v5e: a sum of 2.09 GB on JAX
0.10 and 2.31 GB on 0.12, against 1.65 GB of HBM live at its peak on both).
So a TPU compile always keeps XLA's dump, and `peak_bytes` is the most HBM
holds at one step of XLA's schedule (`peak_source` "live",
`xla.buffers.memory`); the sum stands only where the dump could not be read.
The backend's own `peak_memory_in_bytes` is kept beside it
(`backend_peak_bytes`): on TPU it is every memory at one moment, VMEM too
(measured: the example MLP's 389 KiB of HBM + 200 KiB of VMEM), never less
than HBM's peak; on CPU it leaves the temps out. With the memory breakdown
(`memory=True`) each other memory space has its own peak and buffers
(`memory["other_spaces"]`), and `spaces_note` says why, where the spaces do
not add up to the backend's figure within 1%.

A compile that runs out of the device's memory is a result, not an error
(Contract 8): `fits` is False, with the bytes XLA said it needed where its
message says. Any other failure raises RematError with XLA's message.

Compiling costs seconds to a minute, so results are kept per (target,
Config, device): at most CACHE_SIZE results, least recently used dropped, a
failed compile too (the same code fails the same way). Beneath that, every
compile goes through `xla.compile.service`, which answers a program it
has seen (the same lowered module, device, options and versions) without
compiling, in this process or from the store on disk, across runs.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import jax
from jax.sharding import SingleDeviceSharding

from remat_tui.core.runtime.lru import LRU
from remat_tui.core.setup.arguments import flatten_arguments
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import (
    device_label,
    device_set,
    trace_device,
)
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.setup.meshes import mesh_of, mesh_words, placed_sharding
from remat_tui.core.trace.configured import check_cancelled
from remat_tui.core.xla.compile import service as compile_service
from remat_tui.core.xla.compile.compiled import (  # noqa: F401 (re-exported: where callers look)
    ERROR_LINES,
    Compiled,
    does_not_fit,
    out_of_memory,
    trim_message,
)
from remat_tui.core.xla.compile.lowering import Lowered, lower
from remat_tui.errors import RematError
from remat_tui.registry import Target

CACHE_SIZE = 256  # results kept (numbers only: no executable is held)

# (id(target), Config, device, with the memory breakdown)
#   -> (target, its Compiled or the RematError it raised)
_cache: LRU[tuple[Target, Compiled | RematError]] = LRU(CACHE_SIZE)
CACHED = "cached"  # this very target and configuration, compiled before in this process


@dataclass(frozen=True)
class Source:
    """Where a worker process finds the target to compile it there
    (`xla.run.pool`): its file and name, and the batch it was
    built at (fit), or None for the example's, and the mesh it asks for
    (`Target.mesh`). A dataclass: the compile sets its `config` with
    `dataclasses.replace`."""

    file: str
    name: str
    batch: int | None = None
    config: Config | None = None  # the configuration compiled (set by the compile)
    mesh: tuple[tuple[str, int], ...] | None = None


class CompiledStep(NamedTuple):
    """One compile kept for running it (`xla.run.measure`): XLA's numbers,
    the executable (None when it did not fit the device, or when it was not
    compiled here), how to call it, the traced arguments' leaves (as the
    target built them; `setup.arguments`) and their placed shapes,
    and how the numbers were had (compile_service's COMPILED, SAME_PROGRAM,
    STORED or IN_WORKER)."""

    result: Compiled
    executable: Any
    lowered: Lowered | None
    leaves: list
    abstract: list
    how: str = compile_service.COMPILED
    program: str | None = None  # the program's key (None when CACHED: it was not lowered)

    def with_leaves(self, leaves: list) -> CompiledStep:
        """The same compile, called on other arguments of the same shapes
        (measure's, made verify's when both are asked: `xla.run.shared_runs`)."""
        return self._replace(leaves=leaves)


def compile_answer(
    target: Target,
    config: Config,
    cancelled: Callable[[], bool] | None = None,
    *,
    device: jax.Device | None = None,
    arguments: tuple[tuple, dict] | None = None,
    memory: bool = False,
    source: Source | None = None,
) -> CompiledStep:
    """Compile the step of `target` (the loss and its gradient, or its training
    step) under `config` for its device (or `device`, a jax.Device, when
    given): XLA's numbers (`.result`) and how they were had (`.how`; CACHED
    where this very target and configuration were compiled before in this
    process: nothing was lowered). `arguments`: (args, kwargs) already built
    from the target's factories, to reuse. `memory`: also read where the peak
    goes (Contract 7; XLA writes its record of the compile, which takes a
    little longer). `source`: where a worker finds the target (a search's
    compiles may run in workers; the target's own file and name when not
    given). A compile that fails raises RematError with XLA's message,
    trimmed."""
    dev = config.jax_device if device is None else device
    label = device_label(dev)
    # A result with the breakdown answers a request without it too.
    for wanted in (True,) if memory else (False, True):
        hit = _cache.get((id(target), config, label, wanted))
        if hit is not None and hit[0] is target:
            if isinstance(hit[1], RematError):
                raise RematError(hit[1].message)
            return CompiledStep(hit[1], None, None, [], [], CACHED)
    if source is None and target.file is not None:
        source = Source(target.file, target.name, mesh=target.mesh)
    return _compile_kept(
        target, config, cancelled, dev, label, arguments, memory, source, keep=False
    )


def compile_step(
    target: Target,
    config: Config,
    cancelled: Callable[[], bool] | None = None,
    *,
    device: jax.Device | None = None,
    arguments: tuple[tuple, dict] | None = None,
    memory: bool = False,
) -> CompiledStep:
    """`compile_answer` without its cache, compiled here and keeping the
    executable: for a caller that runs it (`xla.run.measure`). Its numbers
    are kept for `compile_answer` all the same."""
    dev = config.jax_device if device is None else device
    label = device_label(dev)
    return _compile_kept(target, config, cancelled, dev, label, arguments, memory, None, keep=True)


def clear_cache() -> None:
    """Forget every compile of this process (the store on disk stays)."""
    _cache.clear()
    compile_service.clear_memo()


def _compile_kept(
    target: Target,
    config: Config,
    cancelled: Callable[[], bool] | None,
    dev: jax.Device,
    label: str,
    arguments: tuple[tuple, dict] | None,
    memory: bool,
    source: Source | None,
    keep: bool,
) -> CompiledStep:
    key = (id(target), config, label, memory)
    try:
        step = _compile(target, config, dev, label, cancelled, arguments, memory, source, keep)
    except RematError as exc:
        _cache.put(key, (target, exc))
        raise
    _cache.put(key, (target, step.result))
    return step


def _compile(
    target: Target,
    config: Config,
    dev: jax.Device,
    label: str,
    cancelled: Callable[[], bool] | None,
    arguments: tuple[tuple, dict] | None,
    memory: bool = False,
    source: Source | None = None,
    keep: bool = False,
) -> CompiledStep:
    devices = device_set(dev)
    args, kwargs = arguments if arguments is not None else resolve_arguments(target, devices)
    flat = flatten_arguments(target.fn, args, kwargs, target.label)
    here = trace_device(dev)
    step = "train" if target.trains else "gradient"
    what = (
        f"{target.label}: compiling the {'training step' if step == 'train' else 'gradient'} "
        f"under {config.with_device(None).label()} for {label}"
    )
    abstract = [_abstract(x, dev, devices, what) for x in flat.leaves]
    spanned = max(len({d for x in abstract for d in x.sharding.device_set}), 1)
    check_cancelled(cancelled)
    with jax.default_device(here):
        # Only the lowered module outlives _lower: the gradient's jaxpr (tens of
        # thousands of objects for a large unrolled model) is freed before XLA
        # compiles, so the full garbage collections that happen meanwhile (they
        # stop every thread, the app's UI too) do not walk it for the compile's
        # whole duration.
        step_lowered = lower(target, config, flat, here, abstract, what)
        held = step_lowered.differentiated
        wrt = held.to_dict() if held is not None else None
        check_cancelled(cancelled)
        answer = compile_service.compile_program(
            step_lowered.lowered, dev, label, spanned, what,
            memory=memory, keep_executable=keep, cancelled=cancelled, sources=_sources(target),
            mesh=mesh_words(mesh_of(abstract)),
            source=source and replace(source, config=config),
        )  # fmt: skip
    result = replace(answer.result, step=step, differentiated=wrt)
    key = answer.program.key if answer.program else None
    leaves = flat.leaves
    return CompiledStep(result, answer.executable, step_lowered, leaves, abstract, answer.how, key)


def _sources(target: Target) -> str:
    """The user's files a breakdown's lines may name, as they are on disk (a
    digest of each one's path, size and modification time): the target's
    file and the modules imported from its folder, or the file that defines
    a function given in code. Editing one is a new key for a breakdown.

    Installed packages are not the user's files, though a project often keeps
    its virtual environment in its folder: which of their modules a command
    has imported differs from command to command (fit imports what report
    does not), and counting them made each command's key another."""
    file = target.file or getattr(getattr(target.fn, "__code__", None), "co_filename", None)
    if not file or not os.path.isfile(file):
        return ""
    folder = os.path.dirname(os.path.abspath(file)) + os.sep
    files = {os.path.abspath(file)}
    installed = _installed_folders()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        path = os.path.abspath(path)
        if path.startswith(folder) and not _is_installed(path, installed):
            files.add(path)
    digest = hashlib.sha256()
    for path in sorted(files):
        try:
            s = os.stat(path)
        except OSError:
            continue
        digest.update(f"{path}\0{s.st_size}\0{s.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


@functools.cache
def _installed_folders() -> tuple[str, ...]:
    """Where this interpreter's packages and remat-tui itself are installed."""
    paths = sysconfig.get_paths()
    folders = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    folders.add(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    return tuple(os.path.abspath(f) + os.sep for f in folders)


def _is_installed(path: str, installed: tuple[str, ...]) -> bool:
    """A module of an installed package: under this interpreter's package
    folders or remat-tui's, or any site-packages (another environment's)."""
    parts = path.split(os.sep)
    return path.startswith(installed) or "site-packages" in parts or "dist-packages" in parts


def _abstract(leaf: Any, dev: jax.Device, devices: list, what: str) -> jax.ShapeDtypeStruct:
    """The leaf's shape and dtype, placed on `dev`; a leaf sharded over several
    devices keeps its sharding (they must be among `devices`). A mesh the
    user gave is kept, made over the chosen devices where it is abstract or
    of one device (`setup.meshes`): their code may name its axes."""
    aval = jax.typeof(leaf)
    sharding = getattr(leaf, "sharding", None)
    rebound = placed_sharding(sharding, devices, dev, what)
    if rebound is not None:
        return jax.ShapeDtypeStruct(
            aval.shape, aval.dtype, sharding=rebound, weak_type=aval.weak_type
        )
    spans = getattr(sharding, "device_set", None) or set()
    if len(spans) > 1:
        if not spans <= set(devices):
            where = sorted({d.platform for d in spans})
            raise RematError(
                f"{what}: its example arguments are sharded over {', '.join(where)} "
                f"devices, not over {device_label(dev)}'s. Build them from the devices "
                "remat-tui passes: args=lambda devices: ... with "
                "jax.make_mesh(shape, names, devices=devices)."
            )
        placed = sharding
    else:
        memory_kind = getattr(sharding, "memory_kind", None)
        placed = SingleDeviceSharding(dev, memory_kind=memory_kind)
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, sharding=placed, weak_type=aval.weak_type)
