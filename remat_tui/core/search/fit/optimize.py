"""Provides `fit --optimize` (Contract 10 with Contract 12): per batch size, the
best decisions under the budget, by the exact search (`search.suggest.pipeline`
compiled at that batch), ranked by examples per second: the throughput
question, which configuration and which batch.

The batches: from the example's (or `multiple`), as plain fit chooses them
(`search.fit.bracket`: grow while the answer fits, shrink while nothing
does, then narrow between the largest batch that fits and the smallest that
does not, in steps of `multiple`), each try one exact search, each batch
searched once. The trend it aims along is the least compiled peak each search
saw at its batch. At each batch the answer is the least step time within the
budget (measured, with `measure`), so its examples per second is the most
that batch can give; the rows rank by it.

The compiles counted are those of the compile service (what the CLI's
`compiles:` line says): programs XLA compiled, and those answered without
compiling, by the same program compiled for another configuration or batch,
or by the compile cache on disk.

`cancelled()` stops after the compile under way: the batches searched so
far are kept (the one under way with the best it verified).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from remat_tui.core.search.fit import bracket
from remat_tui.core.search.fit.results import Fit, FitProgress, FitRow, Probe, rank
from remat_tui.core.search.request import Request
from remat_tui.core.search.suggest.pipeline import Suggestion, suggest_request
from remat_tui.core.setup.devices import describe_device, device_set, resolve_device
from remat_tui.core.setup.loading import takes_devices
from remat_tui.core.setup.scaling import at_batch, example_batch
from remat_tui.core.trace.configured import Cancelled
from remat_tui.core.units import count
from remat_tui.core.xla.compile import service as compile_service

OPTIMIZED = "the best decisions"  # what the progress line calls the configuration searched


def fit_optimized(
    request: Request,
    budget: int,
    multiple: int,
    max_batch: int | None,
    cap: int,
    start: int,
    cancelled: Callable[[], bool] | None,
    progress: Callable[[FitProgress], object] | None,
    on_row: Callable[[FitRow], object] | None,
    verify: bool = False,
) -> Fit:
    """The best decisions at each batch tried (the module doc); the request's
    target scales, its base holds the sites and device, and suggest is asked
    it at each batch's target; `start` is the first batch,
    `cap` the largest allowed. `verify`: each batch's answer run against the
    code as written at that batch, one whose gradients differ dropped for the
    next best, as suggest's `verify` does (`search.suggest.verified`)."""
    began = time.perf_counter()
    target, base = request.target, request.base
    dev = resolve_device(base.device)
    devices = device_set(dev) if takes_devices(target) else None
    rows: dict[int, FitRow] = {}
    tried: list[bracket.Tried] = []
    counted = _Counted()
    stopped = False

    def say(batch: int | None) -> None:
        if progress is not None:
            low, high = bracket.bracket(tried)
            progress(FitProgress(len(tried), 0, OPTIMIZED, base, low, high, batch,
                                 counted.compiled(), counted.reused(), optimized=True))  # fmt: skip

    while not stopped:
        batch = bracket.next_batch(tried, budget, multiple, cap, start)
        say(batch)
        if batch is None:
            break
        try:
            s = suggest_request(request.at(at_batch(target, batch, devices)), budget,
                                cancelled=cancelled, verify=verify)  # fmt: skip
        except Cancelled:
            stopped = True
            break
        stopped = s.cancelled
        rows[batch] = row = _row(batch, s)
        tried.append(bracket.Tried(batch, s.fits, _least_peak(s)))
        if on_row is not None:
            on_row(row)
    return Fit(
        target_file=target.file,
        target_name=target.name,
        device=describe_device(dev),
        budget=budget,
        multiple=multiple,
        max_batch=max_batch,
        example_batch=example_batch(target),
        rows=rank(list(rows.values())),
        compiles=counted.compiled(),
        reused=counted.reused(),
        stored=counted.stored(),
        seconds=time.perf_counter() - began,
        cancelled=stopped,
        optimized=True,
    )


class _Counted:
    """The compile service's counts since this search began."""

    def __init__(self) -> None:
        self.start = compile_service.counts.snapshot()

    def _since(self, *names: str) -> int:
        now = compile_service.counts.snapshot()
        return sum(now[n] - self.start[n] for n in names)

    def compiled(self) -> int:
        """Programs XLA compiled, here or in workers."""
        return self._since("compiled", "in_workers")

    def reused(self) -> int:
        """Programs answered without compiling: the same program, or the store."""
        return self._since("same_program", "stored")

    def stored(self) -> int:
        """Of those, the ones the compile cache on disk answered."""
        return self._since("stored")


def _least_peak(s: Suggestion) -> int | None:
    """The least compiled peak the search at a batch saw (a configuration
    XLA took): where the batch's trend against the budget is."""
    peaks = [r.compiled.peak_bytes for r in s.rows if r.compiled and r.compiled.fits]
    return min(peaks, default=None)


def _verified(row: FitRow, s: Suggestion) -> None:
    """With verify: the answer's verdict (`gradients`), and a note for each
    answer dropped at this batch because its gradients differ."""
    if s.gradients is None:
        return
    row.gradients = s.gradients
    row.verify_failed = list(s.verify_failed)
    row.notes += [f"verify: dropped {f.row.config.label()}: its gradients differ from the code "
                  f"as written's ({f.why()})" for f in s.verify_failed]  # fmt: skip
    v = s.gradients
    said = {"equal": "bitwise equal to", "agree": "within tolerance of",
            "differ": "different from"}.get(v.verdict)  # fmt: skip
    row.notes.append(
        f"verify: its loss and gradients are {said} the code as written's on {v.device} "
        f"({v.bitwise_leaves} of {len(v.leaves)} leaves bitwise)"
        if said
        else f"verify: not verified: {v.reason}"
    )


def _row(batch: int, s: Suggestion) -> FitRow:
    """A batch's row: the exact search's answer there, or nothing fits."""
    best = s.best
    row = FitRow(config=best.config, policy=best.config.policy, complete=not s.cancelled)
    row.search = s.search
    _verified(row, s)
    if not s.fits or not best.compiled:
        row.not_fit = batch
        if best.compiled:
            row.probes.append(Probe(batch, False, best.compiled, "compiled"))
        return row
    row.batch, row.python, row.measured = batch, best.python, best.measured
    row.probes.append(Probe(batch, True, best.compiled, "compiled", best.time))
    c = s.search
    gap = f"gap {c.gap:.1%}" if c.gap is not None else "gap unknown"
    proven = "proven" if c.proven else "not proven"
    row.notes.append(f"the best decisions at batch {batch}: {gap}, {proven} "
                     f"({c.method}, {count(c.compiles, 'program')})")  # fmt: skip
    return row
