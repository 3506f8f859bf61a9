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
