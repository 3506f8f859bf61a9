"""Provides `analyze_compiled`: an analysis with what XLA says of its compiled
gradient (`analysis.compiled`, `xla.compile.costs`), the configuration resolved
and the example arguments built once for both; and `linked`: the compiled
breakdown (Contract 7) tied to what the analysis knows and XLA does not: the
residual `R#` a buffer at the peak holds (`xla.fates.residuals`, which also
tells each residual what XLA made of it), and the
sentence on why the peak moved so much less than the residual bytes against
the code as written (`search.notes.unchanged`), which compiles the code as written
too, and so only when the comparison is asked for (`vs_written`): a report
compiles one program, its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from remat_tui.core.model import Analysis
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import RUNS, Config
from remat_tui.core.setup.devices import device_set
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.trace import story
from remat_tui.core.trace.analysis import full_view, resolve, row_view
from remat_tui.core.trace.applied import Applied
from remat_tui.core.trace.configured import as_target
from remat_tui.core.trace.traced import trace, trace_config
from remat_tui.core.xla.buffers.peak_notes import kept_by_xla, peak_note, recomputed_early
from remat_tui.core.xla.compile import host_memory, same_program
from remat_tui.core.xla.compile.costs import compile_answer
from remat_tui.core.xla.estimates import step_time
from remat_tui.core.xla.fates import residuals as fates
from remat_tui.core.xla.run.measure import check_measurable
from remat_tui.core.xla.run.measure import measure as measure_step
from remat_tui.errors import RematError
from remat_tui.registry import Target

if TYPE_CHECKING:
    import jax

    from remat_tui.core.xla.compile.compiled import Compiled


def analyze_compiled(
    fn: Any,
    args: tuple | None = None,
    kwargs: dict | None = None,
    policy: str = policies.AS_WRITTEN,
    device: str | jax.Device | None = None,
    cancelled: Callable[[], bool] | None = None,
    sites: dict | None = None,
    config: Config | None = None,
    measure: bool = False,
    runs: int = RUNS,
    vs_written: bool = False,
) -> Analysis:
    """`analyze` (its arguments alike), then the step compiled for the device,
    with where its peak goes and the estimate of its time; `measure`: also
    run it there `runs` times (`xla.run.measure`); `vs_written`: also
    compile the code as written, and say why the peak moved so much less than
    the residual bytes against it, where it did (`linked`)."""
    target = as_target(fn, args, kwargs)
    config, dev = resolve(target, policy, sites, device, config)
    if measure:
        check_measurable(dev, runs)
    arguments = resolve_arguments(target, device_set(dev))
    traced = trace(target, config, dev, arguments, cancelled)
    a = full_view(traced, cancelled)
    measured = None
    if measure:
        compiled, measured = measure_step(
            target, config, runs, cancelled, device=dev, arguments=arguments
        )
    else:
        compiled = compile_answer(
            target, config, cancelled, device=dev, arguments=arguments, memory=True
        ).result
    a = replace(a, compiled=compiled, measured=None if measured is None else measured.to_dict())
    # Each residual with what XLA made of it; each buffer at the peak naming its residual.
    residuals, memory = fates.link(a.residuals, compiled, story.recomputed(traced))
    if memory is not None:
        a = replace(a, residuals=residuals, compiled=replace(compiled, memory=memory))
    if compiled.fits:  # what compiles to the same program changes nothing XLA runs
        applied = same_program.verdicts(target, config, dev, arguments, a.applied, cancelled)
        a = replace(a, applied=applied + merged_recompute(memory))
    linked_compiled = linked(target, a, dev, cancelled, vs_written)
    return replace(a, compiled=linked_compiled, time=estimated(a, compiled))


def merged_recompute(memory: dict | None) -> list[Applied]:
    """The verdict where XLA merged the recomputation the policy asks for with
    the forward computation (`xla.fates.residuals` found the values it keeps)."""
    merged = (memory or {}).get("merged_recompute") or []
    if not merged:
        return []
    values = ", ".join(m["value"] for m in merged[:4]) + (", ..." if len(merged) > 4 else "")
    return [Applied(
        "the recomputation the policy asks for",
        f"XLA merged it with the forward computation (common subexpression elimination): "
        f"the compiled step keeps {len(merged)} forward value{'s' * (len(merged) != 1)} "
        f"({values}) instead of recomputing them, so the peak keeps them; jax.checkpoint's "
        "prevent_cse=True (its default) did not keep them apart in this compile",
        "cse_merged",
    )]  # fmt: skip


def estimated(a: Analysis, c: Compiled | None) -> dict | None:
    """The step-time estimate (`xla.estimates.step_time`) of `a`'s configuration
    compiled as `c` (a Compiled), on a chip the table knows; None otherwise."""
    if c is None or not c.fits:
        return None
    chip = step_time.chip_of(c.device)
    backward = a.flops["backward"]  # counted in the full view, which compiles
    if chip is None or backward is None:
        return None
    flops = (a.flops["forward"] + backward) / c.devices
    t = a.totals
    host = host_memory.moved_bytes(
        c.device,
        host_memory.one_devices_host_bytes(
            t.host_bytes, t.global_host_bytes, a.auto_sharded_devices, c.devices
        ),
    )
    return step_time.estimate(chip, flops, host, step_time.StepCounts.of(c)).to_dict()


def linked(
    target: Target,
    a: Analysis,
    dev: jax.Device,
    cancelled: Callable[[], bool] | None,
    vs_written: bool = False,
) -> Any:
    """`a.compiled` (its buffers at the peak already naming their residuals:
    `xla.fates.residuals`) with (`explanation`) what its `residual` bytes at the
    peak are when autodiff saves fewer, what its `recomputed` bytes are when
    XLA computed them in the forward part, and, with `vs_written`, why its peak
    moved so much less than its residual bytes against the code as written
    (compiled too, with its breakdown), when it did."""
    memory = a.compiled.memory
    if memory is None:
        return a.compiled
    device, host = a.compiled.device, a.totals.host_bytes
    moved = int(host_memory.moved_bytes(device, host))
    # Offloaded bytes with no host memory to go to stay in device memory.
    stays = _sentence(host_memory.stays_on_device(host, device)) if host and not moved else None
    kept = kept_by_xla(memory, a.totals.bytes_excluding_arguments - moved)
    note = None
    written = Config(device=a.config.device)
    if vs_written and a.config != written and a.compiled.fits:
        base = row_view(trace_config(target, written, cancelled), cancelled)
        try:
            base_compiled = compile_answer(
                target, written, cancelled, device=dev, memory=True
            ).result
        except RematError:  # the code as written fails to compile: nothing to weigh against
            base_compiled = None
        if base_compiled is not None:
            note = peak_note(
                base_compiled.memory,
                memory,
                base.totals.bytes_excluding_arguments,
                a.totals.bytes_excluding_arguments,
                "the code as written",
                flops=(base_compiled.flops, a.compiled.flops),
            )
    early = recomputed_early(memory)
    said = " ".join(n for n in (note and note + ".", stays, kept, early) if n) or None
    return replace(a.compiled, memory={**memory, "explanation": said})


def _sentence(words: str) -> str:
    return words[0].upper() + words[1:] + "."
