"""Provides the compiled numbers as the reports show them (Contract 6): when an
analysis was compiled, its peak per device is the headline and the residual
bytes stand beside it as what autodiff saves; two sentences say why they
differ. Also the device's name, a TPU topology's included."""

from __future__ import annotations

from remat_tui.core.model import Analysis
from remat_tui.report.units import (
    GLOBAL,
    PER_DEVICE_UNKNOWN,
    SHARDED,
    all_devices,
    byte_scope,
    human_bytes,
    human_flops,
)

EXPLAINED = (
    "The compiled peak is what XLA's gradient program needs at once on one device: "
    "the arguments, the gradients it returns and its temporaries, residuals among them. "
    "The residual bytes count only the values autodiff saves for the backward pass, "
    "before XLA fuses, reuses or rematerialises buffers, so the two differ and the "
    "peak is the one that must fit."
)


def device_name(device: dict) -> str:
    """`cpu:0`, or `tpu:v5e:2x2` for a deviceless TPU topology."""
    if device.get("topology"):
        return f"{device.get('platform')}:{device['topology']}"
    return f"{device.get('platform')}:{device.get('id')}"


def device_details(device: dict) -> str:
    """`TPU v5 lite, 4 chips`: what the device is."""
    text = str(device.get("description"))
    if device.get("chips"):
        text += f", {device['chips']} chips, compile only"
    return text


def residual_bytes(a: Analysis) -> int:
    """The residual bytes a device holds (what --max-residual-bytes checks):
    per device when the avals say how they are sharded; else every residual
    whole, which under automatic sharding is the figure across all devices
    (no device holds more of a residual than all of it)."""
    return a.totals.device_bytes_per_device


def saved(a: Analysis) -> str:
    """The residual bytes beside the per-device peak, saying whose they are:
    `9.0 KiB per device (36.0 KiB across all 4 devices)` when the avals carry
    their sharding, `36.0 KiB across all 4 devices (per device unknown: ...)`
    when the program spans several devices and they do not, else one
    device's `36.0 KiB per device`."""
    t = a.totals
    devices = a.compiled.devices if a.compiled is not None else None
    scope = byte_scope(a, devices)
    if scope == SHARDED:
        return (
            f"{human_bytes(t.device_bytes_per_device)} per device "
            f"({human_bytes(t.device_bytes)} {all_devices(devices)})"
        )
    if scope == GLOBAL:
        return f"{human_bytes(t.device_bytes)} {all_devices(devices)} ({PER_DEVICE_UNKNOWN})"
    return f"{human_bytes(t.device_bytes)} per device"


def headline(a: Analysis) -> str | None:
    """`peak 687.0 MiB per device (compiled for tpu:v5e:2x2) · saved by autodiff
    294.3 MiB per device`, or None when the analysis was not compiled."""
    c = a.compiled
    if c is None:
        return None
    where = c.device if c.devices == 1 else f"{c.device}, over {c.devices} devices"
    if not c.fits:
        return f"does not fit {where}: {needs(c)} · saved by autodiff {saved(a)}"
    return (
        f"peak {human_bytes(c.peak_bytes)} per device (compiled for {where}) · "
        f"saved by autodiff {saved(a)}"
    )


def needs(c) -> str:
    """What XLA said a compile that ran out of memory needed, in words."""
    if c.needed_bytes and c.available_bytes:
        return (
            f"XLA needs {human_bytes(c.needed_bytes)} per device of "
            f"{human_bytes(c.available_bytes)} available"
        )
    if c.needed_bytes:
        return f"XLA needs {human_bytes(c.needed_bytes)} per device"
    return "XLA ran out of memory compiling it"


def details(a: Analysis) -> list[tuple[str, str]]:
    """(label, value) rows of everything XLA reported, for the reports' tables."""
    c = a.compiled
    if c is None:
        return []
    if not c.fits:
        return [
            ("fits the device", f"no: {needs(c)}"),
            ("XLA says", c.error or ""),
            ("saved by autodiff (residuals)", saved(a)),
            ("what was compiled", step_words(c)),
            ("compiled in", f"{c.seconds:.1f} s, never run"),
        ]
    peak_how = "XLA's own" if c.peak_source == "backend" else "arguments + outputs + temps"
    # XLA's byte figures are one device's: said on each when there are several.
    each = " per device" if c.devices > 1 else ""
    rows = [
        ("peak per device", f"{human_bytes(c.peak_bytes)} ({peak_how})"),
        (f"temporaries{each}", human_bytes(c.temp_bytes)),
        (f"arguments{each}", human_bytes(c.argument_bytes)),
        (f"outputs (the gradients){each}", human_bytes(c.output_bytes)),
        (f"aliased{each}", human_bytes(c.alias_bytes)),
        ("generated code", human_bytes(c.generated_code_bytes)),
    ]
    if c.host_temp_bytes:
        rows.append((f"host temporaries{each}", human_bytes(c.host_temp_bytes)))
    if c.flops is not None:
        rows.append(("FLOPs (XLA's count, a scan body once)", human_flops(int(c.flops))))
    rows += [
        ("saved by autodiff (residuals)", saved(a)),
        ("what was compiled", step_words(c)),
        ("compiled in", f"{c.seconds:.1f} s, never run"),
    ]
    return rows


def step_words(c) -> str:
    """What a compiled figure measures (Contract 8, "step"): every view says it."""
    if c.step == "train":
        return (
            "one training step: the gradient, the optimizer's update and its application, "
            "parameters and optimizer state donated"
        )
    return (
        "the gradient alone: no optimizer state, no parameter update (name the target's "
        "params and optimizer to compile its training step)"
    )
