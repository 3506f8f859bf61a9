"""App responsiveness, measured headless with Textual's Pilot in one process.

1. key press -> updated screen for a cached policy (mlp and the 24-layer
   unrolled transformer);
2. key press -> updated screen for a new policy on the unrolled transformer,
   against the core's own `analyze` time for a new policy, side by side;
3. opening a 20,000-line jaxpr in a pane (set_lines + first frame).

    python bench/bench_app.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time

from remat_tui.app.codeview import CodeView
from remat_tui.app.main import RematApp

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples")


async def settle(app, pilot):
    while app.target is None or app.pending is not None or any(
            w.is_running for w in app.workers):
        await pilot.pause(0.01)


async def press_until_shown(app, pilot, key, policy) -> float:
    start = time.perf_counter()
    await pilot.press(key)
    while app.shown is None or app.shown.policy != policy:
        await pilot.pause(0.005)
    await pilot.pause()  # the frame after the update
    return time.perf_counter() - start


async def cached_switch(path, name) -> float:
    app = RematApp(path, name, show_timings=False)
    times = []
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(app, pilot)
        await pilot.press("2")
        await settle(app, pilot)
        for _ in range(5):
            times.append(await press_until_shown(app, pilot, "0", "as_written"))
            times.append(await press_until_shown(app, pilot, "2", "nothing_saveable"))
    return statistics.median(times)


async def new_policy_vs_core(path, name) -> tuple[float, float]:
    import remat_tui

    app = RematApp(path, name, show_timings=False)
    app_times, core_times = [], []
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(app, pilot)
        target = app.target
        for key, spec in (("2", "nothing_saveable"), ("3", "dots_saveable"),
                          ("4", "dots_with_no_batch_dims_saveable")):
            start = time.perf_counter()
            remat_tui.analyze(target, policy=spec)  # jax.checkpoint cache: same for both
            core_times.append(time.perf_counter() - start)
            app.cache.clear()
            app_times.append(await press_until_shown(app, pilot, key, spec))
            await settle(app, pilot)
    return statistics.median(app_times), statistics.median(core_times)


async def open_big_pane(lines: int = 20_000) -> float:
    from textual.app import App

    text = [f"    v{i}:f32[128,512] = dot_general[dimension_numbers=(([1], [0]), ([], []))] "
            f"a{i} b{i}" for i in range(lines)]

    class One(App):
        def compose(self):
            from remat_tui.app.lexer import JaxprLexer

            yield CodeView(JaxprLexer())

    app = One()
    async with app.run_test(size=(160, 45)) as pilot:
        pane = app.query_one(CodeView)
        start = time.perf_counter()
        pane.set_lines(text, marked=set(range(0, lines, 7)))
        await pilot.pause()
        opened = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(20):
            pane.scroll_to(y=pane.scroll_offset.y + lines // 25, animate=False, immediate=True)
            await pilot.pause()
        scroll = (time.perf_counter() - start) / 20
    return opened, scroll


def main() -> None:
    mlp = os.path.join(EXAMPLES, "mlp.py")
    transformer = os.path.join(EXAMPLES, "transformer.py")
    print(f"cached policy, mlp:                  {asyncio.run(cached_switch(mlp, None)) * 1e3:.1f} ms"
          "  (budget 50 ms)")
    print(f"cached policy, unrolled transformer: "
          f"{asyncio.run(cached_switch(transformer, 'unrolled')) * 1e3:.1f} ms  (budget 50 ms)")
    app_t, core_t = asyncio.run(new_policy_vs_core(transformer, "unrolled"))
    print(f"new policy, unrolled transformer:    app {app_t:.2f} s, core {core_t:.2f} s, "
          f"ratio {app_t / core_t:.2f}  (budget 1.3)")
    opened, scroll = asyncio.run(open_big_pane())
    print(f"20,000-line pane: open {opened * 1e3:.0f} ms (budget 200 ms), "
          f"scroll step {scroll * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
