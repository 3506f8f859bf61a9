"""fit and fit --optimize on every zoo model (issue 41, Wanted 2; Contract
16), run as a user runs it: every row that fits is the configuration
compiled by hand through the model's factory at the row's batch; a model
whose args take no batch is refused in one line (exit 2).
"""

from __future__ import annotations

import pytest

from zoo import oracle as hand
from zoo.runs import (
    answered,
    applies,
    assert_clean,
    each_model,
    fit,
)

pytest.importorskip("flax")
pytest.importorskip("equinox")


@pytest.mark.parametrize("optimize", [False, True], ids=["fit", "fit_optimize"])
@each_model()
def test_fit_rows_are_hand_compiles_at_their_batch(model, optimize):
    applies(model, "fit_optimize" if optimize else "fit")
    run = fit(model, optimize)
    if not model.scales:  # its args take no batch: refused in one line
        assert_clean(run, (2,))
        assert "batch" in run.first_error(), run.first_error()
        return
    assert_clean(run, (0, 1))
    rows = [r for r in answered(run)["rows"] if r["error"] is None and r["batch"]]
    assert rows, f"no row fits: {run.command}"
    own = hand.registered(model).policies
    for row in rows:
        fn = hand.function_by_hand(model, row, own)
        peak = hand.hand_peak(fn, hand.example_args(model, row["batch"]))
        assert row["peak_bytes"] == peak, f"{row['policy']} {row['sites']} at {row['batch']}"
