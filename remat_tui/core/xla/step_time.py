"""Provides the step-time estimate of Contract 8: a roofline model of one step
(the gradient, or the training step) on the chosen chip, per device.

    seconds          = max(compute_seconds, memory_seconds) + host_seconds
    compute_seconds  = FLOPs / the chip's peak FLOP/s
    memory_seconds   = bytes accessed / the chip's memory bandwidth
    host_seconds     = offloaded bytes, written in the forward part and read
                       back in the backward part (2 x host residual bytes),
                       / the host link's bandwidth

It is an estimate, and says so: peak figures are the vendor's (core/xla/chips.py),
compute and memory traffic are assumed to overlap perfectly, host transfers
not at all.

FLOPs are remat-tui's own count (Contract 6): the forward pass, the backward
pass's transposition (the same work under every configuration of a target,
counted once from the code as written) and the configuration's recompute.
Not XLA's cost_analysis FLOPs: XLA counts a loop's body once whatever its trip
count, so a model of 24 scanned layers would count as one layer. Bytes
accessed are XLA's, scaled by that same undercount where remat-tui's FLOPs
exceed XLA's (a loop body counted once), since nothing else knows them.

Before a compile, compute_seconds + host_seconds is known exactly and is at
most the final estimate (`lower_bound`): suggest compiles in that order and
stops where no later candidate can beat the best that fits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from remat_tui.core.setup.devices import resolve_device
from remat_tui.core.xla import chips

MODEL = "roofline"


@dataclass(frozen=True)
class StepTime:
    seconds: float
    compute_seconds: float
    memory_seconds: float
    host_seconds: float
    chip: str
    model: str = MODEL

    def to_dict(self) -> dict:
        return asdict(self)


def chip_of(device) -> chips.Chip | None:
    """The chip a device label (`tpu:v5e:2x2`, `cpu:0`) or jax.Device is, if
    the table knows it."""
    try:
        dev = resolve_device(device)
    except Exception:  # a device that no longer resolves: no estimate
        return None
    return chips.chip_for(dev.platform, getattr(dev, "device_kind", ""))


def host_seconds(chip: chips.Chip, host_bytes: float) -> float:
    """Offloaded residuals cross the host link twice: out in the forward part,
    back in the backward part."""
    return 2 * host_bytes / chip.host_bandwidth


def lower_bound(chip: chips.Chip, flops: float, host_bytes: float) -> float:
    """What `estimate` will at least say, known before compiling."""
    return flops / chip.peak_flops + host_seconds(chip, host_bytes)


def estimate(
    chip: chips.Chip,
    flops: float,
    host_bytes: float,
    bytes_accessed: float | None,
    xla_flops: float | None,
) -> StepTime:
    """The roofline estimate of one device's step: `flops` and `host_bytes`
    per device by remat-tui's count, `bytes_accessed` and `xla_flops` XLA's."""
    compute = flops / chip.peak_flops
    memory = 0.0
    if bytes_accessed:
        undercount = flops / xla_flops if xla_flops and flops > xla_flops else 1.0
        memory = bytes_accessed * undercount / chip.memory_bandwidth
    host = host_seconds(chip, host_bytes)
    return StepTime(max(compute, memory) + host, compute, memory, host, chip.name)
