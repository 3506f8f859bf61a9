"""Provides device selection: 'cpu', 'cpu:1', '1' -> a jax.Device."""

from __future__ import annotations

import jax

from remat_tui.errors import RematError


def resolve_device(spec=None):
    """JAX's default device for None; a Device as is; else parse `platform[:id]` or `id`."""
    if spec is None:
        return jax.devices()[0]
    if isinstance(spec, jax.Device):
        return spec
    text = str(spec).strip()
    devices = jax.devices()
    platform, _, index = text.partition(":")
    try:
        if text.isdigit():
            return devices[int(text)]
        pool = [d for d in devices if d.platform == platform]
        if not pool:
            raise LookupError
        if not index:
            return pool[0]
        return next(d for d in pool if d.id == int(index))
    except (LookupError, ValueError, StopIteration):
        available = ", ".join(device_label(d) for d in devices)
        raise RematError(
            f"unknown device {text!r}; available: {available}. (For more CPU "
            "devices, set XLA_FLAGS=--xla_force_host_platform_device_count=4 "
            "before starting.)"
        ) from None


def device_label(d) -> str:
    return f"{d.platform}:{d.id}"


def describe_device(d) -> dict:
    return {"platform": d.platform, "id": d.id, "description": str(d.device_kind)}
