"""Provides the compiled numbers as the reports show them (Contract 6): when an
analysis was compiled, its peak per device is the headline and the residual
bytes stand beside it as what autodiff saves; two sentences say why they
differ. Also the device's name, a TPU topology's included."""

from __future__ import annotations

from remat_tui.core.model import Analysis
from remat_tui.report.units import human_bytes, human_flops

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
    """The residual bytes a device holds: per device when sharded (what the
    peak is compared with, and --max-residual-bytes checks)."""
    return a.totals.device_bytes_per_device


def headline(a: Analysis) -> str | None:
    """`peak 687.0 MiB per device (compiled for tpu:v5e:2x2) · saved by autodiff
    294.3 MiB`, or None when the analysis was not compiled."""
    c = a.compiled
    if c is None:
        return None
    where = c.device if c.devices == 1 else f"{c.device}, over {c.devices} devices"
    if not c.fits:
        return (
            f"does not fit {where}: {needs(c)} · saved by autodiff {human_bytes(residual_bytes(a))}"
        )
    return (
        f"peak {human_bytes(c.peak_bytes)} per device (compiled for {where}) · "
        f"saved by autodiff {human_bytes(residual_bytes(a))}"
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
            ("saved by autodiff (residuals)", human_bytes(residual_bytes(a))),
            ("what was compiled", step_words(c)),
            ("compiled in", f"{c.seconds:.1f} s, never run"),
        ]
    peak_how = "XLA's own" if c.peak_source == "backend" else "arguments + outputs + temps"
    rows = [
        ("peak per device", f"{human_bytes(c.peak_bytes)} ({peak_how})"),
        ("temporaries", human_bytes(c.temp_bytes)),
        ("arguments", human_bytes(c.argument_bytes)),
        ("outputs (the gradients)", human_bytes(c.output_bytes)),
        ("aliased", human_bytes(c.alias_bytes)),
        ("generated code", human_bytes(c.generated_code_bytes)),
    ]
    if c.host_temp_bytes:
        rows.append(("host temporaries", human_bytes(c.host_temp_bytes)))
    if c.flops is not None:
        rows.append(("FLOPs (XLA's count, a scan body once)", human_flops(int(c.flops))))
    rows += [
        ("saved by autodiff (residuals)", human_bytes(residual_bytes(a))),
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
