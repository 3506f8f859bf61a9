"""Regenerates docs/screenshot.svg with the app's own SVG export.

python docs/make_screenshot.py
"""

import asyncio
import os

from remat_tui.app.main import RematApp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


async def main() -> None:
    os.chdir(ROOT)
    app = RematApp("examples/mlp.py", policy="save_only_these_names('layer1')", show_timings=False)
    async with app.run_test(size=(150, 42)) as pilot:
        while (
            app.target is None or app.pending is not None or any(w.is_running for w in app.workers)
        ):
            await pilot.pause(0.05)
        await pilot.press(
            "r", "down", "down", "down", "down", "down", "down", "down", "down", "down", "down"
        )
        await pilot.pause(0.2)
        app.save_screenshot(os.path.join(ROOT, "docs", "screenshot.svg"))


asyncio.run(main())
