"""How many of the residual bytes at the compiled peak name the residual they
hold (Contract 14, issue 34's goal: at least 90%, the rest explained), on
the examples and a model of named blocks, per device; and what tying the
residuals to the compile costs beside the compile itself.

For each target and device: one `analyze(..., compiled=True)`; the share is
`residual_bytes_named` over the `residual` bytes at the peak
(core/xla/fates.py), and the bytes left unnamed are summed by the reason
each buffer gives (`unnamed`). The cost: reading what the forward part makes
(core/xla/made.py, inside reading the dump) and linking (fates.link), timed
against the compile, alternately, best of --repeat.

    python bench/bench_residual_names.py [--device cpu:0 --device tpu:v5e:2x2]
        [--target FILE:NAME ...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
TARGETS = [
    "examples/mlp.py:loss",
    "examples/transformer.py:unrolled",
    "tests/models/named_blocks.py:unrolled",
    "tests/models/named_blocks.py:scanned",
    "tests/models/named_blocks.py:wide_unrolled",
    "tests/models/named_blocks.py:wide_scanned",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", action="append", default=None)
    parser.add_argument("--target", action="append", default=None, metavar="FILE:NAME")
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()

    import remat_tui
    from remat_tui.core.setup.loading import load_target
    from remat_tui.core.units import human_bytes

    for device in options.device or ["cpu:0"]:
        for ref in options.target or TARGETS:
            target = load_target(os.path.join(ROOT, ref))
            a = remat_tui.analyze(target, device=device, compiled=True)
            memory = a.compiled.memory
            residual = memory["by_category"]["residual"]
            named = memory["residual_bytes_named"]
            share = f"named {named / residual:6.1%}" if residual else "(none at the peak)"
            print(f"{device:12} {ref:40} residual bytes at the peak {human_bytes(residual):>10}"
                  f"  {share}")  # fmt: skip
            for space in memory.get("other_spaces", []):
                held = [b for b in space["at_peak"] if b["category"] == "residual"]
                if held:
                    size = sum(b["bytes"] for b in held)
                    told = sum(b["bytes"] for b in held if b["residual"])
                    print(f"{'':14}{space['space']}: residual bytes at its peak "
                          f"{human_bytes(size)}, named {told / size:.1%}")  # fmt: skip
            why = Counter()
            for b in memory["at_peak"]:
                if b["category"] == "residual" and not b["residual"]:
                    why[b.get("unnamed", "?")[:110]] += b["bytes"]
            for reason, size in why.most_common(4):
                print(f"{'':14}{size / residual:6.1%} unnamed: {reason}")
            fates = Counter(r.story.xla.what for r in a.residuals if r.story and r.story.xla)
            print(f"{'':14}fates: {dict(fates)}")
            _cost(target, device, options.repeat)


def _cost(target, device, repeat: int) -> None:
    """Linking the residuals to the compile against the compile, best of `repeat`."""
    from remat_tui.core.setup.config import Config
    from remat_tui.core.trace import analysis
    from remat_tui.core.xla import compiled, fates

    config = Config.make(device=device)
    a = analysis.analyze(target, config=config)
    compiles, links = [], []
    for _ in range(repeat):
        compiled.clear_cache()
        start = time.perf_counter()
        c = compiled.compile_costs(target, config, memory=True)
        compiles.append(time.perf_counter() - start)
        start = time.perf_counter()
        fates.link(a.residuals, c)
        links.append(time.perf_counter() - start)
    print(f"{'':14}compile (with the breakdown) {min(compiles):.2f} s, linking "
          f"{min(links) * 1000:.0f} ms ({min(links) / min(compiles):.1%})")  # fmt: skip


if __name__ == "__main__":
    main()
