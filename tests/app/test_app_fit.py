"""The fit screen (h): the rows core fit gives, the shown configuration
searched first, the chart's lines, a budget the App keeps, escape stopping
the search with its rows kept, and a row opened in the main screen."""

import threading

from conftest import wait_for
from test_app import SIZE, settle
from textual.widgets import DataTable, Input

from remat_tui.app.main import RematApp
from remat_tui.app.screens.fit import FitScreen
from remat_tui.core.search.fit import batches as fit_module
from remat_tui.core.xla.compile import costs as compiled
from remat_tui.core.xla.compile import shared as programs
from remat_tui.report.fit import COLUMNS, cells

SCALES = """
import jax, jax.numpy as jnp, remat_tui

@remat_tui.target(args=lambda batch=4: ([jax.ShapeDtypeStruct((16, 16), jnp.float32)] * 2,
                                        jax.ShapeDtypeStruct((batch, 16), jnp.float32)))
def f(ws, x):
    for w in ws:
        x = jnp.tanh(x @ w)
    return jnp.mean(x ** 2)
"""


# A bound on one search of the tiny model here, on a loaded machine.
SEARCH_SECONDS = 120


async def open_fit(app, pilot, budget: str) -> FitScreen:
    await settle(app, pilot)
    await pilot.press("f")
    screen = app.screen
    assert isinstance(screen, FitScreen)
    assert screen.query_one(Input).has_focus  # no budget typed yet: it asks for one
    await pilot.press(*budget, "enter")
    return screen


async def test_fit_screen_rows_chart_and_open(write_target):
    app = RematApp(write_target(SCALES), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("2")  # nothing_saveable shown: it is searched first
        await settle(app, pilot)
        shown = app.loaded.shown.config
        screen = await open_fit(app, pilot, "64KiB")
        assert app.opening.last_budget == "64KiB"  # the App keeps it for the next search
        await wait_for(
            pilot, lambda: screen.result is not None, "the search's end", timeout=SEARCH_SECONDS
        )
        result = screen.result
        assert not result.cancelled and result.rows[0].best
        assert min(result.rows, key=lambda r: r.config != shown).config == shown
        table = screen.query_one(DataTable)
        heads = [str(c.label) for c in table.columns.values()]
        assert heads[:2] == ["", "configuration"]  # the configuration names the row
        assert [table.get_row_at(i) for i in range(table.row_count)] == [
            [dict(zip(COLUMNS, cells(r), strict=True))[h] for h in heads] for r in result.rows
        ]
        assert screen.chart_lines and len(screen.chart_lines) <= len(result.rows)
        table.focus()
        await pilot.press("down", "enter")  # the second row, in the main screen
        await settle(app, pilot)
        assert not isinstance(app.screen, FitScreen)
        assert app.loaded.shown.config == result.rows[1].config


async def test_escape_stops_the_search_and_keeps_its_rows(write_target, monkeypatch):
    # The search holds after its first row until escape is pressed: on a fast
    # machine it could otherwise end before the key arrives.
    escaped = threading.Event()
    real_fit = fit_module.fit

    def held_fit(*args, on_row, **kwargs):
        def row_then_hold(row):
            on_row(row)
            escaped.wait(timeout=SEARCH_SECONDS)

        return real_fit(*args, on_row=row_then_hold, **kwargs)

    monkeypatch.setattr(fit_module, "fit", held_fit)
    compiled.clear_cache()
    programs.clear()
    app = RematApp(write_target(SCALES), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_fit(app, pilot, "64KiB")
        await wait_for(pilot, lambda: len(screen.rows) >= 1, "a first row", timeout=SEARCH_SECONDS)
        await pilot.press("escape")
        escaped.set()
        assert isinstance(app.screen, FitScreen)  # the first escape stops, the screen stays
        await wait_for(
            pilot,
            lambda: screen.result is not None,
            "the stopped search's answer",
            timeout=SEARCH_SECONDS,
        )
        assert screen.result.cancelled
        assert 1 <= len(screen.result.rows) < 6  # fewer than the six policies searched
        assert [r.complete for r in screen.result.rows].count(False) <= 1
        assert screen.query_one(DataTable).row_count == len(screen.result.rows)
        await pilot.press("escape")
        assert not isinstance(app.screen, FitScreen)


async def test_a_target_that_does_not_scale_says_so_in_place(write_target):
    fixed = SCALES.replace("lambda batch=4:", "lambda:").replace("(batch, 16)", "(4, 16)")
    app = RematApp(write_target(fixed), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_fit(app, pilot, "64KiB")
        status = screen.query_one("#fit-status")
        await wait_for(
            pilot, lambda: "fit failed" in str(status.render()), "the error", timeout=SEARCH_SECONDS
        )
        assert "lambda batch=32" in str(status.render())
        assert app.loaded.shown is not None  # the app keeps its last good state


async def test_h_after_a_suggest_asks_with_the_last_budget_as_its_default(write_target):
    """Issue 30: `f`, 700MiB, escape, then `h` started a search at 700 MiB at
    once, and the budget typed next went nowhere. `h` asks: the last budget
    is the default (enter takes it), and keys typed straight after `h`, as
    fast as a terminal sends them, replace it."""
    from test_app import type_ahead

    from remat_tui.app.screens.suggest import SuggestScreen

    app = RematApp(write_target(SCALES), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("b", *"700MiB", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SuggestScreen), "the suggest screen")
        await pilot.press("escape", "f")
        asked = app.screen
        assert isinstance(asked, FitScreen)
        field = asked.query_one(Input)
        assert field.has_focus and field.value == "700MiB"  # asked, the last budget offered
        assert asked.request == 0 and not asked.running  # nothing searched yet
        await pilot.press("escape")
        type_ahead(app, ["f", *"64KiB", "enter"])
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, FitScreen) and app.screen.result is not None,
            "the search under the budget typed",
            timeout=SEARCH_SECONDS,
        )
        assert app.screen.result.budget == 64 * 2**10  # what was typed, not 700MiB
        assert app.opening.last_budget == "64KiB"
        await pilot.press("escape", "f", "enter")  # enter alone takes the default
        again = app.screen
        assert isinstance(again, FitScreen)
        await wait_for(pilot, lambda: again.request == 1, "the search under the default")
        assert again.budget_text == "64KiB"
