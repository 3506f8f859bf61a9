"""A structure row in the app (issue 32 item 2): the compare screen lists it,
its panel shows the call to write, and enter opens it in the main screen,
whose title names the structure and whose residuals are JAX's for the same
nesting written by hand."""

from conftest import ROOT, wait_for
from test_app import settle
from test_app_compare import open_compare
from test_structures import WHERE, by_hand_nested, jax_residuals
from textual.widgets import DataTable, Static

from remat_tui.app.main import RematApp

STACK = f"{ROOT}/tests/models/scan_stack.py"


async def test_a_structure_row_opens_in_the_main_screen():
    app = RematApp(STACK, "stack", show_timings=False)
    async with app.run_test(size=(160, 44)) as pilot:
        screen = await open_compare(app, pilot)
        table = screen.query_one(DataTable)
        order = [screen.rows[int(k.value)] for k in table.rows]
        at = next(i for i, r in enumerate(order) if str(r.config.structure) == "nested(4)")
        table.move_cursor(row=at)
        paste = screen.query_one("#detail-paste-value", Static)
        await wait_for(pilot, lambda: "nested_scan(step, init, xs, groups=4)" in str(
            paste.render()), "the row's call in the panel")  # fmt: skip
        assert "def nested_scan" not in str(paste.render())  # the helper: in the report
        await pilot.press("enter")
        await settle(app, pilot)
        assert str(app.loaded.shown.config.structure) == "nested(4)"
        assert "structure nested(4)" in str(app.screen.query_one("#title", Static).render())
        args = app.loaded.target.args()
        shown = [WHERE.sub("", r.text) for r in app.loaded.shown.residuals]
        assert shown == jax_residuals(by_hand_nested(4), args)
