"""App responsiveness, measured headless with Textual's Pilot in one process.

1. key press -> the first frame showing a cached policy written to the
   terminal (mlp and the 24-layer unrolled transformer; median of 30 switches);
2. key press -> updated screen for a new policy on the unrolled transformer,
   against the core's own `analyze` time for a new policy, side by side
   (both pause Python's automatic garbage collection while they trace:
   app/controllers/analyses.py, core/runtime/collector.py; the app also collects once after the
   frame and freezes what is left);
3. opening a 20,000-line jaxpr in a pane (set_lines + first frame).

    python bench/bench_app.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from dataclasses import replace

from remat_tui.app.main import RematApp
from remat_tui.app.widgets.codeview import CodeView

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples")


async def settle(app, pilot):
    while (
        app.loaded.target is None
        or app.analyses.pending is not None
        or any(w.is_running for w in app.workers)
    ):
        await asyncio.sleep(0.02)
    await pilot.pause()


def instrument(app) -> dict[str, list[float]]:
    """Timestamps of each finished `showing.show` (state drawn into widgets) and each frame
    written to the terminal (App._display), to time key -> frame on screen."""
    stamps: dict[str, list[float]] = {"shown": [], "frames": []}
    show, display = app.showing.show, app._display

    def timed_show(analysis):
        show(analysis)
        stamps["shown"].append(time.perf_counter())

    def timed_display(screen, renderable):
        display(screen, renderable)
        stamps["frames"].append(time.perf_counter())

    app.showing.show, app._display = timed_show, timed_display
    return stamps


async def key_to_painted(app, stamps, key: str, policy: str) -> float:
    """Seconds from a key press to the end of writing the first frame that shows
    `policy` (the first frame after the app drew that analysis into its widgets)."""
    start = time.perf_counter()
    app.simulate_key(key)
    while app.loaded.shown is None or app.loaded.shown.policy != policy:
        await asyncio.sleep(0.001 if app.analyses.pending is None else 0.02)
    shown = stamps["shown"][-1]
    while not stamps["frames"] or stamps["frames"][-1] <= shown:
        await asyncio.sleep(0.001)
    return min(t for t in stamps["frames"] if t > shown) - start


async def cached_switch(path, name, rounds=15) -> float:
    app = RematApp(path, name, show_timings=False)
    stamps = instrument(app)
    times = []
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(app, pilot)
        app.simulate_key("2")
        await settle(app, pilot)
        for _ in range(rounds):
            times.append(await key_to_painted(app, stamps, "0", "as_written"))
            await asyncio.sleep(0.05)
            times.append(await key_to_painted(app, stamps, "2", "nothing_saveable"))
            await asyncio.sleep(0.05)
    return statistics.median(times)


async def new_policy_vs_core(path, name, rounds=4) -> tuple[float, float]:
    """The app's key-to-screen time for a policy it has not seen, against the core's
    analyze for the same policy, alternating which goes first. Each side gets a
    fresh target function (jax.checkpoint caches traces per function object,
    which would favour the second) and starts after a garbage collection."""
    import gc

    import remat_tui

    app = RematApp(path, name, show_timings=False)
    stamps = instrument(app)
    app_times, core_times = [], []
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(app, pilot)
        original = app.loaded.target
        specs = (
            ("2", "nothing_saveable"),
            ("3", "dots_saveable"),
            ("4", "dots_with_no_batch_dims_saveable"),
        )
        for round_ in range(rounds):
            for key, spec in specs:

                def core(spec=spec):
                    gc.collect()
                    start = time.perf_counter()
                    remat_tui.analyze(fresh_target(original), policy=spec)
                    core_times.append(time.perf_counter() - start)

                async def in_app(key=key, spec=spec):
                    app.loaded = replace(app.loaded, target=fresh_target(original))
                    baseline = app.analyses.cache.get(app.scene().baseline_key())
                    app.analyses.forget_all_but(baseline)  # traced again, but as_written
                    gc.collect()
                    app_times.append(await key_to_painted(app, stamps, key, spec))
                    await settle(app, pilot)

                if round_ % 2:
                    await in_app()
                    core()
                else:
                    core()
                    await in_app()
    return statistics.median(app_times), statistics.median(core_times)


def fresh_target(target):
    import dataclasses

    def fn(*args, **kwargs):
        return target.fn(*args, **kwargs)

    return dataclasses.replace(target, fn=fn)


async def open_big_pane(lines: int = 20_000) -> tuple[float, float]:
    """Seconds from set_lines to the first frame written, and the median from a
    pagedown key to its frame written, for a 20,000-line jaxpr."""
    from textual.app import App

    from remat_tui.app.widgets.lexer import JaxprLexer

    text = [
        f"    v{i}:f32[128,512] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a{i} b{i}"
        for i in range(lines)
    ]

    class One(App):
        def compose(self):
            yield CodeView(JaxprLexer())

    app = One()
    frames: list[float] = []
    display = app._display

    def timed_display(screen, renderable):
        display(screen, renderable)
        frames.append(time.perf_counter())

    app._display = timed_display

    async def next_frame_after(start: float) -> float:
        while not frames or frames[-1] <= start:
            await asyncio.sleep(0.001)
        return min(t for t in frames if t > start) - start

    async with app.run_test(size=(160, 45)) as pilot:
        pane = app.query_one(CodeView)
        pane.focus()
        await pilot.pause()
        start = time.perf_counter()
        pane.set_lines(text, marked=set(range(0, lines, 7)))
        opened = await next_frame_after(start)
        steps = []
        for _ in range(30):
            await asyncio.sleep(0.05)
            start = time.perf_counter()
            app.simulate_key("pagedown")
            steps.append(await next_frame_after(start))
    return opened, statistics.median(steps)


def main() -> None:
    mlp = os.path.join(EXAMPLES, "mlp.py")
    transformer = os.path.join(EXAMPLES, "transformer.py")
    print(
        f"cached policy, mlp:                  "
        f"{asyncio.run(cached_switch(mlp, None)) * 1e3:.1f} ms  (bar 35 ms)"
    )
    print(
        f"cached policy, unrolled transformer: "
        f"{asyncio.run(cached_switch(transformer, 'unrolled')) * 1e3:.1f} ms  (bar 35 ms)"
    )
    app_t, core_t = asyncio.run(new_policy_vs_core(transformer, "unrolled"))
    print(
        f"new policy, unrolled transformer:    app {app_t:.2f} s, core {core_t:.2f} s, "
        f"ratio {app_t / core_t:.2f}  (bar 1.1)"
    )
    opened, scroll = asyncio.run(open_big_pane())
    print(
        f"20,000-line pane: open {opened * 1e3:.0f} ms (budget 200 ms), "
        f"pagedown to frame {scroll * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
