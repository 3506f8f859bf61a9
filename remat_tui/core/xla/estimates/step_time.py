"""Provides the step-time estimate of Contracts 8 and 9: a roofline model of
one step (the gradient, or the training step) on the chosen chip, per device,
in five parts:

    compute_seconds        = FLOPs / the chip's peak FLOP/s
    transcendental_seconds = transcendentals (exp, log, tanh, ...) / the
                             chip's rate for them (`xla.estimates.chips`)
    memory_seconds         = bytes accessed / the chip's memory bandwidth
    host_seconds           = offloaded bytes, written in the forward part and
                             read back in the backward part (2 x one device's
                             host residual bytes: `xla.compile.host_memory`
                             one_devices_host_bytes), / the host link's
                             bandwidth
    collective_seconds     = bytes one device sends in the step's collectives
                             (all-gather, reduce-scatter, all-reduce,
                             all-to-all, collective-permute: ring factors in
                             `jaxcompat.collectives`) / the chip's
                             interconnect bandwidth, one direction; 0 on one
                             device

    accelerators: seconds = max(compute + transcendental, memory) + host + collective
    the CPU:      seconds = compute + transcendental + memory + host + collective + overhead

where `overhead_seconds` is what any step costs however little it computes,
measured for the CPU (`xla.estimates.cpu_rates`): all a tiny step costs there.
The CPU's rates are its calibration, measured once per machine and kept
(`xla.estimates.calibration`), so that the same program gets the same estimate
run after run; each estimate says where its rates came from (`rates`).

An accelerator streams memory while its units compute; a CPU's cores do the
arithmetic and wait for memory themselves, and measured on this project's CPU
the parts add up (bench/bench_calibration.py measures how close the estimate
comes to measured steps).

The collectives are added, never overlapped: XLA's scheduler may run them
while the chip computes (asynchronous collectives), which this model does not
see, so on a chip that overlaps them well the collective part is an upper
bound. Their bytes are counted per iteration of the loops that hold them (the
program's own trip counts), not scaled by `loop_scale`.

The counts are XLA's own (`cost_analysis` of the compiled step: FLOPs,
transcendentals and bytes accessed), with two corrections:
- XLA counts a loop's body once whatever its trip count. In a program with
  loops, XLA's counts are scaled by remat-tui's count over XLA's (remat-tui
  counts every iteration: `costs.flops`), `loop_scale`.
- The FLOPs are the larger of XLA's and remat-tui's less the transcendentals
  (which remat-tui counts as one FLOP each). XLA's may be larger (its fusions
  compute a cheap value again in each fusion that reads it); remat-tui's may
  be, where XLA merged a recomputation into the forward work that computes the
  loss. Keeping the larger keeps the estimate at or above `lower_bound`.

Before a compile, remat-tui's FLOPs / peak FLOP/s + host_seconds is known and
is at most the final estimate (`lower_bound`, given that no chip computes
transcendentals faster than FLOPs): suggest compiles in that order and stops
where no later candidate can beat the best that fits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from remat_tui.core.setup.devices import resolve_device
from remat_tui.core.xla.estimates import chips

if TYPE_CHECKING:
    import jax

MODEL = "roofline"
# How far apart two estimates must be before their order is to be trusted:
# on the held-out programs of bench/bench_calibration.py every pair more than
# 15% apart was ordered right (docs/guide/measure.md, "How accurate it is").
RESOLUTION = 0.15


@dataclass(frozen=True)
class StepTime:
    """The roofline estimate of one step's time on a chip, per device, in its
    parts: `Row.time` and `FitRow.time`; `Analysis.time` is its `to_dict()`.

    Attributes:
        seconds: the estimate: on an accelerator max(compute +
            transcendental, memory) + host + collective; on the CPU their
            sum + overhead.
        compute_seconds: FLOPs at the chip's peak FLOP/s.
        transcendental_seconds: transcendentals at the chip's rate for them.
        memory_seconds: bytes accessed at the chip's memory bandwidth.
        host_seconds: offloaded bytes, out and back, over the host link.
        chip: the chip's name: `"tpu v5e"`, `"cpu"`.
        model: `"roofline"`.
        overhead_seconds: what any step costs however little it computes
            (measured for the CPU, else 0).
        flops: the FLOPs the compute part counted.
        transcendentals: the transcendentals counted.
        bytes_accessed: the bytes accessed counted.
        loop_scale: what XLA's counts were multiplied by in a program with
            loops (XLA counts a loop body once); 1 otherwise.
        rates: where the chip's figures come from (`Chip.rates_source`):
            `source` in words; for the CPU, its calibration (when, how, for
            which machine, where it is kept, the rates); for the others, the
            vendors' pages cited.
        collective_seconds: the bytes one device sends in collectives over
            the chip's interconnect bandwidth; 0 on one device.
        collective_bytes: those bytes.
        interconnect: the interconnect figure used (`bytes_per_second`,
            None where unknown: counted, not timed) and its `source`.
    """

    seconds: float
    compute_seconds: float
    transcendental_seconds: float
    memory_seconds: float
    host_seconds: float
    chip: str
    model: str = MODEL
    overhead_seconds: float = 0.0
    # What the parts counted, per device: XLA's figures after the corrections above.
    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_accessed: float = 0.0
    loop_scale: float = 1.0
    rates: dict = field(default_factory=dict)
    collective_seconds: float = 0.0
    collective_bytes: float = 0.0
    interconnect: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class StepCounts:
    """What XLA's cost analysis says of one compiled step, per device."""

    flops: float | None
    transcendentals: float | None
    bytes_accessed: float | None
    loops: bool  # the compiled program has a while loop (a scan)
    collective_bytes: float = 0.0  # sent by one device in the step's collectives

    @classmethod
    def of(cls, compiled: Any) -> StepCounts:
        """From a Compiled (`xla.compile.costs`) or its to_dict()."""
        get = compiled.get if isinstance(compiled, dict) else lambda k: getattr(compiled, k, None)
        collectives = get("collectives") or {}
        return cls(
            get("flops"),
            get("transcendentals"),
            get("bytes_accessed"),
            bool(get("loops")),
            float(collectives.get("sent_bytes") or 0.0),
        )


def chip_of(device: str | jax.Device) -> chips.Chip | None:
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


def collective_seconds(chip: chips.Chip, sent_bytes: float) -> float:
    """What one device sends in collectives over the chip's interconnect;
    0 where the chip's interconnect figure is unknown (counted, not timed)."""
    if not sent_bytes or not chip.interconnect_bandwidth:
        return 0.0
    return sent_bytes / chip.interconnect_bandwidth


def lower_bound(chip: chips.Chip, flops: float, host_bytes: float) -> float:
    """What `estimate` will at least say, known before compiling."""
    return flops / chip.peak_flops + host_seconds(chip, host_bytes)


def loop_scale(flops: float, counts: StepCounts) -> float:
    """How many times XLA's counts undercount the step: remat-tui's FLOPs over
    XLA's FLOPs and transcendentals, in a program with loops (else 1)."""
    counted = (counts.flops or 0.0) + (counts.transcendentals or 0.0)
    if not counts.loops or counted <= 0 or flops <= counted:
        return 1.0
    return flops / counted


def estimate(chip: chips.Chip, flops: float, host_bytes: float, counts: StepCounts) -> StepTime:
    """The roofline estimate of one device's step: `flops` and `host_bytes`
    per device by remat-tui's count, `counts` XLA's."""
    scale = loop_scale(flops, counts)
    transcendentals = (counts.transcendentals or 0.0) * scale
    computed = max(flops - transcendentals, (counts.flops or 0.0) * scale, 0.0)
    accessed = (counts.bytes_accessed or 0.0) * scale
    rate = chip.transcendentals_per_second or chip.peak_flops
    compute = computed / chip.peak_flops
    transcendental = transcendentals / rate
    memory = accessed / chip.memory_bandwidth
    host = host_seconds(chip, host_bytes)
    collective = collective_seconds(chip, counts.collective_bytes)
    if chip.overlaps_memory:
        seconds = max(compute + transcendental, memory) + host
    else:
        seconds = compute + transcendental + memory + host
    seconds += collective + chip.overhead_seconds
    return StepTime(
        seconds=seconds,
        compute_seconds=compute,
        transcendental_seconds=transcendental,
        memory_seconds=memory,
        host_seconds=host,
        chip=chip.name,
        overhead_seconds=chip.overhead_seconds,
        flops=computed,
        transcendentals=transcendentals,
        bytes_accessed=accessed,
        loop_scale=scale,
        rates=chip.rates_source(),
        collective_seconds=collective,
        collective_bytes=counts.collective_bytes,
        interconnect=chip.interconnect(),
    )
