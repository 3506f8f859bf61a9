"""Provides `judge_offloads`: which rows of compare and suggest offload to no
avail, said in their notes and kept off the Pareto front and out of
suggest's answer.

Two ways an offload is not worth it:
- the device's compile has no host memory to put the values in (XLA's CPU
  compile: `xla.compile.host_memory`), so the offloaded bytes stay in device
  memory and lower nothing: `offload_without_host`, whose residual bytes then
  weigh device and host bytes together;
- moving the bytes to host and back costs more time on the chip than
  recomputing them would (the same configuration with its offloads
  recomputed instead): `offload_slower`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from remat_tui.core.model import Analysis
from remat_tui.core.setup.config import Config
from remat_tui.core.units import human_bytes, human_seconds
from remat_tui.core.xla.compile import host_memory
from remat_tui.core.xla.estimates import step_time
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.search.rows import Row
    from remat_tui.core.xla.estimates.chips import Chip


def judge_offloads(
    target: Target, rows: list, baseline: Analysis, analysed: Callable[[Config], Row]
) -> None:
    """Mark and note the rows (`search.compare`'s `Row`) whose offload
    lowers no device memory, or costs more time on the chip than the
    recompute it saves; `analysed(config)` gives the row of a configuration
    no row has (the one recomputing instead of offloading)."""
    offloading = [r for r in rows if r.host_bytes]
    if not offloading:
        return
    device = baseline.config.device
    if not host_memory.offloads_to_host(device):
        for row in offloading:
            row.offload_without_host = True
            row.notes.append(host_memory.stays_on_device(row.host_bytes))
        return
    chip = step_time.chip_of(device)
    if chip is None:
        return
    by_config = {r.config: r for r in rows}
    devices = program_devices(baseline)
    for row in offloading:
        instead = row.config.recomputing_offloads(target.policies)
        other = by_config.get(instead)
        if other is None:
            other = by_config[instead] = analysed(instead)
        # One device's time both ways (Contract 17): its share of the whole
        # program's recompute FLOPs, against the bytes it moves over its own
        # host link (all of a replicated residual, its share of a split one).
        saved = (other.recompute_flops - row.recompute_flops) / devices / chip.peak_flops
        moved = host_memory.one_devices_host_bytes(
            row.host_bytes, row.global_host_bytes or row.host_bytes,
            row.auto_sharded_devices, devices,
        )  # fmt: skip
        moving = step_time.host_seconds(chip, moved)
        if moving > saved:
            row.offload_slower = True
            row.notes.append(_slower_offload_note(chip, int(moved), moving, saved, devices))


def program_devices(a: Analysis) -> int:
    """How many devices the program runs over: its arguments' mesh's, or
    those arguments sharded automatically are placed over (1: one device)."""
    mesh = a.device.get("mesh")
    return math.prod(mesh.values()) if mesh else a.auto_sharded_devices


def _slower_offload_note(
    chip: Chip, host_bytes: int, moving: float, saved: float, devices: int = 1
) -> str:
    size = human_bytes(host_bytes) + ("/device" if devices > 1 else "")
    trip = f"moving {size} to host and back takes about {human_seconds(moving)} a step"
    if saved <= 0:
        return (
            f"offloading gains nothing on {chip.name}: recomputing instead costs no "
            f"more work, and {trip}"
        )
    return (
        f"offloading is slower than recomputing on {chip.name}: {trip}, "
        f"recomputing it about {human_seconds(saved)}"
    )
