"""Provides suggest (Contracts 6, 8 and 12): the least-cost configuration whose
memory fits a budget, with what it is proven against.

Memory is the residual bytes one device holds, or the compiled peak per device when
compiling. Cost is the recompute FLOPs, or, once compiled for a chip the
table knows (`xla.estimates.chips`), the estimated step time
(`xla.estimates.step_time`), or, measuring (`measure=True`), the time measured
on the device for candidates that fit; host bytes break ties, and a
configuration whose offload is slower than recomputing what it offloads is
the answer only when nothing else fits.

The space: per place (each checkpointed function, or each call of it where
the program holds several; the outer policy in code without checkpoints) and
per checkpoint_name, save, recompute or offload; the built-in policies and
the target's own; the structures of its scans (`search.configs.structure_grid`). Searched
exactly either way (`search.exact.certificate` says what the answer is
proven against):

- a small space (suggest_candidates.ENUMERATE_LIMIT) is listed whole: every
  configuration analysed, then compiled from the least cost it can have up,
  stopping where none left can beat the best that fits
  (`search.suggest.ordered`);
- a larger one by the exact search (`search.exact.search`): a model of the name
  decisions solved exactly and corrected by compiling until its optimum is
  verified, and the other candidates compiled from their least cost up.

Cancelling (`cancelled()`, the CLI's Ctrl-C, the app's escape) keeps the
best answer compiled so far, with the gap left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from remat_tui.core.display import Displayable
from remat_tui.core.model import Analysis
from remat_tui.core.search.compare import analysed_row, measure_baseline
from remat_tui.core.search.configs.skips import Skip, Skips
from remat_tui.core.search.configs.structure_grid import structure_notes
from remat_tui.core.search.exact import certificate as cert
from remat_tui.core.search.exact.search import NameOutcome, Narrowing, search_names, within
from remat_tui.core.search.exact.space import Space
from remat_tui.core.search.notes.offloads import judge_offloads
from remat_tui.core.search.request import Request, search_request
from remat_tui.core.search.rows import Row
from remat_tui.core.search.suggest.candidates import (  # noqa: F401 (STATES: where tests look)
    ENUMERATE_LIMIT,
    STATES,
    Analysed,
    enumerated,
    listed,
    space_size,
)
from remat_tui.core.search.suggest.choice import (  # noqa: F401 (choose: where callers look)
    Within,
    choose,
    device_memory,
    finish_rows,
    within_resolution,
)
from remat_tui.core.search.suggest.ordered import (
    Runner,
    SearchProgress,
    compile_baseline,
    compile_every,
    compile_in_order,
    least_cost,
)
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import RUNS, Config
from remat_tui.core.setup.devices import device_label
from remat_tui.core.trace.configured import Cancelled
from remat_tui.core.xla.compile import host_memory
from remat_tui.core.xla.run import shared_runs
from remat_tui.errors import RematError
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.search.suggest.verified import Failed
    from remat_tui.core.xla.verify.runs import Verification


@dataclass
class Suggestion(Displayable):
    """What `suggest` returns.

    Attributes:
        budget: the budget, in bytes.
        measure: what had to fit it: `"residual"` (residual bytes per device)
            or `"compiled"` (the compiled peak per device).
        fits: whether any configuration fits.
        best: the answer (a `Row`): the least cost that fits, else the
            smallest; `best.python` is the code to paste.
        baseline: the code as written, for the saving.
        exact: whether the answer is proven optimal (within the model, for
            the exact search's model: `search`).
        searched: how many configurations were analysed.
        rows: the rows analysed (those compiled, when compiling).
        compiled_count: how many were compiled.
        measured_count: how many were run on the device.
        skipped: how many were left out without a compile: they could not
            change the answer, or they offload where the device's compile has
            no host memory (never the answer); `skipped_why` says why.
        device_memory: what the device has for the program, when compiled.
        search: what the answer is proven against (a `Certificate`: method,
            bound, gap, compiles, assumptions).
        cancelled: the search was stopped; `best` is the best verified then.
        refused: the candidates JAX refused to trace (rows with their
            error, never the answer): the search answered from the rest.
        set_aside: where the code as written fits and the best found beats
            its cost by less than the cost can tell apart, that best (and by
            how much): the answer is then the code as written.
        gradients: with `verify=True`, the answer's `Verification`: its
            loss and gradients run on the device against the code as
            written's (Contract 18); else None.
        verify_failed: with `verify=True`, the answers dropped because
            their gradients differ, each with why (`Failed`).
    """

    budget: int
    measure: str  # "residual" | "compiled"
    fits: bool
    best: Row
    baseline: Row  # the code as written, for the saving
    exact: bool
    searched: int
    rows: list[Row]
    search: cert.Certificate
    compiled_count: int = 0  # configurations compiled (compiled measure only)
    measured_count: int = 0  # configurations run on the device (measure=True)
    skipped: int = 0  # left out uncompiled: no better, or offloading with no host memory
    skipped_why: str = ""
    # What the device has for the program (compiled measure only): XLA's figure
    # from a compile that did not fit, else the chip table's memory per chip.
    device_memory: int | None = None
    structure_notes: tuple[str, ...] = ()  # why a scan gets no structure (or no nested one)
    cancelled: bool = False
    refused: tuple[Row, ...] = ()
    set_aside: Within | None = None  # the best found, within the cost's resolution of as written
    gradients: Verification | None = None  # the answer verified (verify=True)
    verify_failed: tuple[Failed, ...] = ()  # answers dropped: their gradients differ
    target: Target | None = field(default=None, repr=False, compare=False)  # for verify()

    def verify(self, seed: int = 0) -> Verification:
        """Run the answer's step and the code as written's on the device with
        the same inputs and compare the loss and gradients (`remat_tui.verify`)."""
        from remat_tui.core.xla.verify.runs import verify

        if self.target is None:
            raise RematError("this Suggestion was not made by suggest: it has no target to run")
        return verify(self.target, self.best.config, seed=seed)

    @property
    def found(self) -> Row:
        """The best configuration the search found: the answer, or the one
        set aside for the code as written (`set_aside`)."""
        return self.set_aside.row if self.set_aside is not None else self.best

    @property
    def budget_above_device(self) -> bool:
        """The budget is more than the device has: the device is the real limit."""
        return self.device_memory is not None and self.budget > self.device_memory

    def to_dict(self) -> dict:
        return {
            "schema": 1,
            "budget": self.budget,
            "measure": self.measure,
            "fits": self.fits,
            "best": self.best.to_dict(),
            "as_written": self.baseline.to_dict(),
            "exact": self.exact,
            "search": self.search.to_dict(),
            "cancelled": self.cancelled,
            "searched": self.searched,
            "compiled_count": self.compiled_count,
            "measured_count": self.measured_count,
            "skipped": {"count": self.skipped, "why": self.skipped_why},
            "device_memory": self.device_memory,
            "budget_above_device": self.budget_above_device,
            "structure_notes": list(self.structure_notes),
            "set_aside": None if self.set_aside is None else self.set_aside.to_dict(),
            "refused": [
                {"configuration": r.config.label(), "error": r.failure} for r in self.refused
            ],
            "gradients": None if self.gradients is None else self.gradients.to_dict(),
            "verify_failed": [f.to_dict() for f in self.verify_failed],
        }


def suggest(
    fn: Target | Callable,
    budget: int,
    args: tuple | None = None,
    kwargs: dict | None = None,
    compiled: bool = False,
    device: str | None = None,
    sites: dict | None = None,
    cancelled: Callable[[], bool] | None = None,
    progress: SearchProgress | None = None,
    compile_all: bool = False,
    measure: bool = False,
    runs: int = RUNS,
    narrowing: Callable[[Narrowing], object] | None = None,
    max_rounds: int | None = None,
    skip: Sequence[str | Skip] | None = None,
    verify: bool = False,
) -> Suggestion:
    """The least-cost configuration whose memory fits `budget` (see the module
    doc). `compile_all`: list the whole space, however large, and compile
    every candidate: the oracle the search is checked against (bench/,
    tests). `measure`: run each compiled candidate that fits `runs` times on
    the device, and choose by the measured time. `narrowing(Narrowing)`:
    hears the exact search's bound, best and gap as they narrow (`search.exact.search`);
    `max_rounds`: the model's answers it compiles before stopping unproven.
    `skip`: candidates to leave out (`search.configs.skips`: `SPEC` anywhere,
    `ID|FUNCTION=SPEC` at a site); never the code as written. `verify`: run
    the answer against the code as written on the device, and never answer
    with one whose gradients differ (`search.suggest.verified`)."""
    request = search_request(fn, args, kwargs, sites=sites, device=device, compiled=compiled,
                             measure=measure, runs=runs, skip=skip)  # fmt: skip
    return suggest_request(request, budget, cancelled, progress, compile_all, narrowing,
                           max_rounds, verify)  # fmt: skip


def suggest_request(
    request: Request,
    budget: int,
    cancelled: Callable[[], bool] | None = None,
    progress: SearchProgress | None = None,
    compile_all: bool = False,
    narrowing: Callable[[Narrowing], object] | None = None,
    max_rounds: int | None = None,
    verify: bool = False,
) -> Suggestion:
    """`suggest` of a request already made (fit's search per batch asks the
    same at each batch's target)."""
    target, base, skips, compiled = request.target, request.base, request.skips, request.compiled
    first, transpose = measure_baseline(target, base, compiled, cancelled)
    names = [n.name for n in first.names]
    offload = host_memory.offloads_to_host(base.device)
    space = Space(base, first.sites, names, offload, policies.candidate_specs(target.policies))
    space.keep(
        i
        for i, d in enumerate(space.decisions)
        if d.policy is None or not skips.drops_at(d.policy, d.place.key, first.sites)
    )
    run = Runner(request.runs, lambda c: c.fits and c.peak_bytes <= budget)
    search = _Search(target, base, first, budget, compiled, cancelled, progress, transpose, run)
    search.skips = skips
    with shared_runs.sharing(verify and request.measured):  # measured: verified by its run
        if compile_all or space_size(target, names, space.places) <= ENUMERATE_LIMIT:
            search.enumerate(space, compile_all)
        else:
            search.exact(space, narrowing, max_rounds)
    answer = search.conclude(space)
    if not verify:
        return answer
    from remat_tui.core.search.suggest.verified import verified_answer

    best, fits, checked, failed = verified_answer(
        answer.rows, answer.best, answer.fits, answer.baseline, budget, target, cancelled
    )
    if not failed:
        return replace(answer, gradients=checked)
    # Another answer than the search's: no longer its proven optimum.
    return replace(answer, best=best, fits=fits, exact=False,
                   set_aside=None, gradients=checked, verify_failed=tuple(failed))  # fmt: skip


class _Search:
    """One suggest: the candidates analysed once (`Analysed`), compiled
    (`run`), and what each way of searching found."""

    def __init__(
        self,
        target: Target,
        base: Config,
        first: Analysis,
        budget: int,
        compiled: bool,
        cancelled: Callable[[], bool] | None,
        progress: SearchProgress | None,
        transpose: int | None,
        run: Runner,
    ) -> None:
        self.target, self.base, self.first = target, base, first
        self.budget, self.compiled = budget, compiled
        self.cancelled, self.progress, self.transpose = cancelled, progress, transpose
        self.analysed = Analysed(target, first, cancelled, progress)
        self.run = run
        self.rows: list[Row] = []  # what the answer is chosen from
        self.reasons: list[str] = []  # why candidates were not compiled
        self.skipped = 0
        self.stopped = False
        self.method = cert.ENUMERATION
        self.outcome: NameOutcome | None = None  # the exact search's, on the model path
        self.unpriced: list[Row] = []  # candidates not compiled, weighed by their least cost
        self.covered: list[Row] = []  # splits saving at least what did not fit: not compiled
        self.skips = Skips()  # what the user left out (--skip)

    def _kept(self, configs: list[Config]) -> list[Config]:
        """`configs` less those a --skip drops (never the code as written)."""
        return [self.base, *self.skips.keep([c for c in configs if c != self.base],
                                            self.first.sites)]  # fmt: skip

    @property
    def baseline(self) -> Row:
        """The code as written: analysed first, either way of searching."""
        return self.analysed.row(self.base)

    def enumerate(self, space: Space, every: bool) -> None:
        """List the whole space, and compile what can change the answer (or `every`)."""
        configs = self._kept(
            enumerated(self.target, self.base, self.first.sites, space.places, space.names)
        )
        self.analysed(configs)  # one batch: its progress counts to what is searched
        baseline = self.baseline
        everything = self.analysed.all()
        judge_offloads(self.target, everything, self.first, analysed_row(self.target))
        homeless = [r for r in everything if r.offload_without_host]
        self.skipped = len(homeless)
        if homeless:
            self.reasons.append(_without_host(len(homeless), self.base.device))
        if not self.compiled:
            self.rows = everything
            return
        for row in everything:
            row.transpose_flops = self.transpose
        wanted = everything if every else [r for r in everything if not r.offload_without_host]
        try:
            if every:  # every candidate: what the ordered search is checked against
                compile_every(self.target, wanted, self.cancelled, self.progress, self.run)
                done, why = wanted, ""
            else:
                done, why, self.covered = compile_in_order(
                    self.target, wanted, baseline, self.budget, self.cancelled, self.progress,
                    self.run,
                )  # fmt: skip
        except Cancelled:
            self.stopped = True
            done, why = [r for r in wanted if r.compiled or r.error], ""
        if len(done) + len(self.covered) < len(wanted) and why:
            self.reasons.insert(0, why)
        self._say_covered()
        self.skipped = len(everything) - len(done)
        self.unpriced = [r for r in wanted if r not in done and r not in self.covered]
        self.rows = done

    def exact(
        self,
        space: Space,
        narrowing: Callable[[Narrowing], object] | None,
        max_rounds: int | None,
    ) -> None:
        """The name decisions by the exact search's model, the rest listed
        and compiled from their least cost up."""
        self.method = cert.MODEL
        others = self.analysed(self._kept(listed(self.target, self.base, self.first.sites)))
        baseline = self.baseline
        judge_offloads(self.target, others, self.first, analysed_row(self.target))
        homeless = [r for r in others if r.offload_without_host]
        if homeless:
            self.reasons.append(_without_host(len(homeless), self.base.device))
        if self.compiled:
            for row in others:
                row.transpose_flops = self.transpose
            why = compile_baseline(self.target, baseline, self.budget, self.cancelled,
                                   self.progress, self.run)  # fmt: skip
            if why:  # nothing can fit: said after that one compile
                self.rows, self.skipped = [baseline], len(self.analysed.all()) - 1
                self.reasons.insert(0, why)
                return
        incumbent = baseline.cost[0] if within(baseline, self.budget) else None
        least = least_cost(baseline) if self.compiled and baseline.compiled else None
        self.outcome = search_names(
            space, self.budget, self._analyse_names, self._compile_rows if self.compiled else None,
            self.cancelled, narrowing, incumbent, max_rounds, least,
        )  # fmt: skip
        self.stopped = self.outcome.cancelled
        names = self.outcome.rows
        if not self.compiled:
            self.rows = _unique([*others, *names])
            return
        answers = [r for r in names if within(r, self.budget)]
        wanted = [r for r in others if not r.offload_without_host]
        done = [baseline]
        if not self.stopped:
            try:
                done, why, self.covered = compile_in_order(
                    self.target, wanted, baseline, self.budget, self.cancelled, self.progress,
                    self.run, known=tuple(answers),
                )  # fmt: skip
            except Cancelled:
                self.stopped, why = True, ""
                done = [r for r in wanted if r.compiled or r.error]
            if why and any(r not in done and r not in self.covered and r.compiled is None
                           for r in wanted):  # fmt: skip
                self.reasons.insert(0, why)
            self._say_covered()
        self.unpriced = [r for r in wanted if r.compiled is None and r.error is None
                         and r not in self.covered]  # fmt: skip
        self.skipped = len(self.unpriced) + len(self.covered) + len(homeless)
        self.rows = _unique([*done, *names])

    def _say_covered(self) -> None:
        if self.covered:
            self.reasons.append(cert.covered_words(len(self.covered)))

    def _analyse_names(self, configs: list[Config]) -> list[Row]:
        """The exact search's rows, analysed, with the transpose FLOPs their
        least cost and estimate count (measured once, on the code as written)."""
        rows = self.analysed(configs)
        if self.compiled:
            for row in rows:
                row.transpose_flops = self.transpose
        return rows

    def _compile_rows(self, rows: list[Row]) -> None:
        """Compile the exact search's rows not compiled yet."""
        fresh = [r for r in rows if r.compiled is None and r.error is None]
        compile_every(self.target, fresh, self.cancelled, self.progress, self.run)

    def conclude(self, space: Space) -> Suggestion:
        # A name assignment the model reached may still be one a --skip names.
        kept = set(self.skips.keep([r.config for r in self.rows], self.first.sites))
        rows = [r for r in self.rows if r.config in kept or r.config == self.base]
        rows = [r for r in rows if not r.refused]  # said apart (`refused`): no numbers
        if self.compiled:  # a compile a stop cut short is no answer: only what compiled
            rows = [r for r in rows if r.compiled is not None or r.error is not None]
        if self.skips.dropped:
            self.reasons.append(self.skips.words())
            self.skipped += len(self.skips.dropped)
        if not rows:
            raise Cancelled()  # stopped before anything could be an answer
        if self.method == cert.MODEL:
            judge_offloads(self.target, rows, self.first, analysed_row(self.target))
        finish_rows(rows, self.base)
        best, fits = choose(rows, self.budget)
        certificate = self._certificate(space, best, fits)
        # A change the cost cannot tell from the code as written is not worth
        # making: the answer is the code as written, the best found said beside.
        set_aside = within_resolution(best, self.baseline, self.budget) if fits else None
        if set_aside is not None:
            best = self.baseline
        return Suggestion(
            budget=self.budget,
            measure="compiled" if self.compiled else "residual",
            fits=fits,
            best=best,
            baseline=self.baseline,
            exact=certificate.proven,
            searched=len(self.analysed.all()),
            rows=rows,
            compiled_count=len(rows) if self.compiled else 0,
            measured_count=sum(1 for r in rows if r.measured),
            skipped=self.skipped,
            skipped_why="; ".join(self.reasons),
            device_memory=device_memory(rows) if self.compiled else None,
            structure_notes=tuple(structure_notes(self.target, self.base)),
            search=certificate,
            cancelled=self.stopped,
            refused=tuple(r for r in self.analysed.all() if r.refused),
            set_aside=set_aside,
            target=self.target,
        )

    def _certificate(self, space: Space, best: Row, fits: bool) -> cert.Certificate:
        source, unit = best.cost_source, best.cost_unit
        chip = best.time.chip if best.time else None
        words = cert.cost_words(source, chip)
        best_cost = best.cost[0] if fits else None
        bounds = [best_cost] if best_cost is not None else []
        if self.unpriced and self.compiled and self.baseline.compiled:
            least = least_cost(self.baseline)
            bounds += [least(r)[0] for r in self.unpriced if not r.offload_slower]
        compiles = len({r.program or ("config", r.config) for r in self.rows if r.compiled})
        covered = [cert.covered_words(len(self.covered))] if self.covered else []
        if self.method == cert.ENUMERATION:
            bound = min(bounds, default=float("inf") if not self.stopped else None)
            assumptions = cert.enumeration_assumptions(self.compiled, words, self.stopped)
            return cert.Certificate(
                cert.ENUMERATION, unit, bound, best_cost, compiles, not self.stopped,
                (*assumptions, *covered, *cert.shared_calls_words(space)),
                space=len(self.analysed.all()),
            )  # fmt: skip
        outcome = self.outcome
        name_bound = outcome.bound if outcome is not None else None
        if name_bound is not None:
            bounds.append(name_bound)
        proven = outcome is not None and outcome.proven and not self.stopped
        bound = min(bounds) if bounds and (proven or name_bound is not None) else None
        assumptions = (
            cert.model_assumptions(outcome, space, self.compiled, words)
            if outcome is not None else [words]
        )  # fmt: skip
        return cert.Certificate(
            cert.MODEL, unit, bound, best_cost, compiles, proven, (*assumptions, *covered),
            space=(outcome.space if outcome else 0) + len(self.analysed.all()),
            decisions=outcome.decisions if outcome else 0,
            rounds=outcome.rounds if outcome else 0,
            interactions=outcome.interactions if outcome else 0,
            noun=space.noun,
        )  # fmt: skip


def _unique(rows: list[Row]) -> list[Row]:
    return list({id(r): r for r in rows}.values())


def _without_host(count: int, device: str | None) -> str:
    """Why suggest leaves out the configurations that offload where the
    device's compile has no host memory."""
    return (
        f"{count} offload to host memory, which {device_label(device)}'s compile does "
        "not have: the offloaded bytes would stay in device memory"
    )
