"""`suggest --compiled` for the Llama-70B-shaped decoder (bench/decoder_70b.py,
`decoder_fsdp`: its parameters sharded over the slice's chips) on a
deviceless TPU v5p slice. Issue 17's bar: it finishes within 10 minutes on
this machine.

The work runs in a child process (a fresh interpreter: importing JAX, the
target file, then `remat_tui.suggest(target, budget, compiled=True,
device=...)`), so the wall time is everything a user of `remat-tui suggest`
waits for. The child also reports how many configurations it analysed,
compiled and skipped, and its answer.

    python bench/bench_suggest_70b.py [--budget 32GiB] [--device tpu:v5p:2x2x2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

# Every compile measured is made: the compile cache (issue 31) would answer a
# program seen in an earlier run.
os.environ.setdefault("REMAT_TUI_NO_CACHE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
TIME_BUDGET = 600.0


def child(budget: str, device: str) -> None:
    import remat_tui

    target = remat_tui.load_targets(os.path.join(HERE, "decoder_70b.py"))["decoder_fsdp"]

    def progress(i, n, config, stage=""):
        print(f"  [{time.perf_counter() - start:6.1f} s] {stage or 'analysing'} {i + 1}/{n}: "
              f"{config.with_device(None).label()}", file=sys.stderr, flush=True)  # fmt: skip

    from remat_tui.core.search.suggest.pipeline import suggest
    from remat_tui.core.units import parse_size

    start = time.perf_counter()
    s = suggest(target, parse_size(budget), compiled=True, device=device, progress=progress)
    best = s.best
    print(json.dumps({
        "seconds": time.perf_counter() - start,
        "searched": s.searched, "compiled": s.compiled_count, "skipped": s.skipped,
        "why": s.skipped_why, "exact": s.exact, "fits": s.fits,
        "answer": best.config.with_device(None).label(),
        "peak_gib": (best.compiled or {}).get("peak_bytes", 0) / 2**30,
        "time": best.time,
        "compile_seconds": sum((r.compiled or {}).get("seconds", 0) for r in s.rows),
    }))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", default="32GiB")
    parser.add_argument("--device", default="tpu:v5p:2x2x2")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(options.budget, options.device)
        return
    start = time.perf_counter()
    command = [sys.executable, __file__, "--child", "--budget", options.budget]
    command += ["--device", options.device]
    out = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    wall = time.perf_counter() - start
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"suggest --compiled, decoder_fsdp, {options.device}, budget {options.budget}")
    print(f"  wall {wall:.0f} s (suggest itself {result['seconds']:.0f} s; "
          f"XLA compiling {result['compile_seconds']:.0f} s)")  # fmt: skip
    print(
        f"  {result['searched']} analysed, {result['compiled']} compiled, "
        f"{result['skipped']} skipped ({result['why']}); exact space: {result['exact']}"
    )
    print(
        f"  answer: {result['answer']} · fits {result['fits']} · "
        f"peak {result['peak_gib']:.2f} GiB/device · est. step {result['time']}"
    )
    print(f"  bar: <= {TIME_BUDGET:.0f} s: {'met' if wall <= TIME_BUDGET else 'NOT met'}")


if __name__ == "__main__":
    main()
