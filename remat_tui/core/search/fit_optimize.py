"""Provides `fit --optimize` (Contract 10 with Contract 12): per batch size, the
best decisions under the budget, by the exact search (core/search/suggest.py
compiled at that batch), ranked by examples per second: the throughput
question, which configuration and which batch.

The batches: from the example's (or `multiple`), doubled while anything
fits the budget (at most `max_batch`), or halved down to `multiple` while
nothing does; the largest batch that fits is then narrowed between the last
that fits and the first that does not (bisection, in steps of `multiple`),
each try one exact search. At each batch the answer is the least step time
within the budget (measured, with `measure`), so its examples per second is
the most that batch can give; the rows rank by it.

`cancelled()` stops after the compile under way: the batches searched so
far are kept (the one under way with the best it verified).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from remat_tui.core.search.fit_rows import Fit, FitProgress, FitRow, Probe, rank
from remat_tui.core.search.skips import Skip
from remat_tui.core.search.suggest import Suggestion, suggest
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.devices import describe_device, device_set, resolve_device
from remat_tui.core.setup.loading import takes_devices
from remat_tui.core.setup.scaling import at_batch, example_batch
from remat_tui.core.trace.configured import Cancelled
from remat_tui.core.xla.compiled_numbers import Compiled
from remat_tui.registry import Target

OPTIMIZED = "the best decisions"  # what the progress line calls the configuration searched


def fit_optimized(
    target: Target,
    budget: int,
    base: Config,
    multiple: int,
    max_batch: int | None,
    cap: int,
    start: int,
    measure: bool,
    runs: int,
    cancelled: Callable[[], bool] | None,
    progress: Callable[[FitProgress], object] | None,
    on_row: Callable[[FitRow], object] | None,
    skip: Sequence[str | Skip] | None = None,
) -> Fit:
    """The best decisions at each batch tried (the module doc); `target`
    scales, `base` holds the sites and device, `start` is the first batch,
    `cap` the largest allowed."""
    began = time.perf_counter()
    dev = resolve_device(base.device)
    devices = device_set(dev) if takes_devices(target) else None
    rows: dict[int, FitRow] = {}
    compiles, stopped = 0, False

    def at(batch: int) -> bool:
        """One exact search at `batch`: whether anything fits."""
        nonlocal compiles, stopped
        if progress is not None:
            fits = max((b for b, r in rows.items() if r.batch), default=0)
            failing = [b for b, r in rows.items() if not r.batch]
            progress(FitProgress(len(rows), len(rows) + 1, OPTIMIZED, base, fits,
                                 min(failing, default=None), batch, compiles,
                                 0))  # fmt: skip
        try:
            s = suggest(at_batch(target, batch, devices), budget, compiled=True,
                        device=base.device, sites=dict(base.site_specs), cancelled=cancelled,
                        measure=measure, runs=runs, skip=skip)  # fmt: skip
        except Cancelled:
            stopped = True
            return False
        compiles += s.search.compiles
        stopped = s.cancelled
        row = _row(batch, s)
        rows[batch] = row
        if on_row is not None:
            on_row(row)
        return s.fits

    def go(batch: int) -> bool:
        return not stopped and at(batch)

    fits, failing = 0, None
    batch = start
    while not stopped:
        if go(batch):
            fits = batch
            if batch >= cap:
                break
            batch = min(batch * 2, cap)
        else:
            failing = batch
            if fits or batch <= multiple:
                break
            batch = max(batch // 2 // multiple * multiple, multiple)
    while fits and failing is not None and failing - fits > multiple and not stopped:
        middle = (fits + failing) // 2 // multiple * multiple
        if middle in (fits, failing):
            break
        if go(middle):
            fits = middle
        else:
            failing = middle
    return Fit(
        target_file=target.file,
        target_name=target.name,
        device=describe_device(dev),
        budget=budget,
        multiple=multiple,
        max_batch=max_batch,
        example_batch=example_batch(target),
        rows=rank(list(rows.values())),
        compiles=compiles,
        reused=0,
        seconds=time.perf_counter() - began,
        cancelled=stopped,
        optimized=True,
    )


def _row(batch: int, s: Suggestion) -> FitRow:
    """A batch's row: the exact search's answer there, or nothing fits."""
    best = s.best
    row = FitRow(config=best.config, policy=best.config.policy, complete=not s.cancelled)
    row.search = s.search.to_dict()
    if not s.fits or not best.compiled:
        row.not_fit = batch
        if best.compiled:
            row.probes.append(Probe(batch, False, Compiled.from_dict(best.compiled), "compiled"))
        return row
    row.batch, row.python, row.measured = batch, best.python, best.measured
    row.probes.append(Probe(batch, True, Compiled.from_dict(best.compiled), "compiled", best.time))
    c = s.search
    gap = f"gap {c.gap:.1%}" if c.gap is not None else "gap unknown"
    proven = "proven" if c.proven else "not proven"
    row.notes.append(f"the best decisions at batch {batch}: {gap}, {proven} "
                     f"({c.method}, {c.compiles} compiles)")  # fmt: skip
    return row
