"""Provides compare (Contract 6): one row of costs per configuration, with the
Pareto-optimal rows marked.

Every row is the row view of its configuration's trace (`trace.analysis`
`row_view`: no jaxpr text), so a row's numbers are the same as the full
analysis of that configuration shows. The configurations
are built-in policies, the target's own, the checkpoint_name save/offload
sets, and each policy at each checkpointed function; a comparison's rows are
Configs, so a row opens in the app as it is (`Row`: `search.rows`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from remat_tui.core.display import Displayable
from remat_tui.core.model import Analysis
from remat_tui.core.search.configs.distinct import distinct
from remat_tui.core.search.configs.skips import Skip
from remat_tui.core.search.configs.structure_grid import structure_candidates, structure_notes
from remat_tui.core.search.notes.offloads import judge_offloads
from remat_tui.core.search.notes.unchanged import (
    Baseline,
    notes_for,
    same_yet_compiled_apart,
    saved_name_notes,
)
from remat_tui.core.search.request import search_request
from remat_tui.core.search.rows import Row, refused_row, row_of
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import RUNS, Config
from remat_tui.core.setup.policies import as_spec
from remat_tui.core.trace.analysis import costs_view, row_view
from remat_tui.core.trace.configured import Cancelled
from remat_tui.core.trace.traced import Trace, trace_config
from remat_tui.core.xla.buffers.peak_notes import peak_note
from remat_tui.core.xla.compile import costs as compiled_xla
from remat_tui.core.xla.compile import host_memory
from remat_tui.core.xla.estimates import step_time
from remat_tui.core.xla.estimates.flop_note import flop_note
from remat_tui.core.xla.run import pool as compile_pool
from remat_tui.core.xla.run import shared_runs
from remat_tui.core.xla.run.measure import measure as measure_step
from remat_tui.errors import RematError
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.xla.compile.compiled import Compiled


@dataclass
class Comparison(Displayable):
    """What `compare` returns.

    Attributes:
        target_file: the target's file, or None.
        target_name: the target's name.
        device: `{"platform", "id", "description"}`.
        rows: one `Row` per configuration.
        seconds: how long the comparison took.
        structure_notes: why a scan of the program gets no structure (or no
            nested one), `search.configs.structure_grid`.
    """

    target_file: str | None
    target_name: str
    device: dict
    rows: list[Row]
    seconds: float
    structure_notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "schema": 1,
            "target": {"file": self.target_file, "name": self.target_name},
            "device": dict(self.device),
            "rows": [r.to_dict() for r in self.rows],
            "structure_notes": list(self.structure_notes),
        }


def compare(
    fn: Target | Callable,
    args: tuple | None = None,
    kwargs: dict | None = None,
    policies: Sequence[str | policies.PolicySpec] | None = None,
    sites: dict | None = None,
    compiled: bool = False,
    device: str | None = None,
    cancelled: Callable[[], bool] | None = None,
    progress: Callable[[int, int, Config], object] | None = None,
    on_row: Callable[[Row], object] | None = None,
    measure: bool = False,
    runs: int = RUNS,
    skip: Sequence[str | Skip] | None = None,
    verify: bool = False,
) -> Comparison:
    """Rows for `policies` (outer specs; default: every configuration worth
    comparing, see `candidates`), each with `sites` as the site overrides.
    `measure`: compile each and run it on the device `runs` times (after a
    warm-up), and rank by the measured time (`xla.run.measure`).
    `on_row` receives each row as soon as it is measured (compiled too), for
    a view to show it at once; notes that weigh rows against each other and
    the Pareto marks come with the Comparison. `skip`: candidates to leave
    out (`search.configs.skips`), never the code as written; a candidate JAX
    refuses to trace is a row with its error either way. `verify`: run each
    traced row's step against the code as written's on the device
    (`search.verified_rows`); a row whose gradients differ is marked
    and never Pareto-optimal."""
    start = time.perf_counter()
    request = search_request(fn, args, kwargs, sites=sites, device=device, compiled=compiled,
                             measure=measure, runs=runs, skip=skip)  # fmt: skip
    target, base, skips, compiled = request.target, request.base, request.skips, request.compiled
    baseline_analysis, transpose = measure_baseline(target, base, compiled, cancelled)
    if policies is None:
        configs = candidates(target, baseline_analysis, base)
    else:
        configs = [base.with_policy(as_spec(p, target.policies)) for p in policies]
    configs = [c for c in configs if c == base or c in skips.keep([c], baseline_analysis.sites)]
    with shared_runs.sharing(verify and request.measured):  # measured rows: verified by their runs
        rows = evaluate(
            target,
            configs,
            baseline_analysis,
            compiled,
            cancelled,
            progress,
            on_row,
            transpose,
            runs=request.runs,
        )
    if verify:
        from remat_tui.core.search.verified_rows import verify_rows

        verify_rows(target, rows, cancelled)
    return conclude(target, rows, baseline_analysis, base, time.perf_counter() - start)


def conclude(target: Target, rows: list[Row], baseline: Analysis, base: Config, seconds: float,
             cancelled: Callable[[], bool] | None=None) -> Comparison:  # fmt: skip
    """The Comparison of `rows` (all of them, or those made before a cancel):
    the notes that weigh rows against each other, and the Pareto marks."""
    judge_offloads(target, rows, baseline, analysed_row(target, cancelled))
    saved_name_notes(rows, target, baseline.sites)
    peak_notes(rows, base)
    mark_pareto(rows)
    return Comparison(target.file, target.name, baseline.device, rows, seconds,
                      structure_notes(target, base))  # fmt: skip


def analysed_row(
    target: Target, cancelled: Callable[[], bool] | None = None
) -> Callable[[Config], Row]:
    """The row of any configuration of `target`, analysed (not compiled)."""
    return lambda config: row_of(row_view(trace_config(target, config, cancelled), cancelled))


def measure_baseline(
    target: Target, base: Config, compiled: bool, cancelled: Callable[[], bool] | None = None
) -> tuple[Analysis, int | None]:
    """The row of `base`, the configuration every other is measured against,
    and (`compiled`) the transposition FLOPs every compiled row shares
    (`transpose_flops`): both views of one trace of it."""
    trace = trace_config(target, base, cancelled)
    row = row_view(trace, cancelled)
    return row, transpose_flops(trace, cancelled) if compiled else None


def evaluate(
    target: Target,
    configs: Sequence[Config],
    baseline: Analysis,
    compiled: bool,
    cancelled: Callable[[], bool] | None,
    progress: Callable[[int, int, Config], object] | None,
    on_row: Callable[[Row], object] | None = None,
    transpose: int | None = None,
    runs: int | None = None,
) -> list[Row]:
    """One row per config (the baseline's analysis is reused for its own); a
    config JAX refuses to trace is a row with its error (`refused_row`).
    Compiled rows get a step time from `transpose` (`transpose_flops`);
    rows to be compiled later need `with_step_flops` first. `runs`: also run
    each compiled row that many times (compile_row)."""
    reference = Baseline.of(baseline)

    def one(numbered: tuple[int, Config]) -> Row:
        i, config = numbered
        if cancelled is not None and cancelled():
            raise Cancelled()
        if progress is not None:
            progress(i, len(configs), config)
        a = baseline if config == baseline.config else None
        if a is None:
            try:
                a = row_view(trace_config(target, config, cancelled), cancelled)
            except RematError as exc:  # JAX refused this one: a row, and the rest go on
                return refused_row(config, exc.message)
        row = row_of(a)
        row.transpose_flops = transpose
        row.notes = notes_for(a, reference)
        if compiled:
            compile_row(target, row, cancelled, runs)
        return row

    # Compiled rows side by side where compiles can run elsewhere (measured
    # ones in turn: a run on the device must have it to itself).
    numbered = list(enumerate(configs))
    done = compile_pool.run_all(numbered, one) if compiled and runs is None else map(one, numbered)
    rows = []
    for row in done:
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def compile_row(
    target: Target,
    row: Row,
    cancelled: Callable[[], bool] | None = None,
    runs: int | None = None,
    run_if: Callable[[Compiled], bool] | None = None,
) -> None:
    """Compile a row's configuration and, with `runs`, run it that many times
    on its device (after a warm-up). A compile that does not fit is the row's
    answer (`fits` False), and so is a run out of memory; any other compile
    failure is the row's `error`, a run's failure its `measured["error"]`:
    none of them stops a comparison or a search. `run_if(compiled)`: run
    only the compiles it accepts."""
    try:
        if runs is None:
            step = compiled_xla.compile_answer(target, row.config, cancelled, memory=True)
            result, row.program = step.result, step.program
        else:
            result, measured = measure_step(target, row.config, runs, cancelled, run_if=run_if)
            row.measured = measured
    except RematError as exc:
        row.error = exc.message
        return
    row.compiled = replace(result, made=())  # the numbers: a row never names residuals
    chip = step_time.chip_of(result.device)
    if not result.fits or row.step_flops is None:
        return
    per_device = result.devices
    # The whole program's FLOPs over its devices; the host bytes one device moves.
    if chip is not None:
        host = host_memory.one_devices_host_bytes(
            row.host_bytes,
            row.global_host_bytes or row.host_bytes,
            row.auto_sharded_devices,
            per_device,
        )
        row.time = step_time.estimate(
            chip,
            row.step_flops / per_device,
            host_memory.moved_bytes(result.device, host),
            step_time.StepCounts.of(result),
        )
    note = flop_note(row.step_flops / per_device, row.recompute_flops / per_device, result)
    if note is not None:
        row.notes.append(note)


def transpose_flops(baseline: Trace, cancelled: Callable[[], bool] | None = None) -> int:
    """The backward pass's FLOPs besides recomputation (the same under every
    configuration), read from the baseline's trace: its backward pass is
    traced now if its row did without it."""
    full = costs_view(baseline, cancelled)
    backward = full.flops["backward"]
    assert backward is not None  # the costs view traces the backward pass
    return backward - full.flops["recompute"]


def peak_notes(rows: list[Row], base: Config) -> None:
    """Note on each compiled row why its peak moved so much less than its
    residual bytes against the code as written, when it did (`search.notes.unchanged`)."""
    written = next((r for r in rows if r.config == base), None)
    if written is None:
        return
    before = written.compiled.memory if written.compiled else None
    if written.compiled is None or before is None:
        return
    for row in rows:
        after = row.compiled.memory if row.compiled else None
        if row is written or row.compiled is None or after is None:
            continue
        same_yet_compiled_apart(row, written)
        flops = (written.compiled.flops, row.compiled.flops)
        note = peak_note(
            before, after, written.saved_bytes, row.saved_bytes, base_label(base), flops=flops
        )
        if note is not None:
            row.notes.append(note)


def base_label(base: Config) -> str:
    """How notes name the configuration rows are weighed against."""
    return "the code as written" if not base.sites else base.with_device(None).label()


def candidates(target: Target, baseline: Analysis, base: Config) -> list[Config]:
    """Every built-in policy and the target's own (outer); the name sets (each
    name saved alone, all names, each offloaded alone, all offloaded), at the
    checkpointed functions when the code has sites, else outer; for code
    with sites, each built-in policy at each checkpointed function; and the
    structures of its scans (`search.configs.structure_grid`); those that decide
    alike once."""
    outer = policies.candidate_specs(target.policies)
    names = [n.name for n in baseline.names]
    name_specs = []
    if names:
        name_specs += [policies.names_policy([n], []) for n in names]
        name_specs.append(policies.names_policy(names, []))
        name_specs += [policies.names_policy([], [n]) for n in names]
        name_specs.append(policies.names_policy([], names))
    functions = list(dict.fromkeys(s.function for s in baseline.sites))
    configs = [base.with_policy(p) for p in outer]
    if functions:
        for function in functions:
            for spec in [*outer, *name_specs]:
                configs.append(base.at_function(baseline.sites, function, spec))
    else:
        configs += [base.with_policy(spec) for spec in name_specs]
    configs += structure_candidates(target, base)
    # Spellings of the same decisions are one row, the first (`search.configs.distinct`).
    return distinct(configs, baseline.sites)


def mark_pareto(rows: list[Row]) -> None:
    """A row is Pareto-optimal when it fits, its offload is not slower than
    recomputing and has host memory to go to, its run (if any) did not fail,
    its gradients (where verified) are the code as written's, and no other
    such row needs no more memory at no more cost (Row.cost: measured or
    estimated step time, or recompute, then host bytes), and less of one."""
    eligible = [
        r
        for r in rows
        if r.fits
        and not r.offload_slower
        and not r.offload_without_host
        and not r.measure_failed
        and not r.gradients_differ
    ]
    for row in rows:
        row.pareto = row in eligible and not any(
            other.weighed_bytes <= row.weighed_bytes
            and other.cost <= row.cost
            and (other.weighed_bytes < row.weighed_bytes or other.cost < row.cost)
            for other in eligible
        )
