"""The oracle of the exact search's tests and bench (issue 33): every
save/recompute assignment of a model's names compiled by hand, as a user
would, `jax.jit(jax.value_and_grad(loss))` of the model's factory with the
policy written by hand, and its peak read from JAX's own memory analysis.
Each assignment's cost is remat-tui's step-time estimate (Contract 8: the
roofline on the CPU's calibrated rates) of that hand-compiled program: XLA's
counts from the hand compile, remat-tui's FLOPs from a trace of it.

`quick=True` (the unit tests' oracle) compiles with XLA's backend
optimisation off (`xla_backend_optimization_level` 0): that level tunes the
machine code LLVM makes, after the HLO passes, buffer assignment (the peak)
and the HLO cost analysis (the counts), so the numbers are the same at half
the compile time (checked on all 64 assignments of the 6-name model on 8
layers, JAX 0.10.2, CPU: every peak and count equal; and the tests check the oracle's
peak against the search's default compile at every assignment the search
compiled). The bench keeps the default, to time what a user's compile costs.
"""

from __future__ import annotations

import contextlib
import itertools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import jax

from remat_tui.core.search.compare import analysed_row, measure_baseline
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.core.xla.estimates import step_time

CP = jax.checkpoint_policies


@dataclass(frozen=True)
class Point:
    """One assignment compiled by hand: the names saved (per site), its peak
    and its estimated step time."""

    saved: tuple[tuple[str, ...], ...]  # per site, the names saved
    peak: int
    seconds: float


@contextlib.contextmanager
def pinned_cpu_rates():
    """The CPU's rates pinned to one calibration of the development machine
    (2 cores, made 2026-11-26 04:29 UTC) while the block runs: every step-time
    estimate, and with it which assignment is the optimum and the search's
    gap, is then a function of XLA's counts alone, the same on every machine
    and in every run (tests/unit/test_exact.py; `bench/bench_exact.py
    --rates pinned`)."""
    from remat_tui.core.xla.estimates import calibration, chips, cpu_rates

    kept = chips._cpu
    chips._cpu = chips._cpu_chip(calibration.Calibration(
        rates=cpu_rates.Rates(flops=105341972472.74669, bandwidth=68415009181.02626,
                              transcendentals=671671650.8971255, overhead=5.907999366172589e-06),
        machine=calibration.this_machine(), calibrated_at="2026-11-26T04:29:31Z",
        method="pinned for tests/unit/test_exact.py", measuring_seconds=0.0, file=None,
    ))  # fmt: skip
    try:
        yield
    finally:
        chips._cpu = kept


QUICK = {"xla_backend_optimization_level": 0}  # the machine code only (the module doc)


def hand_peak_and_counts(loss, args, quick: bool = False) -> tuple[int, step_time.StepCounts]:
    """JAX's own numbers for the step compiled by hand."""
    lowered = jax.jit(jax.value_and_grad(loss)).lower(*args)
    compiled = lowered.compile(compiler_options=QUICK) if quick else lowered.compile()
    m = compiled.memory_analysis()
    peak = (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
            - m.alias_size_in_bytes)  # fmt: skip
    costs = compiled.cost_analysis()
    costs = costs[0] if isinstance(costs, (list, tuple)) else costs
    counts = step_time.StepCounts(
        costs.get("flops"), costs.get("transcendentals"), costs.get("bytes accessed"),
        "while" in compiled.as_text(),
    )  # fmt: skip
    return peak, counts


def every_assignment(
    target, make, args, sites: list[tuple[str, list[str]]], quick: bool = False
) -> list[Point]:
    """Every assignment of the names at each (function, names) of `sites`,
    compiled by hand: `make(*policies)` builds the loss with one policy per
    site, in `sites`' order. `quick`: hand_peak_and_counts'."""
    chip = step_time.chip_of("cpu:0")
    _, transpose = measure_baseline(target, Config(), True)
    row = analysed_row(target)
    per_site = [
        [tuple(n for n, b in zip(names, bits, strict=True) if b)
         for bits in itertools.product((0, 1), repeat=len(names))]
        for _, names in sites
    ]  # fmt: skip
    assignments = list(itertools.product(*per_site))

    def compiled(saved):
        policies_by_site = (CP.save_only_these_names(*s) for s in saved)
        return hand_peak_and_counts(make(*policies_by_site), args, quick)

    # Two at a time: XLA compiles on one core, and the hand compiles are independent.
    with ThreadPoolExecutor(2) as pool:
        numbers = list(pool.map(compiled, assignments))
    points = []
    for saved, (peak, counts) in zip(assignments, numbers, strict=True):
        config = Config(sites=tuple((f, policies.names_policy(list(s), []))
                                    for (f, _), s in zip(sites, saved, strict=True)))  # fmt: skip
        r = row(config)
        flops = r.forward_flops + transpose + r.recompute_flops
        points.append(Point(saved, peak, step_time.estimate(chip, flops, 0, counts).seconds))
    return points


def optimum(points: list[Point], budget: int) -> Point | None:
    """The least estimated time among the assignments that fit."""
    return min((p for p in points if p.peak <= budget), key=lambda p: p.seconds, default=None)


def greedy_by_ratio(points: list[Point], budget: int) -> Point | None:
    """The heuristic the exact search replaces: names added in order of time
    saved per byte added (each measured alone against none saved, assumed to
    add up), the best prefix of that chain that fits. One site."""
    by_saved = {p.saved: p for p in points}
    empty = by_saved[((),)]
    alone = [p for p in points if len(p.saved[0]) == 1]
    ratio = {p.saved[0][0]: (empty.seconds - p.seconds) / max(p.peak - empty.peak, 1)
             for p in alone}  # fmt: skip
    chain, best = [], empty if empty.peak <= budget else None
    for name in sorted(ratio, key=lambda n: -ratio[n]):
        chain.append(name)
        p = by_saved[(tuple(sorted(chain, key=lambda n: int(n[1:]))),)]
        if p.peak <= budget and (best is None or p.seconds < best.seconds):
            best = p
    return best
