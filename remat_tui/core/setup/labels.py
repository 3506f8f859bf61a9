"""Provides `device_label_from`: a device's canonical label from plain values,
the one place it is spelled. `device_label` labels a jax.Device (or what a
user typed) with it, a Config carries the label, and the reports, which
import no jax, label the device an analysis describes (`device_name`) with it.
"""

from __future__ import annotations


def device_label_from(platform: object, id: object, topology: str | None = None) -> str:
    """`cpu:0`, `gpu:1`; a deviceless TPU chip by its topology, chip 0 as
    `tpu:v5e:2x2` and chip 3 as `tpu:v5e:2x2#3` (what `resolve_device` reads
    back)."""
    if topology:
        return f"{platform}:{topology}" if id == 0 else f"{platform}:{topology}#{id}"
    return f"{platform}:{id}"
