"""The exact search (issue 33) against compiling by hand, in one process.

`cpu` (the default), on the held-out scanned models of
tests/models/gated_names.py (CPU compiles: a scan keeps its remat there;
offload does not apply on the CPU, so each name is saved or recomputed):

- `eight` (8 names at one site, 256 assignments; budgets at positions in the
  sorted peaks, `--budgets`, and shares of the way from nothing saved to
  everything saved, `--ways`): every assignment compiled by hand
  (`jax.jit(jax.value_and_grad(loss))` of the model's factory with the
  policy written by hand, tests/unit/exact_oracle.py), then, per budget,
  `suggest(compiled=True)` with the compile memo cleared before each. Printed
  per budget: the oracle's optimum among the name assignments, the best name
  assignment the search verified, whether they are the same, the search's
  compiles, its gap and its wall time against the oracle's.
- `twelve` (12 names, 4,096 assignments): the search's answer, its best name
  assignment compiled by hand (its peak within the budget?), and 200 random
  assignments compiled by hand: the search's answer no worse than their best?

`tpu`: `suggest(compiled=True)` on bench/gpt_v5e.py's `gpt` for a deviceless
`tpu:v5e:2x2` under 16 GiB (its 4 names at its block, save, recompute or
offload: 81 assignments, with the built-ins and structures): the answer, the
gap, the compiles and the time. Run it with another checkout first on
PYTHONPATH for the search before this one (`--label` names the run).

    python bench/bench_exact.py [cpu|tpu] [--label NAME] [--budgets K,K] [--ways K,K]
        [--only eight|twelve] [--rates calibrated|pinned] [--no-random]

`cpu`'s costs are the step-time estimate, the roofline on the CPU's rates:
`--rates calibrated` (the default) reads this machine's calibration
(core/xla/estimates/calibration.py, measured once and kept), `--rates pinned` the one
tests/unit/test_exact.py pins (exact_oracle.pinned_cpu_rates). The optimum,
the search's answer and its gap move with the rates, because every cost
does; the peaks and compile counts do not. The rates used are printed
first. `--only` runs one model; `--no-random` leaves out `twelve`'s 200
random assignments compiled by hand.

`cpu`: every compile is made (REMAT_TUI_NO_CACHE=1: the disk store off) and
the memo cleared between runs. `tpu` keeps the compile store (a GPT compile
takes minutes on a loaded machine: a rerun pays only the programs it has not
compiled before) and says how many compiles it made and how many the store
answered. `--explain` prints, for each assignment the model predicted before
it was compiled (the greedy chains, the model's answers and its checks), the
model's cost and peak against the compile's.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

if "tpu" not in sys.argv[1:]:
    os.environ.setdefault("REMAT_TUI_NO_CACHE", "1")
os.environ.setdefault("REMAT_TUI_JOBS", "1")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(ROOT, "tests", "unit"), os.path.join(ROOT, "tests", "models"), HERE]

import remat_tui  # noqa: E402


def clear() -> None:
    from remat_tui.core.xla.compile import costs as compiled

    compiled.clear_cache()


def names_saved(row) -> tuple | None:
    """The names a row saves at the layer, where it is a name assignment."""
    spec = dict(row.config.site_specs).get("layer")
    if row.config.structure is not None or spec is None:
        return None
    if spec.kind == "nothing_saveable":
        return ()
    if spec.kind != "save_only_these_names":
        return None
    return tuple(sorted(spec.names, key=lambda n: int(n[1:])))


def name_programs(s) -> int:
    """The programs compiled for name assignments (the rest: built-ins and structures)."""
    return len({r.program or id(r) for r in s.rows if r.compiled and names_saved(r) is not None})


def best_names_row(s, budget):
    rows = [r for r in s.rows if names_saved(r) is not None and r.compiled
            and r.fits and r.weighed_bytes <= budget]  # fmt: skip
    return min(rows, key=lambda r: r.cost, default=None)


def searched(target, budget):
    from remat_tui.core.search.suggest.pipeline import suggest

    clear()
    began = time.perf_counter()
    s = suggest(target, budget, compiled=True)
    return s, time.perf_counter() - began


def best_found(s):
    """The best configuration the search found: the answer, or, where the
    answer is to keep the code as written (the best found beats it by less
    than the estimate can tell), the one set aside. The gap is this one's."""
    return s.set_aside.row if getattr(s, "set_aside", None) is not None else s.best


def words(s) -> str:
    c = s.search
    gap = f"{c.gap:.2%}" if c.gap is not None else "unknown"
    if c.bound is not None and c.cost == "seconds":
        gap += f" (bound {c.bound * 1e3:.3f} ms)"
    kept = ""
    if getattr(s, "set_aside", None) is not None:
        a = s.set_aside
        kept = (f"; set aside within the estimate's {a.resolution:.0%}: "
                f"{a.row.config.label()} ({a.row.weighed_bytes} B, "
                f"{a.row.cost[0] * 1e3:.3f} ms, {a.saving:.1%} less)")  # fmt: skip
    return (f"{c.method}, {c.compiles} compiles, {c.rounds} model answers compiled, "
            f"gap {gap}, proven {c.proven}; answer {s.best.config.label()} "
            f"({s.best.weighed_bytes} B, {s.best.cost[0] * 1e3:.3f} ms){kept}")  # fmt: skip


def cpu(budget_positions: list[float], ways: list[float], only: str | None, rates: str,
        random_too: bool) -> None:  # fmt: skip
    import contextlib

    from exact_oracle import pinned_cpu_rates

    from remat_tui.core.xla.estimates import chips

    with pinned_cpu_rates() if rates == "pinned" else contextlib.nullcontext():
        used = chips.measured_cpu().calibration
        print(f"CPU rates ({rates}): {used.rates} ({used.calibrated_at}, {used.method[:40]})",
              flush=True)  # fmt: skip
        targets = remat_tui.load_targets(os.path.join(ROOT, "tests/models/gated_names.py"))
        if only in (None, "eight"):
            eight(targets, budget_positions, ways)
        if only in (None, "twelve"):
            twelve(targets, random_too)


def eight(targets, budget_positions: list[float], ways: list[float]) -> None:
    import gated_names as g
    from exact_oracle import every_assignment, optimum

    names = g.names_of(g.EIGHT)
    began = time.perf_counter()
    oracle = every_assignment(targets["eight"], lambda p: g.make_scanned(p, g.EIGHT),
                              g.scanned_args(), [("layer", names)])  # fmt: skip
    every = time.perf_counter() - began
    print(f"eight: {len(oracle)} assignments compiled by hand in {every:.1f} s", flush=True)
    peaks = sorted({p.peak for p in oracle})
    by_saved = {p.saved: p.peak for p in oracle}
    empty, full = by_saved[((),)], by_saved[(tuple(names),)]
    budgets = [peaks[int(position * (len(peaks) - 1))] for position in budget_positions]
    budgets += [int(empty + way * (full - empty)) for way in ways]
    for budget in budgets:
        want = optimum(oracle, budget)
        s, took = searched(targets["eight"], budget)
        found = best_names_row(s, budget)
        got = names_saved(found) if found else None
        print(
            f"  budget {budget} B: oracle optimum {want.saved[0]} ({want.seconds * 1e3:.3f} ms);"
            f" search's best name assignment {got}"
            f" ({found.cost[0] * 1e3 if found else float('nan'):.3f} ms): "
            f"{'SAME' if got == want.saved[0] else 'DIFFERENT'}; {words(s)} "
            f"({name_programs(s)} of them name assignments); "
            f"{took:.1f} s, {took / every:.3f} of compiling every assignment",
            flush=True,
        )


def twelve(targets, random_too: bool) -> None:
    import gated_names as g
    from exact_oracle import hand_peak_and_counts

    twelve = g.names_of(g.TWELVE)
    make = lambda p: g.make_scanned(p, g.TWELVE)  # noqa: E731
    args = g.scanned_args()
    empty, _ = hand_peak_and_counts(make(g.CP.nothing_saveable), args)
    full, _ = hand_peak_and_counts(make(g.CP.save_only_these_names(*twelve)), args)
    budget = (empty + full) // 2
    s, took = searched(targets["twelve"], budget)
    print(
        f"twelve: 4096 assignments, budget {budget} B (halfway between none and all "
        f"saved); {words(s)}; {took:.1f} s",
        flush=True,
    )
    found = best_names_row(s, budget)
    if found is not None:
        peak, _ = hand_peak_and_counts(make(g.CP.save_only_these_names(*names_saved(found))),
                                       args)  # fmt: skip
        print(
            f"  its best name assignment {names_saved(found)} compiled by hand: {peak} B, "
            f"within the budget: {peak <= budget}",
            flush=True,
        )
    if not random_too:
        return
    rng = random.Random(33)
    picks = {tuple(n for n in twelve if rng.random() < 0.5) for _ in range(400)}
    picks = sorted(picks)[:200]
    from remat_tui.core.search.compare import analysed_row, measure_baseline
    from remat_tui.core.setup import policies
    from remat_tui.core.setup.config import Config
    from remat_tui.core.xla.estimates import step_time

    chip = step_time.chip_of("cpu:0")
    _, transpose = measure_baseline(targets["twelve"], Config(), True)
    row = analysed_row(targets["twelve"])
    began = time.perf_counter()
    best = None
    for saved in picks:
        peak, counts = hand_peak_and_counts(make(g.CP.save_only_these_names(*saved)), args)
        if peak > budget:
            continue
        r = row(Config(sites=(("layer", policies.names_policy(list(saved), [])),)))
        seconds = step_time.estimate(chip, r.forward_flops + transpose + r.recompute_flops, 0,
                                     counts).seconds  # fmt: skip
        if best is None or seconds < best[0]:
            best = (seconds, saved, peak)
    random_took = time.perf_counter() - began
    if best is None:
        print(f"  {len(picks)} random assignments by hand ({random_took:.1f} s): none fits")
    else:
        cost = best_found(s).cost[0]
        print(
            f"  best of {len(picks)} random assignments by hand ({random_took:.1f} s): "
            f"{best[1]} {best[2]} B {best[0] * 1e3:.3f} ms; the best the search found "
            f"{cost * 1e3:.3f} ms: no worse: {cost <= best[0] * (1 + 1e-9)}"
        )


def explain_predictions() -> None:
    """Print the model's prediction of each assignment it is checked at."""
    from remat_tui.core.search.exact import self_check as exact_check

    saw = exact_check.SelfCheck.saw

    def told(self, cost, peak, row, pairs):
        measured = f"no numbers ({row.error})"
        if row.fits and not row.measure_failed:
            measured = f"{row.cost[0] * 1e3:.1f} ms, {row.weighed_bytes / 2**30:.2f} GiB"
        print(
            f"  predicted {cost * 1e3:.1f} ms, {peak / 2**30:.2f} GiB; compiled {measured}: "
            f"{row.config.label()} ({pairs} pairs of its decisions never compiled together)",
            flush=True,
        )
        saw(self, cost, peak, row, pairs)

    exact_check.SelfCheck.saw = told


def tpu(label: str, explain: bool) -> None:
    from remat_tui.core.search.suggest.pipeline import suggest
    from remat_tui.core.xla.compile.service import counts

    if explain:
        explain_predictions()
    target = remat_tui.load_targets(os.path.join(HERE, "gpt_v5e.py"))["gpt"]
    clear()
    began = time.perf_counter()
    extra = {}
    if "narrowing" in suggest.__code__.co_varnames:
        extra["narrowing"] = lambda n: print(
            f"  narrowing: bound {n.bound}, best {n.best}, {n.compiles} compiles "
            f"({time.perf_counter() - began:.0f} s)", flush=True)  # fmt: skip
    s = suggest(target, 16 * 2**30, compiled=True, device="tpu:v5e:2x2", **extra)
    took = time.perf_counter() - began
    search = f"; {words(s)}" if getattr(s, "search", None) else ""
    print(
        f"{label}: {took:.1f} s, {s.compiled_count} compiled, exact {s.exact}, answer "
        f"{s.best.config.label()} ({s.best.weighed_bytes / 2**30:.2f} GiB, "
        f"cost {s.best.cost[0]}){search}",
        flush=True,
    )
    print(f"  compiles: {counts.snapshot()} (stored: answered from the compile store)")
    for line in s.search.assumptions if getattr(s, "search", None) else ():
        print(f"  assumes: {line}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("which", nargs="?", default="cpu", choices=["cpu", "tpu"])
    p.add_argument("--label", default="this checkout")
    p.add_argument("--budgets", default="0.15,0.4", help="budgets as positions in the sorted peaks")
    p.add_argument(
        "--ways",
        default="0.15,0.4",
        help="and budgets as shares of the way from nothing saved to everything saved",
    )
    p.add_argument("--explain", action="store_true", help="tpu: the model's predictions")
    p.add_argument("--only", choices=["eight", "twelve"], help="cpu: one model only")
    p.add_argument("--rates", choices=["calibrated", "pinned"], default="calibrated",
                   help="cpu: this machine's calibration, or the one the tests pin")  # fmt: skip
    p.add_argument("--no-random", action="store_true",
                   help="cpu: without twelve's 200 random assignments by hand")  # fmt: skip
    o = p.parse_args()
    if o.which == "cpu":
        cpu([float(b) for b in o.budgets.split(",")], [float(w) for w in o.ways.split(",") if w],
            o.only, o.rates, not o.no_random)  # fmt: skip
    else:
        tpu(o.label, o.explain)


if __name__ == "__main__":
    main()
