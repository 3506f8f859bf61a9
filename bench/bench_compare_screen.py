"""The app's compare screen with compiling on, measured headless with Textual's
Pilot in one process: seconds from the key `c` to the first row in the table
and to the finished table (★ marked), the first time (every row compiled) and
again with the compiles cached. Issue 17's bar: with a cached compile, the
first rows within 1 s.

    python bench/bench_compare_screen.py [--target FILE:NAME] [--device D]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

# Every compile measured is made: the compile cache (issue 31) would answer a
# program seen in an earlier run.
os.environ.setdefault("REMAT_TUI_NO_CACHE", "1")

from remat_tui.app.main import RematApp
from remat_tui.app.screens.compare import CompareScreen

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(HERE, "..", "examples", "transformer.py") + ":scanned_checkpointed"


async def settle(app, pilot):
    while (
        app.loaded.target is None
        or app.analyses.pending is not None
        or any(w.is_running for w in app.workers)
    ):
        await asyncio.sleep(0.02)
    await pilot.pause()


async def open_compare(app, pilot) -> tuple[float, float, int]:
    """(seconds to the first row on screen, to every row, rows)."""
    start = time.monotonic()
    await pilot.press("c")
    screen = app.screen
    assert isinstance(screen, CompareScreen)
    while screen.done_at is None:
        await asyncio.sleep(0.01)
    first, done, rows = screen.first_row_at - start, screen.done_at - start, len(screen.rows)
    await pilot.press("escape")
    await settle(app, pilot)
    return first, done, rows


async def main(target: str, device: str | None) -> None:
    path, _, name = target.rpartition(":")
    app = RematApp(path, name, device=device, show_timings=False)
    async with app.run_test(size=(180, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("p")  # compiling on: compare compiles each row
        while not app.compiles.known:
            await asyncio.sleep(0.05)
        cold = await open_compare(app, pilot)
        warm = await open_compare(app, pilot)
    for label, (first, done, rows) in (("compiles to do", cold), ("compiles cached", warm)):
        print(f"{label:16s} first row {first:6.2f} s · all {rows} rows {done:6.2f} s")
    print(f"cached: first row / cold first row = {warm[0] / cold[0]:.2f}; bar: first row <= 1 s "
          f"({'met' if warm[0] <= 1.0 else 'NOT met'})")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default=DEFAULT)
    parser.add_argument("--device", default=None)
    options = parser.parse_args()
    asyncio.run(main(options.target, options.device))
