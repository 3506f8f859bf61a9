"""Searches that scale (issue 31): the compile cache, worker processes, and
what N workers would give a fit.

1. `remat-tui compare --compiled` run twice on a fresh cache folder: the
   second run against the first (goal: 0.05 or less where compiles dominate),
   alternating cold and warm runs, each in a process of its own;
   `--profile-warm`: then what a warm run spends its time on (the imports
   alone timed, and one more warm run under cProfile). `--suggest FILE:NAME
   --suggest-budget SIZE`: the same with `remat-tui suggest --compiled` of
   that target under that budget in place of compare.
2. The same compare with `--jobs 2` against `--jobs 1` (both `--no-cache`),
   alternating.
3. A SIMULATION, from measured compile times: `fit` run once in turn, each
   configuration's batch search being a chain of compiles that depend on
   each other and the configurations independent, the time N workers would
   take (the configurations' chains scheduled longest first onto N workers,
   the critical path at least the longest chain) against the sum. Each
   configuration's chain is printed as its search ends.

    python bench/bench_compiles.py [--compare FILE:NAME] [--fit FILE:NAME]
        [--device D] [--budget SIZE] [--rounds 2] [--policy SPEC ...]
        [--only cache|jobs|fit] [--profile-warm] [--suggest FILE:NAME --suggest-budget SIZE]

Defaults: examples/transformer.py:scanned_checkpointed on the CPU for 1-2,
examples/mlp.py:loss for 3 (the GPT of bench/gpt_v5e.py for tpu:v5e:2x2,
`--fit bench/gpt_v5e.py:gpt --device tpu:v5e:2x2 --budget 16GiB`, is 159
compiles: 104 minutes on a loaded 2-core machine). `--policy` (repeated) picks the
configurations, for compare and fit alike, where the defaults would take
too long: a few compiles of a deviceless TPU's program are enough for 1.
"""

from __future__ import annotations

import argparse
import heapq
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXE = os.path.join(os.path.dirname(sys.executable), "remat-tui")
POLICIES = ["as_written", "nothing_saveable", "dots_saveable", "everything_saveable",
            "dots_with_no_batch_dims_saveable"]  # fmt: skip
CHOSEN: list[str] = []  # --policy: the configurations compared and fitted, else the defaults
SUGGEST: list[str] = []  # --suggest-budget: suggest under it, in place of compare


def command(target: str, device: str | None, *extra: str) -> list[str]:
    if SUGGEST:
        cmd = [EXE, "suggest", target, "--budget", *SUGGEST, "--compiled", "--format", "json"]
        return cmd + [*extra] + (["--device", device] if device else [])
    cmd = [EXE, "compare", target, "--compiled", "--format", "json", *extra]
    for p in CHOSEN or POLICIES:
        cmd += ["--policy", p]
    return cmd + (["--device", device] if device else [])


def timed(cmd: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start


def cache_runs(target: str, device: str | None, rounds: int, profile: bool = False) -> None:
    first, second = [], []
    for i in range(rounds):
        folder = tempfile.mkdtemp(prefix="remat-tui-bench-cache-")
        env = {**os.environ, "XDG_CACHE_HOME": folder, "REMAT_TUI_JOBS": "1"}
        try:
            first.append(timed(command(target, device), env))
            second.append(timed(command(target, device), env))
            if profile and i == rounds - 1:
                warm_profile(command(target, device), env)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        print(f"  cold {first[-1]:.1f} s, warm {second[-1]:.1f} s", flush=True)
    ratio = statistics.median(s / f for s, f in zip(second, first, strict=True))
    print(f"1. second run / first run: {ratio:.3f} (goal 0.05 where compiles dominate)")


def warm_profile(cmd: list[str], env: dict) -> None:
    """What a warm run spends its time on: the imports alone in a process of
    their own, then the warm run under cProfile (its largest cumulative
    entries; the profiler slows it)."""
    imports = [sys.executable, "-c", "import jax, remat_tui.core.trace.analysis"]
    print(f"  imports alone (jax, remat-tui): {timed(imports, env):.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "warm.prof")
        subprocess.run([sys.executable, "-m", "cProfile", "-o", out, *cmd], env=env,
                       check=True, capture_output=True, cwd=ROOT)  # fmt: skip
        stats = pstats.Stats(out, stream=sys.stdout)
        print("  the warm run under cProfile, by cumulative time:")
        stats.sort_stats("cumulative").print_stats(25)


def jobs_runs(target: str, device: str | None, rounds: int) -> None:
    env = dict(os.environ)
    one, two = [], []
    for _ in range(rounds):
        one.append(timed(command(target, device, "--no-cache", "--jobs", "1"), env))
        two.append(timed(command(target, device, "--no-cache", "--jobs", "2"), env))
        print(f"  --jobs 1 {one[-1]:.1f} s, --jobs 2 {two[-1]:.1f} s", flush=True)
    ratio = statistics.median(t / o for t, o in zip(two, one, strict=True))
    print(f"2. --jobs 2 / --jobs 1: {ratio:.2f} (below 1: two workers help here)")


def simulated_fit(target: str, device: str | None, budget: str) -> None:
    os.environ["REMAT_TUI_NO_CACHE"] = "1"
    os.environ["REMAT_TUI_JOBS"] = "1"
    sys.path.insert(0, ROOT)
    import remat_tui
    from remat_tui.core.search.fit.batches import fit
    from remat_tui.core.units import parse_size

    def chain(row) -> float:
        return sum(p.compiled.seconds for p in row.probes if p.how == "compiled")

    def heard(row) -> None:  # each chain as it ends: a run cut short still tells
        print(f"   {row.policy}: batches {[p.batch for p in row.probes]}, "
              f"{sum(p.how == 'compiled' for p in row.probes)} compiled, {chain(row):.1f} s",
              flush=True)  # fmt: skip

    loaded = remat_tui.load_targets(target.partition(":")[0])
    chosen = loaded[target.partition(":")[2]] if ":" in target else next(iter(loaded.values()))
    start = time.perf_counter()
    result = fit(chosen, parse_size(budget), device=device, policies=CHOSEN or None, on_row=heard)
    wall = time.perf_counter() - start
    chains = [chain(row) for row in result.rows]
    total = sum(chains)
    print(f"3. SIMULATION from measured compile times: fit of {target}, {len(chains)} "
          f"configurations, {result.compiles} compiles, {total:.1f} s of compiling "
          f"({wall:.1f} s in all, in turn)")  # fmt: skip
    for workers in (2, 4, 8, 16, 32):
        loads = [0.0] * workers
        for chain in sorted(chains, reverse=True):  # longest first, each to the least loaded
            heapq.heappush(loads, heapq.heappop(loads) + chain)
        makespan = max(loads)
        print(f"   {workers:2d} workers (simulated): {makespan:.1f} s of compiling, "
              f"{makespan / total:.2f} of the sum; the longest chain alone "
              f"{max(chains):.1f} s")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", default="examples/transformer.py:scanned_checkpointed")
    parser.add_argument("--fit", default="examples/mlp.py:loss")
    parser.add_argument("--device", default=None)
    parser.add_argument("--budget", default="2MiB")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", choices=("cache", "jobs", "fit"), default=None)
    parser.add_argument("--profile-warm", action="store_true",
                        help="1: profile one more warm run; time the imports alone")  # fmt: skip
    parser.add_argument("--policy", action="append", default=[],
                        help="a configuration to compare and fit (repeat); default: "
                        "five built-ins for compare, fit's own list for fit")  # fmt: skip
    parser.add_argument("--suggest", default=None, metavar="FILE:NAME",
                        help="1: suggest --compiled of it in place of compare")  # fmt: skip
    parser.add_argument("--suggest-budget", default=None, metavar="SIZE",
                        help="the budget of --suggest")  # fmt: skip
    opts = parser.parse_args()
    CHOSEN.extend(opts.policy)
    if opts.suggest:
        if not opts.suggest_budget:
            parser.error("--suggest needs --suggest-budget")
        SUGGEST.append(opts.suggest_budget)
        opts.compare = opts.suggest
    if opts.only in (None, "cache"):
        cache_runs(opts.compare, opts.device, opts.rounds, opts.profile_warm)
    if opts.only in (None, "jobs"):
        jobs_runs(opts.compare, opts.device, opts.rounds)
    if opts.only in (None, "fit"):
        simulated_fit(opts.fit, opts.device, opts.budget)


if __name__ == "__main__":
    main()
