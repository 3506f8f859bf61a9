"""The app keeps cached analyses out of the collector's sight (gc.freeze after
each analysis), yet frees an evicted analysis caught in a reference cycle."""

import gc
import weakref

from remat_tui.app.controllers.analyses import settle_memory
from remat_tui.core.setup import policies


class Node:
    pass


def test_an_evicted_object_in_a_cycle_is_freed_once_the_cache_evicts():
    cyclic = Node()
    cyclic.itself = cyclic  # freed only by a collection that sees it
    ref = weakref.ref(cyclic)
    gc.collect()
    gc.freeze()  # as settle_memory leaves things after an earlier analysis
    try:
        del cyclic
        settle_memory(freed=False)
        assert ref() is not None  # frozen: no collection sees it (the speed it buys)
        settle_memory(freed=True)
        assert ref() is None  # the cache evicted: what was frozen is collected
    finally:
        gc.unfreeze()


def test_jax_caches_are_cleared_every_few_analyses_never_while_the_latest_traces(monkeypatch):
    from remat_tui.app.controllers import analyses as analyses_module
    from remat_tui.app.messages import AnalysisReady

    cleared, settled = [], []
    monkeypatch.setattr(analyses_module, "clear_jax_caches", lambda: cleared.append(1))

    class App:
        def call_after_refresh(self, fn, *args):
            settled.append(args)

    controller = analyses_module.Analyses(App())
    every = analyses_module.JAX_CACHES_EVERY
    for i in range(every - 1):
        controller.request = i
        controller.ready(AnalysisReady(i, ("key", i), Node()), keep=())
    assert cleared == [] and settled[-1] == (False,)  # nothing freed yet
    controller.pending = ("a newer request",)  # its trace runs: wait for it
    controller.ready(AnalysisReady(-1, ("baseline",), Node()), keep=())
    assert cleared == []
    controller.pending, controller.request = None, every
    controller.ready(AnalysisReady(every, ("key", every), Node()), keep=())
    assert cleared == [1] and settled[-1] == (True,)  # collected with what was frozen
    assert controller.since_jax_caches == 0


async def test_the_memory_view_shows_where_the_compiled_peak_goes():
    """p compiles, w opens the breakdown XLA's record gives (the same the CLI's
    `memory` prints), enter on a buffer shows its line in the source pane."""
    from conftest import example
    from test_app import SIZE, press_p_until_compiled, settle
    from textual.widgets import OptionList

    from remat_tui.app.main import RematApp
    from remat_tui.app.screens.memory import MemoryScreen

    app = RematApp(example("mlp.py"), policy="nothing_saveable", show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("w")  # not compiled yet: said, no screen
        await pilot.pause()
        assert not isinstance(app.screen, MemoryScreen)
        await press_p_until_compiled(app, pilot)
        known = app.compiles.known[app.scene().key_of(app.loaded.shown)]
        memory = known.memory
        assert memory is not None and sum(memory["by_category"].values()) == memory["peak_bytes"]
        category = max(memory["by_category"], key=memory["by_category"].get)
        status = str(app.query_one("#status").render())
        assert category in status  # the status line names it
        share = memory["by_category"][category] / memory["peak_bytes"]
        assert f"{category} ({share:.0%})" in status
        assert ("mostly" in status) == (share > 0.5), status  # words true to the number
        await pilot.press("w")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, MemoryScreen)
        assert screen.query_one(OptionList).option_count == len(memory["at_peak"])
        assert screen.chart_marks["peak_step"] == memory["peak_step"]
        assert screen.chart_marks.get("backward_from") == memory["backward_from"]
        if memory.get("explanation"):
            assert memory["explanation"] in str(screen.query_one("#memory-status").render())
        with_line = next(i for i, b in enumerate(memory["at_peak"]) if b["source"])
        screen.query_one(OptionList).highlighted = with_line
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, MemoryScreen)
        source = memory["at_peak"][with_line]["source"]
        assert app.view.source_file == source["file"]
        assert app.query_one("#source").selected == frozenset({source["line"] - 1})


async def test_the_diff_says_how_the_peaks_make_up_changed():
    """With p on, m marks as_written, 2 shows nothing_saveable, v: the diff
    gives both peaks' categories and, the residuals gone but the peak not,
    why (the sentence compare and the reports give)."""
    from conftest import example, wait_for
    from test_app import SIZE, settle

    from remat_tui.app.main import RematApp
    from remat_tui.app.screens.diff import DiffScreen

    async def compiled_shown(app, pilot):
        await wait_for(
            pilot,
            lambda: app.scene().key_of(app.loaded.shown) in app.compiles.known,
            "the shown compile",
        )
        return app.compiles.known[app.scene().key_of(app.loaded.shown)]

    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("p")
        a = await compiled_shown(app, pilot)
        await pilot.press("m", "2")  # mark as_written; nothing_saveable
        await settle(app, pilot)
        b = await compiled_shown(app, pilot)
        await pilot.press("v")
        await pilot.pause()
        assert isinstance(app.screen, DiffScreen)
        status = str(app.screen.query_one("#diff-status").render())
        assert "compiled peak A" in status
        for category in ("residual", "recomputed"):
            if a.memory["by_category"][category] != b.memory["by_category"][category]:
                assert category in status
        if b.memory["peak_bytes"] == a.memory["peak_bytes"]:
            assert "peak unchanged against A" in status


TWO_RESIDUALS = """
import jax
import jax.numpy as jnp
import remat_tui


def example_args():
    return (jax.ShapeDtypeStruct((256, 512), jnp.float32),
            jax.ShapeDtypeStruct((512, 64), jnp.float32),
            jax.ShapeDtypeStruct((64, 256), jnp.float32))


@remat_tui.target(args=example_args)
def loss(x, w1, w2):
    wide = jnp.tanh(x @ w1)
    narrow = jnp.sin(wide @ w2)
    return narrow.sum()
"""


async def test_a_residual_buffer_at_the_peak_opens_its_residual_row(tmp_path):
    """The memory view names a residual buffer's R# (from the analysis shown:
    the compile knows no residuals), and enter on it selects that row."""
    from test_app import SIZE, press_p_until_compiled, settle
    from textual.widgets import OptionList

    from remat_tui.app.main import RematApp
    from remat_tui.app.screens.memory import MemoryScreen
    from remat_tui.app.widgets.residual_table import ResidualTable

    path = tmp_path / "two.py"
    path.write_text(TWO_RESIDUALS)
    app = RematApp(str(path), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await press_p_until_compiled(app, pilot)
        await pilot.press("w")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, MemoryScreen)
        named = [
            (i, b)
            for i, b in enumerate(screen.memory["at_peak"])
            if b["residual"] and b["category"] == "residual"  # argument buffers name theirs too
        ]
        assert named, "no residual buffer at the peak was named"
        index, buffer = named[0]
        row = int(buffer["residual"][1:]) - 1
        r = app.loaded.shown.residuals[row]
        assert app.query_one(ResidualTable).selected != row  # else enter would prove nothing
        assert r.aval == buffer["shape"]  # the R# is a residual of that shape
        screen.query_one(OptionList).highlighted = index
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(ResidualTable).selected == row


def test_the_collection_paused_for_traces_nests_and_never_goes_below_zero():
    from remat_tui.app.controllers.analyses import PausedCollection

    paused, app = PausedCollection(), object()
    assert gc.isenabled()
    try:
        paused.resume(app)  # nothing paused: no effect on a later pause
        paused.pause(app)
        paused.pause(app)  # a second trace, in another thread
        assert not gc.isenabled()
        paused.resume(app)
        assert not gc.isenabled()  # the other trace still runs
        paused.resume(app)
        assert gc.isenabled()
        paused.pause(app)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_closing_the_app_ends_its_pauses_and_no_other_apps():
    from remat_tui.app.controllers.analyses import Analyses, collector

    closing, next_app = Analyses(app=None), Analyses(app=None)
    try:
        collector.pause(closing)  # a trace's answer posted as the app closes: never drawn
        assert not gc.isenabled()
        closing.close()
        assert gc.isenabled()
        collector.pause(next_app)  # the next app's trace
        collector.resume(closing)  # the closed app's trace that still ran ends: no effect
        assert not gc.isenabled()
        collector.resume(next_app)
        assert gc.isenabled()
    finally:
        collector.release(closing)
        collector.release(next_app)


async def test_an_analysis_evicted_from_the_app_cache_is_freed(monkeypatch):
    """Nothing but the cache holds an analysis once it is no longer shown: with
    room for two, besides the one shown and the as_written baseline, which
    are never evicted, an analysis shown two policies ago is evicted, and
    gone once memory has settled."""
    from conftest import example
    from test_app import SIZE, settle

    from remat_tui.app.controllers import analyses as analyses_module
    from remat_tui.app.main import RematApp

    monkeypatch.setattr(analyses_module, "LIMIT", 2)
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("2")
        await settle(app, pilot)
        assert app.loaded.shown.policy == "nothing_saveable"
        evicted = weakref.ref(app.loaded.shown)
        for key in ("3", "4"):
            await pilot.press(key)
            await settle(app, pilot)
        await pilot.pause()
        assert app.loaded.shown.policy == "dots_with_no_batch_dims_saveable"
        assert (
            app.wanted.with_policy(policies.parse("nothing_saveable")).key(app.loaded.reloads)
            not in app.analyses.cache
        )
        assert evicted() is None, gc.get_referrers(evicted())


def test_the_peaks_largest_category_is_mostly_only_past_half():
    """Issue 30: the status line said "mostly recomputed (30%)"."""
    from remat_tui.report.memory import peak_make_up

    def memory(**by_category):
        return {"peak_bytes": sum(by_category.values()), "by_category": by_category}

    assert peak_make_up(memory(residual=62, argument=38)) == "mostly residual (62%)"
    under_half = peak_make_up(memory(recomputed=30, argument=25, output=25, temporary=20))
    assert "mostly" not in under_half and "recomputed (30%)" in under_half
