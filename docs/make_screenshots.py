"""Regenerates the app's screenshots in the documentation: docs/screenshot.svg
(the main screen, which the README shows) and docs/screens/*.svg (compare,
suggest, fit, diff, memory, help, export), each saved by Textual itself
(`App.save_screenshot`) from the app driven headless by the keys a user
presses.

    python docs/make_screenshots.py              # every screen
    python docs/make_screenshots.py compare help # some of them

Run it from a checkout with the package installed (`pip install -e .`); it
takes a minute or so (the memory screen compiles). Each screen waits until
the app's workers are done and two frames in a row are the same, never for
a fixed time, so a loaded machine only makes it slower. The examples are
opened by relative path from the checkout's root, so no path of the machine
that ran it appears in a screenshot.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The screens count what they compiled: a screenshot taken with the compile
# cache on would say "0 compiles" wherever an earlier run had compiled.
os.environ.setdefault("REMAT_TUI_NO_CACHE", "1")
SCREENS = os.path.join(ROOT, "docs", "screens")
SIZE = (150, 42)
MLP = ("examples/mlp.py", None)
TRANSFORMER = ("examples/transformer.py", "scanned_checkpointed")


async def settled(pilot, what: str, timeout: float = 300.0) -> None:
    """Wait until no worker runs and the screen stops redrawing (two frames
    0.1 s apart alike), checking every 0.1 s; fail naming `what` after
    `timeout` seconds."""
    app = pilot.app
    deadline = time.monotonic() + timeout
    last = None
    while True:
        await pilot.pause(0.1)
        busy = any(w.is_running for w in app.workers)
        frame = app.export_screenshot()
        if not busy and frame == last:
            return
        last = frame
        if time.monotonic() > deadline:
            raise SystemExit(f"make_screenshots: timed out waiting for {what}")


async def until(pilot, condition, what: str, timeout: float = 300.0) -> None:
    """Wait for `condition()`, checking every 0.1 s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"make_screenshots: timed out waiting for {what}")
        await pilot.pause(0.1)


def app_for(target: tuple[str, str | None], **options):
    from remat_tui.app.main import RematApp

    path, name = target
    return RematApp(path, name, show_timings=False, **options)


def check_loaded(app) -> None:
    """Stop, saying why, when the app shows an error instead of an analysis."""
    for line in app.query("#error"):  # errors, and notes, above the panes
        text = str(line.render())
        if line.display and text.startswith("error"):
            raise SystemExit(f"make_screenshots: the app shows {text}")


async def shoot(app, path: str, size=SIZE, keys=(), screen: str | None = None, what="") -> None:
    """Open `app`, let it settle, press `keys` (each a key or a callable
    taking the pilot), wait for the screen class named `screen`, settle, save."""
    async with app.run_test(size=size) as pilot:
        await settled(pilot, "the first analysis")
        check_loaded(app)
        for key in keys:
            if callable(key):
                await key(pilot)
            else:
                await pilot.press(key)
            await settled(pilot, f"{what or path} after {key!r}")
        if screen is not None:
            await until(pilot, lambda: type(app.screen).__name__ == screen, screen)
            await settled(pilot, screen)
        app.save_screenshot(path)
    print(f"make_screenshots: wrote {os.path.relpath(path, ROOT)}")


def compiled(pilot) -> bool:
    """`p`'s compile has come back: the status line leads with the peak."""
    return "peak" in str(pilot.app.query_one("#status").render())


async def press_p(pilot) -> None:
    await pilot.press("p")
    await until(pilot, lambda: compiled(pilot), "the compile")


async def main_screen() -> None:
    # A named save policy, the residual table focused, a row selected: its
    # lines highlighted in both jaxpr panes and its source line in the code.
    app = app_for(MLP, policy="save_only_these_names('layer1')")
    keys = ["r", *["down"] * 10]
    await shoot(app, os.path.join(ROOT, "docs", "screenshot.svg"), keys=keys)


async def compare_screen() -> None:
    # With p on: every row compiled for the device, its peak and estimated step.
    app = app_for(TRANSFORMER)
    keys = [press_p, "c"]
    await shoot(app, os.path.join(SCREENS, "compare.svg"), (180, 48), keys, "CompareScreen")


async def suggest_screen() -> None:
    async def budget(pilot) -> None:
        await pilot.press("b")
        await until(pilot, lambda: type(pilot.app.screen).__name__ == "BudgetScreen", "budget")
        await pilot.press(*"300MiB", "enter")

    app = app_for(TRANSFORMER)
    await shoot(app, os.path.join(SCREENS, "suggest.svg"), keys=[budget], screen="SuggestScreen")


async def fit_screen() -> None:
    # How big a batch fits 1 MiB, every configuration compare weighs: rows and chart.
    async def budget(pilot) -> None:
        await pilot.press("f")
        await until(pilot, lambda: type(pilot.app.screen).__name__ == "FitScreen", "fit")
        await pilot.press(*"1MiB", "enter")
        await until(pilot, lambda: pilot.app.screen.result is not None, "the fit search")

    app = app_for(MLP)
    await shoot(app, os.path.join(SCREENS, "fit.svg"), (180, 48), [budget], "FitScreen")


async def diff_screen() -> None:
    # A: the code as written; B: policy 2 at the block's jax.checkpoint.
    app = app_for(TRANSFORMER)
    keys = ["m", "s", "2", "v"]
    await shoot(app, os.path.join(SCREENS, "diff.svg"), keys=keys, screen="DiffScreen")


async def memory_screen() -> None:
    app = app_for(MLP, policy="nothing_saveable")
    keys = [press_p, "w"]
    await shoot(app, os.path.join(SCREENS, "memory.svg"), keys=keys, screen="MemoryScreen")


async def help_screen() -> None:
    app = app_for(MLP)
    await shoot(app, os.path.join(SCREENS, "help.svg"), keys=["question_mark"])


async def export_screen() -> None:
    app = app_for(MLP)
    await shoot(app, os.path.join(SCREENS, "export.svg"), keys=["e"], screen="ExportScreen")


SHOTS = {
    "main": main_screen,
    "compare": compare_screen,
    "suggest": suggest_screen,
    "fit": fit_screen,
    "diff": diff_screen,
    "memory": memory_screen,
    "help": help_screen,
    "export": export_screen,
}


async def run(names: list[str]) -> None:
    os.chdir(ROOT)  # the examples by relative path: no machine path in a screenshot
    os.makedirs(SCREENS, exist_ok=True)
    for name in names:
        await SHOTS[name]()


if __name__ == "__main__":
    wanted = sys.argv[1:] or list(SHOTS)
    unknown = [n for n in wanted if n not in SHOTS]
    if unknown:
        raise SystemExit(f"make_screenshots: unknown {unknown}; choose from {list(SHOTS)}")
    asyncio.run(run(wanted))
