"""Every command on every zoo model (issue 41, Wanted 2; Contract 16), run
as a user runs it, `python -m remat_tui ...`; this file: report, check, verify,
compare, diff, memory, and a deviceless TPU on a subset
(test_zoo_suggest.py and test_zoo_fit.py: the searches).

- every command exits 0 or 1 and never with a traceback; 2 only where the
  input is refused, in one line naming the cause (runs.assert_clean);
- report's residuals are JAX's (`print_saved_residuals`), its compiled
  peak JAX's compile by hand; check against report's own JSON is unchanged;
- compare lists every candidate, one JAX refuses as a row with its error.

The models and their factories: tests/zoo/__init__.py. Each failure says
the command to reproduce it (with XDG_CACHE_HOME as the tier sets it).
"""

from __future__ import annotations

import json

import pytest
from conftest import jax_saved_residuals

from zoo import MODELS
from zoo import oracle as hand
from zoo.runs import (
    answered,
    applies,
    assert_clean,
    baseline,
    cli,
    compiled_budget,
    each_model,
    report,
)

pytest.importorskip("flax")
pytest.importorskip("equinox")


@each_model()
def test_report_is_jax_residuals_and_hand_peak(model):
    applies(model, "report")
    run = report(model)
    assert_clean(run, (0,))
    with open(baseline(model)) as fh:
        got = json.load(fh)
    args = hand.example_args(model)
    want = jax_saved_residuals(model.target_fn(), "as_written", args, {})
    assert [r["text"] for r in got["residuals"]] == want, run.command
    assert got["compiled"]["peak_bytes"] == hand.hand_peak(model.target_fn(), args), run.command


@each_model()
def test_check_against_reports_json_is_unchanged(model):
    applies(model, "check")
    assert_clean(report(model), (0,))
    run = cli("check", model.spec, "--against", baseline(model))
    assert_clean(run, (0,))
    assert "unchanged" in run.stdout, run.stdout


# ---- compare, diff, memory ----------------------------------------------------------


@each_model()
def test_verify_gives_the_code_as_writtens_gradients(model):
    """verify (Contract 18) under nothing_saveable, which recomputes every
    value: the zoo's models are pure, so their gradients agree (exit 0)."""
    applies(model, "verify")
    run = cli("verify", model.spec, "--policy", "nothing_saveable", "--format", "json")
    assert_clean(run, (0,))
    gradients = answered(run)["gradients"]
    assert gradients["verdict"] in ("equal", "agree") and gradients["leaf_count"] >= 2, run.command


@each_model()
def test_compare_lists_every_candidate(model):
    """Every candidate is a row; one JAX refuses is a row carrying its error."""
    applies(model, "compare")
    run = cli("compare", model.spec, "--format", "json")
    assert_clean(run, (0,))
    rows = run.json()["rows"]
    assert any(r["error"] is None for r in rows), run.command
    assert all(r["error"] is None or r["error"].strip() for r in rows), run.command
    if model.refused:  # the candidate JAX refuses is a row, with JAX's words
        assert any(model.refused in (r["error"] or "") for r in rows), run.command


@each_model()
def test_diff(model):
    applies(model, "diff")
    run = cli("diff", model.spec, "--policy", "nothing_saveable", "--vs", "dots_saveable",
              "--format", "json")  # fmt: skip
    assert_clean(run, (0,))


@each_model()
def test_memory(model):
    applies(model, "memory")
    assert_clean(cli("memory", model.spec, "--format", "json"), (0,))


# ---- a deviceless TPU, on a few models ----------------------------------------------

TPU = "tpu:v5e:2x2"


@pytest.mark.parametrize("command", ["report", "suggest", "verify"])
@pytest.mark.parametrize("model", [m for m in MODELS if m.tpu], ids=lambda m: m.id)
def test_a_deviceless_tpu(model, command):
    from remat_tui.core.setup import devices

    if not devices.libtpu_installed():
        pytest.skip("libtpu is not installed (the tpu extra): no deviceless TPU compiles")
    if command == "report":
        run = cli("report", model.spec, "--compiled", "--device", TPU, "--format", "json")
        assert_clean(run, (0,))
    elif command == "verify":  # a topology runs nothing: one line says so, nothing claimed
        run = cli("verify", model.spec, "--device", TPU, "--format", "json")
        assert_clean(run, (2,))
        assert not run.stdout and "deviceless TPU topology" in run.first_error()
    else:
        budget = str(compiled_budget(model))
        run = cli("suggest", model.spec, "--budget", budget, "--compiled", "--device", TPU,
                  "--format", "json")  # fmt: skip
        assert_clean(run, (0, 1))
        answered(run)
