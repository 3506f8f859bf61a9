"""Provides device selection: 'cpu', 'cpu:1', '1' -> a jax.Device, and
deviceless TPU topologies: 'tpu:v5e:2x2' -> the chips of a TPU slice that is
not attached, to compile for ahead of time (never to run on).

A topology comes from `jax.experimental.topologies.get_topology_desc`, which
needs libtpu (`pip install 'remat-tui[tpu]'`). Its devices are compile-only:
an analysis traces on a local CPU device (`trace_device`: jaxprs do not depend
on the device) and `xla.compile.costs` compiles for the chips (`device_set`).
"""

from __future__ import annotations

import importlib
import os
import threading

import jax

from remat_tui.core.setup.labels import device_label_from
from remat_tui.errors import RematError

# Listed when libtpu is installed; any other topology libtpu knows works too.
TOPOLOGIES = ("v5e:2x2", "v5p:2x2x2", "v6e:2x2")
TPU_EXTRA = "pip install 'remat-tui[tpu]'"

_topologies: dict[str, list[jax.Device]] = {}  # topology name -> its compile-only devices
_topology_of: dict[jax.Device, str] = {}  # compile-only device -> its topology's name
_lock = threading.Lock()


def resolve_device(spec: str | jax.Device | None = None) -> jax.Device:
    """JAX's default device for None; a Device as is; `tpu:TOPOLOGY` the first
    chip of that deviceless topology (`tpu:TOPOLOGY#N` its chip N, as
    `device_label` names it); else parse `platform[:id]` or `id`."""
    if spec is None:
        return jax.devices()[0]
    if isinstance(spec, jax.Device):
        return spec
    text = str(spec).strip()
    platform, _, index = text.partition(":")
    topology = platform == "tpu" and index and not index.isdigit()
    name, _, chip = index.partition("#")  # device_label's `tpu:v5e:2x2#3`: chip 3
    devices = topology_devices(name) if topology else jax.devices()
    try:
        if topology:
            return next(d for d in devices if d.id == int(chip)) if chip else devices[0]
        if text.isdigit():
            return devices[int(text)]
        pool = [d for d in devices if d.platform == platform]
        if not pool:
            raise LookupError
        if not index:
            return pool[0]
        return next(d for d in pool if d.id == int(index))
    except (LookupError, ValueError, StopIteration):
        available = ", ".join(available_devices())
        raise RematError(
            f"unknown device {text!r}; available: {available}. (For more CPU "
            "devices, set XLA_FLAGS=--xla_force_host_platform_device_count=4 "
            "before starting.)"
        ) from None


def topology_devices(name: str) -> list[jax.Device]:
    """The compile-only chips of TPU topology `name` (e.g. `v5e:2x2`), loaded once."""
    name = name.strip()
    if not libtpu_installed():
        raise RematError(
            f"device 'tpu:{name}' needs libtpu to compile for a TPU topology without "
            f"a TPU; install it with {TPU_EXTRA}."
        )
    with _lock:
        if name in _topologies:
            return _topologies[name]
        from jax.experimental import topologies

        try:
            devices = list(topologies.get_topology_desc(name, platform="tpu").devices)
        except Exception as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RematError(
                f"unknown TPU topology {name!r}: libtpu says: {reason}. "
                f"Try one of {', '.join('tpu:' + t for t in TOPOLOGIES)}."
            ) from None
        _topologies[name] = devices
        for d in devices:
            _topology_of[d] = name
        return devices


def libtpu_installed() -> bool:
    """Whether JAX can load libtpu: the `libtpu` package, or TPU_LIBRARY_PATH."""
    path = os.environ.get("TPU_LIBRARY_PATH")
    if path and os.path.isfile(path):
        return True
    try:
        importlib.import_module("libtpu")
    except ImportError:
        return False
    return True


def topology_of(d: jax.Device) -> str | None:
    """The topology name of a deviceless TPU chip; None for a local device."""
    return _topology_of.get(d)


def trace_device(d: jax.Device) -> jax.Device:
    """Where to trace for `d`: itself, or a local CPU device for a deviceless chip."""
    return jax.devices("cpu")[0] if topology_of(d) is not None else d


def device_set(d: jax.Device) -> list[jax.Device]:
    """The devices a sharded target spans when `d` is chosen: the topology's
    chips, or every local device of `d`'s platform. What an args factory's
    `devices` parameter receives."""
    name = topology_of(d)
    if name is not None:
        return list(_topologies[name])
    return list(jax.devices(d.platform))


def local_device_count(platform: str) -> int | None:
    """How many local devices `platform` has; None when JAX has no such backend."""
    try:
        return len(jax.devices(platform))
    except RuntimeError:  # no such backend
        return None


def available_devices() -> list[str]:
    """Labels to offer: the local devices, then the TPU topologies when libtpu
    is installed (listing them loads nothing)."""
    labels = [device_label(d) for d in jax.devices()]
    if libtpu_installed():
        labels += [f"tpu:{t}" for t in TOPOLOGIES]
    return labels


def device_label(d: jax.Device | str | None = None) -> str:
    """The canonical label of `d`, or of the device it names (`0`, `cpu`,
    `cpu:0` and the jax.Device are all `cpu:0`; None: JAX's default device).
    An unknown device raises RematError listing the available ones."""
    device = resolve_device(d)
    return device_label_from(device.platform, device.id, topology_of(device))


def describe_device(d: jax.Device) -> dict:
    out = {"platform": d.platform, "id": d.id, "description": str(d.device_kind)}
    name = topology_of(d)
    if name is not None:
        out["topology"] = name
        out["chips"] = len(_topologies[name])
    return out


def _libtpu_without_chips() -> None:
    """Make an installed libtpu harmless on a machine without TPU chips.

    JAX probes for a TPU backend whenever it starts, and libtpu, when installed,
    then (1) complains on standard error that it cannot find its accelerator
    type and worker hostnames (lines that would land on the app's screen) and
    (2) takes /tmp/libtpu_lockfile for the life of the process, so a second
    JAX process (the CLI beside the app, two test runs) cannot load libtpu to
    compile for a topology: "Internal error when accessing libtpu multi-process
    lockfile". Both guard chips this machine does not have. Unless the user set
    them, these variables quiet the first and lift the lock; compiles for a
    named topology are the same with and without them (measured on v5p:2x2x2).
    (3) The libtpu of JAX 0.12 remaps its code to huge pages as it loads and, on
    kernels whose file-backed huge pages do not line up, says so on standard
    error ("hugepage_text.cc ... File offset incorrectly aligned"). That only
    speeds up running on a chip, so it is turned off here (`--hugepage_text=false`,
    a flag libtpu 0.0.42 knows too).
    Runs when this module is imported, before remat-tui starts JAX's backends.
    """
    if not libtpu_installed():
        return
    from remat_tui.core.jaxcompat.program import tpu_chips_here

    if tpu_chips_here() != 0:
        return
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-4")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    flags = os.environ.get("LIBTPU_INIT_ARGS", "")
    if "hugepage_text" not in flags:
        os.environ["LIBTPU_INIT_ARGS"] = f"{flags} --hugepage_text=false".strip()


_libtpu_without_chips()
