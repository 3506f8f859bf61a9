"""The app's search screen on every zoo model (issue 41, items 2 and Wanted
2): `b`, a budget, enter, and the search ends, with its answer or with its
error shown in place; it never keeps "searching" with no error.

By residual bytes on every model, and by the compiled peak (`p` on first) on
the subset the registry marks `app_compiled`. The
budget is the CLI tier's (halfway between as written and under
nothing_saveable), the wait generous: a hang is a wait that does not end.
"""

from __future__ import annotations

import pytest
from conftest import wait_for
from test_app import SIZE, press_p_until_compiled, settle

from zoo import MODELS
from zoo.runs import compiled_budget, residual_budget, store_folder

pytest.importorskip("flax")
pytest.importorskip("equinox")

HANG = 240.0  # seconds: a search on a model this small that has not ended by then is hung


def cases() -> list:
    """Every model by residual bytes; the compiled peak on a subset (each of
    its searches compiles tens of programs)."""
    return [
        pytest.param(m, measure, id=f"{m.id}-{measure}")
        for m in MODELS
        for measure in ("residual", "compiled")
        if measure == "residual" or m.app_compiled
    ]


@pytest.fixture
def shared_store(monkeypatch):
    """The CLI tier's compile store (runs.store_folder), for the app's
    compiles: a program the CLI compiled is not compiled again."""
    from remat_tui.core.xla.compile import service as compile_service

    monkeypatch.setenv("XDG_CACHE_HOME", store_folder())
    monkeypatch.setenv("REMAT_TUI_NO_CACHE", "0")
    compile_service.use_store(None)
    yield
    compile_service.use_store(None)


@pytest.mark.parametrize("model,measure", cases())
async def test_the_search_screen_answers(model, measure, shared_store):
    from remat_tui.app.main import RematApp
    from remat_tui.app.screens.suggest import (
        BudgetScreen,
        SuggestDone,
        SuggestFailed,
        SuggestScreen,
    )

    budget = compiled_budget(model) if measure == "compiled" else residual_budget(model)
    seen: list = []
    app = RematApp(model.path, model.target, show_timings=False)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(app, pilot)
        assert app.loaded.target is not None, f"{model.spec} did not load in the app"
        if measure == "compiled":  # p: the compiled peak must fit
            await press_p_until_compiled(app, pilot)
        await pilot.press("b")
        await pilot.pause()
        assert isinstance(app.screen, BudgetScreen)
        await pilot.press(*str(budget), "enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, SuggestScreen)

        def ended() -> bool:
            return any(isinstance(m, (SuggestDone, SuggestFailed)) for m in seen)

        try:
            await wait_for(pilot, ended, "the search to end", timeout=HANG)
        except AssertionError:
            status = str(screen.query_one("#suggest-status").render())
            pytest.fail(f"hung: after {HANG:g} s, no answer or error; the screen says {status!r}")
        await pilot.pause()
        screen.tick()  # the screen's clock, which runs every half second, once more
        await pilot.pause()
        status = str(screen.query_one("#suggest-status").render())
        failed = [m for m in seen if isinstance(m, SuggestFailed)]
        if failed:
            error = failed[-1].message
            assert error in status, (
                f"hung: the search ended with {error!r}, the screen says {status!r}"
            )
            pytest.fail(f"no answer; the screen shows the error: {error}")
        assert screen.suggestion is not None and screen.suggestion.budget == budget
