"""Provides `prepared`: a target with its example arguments built once.

A target's `args` may be a factory that builds real arrays (seconds, when it
draws random numbers); the app analyses one target under many policies, so it
calls the factory once per target (and again after a reload, which makes new
Target objects) and hands `analyze` and the compiler the built values.

A factory that takes `devices` (core/setup/loading.py: a sharded target builds its
mesh from them) is called once per device set instead: the local devices for
`cpu:0`, a topology's chips for `tpu:v5e:2x2` (core.setup.devices.device_set), so
each device is analysed and compiled over the mesh it would train on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from remat_tui.core.runtime.lru import LRU
from remat_tui.registry import Target

LIMIT = 16  # builds kept (they may hold real arrays): targets of old reloads, devices left
# (id(target), device set or None) -> (target, prepared target)
_built: LRU[tuple[Target, Target]] = LRU(LIMIT)  # (the target, it built)


def prepared(
    target: Target, device: str | None = None, on_stage: Callable[[str], None] | None = None
) -> Target:
    """`target` with `args`/`kwargs` resolved for `device` (a label such as
    `cpu:0` or `tpu:v5e:2x2`; None: JAX's default), raising RematError as
    analyze would (a factory that fails, a topology libtpu cannot load).
    `on_stage` hears "building example arguments" when a factory is called."""
    from remat_tui.core.setup.devices import device_set, resolve_device
    from remat_tui.core.setup.loading import resolve_arguments, takes_devices

    # Only a factory that takes `devices` needs the device resolved: an
    # unsharded target stays one build, whatever device is chosen.
    devices = device_set(resolve_device(device)) if takes_devices(target) else None
    key = (id(target), tuple(devices) if devices is not None else None)

    def build() -> tuple[Target, Target]:
        if on_stage is not None and (callable(target.args) or callable(target.kwargs)):
            on_stage("building example arguments")
        args, kwargs = resolve_arguments(target, devices)
        return target, replace(target, args=args, kwargs=kwargs)

    # One build per key, even when two workers ask at once; an entry of an old
    # target whose id was reused is built again.
    return _built.get_or_build(key, build, valid=lambda hit: hit[0] is target)[1]
