"""Issue 43 in the app: a call back to Python that the shown configuration
recomputes is said above the panes, as the notes on what changes nothing
are; the line is the one JAX's jaxpr gives the callback."""

import os

from conftest import ROOT
from test_app import SIZE, settle

from remat_tui.app.main import RematApp

NOISY = os.path.join(ROOT, "tests", "models", "stateful_noise.py")


def callback_line() -> int:
    with open(NOISY) as fh:
        return next(i for i, text in enumerate(fh, 1) if "jax.pure_callback(_draw" in text)


async def test_the_app_notes_a_callback_the_configuration_runs_again():
    app = RematApp(NOISY, "loss", policy="nothing_saveable")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        error = app.query_one("#error")
        said = str(error.render())
        assert error.display
        assert f"pure_callback at stateful_noise.py:{callback_line()} runs again" in said


async def test_the_compare_screen_marks_the_rows_that_run_the_callback_again():
    """↻ on compare's rows whose configuration recomputes the callback (JAX's
    gradient program runs it twice under nothing_saveable), not on the code
    as written's; the status says what ↻ means and the notes say which."""
    import jax
    from conftest import wait_for
    from textual.widgets import DataTable

    from remat_tui.app.screens.compare import CompareScreen

    app = RematApp(NOISY, "loss", show_timings=False)
    async with app.run_test(size=(200, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await wait_for(pilot, lambda: screen.done_at is not None, "the comparison", timeout=120)
        table = screen.query_one(DataTable)
        marks = {
            screen.rows[int(k.value)].config.label(): str(table.get_row(k)[0]) for k in table.rows
        }
        module = app.loaded.target.fn.__globals__
        args = module["example_args"]()
        line = callback_line()
        for policy, runs in (("nothing_saveable", 2), ("as_written", 1)):
            under = getattr(jax.checkpoint_policies, policy, None)
            grad = jax.make_jaxpr(jax.grad(module["loss_under"](under)))(*args)
            assert jax_runs(grad.jaxpr, line) == runs
        assert "↻" in marks["policy nothing_saveable; cpu:0"]
        assert "↻" not in marks["policy as_written; cpu:0"]
        assert "↻: it runs a call back to Python again" in str(
            screen.query_one("#compare-status").render()
        )


def jax_runs(jaxpr, line: int) -> int:
    """How many pure_callback equations at `line` of the model JAX's program holds."""
    from jax._src import source_info_util

    count = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pure_callback":
            said = source_info_util.summarize(eqn.source_info)
            count += f"stateful_noise.py:{line}:" in said
        for p in eqn.params.values():
            for sub in p if isinstance(p, tuple | list) else (p,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    count += jax_runs(inner, line)
    return count
