"""Provides the compiled numbers as the reports show them (Contract 6): when an
analysis was compiled, its peak per device is the headline and the residual
bytes stand beside it as what autodiff saves; two sentences say why they
differ. Also the device's name, a TPU topology's included."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from remat_tui.core.model import Analysis, Totals
from remat_tui.core.setup.labels import device_label_from
from remat_tui.core.units import human_bytes, human_flops, human_seconds
from remat_tui.core.xla.estimates.flop_note import flop_note
from remat_tui.report.phrases import (
    GLOBAL,
    PER_DEVICE_UNKNOWN,
    SHARDED,
    byte_scope,
    in_global_sizes,
)

if TYPE_CHECKING:
    from remat_tui.core.xla.compile.compiled import Compiled
    from remat_tui.core.xla.estimates.step_time import StepTime
    from remat_tui.core.xla.run.measure import Measured

EXPLAINED = (
    "The compiled peak is what XLA's program for the step needs at once in one device's "
    "memory: the arguments, what it returns (the loss and gradients, or a training step's "
    "new parameters and optimizer state) and its temporaries, residuals among them. "
    "The residual bytes count only the values autodiff saves for the backward pass, "
    "before XLA fuses, reuses or rematerialises buffers, so the two differ and the "
    "peak is the one that must fit."
)


def device_name(device: dict) -> str:
    """The label of the device an analysis describes (`Analysis.device`):
    `cpu:0`, or `tpu:v5e:2x2` (`tpu:v5e:2x2#3` for its chip 3) for a deviceless
    TPU topology; the label its Config carries."""
    return device_label_from(device.get("platform"), device.get("id"), device.get("topology"))


def device_details(device: dict) -> str:
    """`TPU v5 lite, 4 chips`: what the device is; and the mesh the arguments
    are sharded over, `mesh data=4,model=2`, where they are."""
    text = str(device.get("description"))
    if device.get("chips"):
        text += f", {device['chips']} chips, compile only"
    return text + mesh_said(device, ", ")


def mesh_said(device: dict, before: str = " ") -> str:
    """`mesh data=4,model=2`, after `before`, for arguments sharded over a mesh; else ``."""
    mesh = device.get("mesh")
    if not mesh:
        return ""
    return f"{before}mesh " + ",".join(f"{k}={v}" for k, v in mesh.items())


def residual_bytes(a: Analysis) -> int:
    """The residual bytes a device holds (what --max-residual-bytes checks):
    per device when the avals say how they are sharded; else every residual
    whole, which under automatic sharding is its global array size (no
    device holds more of a residual than all of it)."""
    return a.totals.device_bytes


def saved(a: Analysis) -> str:
    """The residual bytes beside the per-device peak, saying whose they are:
    `9.0 KiB per device (36.0 KiB in global array sizes)` when the avals
    carry their sharding, `36.0 KiB in global array sizes (per device
    unknown: ...)` when the program spans several devices and they do not,
    else one device's `36.0 KiB per device`."""
    t = a.totals
    devices = a.compiled.devices if a.compiled is not None else None
    scope = byte_scope(a, devices)
    if scope == SHARDED:
        return (
            f"{human_bytes(t.device_bytes)} per device "
            f"({in_global_sizes(t.global_device_bytes)}){_and_host(t)}"
        )
    if scope == GLOBAL:
        return f"{in_global_sizes(t.global_device_bytes)} ({PER_DEVICE_UNKNOWN})" + _and_host(t)
    return f"{human_bytes(t.device_bytes)} per device" + _and_host(t)


def _and_host(t: Totals) -> str:
    return f" + {human_bytes(t.host_bytes)} offloaded to host" if t.host_bytes else ""


def offloaded(a: Analysis) -> list[tuple[str, str]]:
    """The row saying that the residual bytes the policy offloads stay in
    device memory, in the peak, where the compile has no host memory for
    them (XLA's CPU); none otherwise (`saved` counts them as offloaded)."""
    host, c = a.totals.host_bytes, a.compiled
    if not host or c is None or not c.fits or c.host_temp_bytes:
        return []
    if any(s["space"] == "host" for s in (c.memory or {}).get("other_spaces") or []):
        return []
    return [(
        "offloaded to host (residuals)",
        f"{human_bytes(host)}, which stay in device memory: XLA's compile for {c.device} has "
        "no host memory space, so offloading lowers nothing here",
    )]  # fmt: skip


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


def needs(c: Compiled) -> str:
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
            *differs(c),
            ("compiled in", f"{c.seconds:.1f} s"),
        ]
    # XLA's byte figures are one device's: said on each when there are several.
    each = " per device" if c.devices > 1 else ""
    rows = [
        ("peak per device", f"{human_bytes(c.peak_bytes)} ({peak_words(c)})"),
        *allocations_row(c),
        *other_spaces(c),
        (f"temporaries{each}", human_bytes(c.temp_bytes)),
        (f"arguments{each}", human_bytes(c.argument_bytes)),
        (f"outputs ({output_words(c)}){each}", human_bytes(c.output_bytes)),
        (f"aliased{each}", human_bytes(c.alias_bytes)),
        ("generated code", human_bytes(c.generated_code_bytes)),
    ]  # fmt: skip
    if c.host_temp_bytes:
        rows.append((f"host temporaries{each}", human_bytes(c.host_temp_bytes)))
    if c.flops is not None:
        rows.append(("FLOPs (XLA's count, a loop body once)", human_flops(int(c.flops))))
    if c.transcendentals:
        rows.append(("transcendentals (XLA's count)", human_flops(int(c.transcendentals))))
    backward = a.flops["backward"]  # counted in every view that compiles
    note = backward is not None and flop_note(
        (a.flops["forward"] + backward) / c.devices, a.flops["recompute"] / c.devices, c
    )
    if note:
        rows.append(("FLOPs, XLA's and remat-tui's", note))
    # An Analysis keeps its estimate and its runs as their JSON; imported
    # here, as their modules import JAX (`remat-tui --help` imports none).
    from remat_tui.core.xla.estimates.step_time import StepTime
    from remat_tui.core.xla.run.measure import Measured

    if a.time:
        time = StepTime(**a.time)
        rows.append(("est. step", estimate_words(time)))
        if rates_words(time):
            rows.append(("est. step's rates", rates_words(time)))
    if a.measured:
        rows.append(("measured", measured_words(Measured(**a.measured))))
    ran = "run on the device" if a.measured and a.measured.get("runs") else "never run"
    rows += [
        ("saved by autodiff (residuals)", saved(a)),
        *offloaded(a),
        ("what was compiled", step_words(c)),
        *differs(c),
        ("compiled in", f"{c.seconds:.1f} s, {ran}"),
    ]
    return rows


# Beside each byte figure of a compile: whether a budget is judged by it
# (suggest's and fit's --budget, report's --max-peak-bytes, check's peak).
JUDGED = "the figure budgets are judged by"
NOT_JUDGED = "not the figure budgets are judged by"


def peak_words(c: Compiled) -> str:
    """What the peak figure is: the sum of the main memory's allocations, or
    on TPU (`peak_source` "live") the most HBM holds at one step of XLA's
    schedule, which the allocations' sizes below do not add up to; and that
    budgets are judged by it."""
    if c.peak_source == "live":
        return (
            "HBM's live peak: the most bytes live at one step of XLA's schedule, not the "
            f"sum of the allocation sizes below; {JUDGED}"
        )
    return f"device memory: {_sum_words(c)}; {JUDGED}"


def _sum_words(c: Compiled) -> str:
    aliased = " - aliased" if c.alias_bytes else ""
    return f"arguments + outputs + temporaries{aliased}"


def allocations_sum(c: Compiled) -> int:
    """XLA's allocation sizes of the main memory added up."""
    return c.argument_bytes + c.output_bytes + c.temp_bytes - c.alias_bytes


def allocations_row(c: Compiled) -> list[tuple[str, str]]:
    """On TPU, where the peak is HBM's live peak, the row adding up XLA's
    allocation sizes (what a user adds by hand), saying why it is not the
    peak; none where the peak is that sum."""
    if c.peak_source != "live":
        return []
    total = allocations_sum(c)
    if total > c.peak_bytes:
        why = "above the live peak: the temporaries count as their whole heap"
    elif total < c.peak_bytes:
        why = "below the live peak: the temporary size leaves some temporaries out"
    else:
        why = "the live peak too, here"
    return [(_sum_words(c), f"{human_bytes(total)} (XLA's allocation sizes added up, {why}; "
                            f"{NOT_JUDGED})")]  # fmt: skip


def backend_words(c: Compiled) -> str:
    """What XLA's own `peak_memory_in_bytes` counts, where it can be told
    from the other figures, and that budgets are not judged by it."""
    b = c.backend_peak_bytes or 0
    spaces = (c.memory or {}).get("other_spaces") or []
    together = c.peak_bytes + sum(s["peak_bytes"] for s in spaces)
    # XLA's CPU figure is the arguments and outputs and a few bytes (an output
    # tuple's table): within a KiB, or a thousandth of it, is that sum.
    if abs(b - (c.argument_bytes + c.output_bytes - c.alias_bytes)) <= max(1024, b // 1000):
        what = "XLA's own figure: arguments + outputs, the temporaries left out"
    elif spaces and abs(together - b) <= 0.01 * b:
        named = ", ".join(s["space"] for s in spaces)
        what = f"XLA's own figure: every memory at one moment, device memory's and {named}"
    else:
        what = "XLA's own figure, by its own accounting of the memories"
    return f"{what}; {NOT_JUDGED}"


def other_spaces(c: Compiled) -> list[tuple[str, str]]:
    """A row per memory space besides the device's main memory (TPU VMEM, host
    memory of offloaded values), each at its own peak, and XLA's own peak of
    them all with why the two differ, where they do."""
    memory = c.memory or {}
    rows = []
    for space in memory.get("other_spaces", []):
        largest = space["at_peak"][0] if space["at_peak"] else None
        what = f"{human_bytes(space['peak_bytes'])} at its own peak"
        if largest is not None:
            what += f"; largest {largest['shape']} {human_bytes(largest['bytes'])}"
            if largest["source"]:
                what += f" at {os.path.basename(largest['source']['file'])}:"
                what += str(largest["source"]["line"])
        rows.append((f"peak in {space['space']} (not device memory)", what))
    if c.backend_peak_bytes and c.backend_peak_bytes != c.peak_bytes:
        rows.append((
            "XLA's peak_memory_in_bytes",
            f"{human_bytes(c.backend_peak_bytes)} ({backend_words(c)})",
        ))  # fmt: skip
    if c.spaces_note:
        rows.append(("memory spaces", c.spaces_note))
    return rows


def estimate_words(t: StepTime) -> str:
    """`~1.23 ms on cpu (compute 0.5 ms + transcendentals 0.2 ms + memory
    0.4 ms + host 0; roofline, an estimate)`; with the collectives where a
    device sends any (`collectives 0.3 ms for 1.2 MiB sent per device`)."""
    parts = [
        f"compute {human_seconds(t.compute_seconds)}",
        f"transcendentals {human_seconds(t.transcendental_seconds)}",
        f"memory {human_seconds(t.memory_seconds)}",
        f"host {human_seconds(t.host_seconds)}",
    ]
    if t.collective_bytes:
        timed = t.interconnect.get("bytes_per_second")
        seconds = human_seconds(t.collective_seconds) if timed else "not timed"
        sent = human_bytes(int(t.collective_bytes))
        parts.append(f"collectives {seconds} for {sent} sent per device")
    return f"~{human_seconds(t.seconds)} on {t.chip} ({', '.join(parts)}; {t.model})"


def rates_words(t: StepTime) -> str:
    """Where the estimate's rates came from, or '': the CPU's calibration
    (`calibrated on this machine 2026-11-26 14:03 UTC (kept in ...);
    --recalibrate measures again`), or the chip table's published figures."""
    rates = t.rates
    source = rates.get("source", "")
    if source and "calibrated_at" in rates:
        source = f"{source}; --recalibrate measures again"
    if t.collective_bytes and t.interconnect.get("source"):
        source = f"{source}; collectives: {t.interconnect['source']}".lstrip("; ")
    return source


def measured_words(m: Measured) -> str:
    """`1.21 ms min, 1.25 ms median of 5 runs; peak 1.2 GiB` or why it has none."""
    if m.error or m.min_seconds is None or m.median_seconds is None:
        return (m.error or "not run").splitlines()[0]
    text = (
        f"{human_seconds(m.min_seconds)} min, {human_seconds(m.median_seconds)} median "
        f"of {m.runs} runs"
    )
    if m.peak_bytes is not None:
        return text + f"; peak {human_bytes(m.peak_bytes)}"
    return text + f"; no peak figure: {m.peak_note}"


def step_words(c: Compiled) -> str:
    """What a compiled figure measures (Contract 8, "step"): every view says it."""
    if c.step == "train":
        return (
            "one training step: the gradient, the optimizer's update and its application, "
            "parameters and optimizer state donated"
        )
    return (
        f"the gradient alone, of {arguments_words(c.differentiated)}: no optimizer state, no "
        "parameter update (name the target's params and optimizer to compile its training step)"
    )


def output_words(c: Compiled) -> str:
    """What the step returns, as it is: a training step's new parameters and
    optimizer state, or the loss and the differentiated arguments' gradients."""
    if c.step == "train":
        return "the new parameters and optimizer state, and the loss"
    return f"the loss and the gradients of {arguments_words(c.differentiated)}"


def arguments_words(d: dict | None) -> str:
    """`argument 0`, `arguments 1 and 2`, `keyword arguments x, w`: what the
    step differentiates (Compiled.differentiated)."""
    if d is None:
        return "what the target's train_step differentiates"
    named = []
    if d["positions"]:
        named.append(_counted("argument", [str(p) for p in d["positions"]]))
    if d["keywords"]:
        named.append(_counted("keyword argument", d["keywords"]))
    return " and ".join(named) or "no argument (none is floating-point)"


def differs(c: Compiled) -> list[tuple[str, str]]:
    """The one row saying that the step differentiates other arguments than
    the residual list does (print_saved_residuals differentiates every
    argument), where they differ."""
    d = c.differentiated
    if d is None or d["every_argument"]:
        return []
    return [(
        "differentiated",
        f"the step: {arguments_words(d)} ({d['why']}); the residual list: every argument, "
        "as jax.ad_checkpoint.print_saved_residuals differentiates them",
    )]  # fmt: skip


def _counted(word: str, names: list[str]) -> str:
    """`argument 0`, `arguments 1 and 2`, `keyword arguments w, x and y`."""
    if len(names) == 1:
        return f"{word} {names[0]}"
    return f"{word}s {', '.join(names[:-1])} and {names[-1]}"
