"""Structures (issue 32): what nesting or splitting a scan does to the compiled
peak, beside the policies, measured by compiling (never running).

Part 1, `--cpu` (the default runs both parts): the memory curve of nested(G)
on a CPU stack of 64 small layers in one scan (tests/models/scan_stack.py,
each layer under jax.checkpoint(nothing_saveable)), for every G that divides
64, against the formula of docs/how-it-decides.md: the peak is what every
configuration holds (arguments, outputs, one layer's work) plus about
G + N/G carries, fitted by least squares to the measured points (two
numbers: the fixed part and the bytes per carry).

Part 2, `--tpu`: the GPT of bench/gpt_v5e.py (24 scanned, checkpointed
blocks; batch 32 x 1024) compiled for a deviceless `tpu:v5e:2x2`: the code
as written, the best policy at the block's checkpoint under 16 GiB
(bench_suggest_tpu.py's answer, save_only_these_names('qkv')), nested(G)
at the square-root choice and its neighbours, and split(K, as_written,
nothing_saveable) for K at every eighth of the 24 blocks: each row's peak
per device (HBM), whether it fits the chip, and the estimated step time.
"best K" is the largest K that fits 16 GiB (the least recomputation that
fits). Each compile that fits takes tens of seconds on 2 cores.

    python bench/bench_structures.py [--cpu | --tpu]

Compiles run on this machine's CPU cores; nothing needs a TPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GIB = 1 << 30


def cpu_curve(layers: int = 64) -> None:
    sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
    import numpy as np
    import scan_stack

    from remat_tui.core.setup.config import Config
    from remat_tui.core.xla.compile.costs import compile_answer
    from remat_tui.registry import Target

    target = Target(fn=scan_stack.make_stack(layers=layers), name="stack",
                    args=scan_stack.make_args(layers))  # fmt: skip
    groups = [g for g in range(2, layers // 2 + 1) if layers % g == 0]
    peaks = {None: compile_answer(target, Config(), memory=True).result.memory["peak_bytes"]}
    for g in groups:
        config = Config.make(structure=f"nested({g})")
        peaks[g] = compile_answer(target, config, memory=True).result.memory["peak_bytes"]
    # peak = fixed + per_carry * (G + N/G), fitted to the nested points
    kept = np.array([g + layers / g for g in groups], float)
    measured = np.array([peaks[g] for g in groups], float)
    per_carry, fixed = np.polyfit(kept, measured, 1)
    carry = scan_stack.BATCH * scan_stack.WIDTH * 4
    fitted = f"{per_carry / 1024:.0f} KiB per carry, {fixed / 1024:.0f} KiB fixed"
    print(f"CPU, {layers} layers, one carry {carry / 1024:.0f} KiB (fitted: {fitted})")
    print(f"{'structure':<12} {'G + N/G':>8} {'measured peak':>14} {'formula':>10}")
    print(f"{'as written':<12} {layers:>8} {peaks[None] / 1e6:>11.2f} MB "
          f"{(fixed + per_carry * layers) / 1e6:>7.2f} MB")  # fmt: skip
    for g, k in zip(groups, kept, strict=True):
        print(f"{f'nested({g})':<12} {k:>8.0f} {peaks[g] / 1e6:>11.2f} MB "
              f"{(fixed + per_carry * k) / 1e6:>7.2f} MB")  # fmt: skip


def tpu_table(device: str = "tpu:v5e:2x2", budget: int = 16 * GIB) -> None:
    import remat_tui
    from remat_tui.core.search.compare import evaluate, measure_baseline
    from remat_tui.core.search.configs.structure_grid import k_grid
    from remat_tui.core.setup.config import Config
    from remat_tui.core.trace.rebuilt_scans import sqrt_groups

    target = remat_tui.load_targets(os.path.join(HERE, "gpt_v5e.py"))["gpt"]
    layers = 24
    base = Config.make(device=device)
    sqrt = sqrt_groups(layers)
    configs = [
        base,
        base.with_sites({"block": "save_only_these_names('qkv')"}),
        *(base.with_structure(f"nested({g})") for g in (2, sqrt, 6)),
        *(base.with_structure(f"split({k}, as_written, nothing_saveable)")
          for k in k_grid(layers, 8)),
    ]  # fmt: skip
    start = time.perf_counter()
    baseline, transpose = measure_baseline(target, base, True)

    def progress(i, n, config):
        print(f"  [{time.perf_counter() - start:6.0f} s] {i + 1}/{n} {config.label()}",
              file=sys.stderr, flush=True)  # fmt: skip

    rows = evaluate(target, configs, baseline, True, None, progress, transpose=transpose)
    print(f"GPT (bench/gpt_v5e.py:gpt), {device}, budget {budget / GIB:.0f} GiB, "
          f"{time.perf_counter() - start:.0f} s")  # fmt: skip
    print(f"{'configuration':<52} {'peak/device':>12} {'fits':>5} {'est. step':>10}")
    best_split = None
    for row in rows:
        c = row.compiled or {}
        peak = c.get("peak_bytes") or c.get("needed_bytes")
        fits = row.fits and peak is not None and peak <= budget
        step = f"{row.time['seconds'] * 1e3:.0f} ms" if row.time else "-"
        label = row.config.label().replace(f"; {device}", "").replace("policy as_written; ", "")
        label = label.replace("structure ", "")
        print(f"{label:<52} {peak / GIB if peak else float('nan'):>8.2f} GiB "
              f"{'yes' if fits else 'no':>5} {step:>10}")  # fmt: skip
        s = row.config.structure
        if fits and s is not None and s.kind == "split":
            best_split = s if best_split is None or s.count > best_split.count else best_split
    print(f"best K: {best_split}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="the CPU curve only")
    parser.add_argument("--tpu", action="store_true", help="the TPU table only")
    opts = parser.parse_args()
    if not opts.tpu:
        cpu_curve()
    if not opts.cpu:
        tpu_table()


if __name__ == "__main__":
    main()
