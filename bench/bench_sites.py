"""What checkpoint sites cost, side by side in one process (issue 6's budgets).

1. A site override against a new outer policy, on the scanned transformer whose
   block is checkpointed (`transformer.py:scanned_checkpointed`), as the app
   asks for them: the target loaded once, each spec asked for the first time
   on each side (35 specs: the built-ins and every set of the example's five
   names; budget: the override costs no more, ratio <= 1.0). The same specs
   asked again are shown too (no budget: the app keeps the analyses it has).
2. Listing sites and origins against the same analysis with both switched off,
   on the 24-layer unrolled transformer, each run on a fresh function object
   (budget: at most 10% more, ratio <= 1.10). Also shown: the same model with
   `jax.checkpoint` on every block (24 sites), where sites need the primal
   program traced once more.

Sides alternate and garbage is collected before each run, to spread the
machine's noise over both.

    python bench/bench_sites.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import statistics
import sys
import time
from contextlib import contextmanager

import jax

import remat_tui
from remat_tui.core.setup import loading
from remat_tui.core.trace import primal, traced

HERE = os.path.dirname(os.path.abspath(__file__))
BUILT_INS = [
    "nothing_saveable",
    "dots_saveable",
    "everything_saveable",
    "dots_with_no_batch_dims_saveable",
]
NAMES = ["query_proj", "key_proj", "value_proj", "attention_out", "mlp_hidden"]


def fresh_specs() -> list[str]:
    """Specs the process has not seen: the built-ins, then every set of the
    example's names to save (31), so each request is a new one on both sides."""
    sets = [c for k in range(1, len(NAMES) + 1) for c in itertools.combinations(NAMES, k)]
    return BUILT_INS + [f"save_only_these_names({', '.join(map(repr, c))})" for c in sets]


def timed(run) -> float:
    gc.collect()
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def override_vs_outer(targets, repeat: int) -> tuple[float, float]:
    """(new, repeated): each spec asked for the first time on each side (the
    budget), then the same specs again (JAX's and our caches warm; the app
    never asks twice, it keeps the analyses it has)."""
    target = targets["scanned_checkpointed"]
    remat_tui.analyze(target)  # the app's first analysis: sites found, primal cached
    site: list[float] = []
    outer: list[float] = []
    for i, spec in enumerate(fresh_specs()):
        runs = [
            (site, lambda s=spec: remat_tui.analyze(target, sites={"block": s})),
            (outer, lambda s=spec: remat_tui.analyze(target, policy=s)),
        ]
        for times, run in runs if i % 2 == 0 else runs[::-1]:  # alternate who goes first
            times.append(timed(run))
    ms, mo = statistics.median(site), statistics.median(outer)
    print(f"  new: site override {ms:.3f} s, new outer policy {mo:.3f} s (medians of {len(site)})")
    again_site, again_outer = [], []
    for _ in range(repeat):
        for spec in BUILT_INS:
            again_site.append(timed(lambda s=spec: remat_tui.analyze(target, sites={"block": s})))
            again_outer.append(timed(lambda s=spec: remat_tui.analyze(target, policy=s)))
    rs, ro = statistics.median(again_site), statistics.median(again_outer)
    print(f"  repeated: site override {rs:.3f} s, outer policy {ro:.3f} s")
    return ms / mo, rs / ro


@contextmanager
def without_sites_and_origins():
    """The analysis as it was before sites: no detection, no origins, no per-device bytes."""

    class NoOrigins:
        def __init__(self, *_):
            pass

        def of(self, *_):
            return None

    saved = traced._has_user_checkpoint, traced.Origins, traced.per_device_bytes
    traced._has_user_checkpoint = lambda *a, **k: False
    traced.Origins = NoOrigins
    traced.per_device_bytes = lambda aval: None
    try:
        yield
    finally:
        traced._has_user_checkpoint, traced.Origins, traced.per_device_bytes = saved


def fresh_target(target, fn):
    return remat_tui.Target(
        fn=fn, name=target.name, args=target.args, kwargs=target.kwargs, file=target.file
    )


def listing_overhead(make_fn, target, repeat: int, policy: str) -> float:
    on, off = [], []
    for i in range(repeat):
        primal._cache.clear()
        on.append(timed(lambda: remat_tui.analyze(fresh_target(target, make_fn()), policy=policy)))
        with without_sites_and_origins():
            off.append(
                timed(lambda: remat_tui.analyze(fresh_target(target, make_fn()), policy=policy))
            )
        print(f"  round {i + 1}/{repeat}: on {on[-1]:.2f}s off {off[-1]:.2f}s", file=sys.stderr)
    return statistics.median(on) / statistics.median(off)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    path = os.path.join(HERE, "..", "examples", "transformer.py")
    targets = loading.load_targets(path)
    module = targets["unrolled"].fn.__globals__

    print("1. site override vs new outer policy, scanned_checkpointed")
    new, repeated = override_vs_outer(targets, opts.repeat)
    print(f"   site override / outer policy, each new = {new:.3f}  (budget 1.00)")
    print(f"   the same specs asked again = {repeated:.3f}  (no budget: the app caches them)")

    unrolled = targets["unrolled"]

    def plain():
        def unrolled_fn(layers, x):
            return module["unrolled"](layers, x)

        return unrolled_fn

    def checkpointed():
        block = jax.checkpoint(module["block"], policy=jax.checkpoint_policies.dots_saveable)

        def unrolled_checkpointed(layers, x):
            for p in layers:
                x = block(p, x)
            return jax.numpy.mean(x**2)

        return unrolled_checkpointed

    for label, make_fn, policy in [
        ("unrolled, as_written", plain, "as_written"),
        ("unrolled, outer dots_saveable", plain, "dots_saveable"),
        ("unrolled, jax.checkpoint on each block (24 sites)", checkpointed, "as_written"),
    ]:
        print(f"2. sites + origins on / off: {label}")
        ratio = listing_overhead(make_fn, unrolled, opts.repeat, policy)
        print(f"   with / without = {ratio:.3f}  (budget 1.10)")


if __name__ == "__main__":
    main()
