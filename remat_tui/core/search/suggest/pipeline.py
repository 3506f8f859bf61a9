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

- a small space (`search.suggest.candidates` ENUMERATE_LIMIT) is listed
  whole (`enumeration`): every configuration analysed, then compiled from the
  least cost it can have up, stopping where none left can beat the best that
  fits (`search.suggest.ordered`);
- a larger one by the exact search (`modelled`, `search.exact.search`): a
  model of the name decisions solved exactly and corrected by compiling until
  its optimum is verified, and the other candidates compiled from their least
  cost up.

One pipeline either way: every row is made and changed by one `Evaluator`
(analyse, judge offloads, compile, run); the way of searching only chooses
what it evaluates and returns what it `Found`; then `conclude` chooses the
answer (`choose`, with the evaluator's one test of an answer) and says what
it is proven against (`Certificate.of`).

Cancelling (`cancelled()`, the CLI's Ctrl-C, the app's escape) keeps the
best answer compiled so far, with the gap left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from remat_tui.core.display import Displayable
from remat_tui.core.search.compare import measure_baseline
from remat_tui.core.search.configs.skips import Skip
from remat_tui.core.search.configs.structure_grid import structure_notes
from remat_tui.core.search.exact import certificate as cert
from remat_tui.core.search.exact.certificate import ENUMERATION, MODEL
from remat_tui.core.search.exact.search import NameOutcome, Narrowing, search_names
from remat_tui.core.search.exact.space import Space
from remat_tui.core.search.request import Request, search_request
from remat_tui.core.search.rows import Row
from remat_tui.core.search.suggest.candidates import (  # noqa: F401 (STATES: where tests look)
    ENUMERATE_LIMIT,
    STATES,
    enumerated,
    listed,
    space_size,
)
from remat_tui.core.search.suggest.choice import Within, choose, device_memory, within_resolution
from remat_tui.core.search.suggest.evaluator import Evaluator, SearchProgress
from remat_tui.core.search.suggest.ordered import Ordered, compile_all, compile_in_order
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import RUNS
from remat_tui.core.setup.devices import device_label
from remat_tui.core.trace.configured import Cancelled
from remat_tui.core.units import count
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
    same at each batch's target): the candidates evaluated (`Evaluator`) by
    one way of searching (`enumeration` or `modelled`), then the answer
    chosen from what it found (`conclude`), and verified."""
    target, base = request.target, request.base
    first, transpose = measure_baseline(target, base, request.compiled, cancelled)
    names = [n.name for n in first.names]
    offload = host_memory.offloads_to_host(base.device)
    space = Space(base, first.sites, names, offload, policies.candidate_specs(target.policies))
    space.keep(
        i
        for i, d in enumerate(space.decisions)
        if d.policy is None or not request.skips.drops_at(d.policy, d.place.key, first.sites)
    )
    evaluator = Evaluator(target, base, first, budget, request.compiled, request.runs, transpose,
                          request.skips, cancelled, progress)  # fmt: skip
    with shared_runs.sharing(verify and request.measured):  # measured: verified by its run
        if compile_all or space_size(target, names, space.places) <= ENUMERATE_LIMIT:
            found = enumeration(evaluator, space, compile_all)
        else:
            found = modelled(evaluator, space, narrowing, max_rounds)
    answer = conclude(evaluator, space, found)
    if not verify:
        return answer
    from remat_tui.core.search.suggest.verified import verified_answer

    best, fits, checked, failed = verified_answer(
        answer.rows, answer.best, answer.fits, answer.baseline, evaluator.is_answer, target,
        cancelled,
    )  # fmt: skip
    if not failed:
        return replace(answer, gradients=checked)
    # Another answer than the search's: no longer its proven optimum.
    return replace(answer, best=best, fits=fits, exact=False,
                   set_aside=None, gradients=checked, verify_failed=tuple(failed))  # fmt: skip


@dataclass
class Found:
    """What one way of searching found (`enumeration`, `modelled`): the rows
    the answer is chosen from, why the rest were left out, and what the
    certificate reads (`search.exact.certificate` `Searched`)."""

    method: str
    rows: list[Row]
    compiling: bool
    candidates: int  # the candidates listed (besides the exact search's space)
    why: list[str] = field(default_factory=list)  # why candidates were left out
    skipped: int = 0  # how many
    listed: Ordered | None = None  # the listed candidates compiled, when compiling
    names: NameOutcome | None = None  # the exact search's, on the model's way
    least: Callable[[Row], tuple] | None = None  # prices what was left uncompiled
    floor: str = ""  # why none can fit: what every configuration holds is above the budget

    @property
    def stopped(self) -> bool:
        return bool(self.listed and self.listed.stopped) or bool(
            self.names and self.names.cancelled
        )

    @property
    def covered(self) -> int:
        return len(self.listed.covered) if self.listed else 0

    @property
    def left_bound(self) -> float | None:
        return self.listed.bound(self.least) if self.listed else None

    @property
    def compiles(self) -> int:
        """Programs compiled: configurations that lower to one program count once."""
        return len({r.program or ("config", r.config) for r in self.rows if r.compiled})


def enumeration(evaluator: Evaluator, space: Space, every: bool) -> Found:
    """The whole space listed and analysed, and compiled from the least cost
    up (`compile_in_order`), or `every` candidate compiled."""
    target, base, sites = evaluator.target, evaluator.base, evaluator.first.sites
    evaluator.analyse(evaluator.kept(enumerated(target, base, sites, space.places, space.names)))
    everything = evaluator.all()
    homeless = [r for r in everything if r.offload_without_host]
    why = [_without_host(len(homeless), base.device)] if homeless else []
    found = Found(ENUMERATION, everything, evaluator.compiling, len(everything), why, len(homeless))
    if not evaluator.compiling:
        return found
    wanted = everything if every else [r for r in everything if not r.offload_without_host]
    listed = compile_all(evaluator, wanted) if every else compile_in_order(evaluator, wanted)
    if listed.why and listed.skipped:
        found.why.insert(0, listed.why)
    if listed.covered:
        found.why.append(cert.covered_words(len(listed.covered)))
    found.rows, found.listed, found.least = listed.rows, listed, evaluator.least
    found.floor = listed.why if listed.none_can_fit else ""
    found.skipped = len(everything) - len(listed.rows)
    return found


def modelled(
    evaluator: Evaluator,
    space: Space,
    narrowing: Callable[[Narrowing], object] | None,
    max_rounds: int | None,
) -> Found:
    """The name decisions by the exact search's model (`search_names`), the
    other candidates listed and compiled from their least cost up, bounded
    from the start by the model's answers."""
    target, base = evaluator.target, evaluator.base
    others = evaluator.analyse(evaluator.kept(listed(target, base, evaluator.first.sites)))
    baseline = evaluator.baseline
    homeless = [r for r in others if r.offload_without_host]
    why = [_without_host(len(homeless), base.device)] if homeless else []
    if evaluator.compiling:
        none_can_fit = evaluator.compile_baseline()
        if none_can_fit:  # said after that one compile
            listed_count = len(_unique(others))
            return Found(MODEL, [baseline], True, listed_count, [none_can_fit, *why],
                         len(evaluator.all()) - 1, floor=none_can_fit)  # fmt: skip
    incumbent = baseline.cost[0] if evaluator.is_answer(baseline) else None
    names = search_names(space, evaluator, narrowing, incumbent, max_rounds)
    # the space: the model's assignments and the others listed, whatever the
    # search analysed of them (its rows are counted in `searched`)
    listed_count = len(_unique(others))
    if not evaluator.compiling:
        return Found(MODEL, _unique([*others, *names.rows]), False, listed_count, why, names=names)
    wanted = [r for r in others if not r.offload_without_host]
    if names.cancelled:
        done = Ordered([baseline], wanted, stopped=True)
    else:
        answers = [r for r in names.rows if evaluator.is_answer(r)]
        done = compile_in_order(evaluator, wanted, known=answers)
    if done.why and done.left:
        why.insert(0, done.why)
    if done.covered:
        why.append(cert.covered_words(len(done.covered)))
    rows = _unique([*done.rows, *names.rows])
    # Every configuration analysed and not among the rows was not compiled (as
    # listing the space whole counts them): the others left, and of the
    # model's, the chain steps left out by their least cost and those a stop
    # cut short.
    evaluated = {id(r) for r in rows if not r.refused}  # a refused row is said apart
    skipped = sum(1 for r in evaluator.all() if id(r) not in evaluated)
    if names.chains_slower:
        why.append(f"{count(names.chains_slower, 'assignment')} of the greedy chains whose "
                   "least cost before compiling is above an answer's")  # fmt: skip
    if names.cancelled or done.stopped:
        why.append("the rest: stopped before they were compiled")
    return Found(MODEL, rows, True, listed_count, why, skipped, done, names, evaluator.least)


def conclude(evaluator: Evaluator, space: Space, found: Found) -> Suggestion:
    """The answer among what the search found: chosen (`choose`), with what
    it is proven against (`Certificate.of`), and set aside for the code as
    written where the cost cannot tell them apart."""
    base, baseline, compiling = evaluator.base, evaluator.baseline, evaluator.compiling
    # A name assignment the model reached may still be one a --skip names.
    kept = set(evaluator.skips.keep([r.config for r in found.rows], evaluator.first.sites))
    rows = [r for r in found.rows if r.config in kept or r.config == base]
    rows = [r for r in rows if not r.refused]  # said apart (`refused`): no numbers
    if compiling:  # a compile a stop cut short is no answer: only what compiled
        rows = [r for r in rows if r.compiled is not None or r.error is not None]
    why, skipped = list(found.why), found.skipped
    if evaluator.skips.dropped:
        why.append(evaluator.skips.words())
        skipped += len(evaluator.skips.dropped)
    if not rows:
        raise Cancelled()  # stopped before anything could be an answer
    evaluator.finish(rows)
    best, fits = choose(rows, evaluator.is_answer)
    words = cert.cost_words(best.cost_source, best.time.chip if best.time else None)
    certificate = cert.Certificate.of(
        found, space, best.cost[0] if fits else None, best.cost_unit, words
    )
    # A change the cost cannot tell from the code as written is not worth
    # making: the answer is the code as written, the best found said beside.
    set_aside = within_resolution(best, baseline, evaluator.is_answer) if fits else None
    if set_aside is not None:
        best = baseline
    return Suggestion(
        budget=evaluator.budget,
        measure="compiled" if compiling else "residual",
        fits=fits,
        best=best,
        baseline=baseline,
        exact=certificate.proven,
        searched=len(evaluator.all()),
        rows=rows,
        compiled_count=len(rows) if compiling else 0,
        measured_count=sum(1 for r in rows if r.measured),
        skipped=skipped,
        skipped_why="; ".join(why),
        device_memory=device_memory(rows) if compiling else None,
        structure_notes=tuple(structure_notes(evaluator.target, base)),
        search=certificate,
        cancelled=found.stopped,
        refused=tuple(r for r in evaluator.all() if r.refused),
        set_aside=set_aside,
        target=evaluator.target,
    )


def _unique(rows: list[Row]) -> list[Row]:
    return list({id(r): r for r in rows}.values())


def _without_host(how_many: int, device: str | None) -> str:
    """Why suggest leaves out the configurations that offload where the
    device's compile has no host memory."""
    return (
        f"{how_many} offload to host memory, which {device_label(device)}'s compile does "
        "not have: the offloaded bytes would stay in device memory"
    )
