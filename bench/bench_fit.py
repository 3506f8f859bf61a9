"""fit on a deviceless TPU v5e against a bisection by hand: issue 27's
benchmark. For a GPT-2-medium-shaped decoder (bench/gpt_v5e.py: 24 scanned
jax.checkpoint'ed blocks, bf16, 1024 tokens, its args factory taking `batch`,
the example's 32) under a 16 GiB budget on tpu:v5e:2x2.

Per configuration of the block's checkpoint, side by side in one process and
alternating (fit for one, then the same by hand, then the next), so the
machine's load weighs on both alike:

- fit: `core.search.fit.fit` for that one configuration, compiles shared with
  the configurations before it where the program is the same (as a whole
  `remat-tui fit` run shares them).
- by hand: what a user does without remat-tui, each compile by hand with JAX:
  `jax.jit(jax.value_and_grad(make_gpt(policy), argnums=(0, 1),
  allow_int=True)).lower(...).compile()` for the chip, peak = XLA's
  `peak_memory_in_bytes`, a compile XLA refuses for memory one that does not
  fit; from the example's batch, doubling while it fits (halving while it
  does not), then bisecting to one example.

Printed per configuration: each side's answer, its compiles (those that fit
the chip, which take 20-70 s here, and those XLA refused, which take a few
seconds) and its seconds, and the batches fit tried in order (`16>`: compiled,
over the budget; `25R`: refused by XLA); then the totals and the ratios fit /
by hand, in compiles and in time. The compile cache is cleared first. fit's
seconds include what by hand does not give: the step-time estimate at each
batch that fits (a trace of the step, a fraction of a second here).

    python bench/bench_fit.py [--budget 16GiB] [--device tpu:v5e:2x2] [--quick] [--configs N]

--quick: the `gpt_quick` target (4 blocks, batch 8 x 512 tokens) under 1 GiB.

Measured (2 shared CPU cores, JAX 0.10.2, libtpu for v5e), the same answer on
both sides for all five configurations:

    as written                        fit 2 + 2 refused, 90 s (32R 16 24 25R)  by hand 2 + 4, 59 s
    the same, spelled at the site     fit 0 (4 the same program), 1 s          by hand 2 + 4, 40 s
    nothing_saveable                  fit 3 + 1 refused, 64 s (32 48 50 51R)   by hand 3 + 4, 84 s
    save_only_these_names('qkv')      fit 4 + 3 refused, 98 s (32 34 68R 51R 42 45R 44)
                                                                               by hand 3 + 4, 72 s
    dots_with_no_batch_dims_saveable  fit 2 + 3 refused, 42 s (32R 16 24 26R 25R)
                                                                               by hand 2 + 4, 41 s

    total: fit 20 compiles (11 that fit the chip) in 295 s; by hand 32 (12) in 296 s
    fit / by hand: compiles 0.62, compiles that fit the chip 0.92, time 1.00

fit runs first in each pair, so it pays the process's first compile (as
written: 90 s against 59 s). With the peak weighed as HBM's live peak (XLA's
own figure on this model), every answer sits at the chip's own limit: the
batch after it is one XLA refuses, in about a second. So a bisection by hand
wastes little time on the batches that do not fit, and fit saves compiles
but not time here. With the peak weighed as XLA's allocation sizes (which
overstate HBM: core/xla/compile/costs.py), the answers were 15 to 51 and every try
a full compile: fit took 19 compiles and 632 s against 31 and 951 s (0.61,
0.66). Where fit loses a compile (qkv), XLA's TPU compiler rematerialises on
its own near the chip's memory, so the peak flattens there and a line
through two peaks overshoots.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# Every compile measured is made: the compile cache (issue 31) would answer a
# program seen in an earlier run.
os.environ.setdefault("REMAT_TUI_NO_CACHE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gpt_v5e  # noqa: E402 (its folder first on the path)

NAMES = gpt_v5e.NAMES
# (the block's policy as a spec, as a jax policy); None: the code as written.
CONFIGS = [
    (None, gpt_v5e.AS_WRITTEN),
    (f"save_only_these_names({', '.join(repr(n) for n in NAMES)})", gpt_v5e.AS_WRITTEN),
    ("nothing_saveable", "nothing_saveable"),
    ("save_only_these_names('qkv')", ("save_only_these_names", ("qkv",))),
    ("dots_with_no_batch_dims_saveable", "dots_with_no_batch_dims_saveable"),
]


def jax_policy(which):
    import jax

    cp = jax.checkpoint_policies
    if isinstance(which, str):
        return getattr(cp, which)
    if isinstance(which, tuple):
        return getattr(cp, which[0])(*which[1])
    return which


class ByHand:
    """Doubling from the example's batch (halving when it does not fit), then
    bisecting, each compile by hand."""

    def __init__(self, layers, seq, budget, dev):
        self.layers, self.seq, self.budget, self.dev = layers, seq, budget, dev
        self.fitting = self.refused = 0

    def fits(self, policy, batch) -> bool:
        import jax
        from jax.sharding import SingleDeviceSharding

        params, tokens = gpt_v5e.make_args(self.layers, batch, self.seq)()
        placed = SingleDeviceSharding(self.dev)
        params, tokens = jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=placed), (params, tokens)
        )
        step = jax.value_and_grad(gpt_v5e.make_gpt(policy), argnums=(0, 1), allow_int=True)
        with jax.default_device(jax.devices("cpu")[0]):
            lowered = jax.jit(step).lower(params, tokens)
        try:
            m = lowered.compile().memory_analysis()
        except Exception as exc:  # XLA refused it: out of memory
            if "RESOURCE_EXHAUSTED" not in str(exc) and "out of memory" not in str(exc).lower():
                raise
            self.refused += 1
            return False
        self.fitting += 1
        # XLA's own peak: every memory at one moment. On this model VMEM holds
        # next to nothing at HBM's peak, so it is HBM's live peak within
        # kilobytes (gpt_quick: 1,645,988,864 B against 1,645,982,720 B), the
        # peak fit weighs on TPU; XLA's sizes of its allocations overstate HBM
        # (2.09 GB on JAX 0.10, 2.31 GB on 0.12).
        return m.peak_memory_in_bytes <= self.budget

    def search(self, policy, start) -> int:
        low, high = 0, None
        if self.fits(policy, start):
            low, batch = start, 2 * start
            while high is None:
                if self.fits(policy, batch):
                    low, batch = batch, 2 * batch
                else:
                    high = batch
        else:
            high, batch = start, start // 2
            while batch >= 1 and low == 0:
                if self.fits(policy, batch):
                    low = batch
                else:
                    high, batch = batch, batch // 2
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if self.fits(policy, mid) else (low, mid)
        return low


def mark(probe) -> str:
    """A batch tried, in order: 15 fits the budget, 16> compiled over it, 25R refused by XLA."""
    if probe.fits:
        return str(probe.batch)
    return f"{probe.batch}{'>' if probe.compiled.fits else 'R'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default=None, help="default 16GiB (--quick: 1GiB)")
    parser.add_argument("--device", default="tpu:v5e:2x2")
    parser.add_argument("--quick", action="store_true", help="the small target, a fast check")
    parser.add_argument("--configs", type=int, default=len(CONFIGS), help="the first N only")
    opts = parser.parse_args()
    name = "gpt_quick" if opts.quick else "gpt"
    layers, seq = (
        (gpt_v5e.QUICK_LAYERS, gpt_v5e.QUICK_SEQ) if opts.quick else (gpt_v5e.LAYERS, gpt_v5e.SEQ)
    )

    import remat_tui
    from remat_tui.core.search.fit.batches import fit
    from remat_tui.core.setup.config import Config
    from remat_tui.core.setup.devices import resolve_device
    from remat_tui.core.units import human_bytes, parse_size
    from remat_tui.core.xla.compile import costs as compiled
    from remat_tui.core.xla.compile import shared as programs

    budget = parse_size(opts.budget or ("1GiB" if opts.quick else "16GiB"))
    target = remat_tui.load_targets(os.path.join(HERE, "gpt_v5e.py"))[name]
    start = gpt_v5e.QUICK_BATCH if opts.quick else gpt_v5e.BATCH
    print(f"target bench/gpt_v5e.py:{name}, budget {human_bytes(budget)}, device {opts.device}")
    compiled.clear_cache()
    programs.clear()
    hand = ByHand(layers, seq, budget, resolve_device(opts.device))
    totals = {"fit": [0, 0, 0.0], "hand": [0, 0, 0.0]}  # fitting, refused compiles, seconds
    for spec, policy in CONFIGS[: opts.configs]:
        label = spec or "as written"
        config = Config.make(sites={"block": spec} if spec else None, device=opts.device)
        began = time.perf_counter()
        result = fit(target, budget, device=opts.device, configs=[(config, label)])
        fit_seconds = time.perf_counter() - began
        (row,) = result.rows
        compiled_now = [p for p in row.probes if p.how == programs.COMPILED]
        fit_fitting = sum(p.compiled.fits for p in compiled_now)
        fit_refused = len(compiled_now) - fit_fitting
        reused = len(row.probes) - len(compiled_now)
        before = hand.fitting, hand.refused
        began = time.perf_counter()
        answer = hand.search(jax_policy(policy), start)
        hand_seconds = time.perf_counter() - began
        hand_fitting, hand_refused = hand.fitting - before[0], hand.refused - before[1]
        for side, numbers in (("fit", (fit_fitting, fit_refused, fit_seconds)),
                              ("hand", (hand_fitting, hand_refused, hand_seconds))):  # fmt: skip
            totals[side] = [a + b for a, b in zip(totals[side], numbers, strict=True)]
        print(
            f"{label}:\n  fit     batch {row.batch:>4} (peak {human_bytes(row.peak_bytes or 0)}), "
            f"{fit_fitting} compiles + {fit_refused} refused for memory"
            + (f" + {reused} answered by the same program" if reused else "")
            + f", {fit_seconds:.0f} s; tried {' '.join(mark(p) for p in row.probes)}\n"
            f"  by hand batch {answer:>4}, {hand_fitting} compiles + {hand_refused} refused for "
            f"memory, {hand_seconds:.0f} s" + ("" if answer == row.batch else "  DIFFERENT ANSWER"),
            flush=True,
        )
    (ff, fr, fs), (hf, hr, hs) = totals["fit"], totals["hand"]
    print(
        f"\ntotal: fit {ff + fr} compiles ({ff} that fit the chip) in {fs:.0f} s; by hand "
        f"{hf + hr} compiles ({hf} that fit the chip) in {hs:.0f} s"
    )
    print(
        f"fit / by hand: compiles {(ff + fr) / (hf + hr):.2f}, compiles that fit the chip "
        f"{ff / max(hf, 1):.2f}, time {fs / hs:.2f}"
    )


if __name__ == "__main__":
    main()
