"""Provides fit (Contract 10): per configuration, the largest batch whose
compiled step (the training step where the target trains, else the gradient
keeping the loss) fits a memory budget, and what that batch buys in examples
per second.

The target must scale (`setup.scaling`: its args factory takes
`batch`). Each configuration is searched on its own, from the example's batch,
by `search.fit.bracket` (grow or shrink along the peaks' trend, then
narrow by interpolation and bisection), batches in steps of `multiple` up to
`max_batch`; the answer is a batch that fits beside the next multiple that
does not. A compile XLA refuses for want of memory is a batch that does not
fit, never an error; a compile that fails otherwise ends that configuration's
row with its error, and the search goes on.

Compiles are shared where the program is the same (`xla.compile.service`:
the lowered module and what it is compiled for), across configurations,
searches and runs (the store on disk), and cached per target, configuration
and batch (`xla.compile.costs`). Each configuration's batches depend on the
ones before, so they are compiled in turn; the configurations depend on
nothing, so they are searched side by side where compiles can run in worker
processes or on a Ray cluster (`xla.run.pool`), rows kept in
their order.

Each batch that fits gets the roofline's step-time estimate (its FLOPs and
host bytes from a trace at that batch, XLA's counts from the compile), which
makes the examples-per-second curve. With `measure`, each row's batch is then
compiled once more and run on the device (`xla.run.measure`), and the
measured time ranks.

`cancelled()` (the app's escape, the CLI's Ctrl-C) stops the search after
the compile under way: the rows found so far are kept, the one being searched
marked incomplete with the bracket it had reached.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

from remat_tui.core.search.compare import candidates
from remat_tui.core.search.configs.skips import Skip, Skips
from remat_tui.core.search.fit import bracket
from remat_tui.core.search.fit.optimize import fit_optimized
from remat_tui.core.search.fit.results import Fit, FitProgress, FitRow, Probe, rank
from remat_tui.core.search.request import search_request
from remat_tui.core.setup.config import RUNS, Config
from remat_tui.core.setup.devices import describe_device, device_set
from remat_tui.core.setup.loading import takes_devices
from remat_tui.core.setup.policies import as_spec
from remat_tui.core.setup.scaling import (
    argument_bytes,
    at_batch,
    example_batch,
    require_scalable,
    shapes,
)
from remat_tui.core.trace.analysis import costs_view, row_view
from remat_tui.core.trace.configured import Cancelled, as_target, check_cancelled
from remat_tui.core.trace.traced import trace_config
from remat_tui.core.units import human_bytes
from remat_tui.core.xla.compile import host_memory
from remat_tui.core.xla.compile import shared as programs
from remat_tui.core.xla.compile.costs import Source
from remat_tui.core.xla.estimates import step_time
from remat_tui.core.xla.run import pool as compile_pool
from remat_tui.core.xla.run.measure import measure as measure_step
from remat_tui.errors import RematError
from remat_tui.registry import Target

if TYPE_CHECKING:
    import jax

    from remat_tui.core.setup.policy_spec import PolicySpec
    from remat_tui.core.xla.compile.compiled import Compiled

MAX_BATCH = 1 << 20  # the largest batch tried when no max_batch is given


def fit(
    fn: Target | Callable,
    budget: int,
    args: tuple | None = None,
    kwargs: dict | None = None,
    policies: list[str] | None = None,
    sites: dict | None = None,
    device: str | None = None,
    multiple: int = 1,
    max_batch: int | None = None,
    measure: bool = False,
    runs: int = RUNS,
    configs: list[tuple[Config, str]] | None = None,
    first: Config | None = None,
    cancelled: Callable[[], bool] | None = None,
    progress: Callable[[FitProgress], object] | None = None,
    on_row: Callable[[FitRow], object] | None = None,
    optimize: bool = False,
    skip: Sequence[str | Skip] | None = None,
    verify: bool = False,
) -> Fit:
    """The largest batch that fits `budget` bytes (per device) for each of
    `policies` (outer specs, each row labelled as written; default: every
    configuration compare weighs, `candidates`), with `sites` overriding the
    code's checkpoints, on `device`. `configs`: (Config, label) pairs to
    search instead; `first`: a configuration to search before the others
    (the app's shown one). `on_row` hears each row as its search ends.
    `optimize`: instead, per batch size, the best decisions under the budget
    (`search.fit.optimize`), a row per batch. `skip`: candidates to
    leave out (`search.configs.skips`). `verify` (with `optimize`): each
    batch's answer run against the code as written on the device, one whose
    gradients differ dropped for the next best (Contract 18)."""
    # Long for its signature, the API's and the app's options; the body is the
    # setup each search shares, then one loop over configurations.
    start_time = time.perf_counter()
    target = as_target(fn, args, kwargs)
    _check_numbers(budget, multiple, max_batch)
    require_scalable(target)
    # Every batch is compiled: its peak is what fits.
    request = search_request(target, sites=sites, device=device, compiled=True,
                             measure=measure, runs=runs, skip=skip)  # fmt: skip
    base = request.base
    dev = base.jax_device
    devices = device_set(dev) if takes_devices(target) else None
    cap = MAX_BATCH if max_batch is None else max_batch
    example = example_batch(target)
    largest = bracket.largest_allowed(multiple, cap)
    start = min(max((example or multiple) // multiple * multiple, multiple), largest)

    def built(batch: int) -> Target:
        return at_batch(target, batch, devices)

    if verify and not optimize:
        raise RematError(
            "--verify checks the configuration fit --optimize answers with at each batch; "
            "add --optimize, or verify one configuration with remat-tui verify."
        )
    _check_scaling(target, built, budget, multiple)
    if optimize:
        if policies is not None or configs is not None:
            raise RematError(
                "--optimize searches every decision at each batch; --policy names "
                "configurations to search instead: give one or the other."
            )
        return fit_optimized(request, budget, multiple, max_batch, largest, start, cancelled,
                             progress, on_row, verify)  # fmt: skip
    stopped = False
    try:
        if configs is None:
            configs = _configs(target, built(start), base, policies, cancelled, request.skips)
    except Cancelled:  # before any row: an empty answer, said to be cancelled
        configs, stopped = [], True
    if first is not None and not stopped:
        configs = _unique([(first, first.policy), *configs])
    file = target.file
    source = (lambda batch: Source(file, target.name, batch, mesh=target.mesh)) if file else None
    search = _Search(built, dev, budget, multiple, cap, start, cancelled, progress, source)

    def one(numbered: tuple[int, tuple[Config, str]]) -> tuple[FitRow, bool]:
        """A configuration's search: its row, and whether it was cancelled."""
        index, (config, label) = numbered
        row = FitRow(config=config, policy=label)
        try:
            search.run(row, index, len(configs))
        except Cancelled:
            return row, True
        return row, False

    rows: list[FitRow] = []
    # Configurations side by side where compiles can run elsewhere: each one's
    # batches depend on the ones before, the configurations on nothing.
    for row, cut in compile_pool.run_all(list(enumerate(configs)), one):
        stopped = stopped or cut
        if row.probes or not cut:
            rows.append(row)
            if on_row is not None:
                on_row(row)
        if stopped:
            break
    if request.runs is not None and not stopped:
        stopped = _measure_rows(rows, built, dev, request.runs, cancelled)
    return Fit(
        target_file=target.file,
        target_name=target.name,
        device=describe_device(dev),
        budget=budget,
        multiple=multiple,
        max_batch=max_batch,
        example_batch=example,
        rows=rank(rows),
        compiles=search.compiles,
        reused=search.reused,
        stored=search.stored,
        seconds=time.perf_counter() - start_time,
        cancelled=stopped,
    )


def _check_numbers(budget: object, multiple: object, max_batch: object) -> None:
    if not isinstance(multiple, int) or isinstance(multiple, bool) or multiple < 1:
        raise RematError(
            f"multiple {multiple!r}: the batch grows in steps of this many examples; give a "
            "positive whole number (1: any batch; 8: batches of 8, 16, 24, ...)."
        )
    if max_batch is not None and (not isinstance(max_batch, int) or max_batch < multiple):
        raise RematError(
            f"max batch {max_batch!r}: the largest batch to try must be a whole number of at "
            f"least the multiple ({multiple})."
        )
    if not isinstance(budget, int) or budget <= 0:
        raise RematError(f"budget {budget!r}: give a positive size in bytes (or '16GiB').")


def _check_scaling(
    target: Target, built: Callable[[int], Target], budget: int, multiple: int
) -> None:
    """Bad input said before anything compiles: a `batch` the factory ignores,
    and a budget the arguments alone exceed at the smallest batch."""
    smallest = built(multiple)
    if shapes(smallest) == shapes(built(2 * multiple)):
        raise RematError(
            f"{target.label}: its args factory takes `batch` but builds the same shapes at "
            f"batch {multiple} and {2 * multiple}; make the batch dimension of the inputs "
            "`batch` (e.g. jax.ShapeDtypeStruct((batch, 784), jnp.float32))."
        )
    try:
        floor = argument_bytes(smallest)
    except ValueError as exc:  # jax's IndivisibleError: a batch the mesh cannot split
        raise RematError(
            f"{target.label}: at batch {multiple} its arguments do not split over their mesh "
            f"({str(exc).splitlines()[0]}). Grow the batch in steps the mesh divides: "
            "--multiple N (multiple=N in the API), N the product of the mesh axes that split "
            "the batch."
        ) from None
    if floor > budget:
        raise RematError(
            f"{target.label}: the budget, {human_bytes(budget)}, is below what the arguments "
            f"alone take at batch {multiple}: {human_bytes(floor)} per device, so no batch "
            "can fit. Give a budget above that (the device's memory, e.g. --budget 16GiB)."
        )


def _configs(
    target: Target,
    example: Target,
    base: Config,
    policies: Sequence[str | PolicySpec] | None,
    cancelled: Callable[[], bool] | None,
    skips: Skips,
) -> list[tuple[Config, str]]:
    """(Config, label) per configuration asked for: `policies` as written, or
    compare's candidates (read off a trace at the first batch) less those
    `skips` names, duplicates (two spellings of one policy) searched once."""
    if policies is None:
        baseline = row_view(trace_config(example, base, cancelled), cancelled)
        kept = [c for c in candidates(example, baseline, base)
                if c == base or skips.keep([c], baseline.sites)]  # fmt: skip
        pairs = [(c, c.policy) for c in kept]
    else:
        specs = [as_spec(p, target.policies) for p in policies]
        labels = [p if isinstance(p, str) else p.canonical for p in policies]
        pairs = [(base.with_policy(s), label) for s, label in zip(specs, labels, strict=True)]
    return _unique(pairs)


def _unique(pairs: list[tuple[Config, str]]) -> list[tuple[Config, str]]:
    """Each configuration once, where it first comes, with its first label."""
    seen: dict = {}
    for config, label in pairs:
        seen.setdefault(config, (config, label))
    return list(seen.values())


class _Search:
    """One configuration's bracket after another, sharing compiles."""

    def __init__(
        self,
        built: Callable[[int], Target],
        dev: jax.Device,
        budget: int,
        multiple: int,
        cap: int,
        start: int,
        cancelled: Callable[[], bool] | None,
        progress: Callable[[FitProgress], object] | None,
        source: Callable[[int], Source] | None,
    ) -> None:
        self.built, self.dev, self.budget = built, dev, budget
        self.multiple, self.cap, self.start = multiple, cap, start
        self.cancelled, self.progress = cancelled, progress
        self.source = source  # batch -> where a worker finds the target, or None
        self.chip = step_time.chip_of(dev)
        self.compiles = self.reused = self.stored = 0
        self.counting = threading.Lock()  # configurations may be searched in threads
        self.times: dict[
            Hashable, step_time.StepTime
        ] = {}  # a program's key -> its step-time estimate

    def run(self, row: FitRow, index: int, total: int) -> None:
        tried: list[bracket.Tried] = []
        while True:
            batch = bracket.next_batch(tried, self.budget, self.multiple, self.cap, self.start)
            self._say(row, index, total, tried, batch)
            if batch is None:
                break
            try:
                probe = self._probe(row, batch)
            except RematError as exc:
                row.error = exc.message
                break
            row.probes.append(probe)
            peak = probe.compiled.peak_bytes if probe.compiled.fits else None
            tried.append(bracket.Tried(batch, probe.fits, peak))
            self._conclude(row, tried)
        row.complete = row.error is None and bracket.closed(tried, self.multiple, self.cap)
        self._conclude(row, tried)
        if row.batch and not row.python:
            row.python = self._python(row)

    def _probe(self, row: FitRow, batch: int) -> Probe:
        check_cancelled(self.cancelled)
        scaled = self.built(batch)
        source = self.source(batch) if self.source is not None else None
        shared = programs.compile_shared(scaled, row.config, self.dev, self.cancelled, source)
        compiled, how = shared.result, shared.how
        with self.counting:
            self.compiles += how in programs.NEW
            self.reused += how in (programs.SAME_PROGRAM, programs.STORED)
            self.stored += how == programs.STORED
        fits = compiled.fits and compiled.peak_bytes <= self.budget
        probe = Probe(batch, fits, compiled, how)
        if fits:
            key = shared.program or (id(scaled), row.config)
            probe.time, python = self._estimate(key, scaled, row.config, compiled)
            row.python = python or row.python
        return probe

    def _estimate(
        self, key: Hashable, scaled: Target, config: Config, compiled: Compiled
    ) -> tuple[step_time.StepTime | None, str]:
        """The step-time estimate at this batch, once per program (`key`: the
        same program takes the same time), and the snippet to paste when traced."""
        if self.chip is None:
            return None, ""
        if key in self.times:
            return self.times[key], ""
        a = costs_view(trace_config(scaled, config, self.cancelled), self.cancelled)
        devices = compiled.devices
        backward = a.flops["backward"]
        assert backward is not None  # the costs view traces the backward pass
        step_flops = a.flops["forward"] + backward
        t = a.totals
        host = host_memory.one_devices_host_bytes(
            t.host_bytes, t.global_host_bytes, a.auto_sharded_devices, devices
        )
        estimate = step_time.estimate(
            self.chip,
            step_flops / devices,
            host_memory.moved_bytes(compiled.device, host),
            step_time.StepCounts.of(compiled),
        )
        self.times[key] = estimate
        return estimate, a.python

    def _python(self, row: FitRow) -> str:
        scaled = self.built(row.batch)
        return row_view(trace_config(scaled, row.config, self.cancelled), self.cancelled).python

    def _conclude(self, row: FitRow, tried: list) -> None:
        """The row's answer from its bracket so far."""
        low, high = bracket.bracket(tried)
        row.batch, row.not_fit = low, high
        row.capped = high is None and low + self.multiple > self.cap

    def _say(self, row: FitRow, index: int, total: int, tried: list, batch: int | None) -> None:
        if self.progress is None:
            return
        low, high = bracket.bracket(tried)
        self.progress(
            FitProgress(index, total, row.policy, row.config, low, high, batch,
                        self.compiles, self.reused)
        )  # fmt: skip


def _measure_rows(
    rows: list[FitRow],
    built: Callable[[int], Target],
    dev: jax.Device,
    runs: int,
    cancelled: Callable[[], bool] | None,
) -> bool:
    """Run each row's step at its batch on the device; True when cancelled."""
    for row in rows:
        if not row.batch:
            continue
        try:
            _, measured = measure_step(
                built(row.batch), row.config, runs, cancelled, device=dev, memory=False
            )
        except Cancelled:
            return True
        except RematError as exc:
            row.notes.append(f"not measured: {exc.message}")
            continue
        row.measured = measured
    return False
