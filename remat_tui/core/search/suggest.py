"""Provides suggest (Contracts 6 and 8): the least-cost configuration whose
memory fits a budget.

Memory is the residual bytes on device, or the compiled peak per device when compiling.
Cost is the recompute FLOPs, or, once compiled for a chip the table knows
(core/xla/chips.py), the estimated step time (core/xla/step_time.py); host bytes break
ties, and a configuration whose offload is slower than recomputing what it offloads is
the answer only when nothing else fits. The search space is the built-in policies and
the target's own, and every save/offload/recompute assignment of its checkpoint_names,
applied where the code puts its checkpoints (each checkpointed function) or, in code
without sites, as an outer policy; and its scans' structures (structures.py).

Measured (`measure=True`): the same ordered search, by the estimate, and each
compiled candidate that fits the budget also runs on the device; the answer
is the least measured time among them. Candidates left out are those
estimated slower than the estimated best before compiling.

With compiling, only what can change the answer is compiled: every
candidate is first analysed without compiling (its recompute FLOPs and host
bytes need no compile, and give a lower bound of its step time), then
compiled from the least bound up, and the search stops at the first
candidate whose bound exceeds the cost of the best one found to fit: it and
every later one cost more (core/search/ordered.py, `compile_in_order`). Compiles that run out
of memory are fast and are rows that do not fit; other compile failures are
rows with an error. Either way the search goes on.

Exact while the space is small (at most `exact_limit` configurations per
place, and their product over places): every configuration is analysed.
Beyond that, a stated heuristic: the built-ins, each name saved alone and
offloaded alone, then two greedy chains, names saved and names offloaded,
each adding names by recomputation removed per byte (device bytes for a
save, host bytes for an offload; each name's effect measured alone, assumed
additive), every prefix of each chain analysed for real, the best that fits
kept.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remat_tui.core.display import Displayable
from remat_tui.core.model import Analysis
from remat_tui.core.search.compare import (
    Row,
    analysed_row,
    evaluate,
    mark_pareto,
    measure_baseline,
    peak_notes,
)
from remat_tui.core.search.distinct import merge_key
from remat_tui.core.search.offload import judge_offloads
from remat_tui.core.search.ordered import Progress, Runner, compile_in_order
from remat_tui.core.search.structures import FINE, structure_candidates, structure_notes
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.configured import as_target
from remat_tui.core.xla import compile_pool, host_memory, step_time
from remat_tui.core.xla.measure import RUNS, check_measurable
from remat_tui.registry import Target

if TYPE_CHECKING:
    from remat_tui.core.places import Site
    from remat_tui.core.setup.policy_spec import PolicySpec

EXACT_LIMIT = 64  # configurations analysed before switching to the heuristic
STATES = ("recompute", "save", "offload")


@dataclass
class Suggestion(Displayable):
    """What `suggest` returns.

    Attributes:
        budget: the budget, in bytes.
        measure: what had to fit it: `"residual"` (residual bytes on device)
            or `"compiled"` (the compiled peak per device).
        fits: whether any configuration fits.
        best: the answer (a `Row`): the least cost that fits, else the
            smallest; `best.python` is the code to paste.
        baseline: the code as written, for the saving.
        exact: whether every configuration was analysed (else the heuristic).
        searched: how many configurations were analysed.
        rows: the rows analysed (those compiled, when compiling).
        compiled_count: how many were compiled.
        measured_count: how many were run on the device.
        skipped: how many were left out without a compile: they could not
            change the answer, or they offload where the device's compile has
            no host memory (never the answer); `skipped_why` says why.
        device_memory: what the device has for the program, when compiled.
    """

    budget: int
    measure: str  # "residual" | "compiled"
    fits: bool
    best: Row
    baseline: Row  # the code as written, for the saving
    exact: bool
    searched: int
    rows: list[Row]
    compiled_count: int = 0  # configurations compiled (compiled measure only)
    measured_count: int = 0  # configurations run on the device (measure=True)
    skipped: int = 0  # left out uncompiled: no better, or offloading with no host memory
    skipped_why: str = ""
    # What the device has for the program (compiled measure only): XLA's figure
    # from a compile that did not fit, else the chip table's memory per chip.
    device_memory: int | None = None
    structure_notes: tuple[str, ...] = ()  # why a scan gets no structure (or no nested one)

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
            "searched": self.searched,
            "compiled_count": self.compiled_count,
            "measured_count": self.measured_count,
            "skipped": {"count": self.skipped, "why": self.skipped_why},
            "device_memory": self.device_memory,
            "budget_above_device": self.budget_above_device,
            "structure_notes": list(self.structure_notes),
        }


def suggest(
    fn: Target | Callable,
    budget: int,
    args: tuple | None = None,
    kwargs: dict | None = None,
    compiled: bool = False,
    device: str | None = None,
    sites: dict | None = None,
    exact_limit: int = EXACT_LIMIT,
    cancelled: Callable[[], bool] | None = None,
    progress: Progress | None = None,
    compile_all: bool = False,
    measure: bool = False,
    runs: int = RUNS,
) -> Suggestion:
    """The least-cost configuration whose memory fits `budget` (see the module
    doc). `compile_all`: compile every candidate rather than only those that
    can change the answer, to check the ordered search (bench/, tests).
    `measure`: run each compiled candidate that fits `runs` times on the
    device, and choose by the measured time."""
    target = as_target(fn, args, kwargs)
    base = Config.make(sites=sites, device=device, declared=target.policies)
    if measure:
        check_measurable(base.device, runs)
    compiled = compiled or measure
    first, transpose = measure_baseline(target, base, compiled, cancelled)
    rows, exact = candidates(target, base, first, exact_limit, cancelled, progress)
    searched = len(rows)
    baseline = next(r for r in rows if r.config == base)
    judge_offloads(target, rows, first, analysed_row(target, cancelled))
    # Offloads with no host memory to go to are never the answer: not compiled.
    homeless = [r for r in rows if r.offload_without_host]
    reasons = [_without_host(len(homeless), base.device)] if homeless else []
    skipped = len(homeless)
    if compiled:
        run = Runner(runs if measure else None, lambda c: c.fits and c.peak_bytes <= budget)
        for row in rows:
            row.transpose_flops = transpose
        wanted = rows if compile_all else [r for r in rows if not r.offload_without_host]
        done, why = compile_candidates(
            target, wanted, baseline, budget, cancelled, progress, run, compile_all
        )
        if len(done) < len(wanted):
            reasons.insert(0, why)
        skipped = len(rows) - len(done)
        rows = done
        peak_notes(rows, base)
    mark_pareto(rows)
    best, fits = choose(rows, budget)
    return Suggestion(
        budget=budget,
        measure="compiled" if compiled else "residual",
        fits=fits,
        best=best,
        baseline=baseline,
        exact=exact,
        searched=searched,
        rows=rows,
        compiled_count=len(rows) if compiled else 0,
        measured_count=sum(1 for r in rows if r.measured),
        skipped=skipped,
        skipped_why="; ".join(reasons),
        device_memory=_device_memory(rows) if compiled else None,
        structure_notes=tuple(structure_notes(target, base)),
    )


def candidates(
    target: Target,
    base: Config,
    first: Analysis,
    exact_limit: int,
    cancelled: Callable[[], bool] | None,
    progress: Progress | None,
) -> tuple[list[Row], bool]:
    """(the rows of every candidate analysed, not compiled; whether that is
    the whole space): every configuration while the space is at most
    `exact_limit`, else the heuristic's (see the module doc)."""
    places: list[str | None] = [*dict.fromkeys(s.function for s in first.sites)] or [None]
    names = [n.name for n in first.names]
    choices = _choices(target, names)
    space = len(choices) ** len(places)
    measured: dict[tuple, Row] = {}  # what a configuration decides -> its row

    def analysed(configs: list[Config]) -> list[Row]:
        """Rows for `configs`, configurations that decide alike analysed once
        (core/search/distinct.py; not compiled): the first one's row."""
        keys = [merge_key(c, first.sites) for c in configs]
        new: dict = {}
        for key, config in zip(keys, configs, strict=True):
            if key not in measured:
                new.setdefault(key, config)
        rows = evaluate(target, list(new.values()), first, False, cancelled, progress)
        measured.update(zip(new, rows, strict=True))
        return [measured[k] for k in keys]

    exact = space <= exact_limit
    structures = structure_candidates(target, base, FINE)  # beside the policies, always
    if exact:  # one batch, so its progress counts to the number searched
        combos = itertools.product(choices, repeat=len(places))
        analysed([base, *(_config(base, first.sites, places, c) for c in combos), *structures])
    else:
        analysed([base, *structures])
        _heuristic(base, first.sites, places, names, choices, analysed)
    return list(measured.values()), exact


def compile_candidates(
    target: Target,
    rows: list[Row],
    baseline: Row,
    budget: int,
    cancelled: Callable[[], bool] | None,
    progress: Progress | None,
    run: Runner,
    every: bool,
) -> tuple[list[Row], str]:
    """(the rows compiled, why the rest were not): every row (`every`, to
    check the ordered search), else only those that can change the answer
    (`compile_in_order`)."""
    if not every:
        return compile_in_order(target, rows, baseline, budget, cancelled, progress, run)

    def one(numbered: tuple[int, Row]) -> None:
        i, row = numbered
        if progress is not None:
            progress(i, len(rows), row.config, "compiling")
        run(target, row, cancelled)

    numbered = list(enumerate(rows))
    for _ in compile_pool.run_all(numbered, one) if run.runs is None else map(one, numbered):
        pass
    return rows, ""


def choose(rows: list[Row], budget: int) -> tuple[Row, bool]:
    """(the answer, whether it fits): the least cost among the rows that fit
    the budget (an offload slower than recomputing only if nothing else does;
    never a row whose run failed, nor an offload with no host memory to go
    to), else the smallest."""
    usable = [r for r in rows if not r.offload_without_host] or rows
    fitting = [r for r in usable if r.fits and r.weighed_bytes <= budget and not r.measure_failed]
    if fitting:
        return min(_eligible(fitting), key=lambda r: (r.cost, r.weighed_bytes)), True
    measured = [r for r in usable if r.error is None] or usable
    return min(measured, key=lambda r: (r.weighed_bytes, r.cost)), False


def _without_host(count: int, device: str | None) -> str:
    """Why suggest leaves out the configurations that offload where the
    device's compile has no host memory."""
    return (
        f"{count} offload to host memory, which {host_memory.label(device)}'s compile does "
        "not have: the offloaded bytes would stay in device memory"
    )


def _device_memory(rows: list[Row]) -> int | None:
    """The device's memory for a program: what XLA said it has when a compile
    did not fit, else the chip table's figure."""
    said = [
        (r.compiled or {})["available_bytes"]
        for r in rows
        if (r.compiled or {}).get("available_bytes")
    ]
    if said:
        return max(said)
    compiled = next((r.compiled for r in rows if r.compiled), None)
    chip = step_time.chip_of(compiled["device"]) if compiled else None
    return chip.memory_bytes if chip is not None else None


def _eligible(rows: list[Row]) -> list[Row]:
    """Rows whose offload is not slower than recomputing, unless none is."""
    return [r for r in rows if not r.offload_slower] or rows


def _choices(target: Target, names: list[str]) -> list[policies.PolicySpec]:
    """Every policy one place can have: built-ins, the target's own, and each
    save/offload/recompute assignment of the names."""
    out = policies.candidate_specs(target.policies)
    for states in itertools.product(STATES, repeat=len(names)):
        saved = [n for n, s in zip(names, states, strict=True) if s == "save"]
        offloaded = [n for n, s in zip(names, states, strict=True) if s == "offload"]
        out.append(policies.names_policy(saved, offloaded))
    # Spellings of the same decisions once: the first (save_only_these_names()
    # is nothing_saveable).
    once: dict = {}
    for spec in out:
        once.setdefault(policies.same_decisions(spec), spec)
    return list(dict.fromkeys(once.values()))


def _config(
    base: Config,
    sites: Sequence[Site],
    places: Sequence[str | None],
    combo: Sequence[policies.PolicySpec],
) -> Config:
    if places == [None]:
        return base.with_policy(combo[0])
    config = base
    for place, spec in zip(places, combo, strict=True):
        assert place is not None  # places are functions, but for [None]: outer
        config = config.at_function(sites, place, spec)
    return config


def _heuristic(
    base: Config,
    sites: Sequence[Site],
    places: list[str | None],
    names: list[str],
    choices: list[PolicySpec],
    run: Callable[[list[Config]], list[Row]],
) -> None:
    """Built-ins everywhere, then the greedy name chains (see the module doc),
    the same policy at every place."""
    builtins = [c for c in choices if not _is_names_policy(c)]
    run([_config(base, sites, places, [b] * len(places)) for b in builtins])
    nothing = policies.names_policy([], [])
    singles = []
    for name in names:
        singles.append(("save", name, policies.names_policy([name], [])))
        singles.append(("offload", name, policies.names_policy([], [name])))
    configs = [_config(base, sites, places, [nothing] * len(places))]
    configs += [_config(base, sites, places, [spec] * len(places)) for _, _, spec in singles]
    measured = run(configs)
    empty, alone = measured[0], measured[1:]
    # Each name's effect measured alone, assumed additive: recompute removed per
    # byte, device bytes for saving and host bytes for offloading. One chain per
    # state: in one chain offloads (no device bytes at all) would crowd every
    # save out, and a set saving several names would never be tried.
    chains = []
    for state in ("save", "offload"):
        gains = []
        for (kind, name, _), row in zip(singles, alone, strict=True):
            removed = empty.recompute_flops - row.recompute_flops
            added = row.weighed_bytes - empty.weighed_bytes if kind == "save" else row.host_bytes
            if kind == state:  # a name that spares nothing alone may with others: kept, last
                gains.append((max(removed, 0) / max(added, 1), name))
        chosen: list[str] = []
        for _, name in sorted(gains, reverse=True):
            chosen.append(name)
            saved, offloaded = (chosen, []) if state == "save" else ([], chosen)
            spec = policies.names_policy(list(saved), list(offloaded))
            chains.append(_config(base, sites, places, [spec] * len(places)))
    run(chains)


def _is_names_policy(spec: policies.PolicySpec) -> bool:
    return spec.kind in (policies.NAMES_ONLY, policies.OFFLOAD_NAMES) and not spec.declared
