"""Provides suggest (Contract 6): the configuration with the least
recomputation whose memory fits a budget.

Memory is the residual bytes on device, or the compiled peak per device when
compiling. The search space is the built-in policies and the target's own,
and every save/offload/recompute assignment of its checkpoint_names, applied
where the code puts its checkpoints (each checkpointed function) or, in code
without sites, as an outer policy.

With compiling, only what can change the answer is compiled: every
candidate is first analysed without compiling (its recompute FLOPs need no
compile), then compiled in order of recompute, and the search stops after the
first group of equal recompute that holds a configuration that fits: every
later one recomputes more, so it cannot be the answer. Compiles that run out
of memory are fast and are rows that do not fit; other compile failures are
rows with an error. Either way the search goes on.

Exact while the space is small (at most `exact_limit` configurations per
place, and their product over places): every configuration is analysed.
Beyond that, a stated heuristic: the built-ins, each name saved alone and
offloaded alone, then names added greedily by recomputation removed per byte
saved (each name's effect measured alone, assumed additive), every greedy
prefix analysed for real, the best that fits kept.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from remat_tui.core import policies
from remat_tui.core.analysis import analyze, as_target
from remat_tui.core.compare import Row, canonical_spec, compile_row, evaluate, mark_pareto
from remat_tui.core.config import Config

EXACT_LIMIT = 64  # configurations analysed before switching to the heuristic
STATES = ("recompute", "save", "offload")


@dataclass
class Suggestion:
    budget: int
    measure: str  # "residual" | "compiled"
    fits: bool
    best: Row
    baseline: Row  # the code as written, for the saving
    exact: bool
    searched: int
    rows: list[Row]
    compiled_count: int = 0  # configurations compiled (compiled measure only)
    skipped: int = 0  # configurations not compiled: they could not change the answer
    skipped_why: str = ""

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
            "skipped": {"count": self.skipped, "why": self.skipped_why},
        }


def suggest(
    fn,
    budget: int,
    args=None,
    kwargs=None,
    compiled: bool = False,
    device: str | None = None,
    sites: dict | None = None,
    exact_limit: int = EXACT_LIMIT,
    cancelled=None,
    progress=None,
    compile_all: bool = False,
) -> Suggestion:
    """The least-cost configuration whose memory fits `budget` (see the module
    doc). `compile_all`: compile every candidate rather than only those that
    can change the answer, to check the ordered search (bench/, tests)."""
    target = as_target(fn, args, kwargs)
    base = Config.make(sites=sites, device=device, declared=target.policies)
    first = analyze(target, config=base, row_only=True, cancelled=cancelled)
    places = list(dict.fromkeys(s.function for s in first.sites)) or [None]
    names = [n.name for n in first.names]
    choices = _choices(target, names)
    space = len(choices) ** len(places)
    measured: dict[Config, Row] = {}

    def run(configs: list[Config]) -> list[Row]:
        """Rows for `configs`, each configuration analysed once (not compiled)."""
        new = [c for c in dict.fromkeys(configs) if c not in measured]
        rows = evaluate(target, new, first, False, cancelled, progress)
        measured.update(zip(new, rows, strict=True))
        return [measured[c] for c in configs]

    exact = space <= exact_limit
    if exact:  # one batch, so its progress counts to the number searched
        combos = itertools.product(choices, repeat=len(places))
        run([base, *(_config(base, first.sites, places, c) for c in combos)])
    else:
        run([base])
        _heuristic(base, first.sites, places, names, choices, run)
    rows = list(measured.values())
    baseline = next(r for r in rows if r.config == base)
    skipped, why = 0, ""
    if compiled:
        if compile_all:
            for i, row in enumerate(rows):
                if progress is not None:
                    progress(i, len(rows), row.config, "compiling")
                compile_row(target, row, cancelled)
            done = rows
        else:
            done = compile_in_order(target, rows, baseline, budget, cancelled, progress)
        skipped = len(rows) - len(done)
        if skipped:
            why = "each recomputes more than the answer, so none of them could be it"
        rows = done
    mark_pareto(rows)
    fitting = [r for r in rows if r.fits and r.memory <= budget]
    if fitting:
        best = min(fitting, key=lambda r: (r.recompute_flops, r.memory, r.host_bytes))
    else:
        measured_rows = [r for r in rows if r.error is None] or rows
        best = min(measured_rows, key=lambda r: (r.memory, r.recompute_flops))
    return Suggestion(
        budget=budget,
        measure="compiled" if compiled else "residual",
        fits=bool(fitting),
        best=best,
        baseline=baseline,
        exact=exact,
        searched=len(measured),
        rows=rows,
        compiled_count=len(rows) if compiled else 0,
        skipped=skipped,
        skipped_why=why,
    )


def compile_in_order(target, rows: list[Row], baseline: Row, budget: int, cancelled, progress):
    """Compile rows by recompute, least first, and stop after the first group
    of equal recompute holding one that fits the budget: the answer is the
    least recompute that fits, so no later row can be it. The baseline (the
    code as written) is always compiled: the answer is measured against it.
    Returns the rows compiled."""
    baseline_first = [baseline, *sorted((r for r in rows if r is not baseline), key=_cost)]
    done: list[Row] = []
    least = float("inf")  # the least recompute among the rows found to fit so far
    for row in baseline_first:
        if row.recompute_flops > least:
            break  # every row after this recomputes more than one that fits
        if progress is not None:
            progress(len(done), len(baseline_first), row.config, "compiling")
        compile_row(target, row, cancelled)
        done.append(row)
        if row.fits and row.memory <= budget:
            least = min(least, row.recompute_flops)
    return done


def _cost(row: Row) -> tuple:
    """The order candidates are compiled in: recompute, then host, then device bytes."""
    return (row.recompute_flops, row.host_bytes, row.device_bytes)


def _choices(target, names: list[str]) -> list[str]:
    """Every policy one place can have: built-ins, the target's own, and each
    save/offload/recompute assignment of the names."""
    out = [*policies.builtin_specs(), *target.policies]
    for states in itertools.product(STATES, repeat=len(names)):
        saved = [n for n, s in zip(names, states, strict=True) if s == "save"]
        offloaded = [n for n, s in zip(names, states, strict=True) if s == "offload"]
        out.append(policies.names_policy(saved, offloaded).canonical)
    return [canonical_spec(p, target) for p in dict.fromkeys(out)]


def _config(base: Config, sites: list, places: list, combo) -> Config:
    if places == [None]:
        return base.with_policy(combo[0])
    config = base
    for place, spec in zip(places, combo, strict=True):
        config = config.at_function(sites, place, spec)
    return config


def _heuristic(base, sites, places, names, choices, run) -> None:
    """Built-ins everywhere, then the greedy name chain (see the module doc),
    the same policy at every place."""
    builtins = [c for c in choices if not _is_names_policy(c)]
    run([_config(base, sites, places, [b] * len(places)) for b in builtins])
    nothing = policies.names_policy([], []).canonical
    singles = []
    for name in names:
        singles.append(("save", name, policies.names_policy([name], []).canonical))
        singles.append(("offload", name, policies.names_policy([], [name]).canonical))
    configs = [_config(base, sites, places, [nothing] * len(places))]
    configs += [_config(base, sites, places, [spec] * len(places)) for _, _, spec in singles]
    measured = run(configs)
    empty, alone = measured[0], measured[1:]
    # Each name's effect measured alone, assumed additive: recompute removed per byte.
    gains = []
    for (state, name, _), row in zip(singles, alone, strict=True):
        removed = empty.recompute_flops - row.recompute_flops
        added = max(row.memory - empty.memory, 1)
        if removed > 0:
            gains.append((removed / added, state, name))
    chain_saved, chain_offloaded, taken = [], [], set()
    chain = []
    for _, state, name in sorted(gains, reverse=True):
        if name in taken:
            continue
        taken.add(name)
        (chain_saved if state == "save" else chain_offloaded).append(name)
        spec = policies.names_policy(list(chain_saved), list(chain_offloaded)).canonical
        chain.append(_config(base, sites, places, [spec] * len(places)))
    run(chain)


def _is_names_policy(spec: str) -> bool:
    return spec.startswith(("save_only_these_names(", policies.OFFLOAD_NAMES + "("))
