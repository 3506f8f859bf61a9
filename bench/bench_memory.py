"""What reading where the peak goes (Contract 7) adds to a compile, measured
side by side in one process: the 24-layer transformer's gradient (unrolled and
scanned, examples/transformer.py) compiled for CPU plainly and with XLA's
record of the compile written, read and turned into the breakdown
(core/xla/buffers/memory.py), alternately, best of --repeat each. Issue 15's bar: at most
20% added compile time. Then, headless in the app, the key `w` to the memory
view's first frame written once the compile is cached (bar: 100 ms), median
of 10.

    python bench/bench_memory.py [--repeat 3] [--device cpu:0]
"""

from __future__ import annotations

import argparse
import os
import time

# Every compile measured is made: the compile cache (issue 31) would answer a
# program seen in an earlier run.
os.environ.setdefault("REMAT_TUI_NO_CACHE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default=None)
    parser.add_argument(
        "--target",
        action="append",
        default=None,
        metavar="FILE:NAME",
        help="targets to time (default: the transformer, unrolled and scanned); e.g. "
        "bench/decoder_70b.py:decoder",
    )
    options = parser.parse_args()

    import remat_tui
    from remat_tui.core.setup.config import Config
    from remat_tui.core.xla.compile import costs as compiled

    example = os.path.join(HERE, "..", "examples", "transformer.py")
    wanted = options.target or [f"{example}:unrolled", f"{example}:scanned_checkpointed"]
    for spec in wanted:
        path, _, name = spec.rpartition(":")
        target = remat_tui.load_targets(path)[name]
        config = Config(device=options.device)
        times = {False: [], True: []}
        for _ in range(options.repeat):
            for memory in (False, True):
                compiled.clear_cache()
                start = time.perf_counter()
                result = compiled.compile_answer(target, config, memory=memory).result
                times[memory].append(time.perf_counter() - start)
                if memory:
                    assert result.memory is not None, result.memory_note
        plain, with_memory = min(times[False]), min(times[True])
        print(
            f"{name:22s} plain {plain:6.2f} s · with the breakdown {with_memory:6.2f} s · "
            f"added {with_memory / plain - 1:+.0%} (bar +20%)"
        )


async def memory_view_opens() -> list[float]:
    """Seconds from the key `w` to the end of writing the first frame of the
    memory view, the compile cached: timed as bench_app.py times a policy
    switch (App._display stamps each frame written), not by Pilot's own waits."""
    import asyncio

    from remat_tui.app.main import RematApp
    from remat_tui.app.screens.memory import MemoryScreen

    path = os.path.join(HERE, "..", "examples", "transformer.py")
    app = RematApp(path, "scanned_checkpointed", show_timings=False)
    frames: list[tuple[float, object]] = []  # (written at, the screen drawn)
    display = app._display

    def timed_display(screen, renderable):
        display(screen, renderable)
        frames.append((time.perf_counter(), screen))

    app._display = timed_display
    seconds = []
    async with app.run_test(size=(160, 45)) as pilot:
        while app.loaded.shown is None or app.analyses.pending is not None:
            await asyncio.sleep(0.05)
        await pilot.press("p")
        while app.scene().key_of(app.loaded.shown) not in app.compiles.known:
            await asyncio.sleep(0.05)
        await pilot.pause()
        for _ in range(10):
            start = time.perf_counter()
            app.simulate_key("w")
            while not any(t > start and isinstance(s, MemoryScreen) for t, s in frames):
                await asyncio.sleep(0.001)
            first = min(t for t, s in frames if t > start and isinstance(s, MemoryScreen))
            seconds.append(first - start)
            await pilot.press("escape")
            await pilot.pause()
    return seconds


if __name__ == "__main__":
    import asyncio
    import statistics
    import sys

    main()
    if "--target" in sys.argv:  # the app's view is timed on the transformer alone
        raise SystemExit(0)
    opened = asyncio.run(memory_view_opens())
    print(f"memory view: w to its first frame, median {statistics.median(opened) * 1e3:.0f} ms, "
          f"worst {max(opened) * 1e3:.0f} ms of {len(opened)} (bar 100 ms)")  # fmt: skip
