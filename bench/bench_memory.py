"""What reading where the peak goes (Contract 7) adds to a compile, measured
side by side in one process: the 24-layer transformer's gradient (unrolled and
scanned, examples/transformer.py) compiled for CPU plainly and with XLA's
record of the compile written, read and turned into the breakdown
(core/memory.py), alternately, best of --repeat each. Issue 15's bar: at most
20% added compile time.

    python bench/bench_memory.py [--repeat 3] [--device cpu:0]
"""

from __future__ import annotations

import argparse
import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default=None)
    options = parser.parse_args()

    import remat_tui
    from remat_tui.core import compiled
    from remat_tui.core.config import Config

    targets = remat_tui.load_targets(os.path.join(HERE, "..", "examples", "transformer.py"))
    for name in ("unrolled", "scanned_checkpointed"):
        target = targets[name]
        config = Config(device=options.device)
        times = {False: [], True: []}
        for _ in range(options.repeat):
            for memory in (False, True):
                compiled.clear_cache()
                start = time.perf_counter()
                result = compiled.compile_costs(target, config, memory=memory)
                times[memory].append(time.perf_counter() - start)
                if memory:
                    assert result.memory is not None, result.memory_note
        plain, with_memory = min(times[False]), min(times[True])
        print(
            f"{name:22s} plain {plain:6.2f} s · with the breakdown {with_memory:6.2f} s · "
            f"added {with_memory / plain - 1:+.0%} (bar +20%)"
        )


if __name__ == "__main__":
    main()
