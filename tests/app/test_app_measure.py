"""The app's measured mode (`x`): each step shown run on its device and timed,
beside the estimate; compare's rows run and ranked by it, with the estimate's
parts in the panel beneath; escape stops a comparison and keeps its rows."""

import pytest
from conftest import example, wait_for
from test_app import SIZE, settle
from textual.widgets import DataTable, Static

from remat_tui.app.main import RematApp
from remat_tui.app.screens.compare import CompareScreen
from remat_tui.core.setup import devices as devices_lib
from remat_tui.errors import RematError


def status(app) -> str:
    return str(app.query_one("#status").render())


async def test_x_runs_the_step_shown_and_times_it():
    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("x")
        assert app.wanted.measured and app.wanted.compiled  # p comes on with x
        key = app.scene().key_of(app.loaded.shown)
        await wait_for(pilot, lambda: key in app.compiles.measured, "the step's runs")
        await pilot.pause()
        measured = app.compiles.measured[key]
        assert measured.ok and measured.runs == 5
        text = status(app)
        assert "peak " in text and "measured " in text and "est. ~" in text
        await pilot.press("x")  # off: the compiled numbers stay, the runs go
        await pilot.pause()
        assert not app.wanted.measured and app.wanted.compiled
        assert "measured " not in status(app)


async def test_compare_with_x_on_runs_every_row_and_ranks_by_it():
    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=(200, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("x", "c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await wait_for(pilot, lambda: screen.done_at is not None, "the comparison", timeout=120)
        assert screen.rows and all(r.cost_source == "measured" for r in screen.rows)
        table = screen.query_one(DataTable)
        heads = [str(c.label) for c in table.columns.values()]
        assert "measured" in heads and "est. step" in heads
        await pilot.press("t")  # sorted by the step time: the measured one
        times = [screen.rows[int(k.value)].measured.min_seconds for k in table.rows]
        assert times == sorted(times)
        # The panel beneath: the estimate's parts and where its rates came
        # from, and what the runs measured.
        estimate = str(screen.query_one("#detail-estimate-value", Static).render())
        assert "compute" in estimate and "transcendentals" in estimate and "memory" in estimate
        rates = str(screen.query_one("#detail-rates-value", Static).render())
        assert "calibrated on this machine" in rates and "--recalibrate" in rates
        assert "median of 5 runs" in str(screen.query_one("#detail-measured-value").render())


async def test_escape_stops_a_comparison_and_keeps_its_rows():
    app = RematApp(example("transformer.py"), "scanned_checkpointed", show_timings=False)
    async with app.run_test(size=(200, 48)) as pilot:
        await settle(app, pilot)
        # Compiling each of its forty-odd rows: the comparison is still under
        # way when escape comes.
        await pilot.press("p", "c")
        screen = app.screen
        await wait_for(pilot, lambda: len(screen.rows) >= 2, "two rows")
        await pilot.press("escape")
        await wait_for(pilot, lambda: screen.done_at is not None, "the stop")
        assert app.screen is screen  # still there, with what it had
        kept = len(screen.rows)
        assert 2 <= kept and screen.query_one(DataTable).row_count == kept
        assert "stopped" in str(screen.query_one("#compare-status", Static).render())
        assert any(r.pareto for r in screen.rows)  # ★ among the rows kept
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not screen


async def test_x_on_a_topology_says_why_in_place():
    try:
        devices_lib.resolve_device("tpu:v5e:2x2")
    except RematError as exc:
        pytest.skip(f"no deviceless TPU here ({exc.message})")
    app = RematApp(example("mlp.py"), device="tpu:v5e:2x2", show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("x")
        await pilot.pause()
        assert not app.wanted.measured  # refused, the app keeps going
        error = str(app.query_one("#error").render())
        assert "cannot be measured" in error and "deviceless" in error
