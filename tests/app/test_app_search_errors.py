"""A search, comparison, fit, diff or memory view that raises ends there: its
error said in place (its cause named, none of our traceback), the clock
stopped, one escape back to the main screen, and the app still showing what
it showed and still answering keys. The failures are injected: the core's
own bugs get fixed, and these tests must not wait for one to stay."""

import pytest
from conftest import example, wait_for
from test_app import SIZE, listed_policies, press_p_until_compiled, settle

from remat_tui.app.main import RematApp
from remat_tui.app.screens.budget import BudgetScreen
from remat_tui.app.screens.compare import CompareScreen
from remat_tui.app.screens.fit import FitScreen
from remat_tui.app.screens.suggest import SuggestScreen

INJECTED = "injected for the test"


def status(screen, widget: str) -> str:
    return str(screen.query_one(widget).render())


def raising(app, reports: bool = True):
    """A stand-in for a core search (suggest's or compare's): says one
    configuration is under way (so the clock has something to show), then
    raises."""

    def search(*args, progress=None, **kwargs):
        if reports:
            progress(0, 3, app.wanted.config)
        raise ValueError(INJECTED)

    return search


async def back_in_the_main_screen(app, pilot, shown) -> None:
    """One escape leaves; the app shows what it showed and answers keys."""
    await pilot.press("escape")
    await pilot.pause()
    assert app.screen is app.screen_stack[0], "one escape did not leave the screen"
    assert app.loaded.shown is shown
    await pilot.press("2")
    await settle(app, pilot)
    assert app.loaded.shown.policy == listed_policies(app)[2]


async def ask_suggest(app, pilot, budget: str = "1KiB") -> SuggestScreen:
    await pilot.press("b")
    await pilot.pause()
    assert isinstance(app.screen, BudgetScreen)
    await pilot.press(*budget, "enter")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, SuggestScreen)
    return screen


def said_once(text: str) -> None:
    """The cause named (type and message), and none of our traceback."""
    assert f"ValueError: {INJECTED}" in text
    assert "Traceback" not in text and "File " not in text


async def test_a_suggest_that_raises_says_why_stops_its_clock_and_escape_goes_back(monkeypatch):
    import remat_tui.core.search.suggest.pipeline as core_suggest

    app = RematApp(example("mlp.py"), show_timings=False)
    monkeypatch.setattr(core_suggest, "suggest", raising(app))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown
        screen = await ask_suggest(app, pilot)
        await wait_for(
            pilot, lambda: "failed" in status(screen, "#suggest-status"), "the failure", timeout=30
        )
        await app.workers.wait_for_complete()
        screen.tick()  # what the clock does every half second: the failure stays
        await pilot.pause()
        text = status(screen, "#suggest-status")
        assert text.startswith("suggest failed") and "searching" not in text, text
        said_once(text)
        await back_in_the_main_screen(app, pilot, shown)


async def test_words_of_the_exact_search_that_raise_fail_the_search_not_the_app(monkeypatch):
    """The narrowing's words are made where the search runs: if making them
    raises, the search fails in place (it used to raise in the App's handler)."""
    import remat_tui.core.search.suggest.pipeline as core_suggest
    import remat_tui.report.suggest as report_suggest

    def narrowing_line(*args):
        raise ValueError(INJECTED)

    def search(*args, narrowing=None, **kwargs):
        narrowing(object())  # any narrowing: its words raise
        raise AssertionError("the search went on past the failure")

    monkeypatch.setattr(report_suggest, "narrowing_line", narrowing_line)
    monkeypatch.setattr(core_suggest, "suggest", search)
    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown
        screen = await ask_suggest(app, pilot)
        await wait_for(
            pilot, lambda: "failed" in status(screen, "#suggest-status"), "the failure", timeout=30
        )
        said_once(status(screen, "#suggest-status"))
        await back_in_the_main_screen(app, pilot, shown)


async def test_suggest_on_the_seed_notebooks_f2_ends_and_escape_goes_back():
    """examples/notebook.py:f2 (jax.checkpoint called three times, no names)
    made the core's search raise: whatever the core does with it, the screen
    ends with an answer or an error in place, and escape leaves."""
    app = RematApp(example("notebook.py"), "f2", show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown
        screen = await ask_suggest(app, pilot)
        await wait_for(
            pilot,
            lambda: not status(screen, "#suggest-status").startswith("searching"),
            "the search to end",
            timeout=120,
        )
        await app.workers.wait_for_complete()
        screen.tick()  # what the clock does every half second: the end stays
        await pilot.pause()
        text = status(screen, "#suggest-status")
        assert screen.suggestion is not None or text.startswith("suggest failed"), text
        assert "Traceback" not in text
        await back_in_the_main_screen(app, pilot, shown)


async def test_a_compare_that_raises_says_why_and_escape_goes_back(monkeypatch):
    import remat_tui.core.search.compare as core_compare

    app = RematApp(example("mlp.py"), show_timings=False)
    monkeypatch.setattr(core_compare, "compare", raising(app))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await wait_for(
            pilot, lambda: "failed" in status(screen, "#compare-status"), "the failure", timeout=30
        )
        said_once(status(screen, "#compare-status"))
        await back_in_the_main_screen(app, pilot, shown)


async def test_a_fit_that_raises_says_why_and_escape_goes_back(monkeypatch):
    import remat_tui.core.search.fit.batches as core_fit

    app = RematApp(example("mlp.py"), show_timings=False)
    monkeypatch.setattr(core_fit, "fit", raising(app, reports=False))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown
        await pilot.press("f")
        screen = app.screen
        assert isinstance(screen, FitScreen)
        await pilot.press(*"1MiB", "enter")
        await wait_for(
            pilot, lambda: "failed" in status(screen, "#fit-status"), "the failure", timeout=30
        )
        said_once(status(screen, "#fit-status"))
        await back_in_the_main_screen(app, pilot, shown)


@pytest.mark.parametrize(
    ("module", "name", "keys"),
    [
        ("remat_tui.core.search.diff", "diff_analyses", ("m", "3", "v")),
        ("remat_tui.report.memory", "summary", ("w",)),
    ],
    ids=["diff", "memory"],
)
async def test_a_view_that_raises_is_said_and_the_main_screen_stays(
    monkeypatch, module, name, keys
):
    """diff (m, another policy, v) and the memory view (w, once p compiled)
    make their answer as they open: an error is said, no screen opens."""
    import importlib

    def fails(*args, **kwargs):
        raise ValueError(INJECTED)

    monkeypatch.setattr(importlib.import_module(module), name, fails)
    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        if "w" in keys:
            await press_p_until_compiled(app, pilot)
        for key in keys[:-1]:
            await pilot.press(key)
            await settle(app, pilot)
        shown = app.loaded.shown
        await pilot.press(keys[-1])
        await settle(app, pilot)
        assert app.screen is app.screen_stack[0]
        said = [n.message for n in app._notifications]
        assert any(f"ValueError: {INJECTED}" in m for m in said), said
        assert app.loaded.shown is shown  # what it showed before the key
        await pilot.press("2")  # still answering keys
        await settle(app, pilot)
        assert app.loaded.shown.policy == listed_policies(app)[2]
