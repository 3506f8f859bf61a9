"""compare() of every built-in policy with compiled memory on CPU, for a
Llama-70B-shaped decoder (bench/decoder_70b.py: 80 layers, d_model 8192,
grouped-query attention, bf16 ShapeDtypeStruct inputs, lax.scan over
jax.checkpoint'ed layers). Issue 7's budget: at most 60 s and 4 GiB of RAM.

The work runs in a child process (a fresh interpreter: importing JAX, the
target file, then `remat_tui.compare(target, policies=<the six built-ins>,
compiled=True)`), so the wall time is everything a user waits for and the
peak RSS is the child's alone (getrusage(RUSAGE_CHILDREN).ru_maxrss). The
child also reports the compare call's own time and each row's numbers.

    cd bench && python bench_70b.py [--device cpu:0] [--profile out.prof] [--all]

--all compares every configuration the CLI's `compare` does (policies=None:
the built-ins outer and at the checkpointed function, the name sets...), not
the budget's six: about four times as many compiles.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

# Every compile measured is made: the compile cache (issue 31) would answer a
# program seen in an earlier run.
os.environ.setdefault("REMAT_TUI_NO_CACHE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
TIME_BUDGET, RSS_BUDGET = 60.0, 4 * 2**30


def child(device: str | None, profile: str | None, every: bool) -> None:
    start = time.perf_counter()
    import remat_tui
    from remat_tui.core.setup import policies

    target = remat_tui.load_targets(os.path.join(HERE, "decoder_70b.py"))["decoder"]
    loaded = time.perf_counter()
    specs = None if every else policies.builtin_specs()

    def run():
        return remat_tui.compare(target, policies=specs, compiled=True, device=device)

    if profile:
        import cProfile

        profiler = cProfile.Profile()
        comparison = profiler.runcall(run)
        profiler.dump_stats(profile)
    else:
        comparison = run()
    done = time.perf_counter()
    rows = [
        {
            "policy": r.config.label(),
            "device_bytes": r.device_bytes,
            "recompute_flops": r.recompute_flops,
            "compiled": r.compiled,
            "pareto": r.pareto,
        }
        for r in comparison.rows
    ]
    print(json.dumps({"import_and_load": loaded - start, "compare": done - loaded, "rows": rows}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="default: the target's (cpu:0)")
    parser.add_argument("--profile", default=None, help="cProfile the compare call to FILE")
    parser.add_argument("--all", action="store_true", help="every configuration, not six")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        child(opts.device, opts.profile, opts.all)
        return
    command = [sys.executable, os.path.abspath(__file__), "--child"]
    if opts.device:
        command += ["--device", opts.device]
    if opts.profile:
        command += ["--profile", opts.profile]
    if opts.all:
        command.append("--all")
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"the child failed (exit {proc.returncode})")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    which = "every configuration" if opts.all else "the six built-ins"
    print(f"Llama-70B-shaped decoder (80 layers, d_model 8192, GQA 64/8, bf16), {which}")
    print(f"{'policy':<60} {'residuals':>10} {'compiled peak':>14} {'compile s':>9}")
    for row in result["rows"]:
        c = row["compiled"] or {}
        peak = c.get("peak_bytes")
        print(
            f"{row['policy'][:60]:<60} {row['device_bytes'] / 2**30:>8.2f}Gi "
            f"{(peak or 0) / 2**30:>12.2f}Gi {c.get('seconds', 0):>9.2f}"
            + ("  pareto" if row["pareto"] else "")
        )
    print(f"import+load {result['import_and_load']:.2f} s, compare {result['compare']:.2f} s")
    verdict = "holds" if wall <= TIME_BUDGET and rss <= RSS_BUDGET else "FAILS"
    print(
        f"wall {wall:.2f} s (budget {TIME_BUDGET:.0f} s), peak RSS {rss / 2**30:.2f} GiB "
        f"(budget {RSS_BUDGET / 2**30:.0f} GiB): budget {verdict}"
    )


if __name__ == "__main__":
    main()
