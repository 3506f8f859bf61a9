"""How many of the residual bytes at the compiled peak name the residual they
hold (Contract 14, issue 34's goal: at least 90%, the rest explained), on
the examples and a model of named blocks, per device; and what tying the
residuals to the compile costs beside the compile itself.

For each target and device: one `analyze(..., compiled=True)`; per memory
(the device's main one, and TPU's VMEM), the share of the `residual` bytes
at its peak whose buffer names a residual (core/xla/fates/residuals.py), of it those
holding what the residual is computed from (`holds: input`,
core/xla/fates/unsaved.py), and the bytes left unnamed summed by the reason each
buffer gives (`unnamed`). The cost: reading what the forward part makes
(core/xla/buffers/made.py, inside reading the dump) and linking (fates.link), timed
against the compile, alternately, best of --repeat.

    python bench/bench_residual_names.py [--device cpu:0 --device tpu:v5e:2x2]
        [--target FILE:NAME ...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter

# Every side compiles (the compile store would answer the repeats)
os.environ.setdefault("REMAT_TUI_NO_CACHE", "1")
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

    for device in options.device or ["cpu:0"]:
        for ref in options.target or TARGETS:
            target = load_target(os.path.join(ROOT, ref))
            a = remat_tui.analyze(target, device=device, compiled=True)
            memory = a.compiled.memory
            for space in [memory, *memory.get("other_spaces", [])]:
                _share(device, ref, space)
            fates = Counter(r.story.xla.what for r in a.residuals if r.story and r.story.xla)
            print(f"{'':14}fates: {dict(fates)}")
            _cost(target, device, options.repeat)


def _share(device: str, ref: str, space: dict) -> None:
    """One memory's residual bytes at its peak: the share naming their
    residual (of it, holding what the residual is computed from), and the
    bytes left unnamed by the reason their buffers give."""
    from remat_tui.core.units import human_bytes

    held = [b for b in space["at_peak"] if b["category"] == "residual"]
    name = space.get("space", "main")
    if not held:
        if name == "main":
            print(f"{device:12} {ref:40} main: no residual bytes at the peak")
        return
    size = sum(b["bytes"] for b in held)
    told = sum(b["bytes"] for b in held if b["residual"])
    inputs = sum(b["bytes"] for b in held if b.get("holds") == "input")
    lead = f"{device:12} {ref:40}" if name == "main" else f"{'':14}"
    print(f"{lead}{name}: residual bytes at its peak {human_bytes(size):>10}  named "
          f"{told / size:6.1%} (inputs {inputs / size:.1%})")  # fmt: skip
    why = Counter()
    for b in held:
        if not b["residual"]:
            why[b.get("unnamed", "?")[:110]] += b["bytes"]
    for reason, part in why.most_common(4):
        print(f"{'':16}{part / size:6.1%} unnamed: {reason}")


def _cost(target, device, repeat: int) -> None:
    """Linking the residuals to the compile, and reading what the forward part
    makes (inside the compile's reading of its dump), against the compile,
    best of `repeat`."""
    from remat_tui.core.setup.config import Config
    from remat_tui.core.trace import analysis
    from remat_tui.core.xla.buffers import accounting as memory_accounting
    from remat_tui.core.xla.compile import costs as compiled
    from remat_tui.core.xla.fates import residuals as fates

    config = Config.make(device=device)
    a = analysis.analyze(target, config=config)
    reading = memory_accounting.forward_values
    spent: list[float] = []

    def timed(*args):
        start = time.perf_counter()
        try:
            return reading(*args)
        finally:
            spent.append(time.perf_counter() - start)

    compiles, links, reads = [], [], []
    memory_accounting.forward_values = timed
    try:
        for _ in range(repeat):
            compiled.clear_cache()
            spent.clear()
            start = time.perf_counter()
            c = compiled.compile_answer(target, config, memory=True).result
            compiles.append(time.perf_counter() - start)
            reads.append(sum(spent))
            start = time.perf_counter()
            fates.link(a.residuals, c)
            links.append(time.perf_counter() - start)
    finally:
        memory_accounting.forward_values = reading
    best = min(compiles)
    print(f"{'':14}compile (with the breakdown) {best:.2f} s; of it, reading what the "
          f"forward part makes {min(reads) * 1000:.0f} ms ({min(reads) / best:.1%}); "
          f"linking {min(links) * 1000:.0f} ms ({min(links) / best:.1%})")  # fmt: skip


if __name__ == "__main__":
    main()
