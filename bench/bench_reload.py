"""Hot reload, measured headless with Textual's Pilot in one process.

A save of (a copy of) examples/transformer.py, the app showing `unrolled`:
from the write to the first frame on screen showing the re-analysed target
(file watch, re-import, example arguments, trace, drawing), against a fresh
analysis of the same file in the same process (import the file and `analyze`
the target), side by side, alternating which goes first, each after a garbage
collection. Prints both medians and their ratio (target: 1.3 or less).

    python bench/bench_reload.py
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import statistics
import tempfile
import time

from bench_app import instrument, settle

from remat_tui.app.main import RematApp

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "examples", "transformer.py")


def fresh_analysis(path: str) -> float:
    import remat_tui

    gc.collect()
    start = time.perf_counter()
    remat_tui.analyze(remat_tui.load_targets(path)["unrolled"])
    return time.perf_counter() - start


async def save_to_screen(app, pilot, stamps, path: str, mark: int) -> float:
    """Seconds from writing the file to the end of the first frame that shows
    the analysis of what was written."""
    before = app.loaded.shown
    with open(SOURCE, encoding="utf-8") as fh:
        text = fh.read()
    gc.collect()
    start = time.perf_counter()
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f"{text}\n# save {mark}\n")
    while app.loaded.shown is before:
        await asyncio.sleep(0.005)
    shown = stamps["shown"][-1]
    while not stamps["frames"] or stamps["frames"][-1] <= shown:
        await asyncio.sleep(0.001)
    took = min(t for t in stamps["frames"] if t > shown) - start
    await settle(app, pilot)
    return took


async def main(rounds: int = 8) -> None:
    folder = tempfile.mkdtemp(prefix="remat-bench-")
    path = os.path.join(folder, "transformer.py")
    shutil.copy(SOURCE, path)
    app = RematApp(path, "unrolled", show_timings=False)
    stamps = instrument(app)
    reload_times, fresh_times = [], []
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await settle(app, pilot)
            while not app.reloader.watched:
                await asyncio.sleep(0.01)
            fresh_analysis(path)  # warm both sides' imports
            for round_ in range(rounds):
                if round_ % 2:
                    reload_times.append(await save_to_screen(app, pilot, stamps, path, round_))
                    fresh_times.append(fresh_analysis(path))
                else:
                    fresh_times.append(fresh_analysis(path))
                    reload_times.append(await save_to_screen(app, pilot, stamps, path, round_))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    reload_s, fresh_s = statistics.median(reload_times), statistics.median(fresh_times)
    print("examples/transformer.py:unrolled (24 layers), median of", rounds)
    print(f"  save -> screen updated (hot reload)   {reload_s:6.3f} s")
    print(f"  fresh analysis (import + analyze)     {fresh_s:6.3f} s")
    print(f"  ratio                                 {reload_s / fresh_s:6.2f}x  (target <= 1.3x)")


if __name__ == "__main__":
    asyncio.run(main())
