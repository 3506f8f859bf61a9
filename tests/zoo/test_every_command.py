"""Every command on every zoo model (issue 41, Wanted 2; Contract 16), run
as a user runs it, `python -m remat_tui ...`:

- every command exits 0 or 1 and never with a traceback; 2 only where the
  input is refused, in one line naming the cause (runs.assert_clean);
- report's residuals are JAX's (`print_saved_residuals`), its compiled
  peak JAX's compile by hand; check against report's own JSON is unchanged;
- suggest's answer (residual bytes, and the compiled peak with
  `--compiled`) equals its configuration built by hand through the model's
  factory; fit's rows (and fit --optimize's) equal theirs compiled by hand
  at their batch;
- suggest's printed snippet runs as pasted into a copy of the model's file
  and gives the figures it was printed with.

The models and their factories: tests/zoo/__init__.py. Each failure says
the command to reproduce it (with XDG_CACHE_HOME as the tier sets it).
"""

from __future__ import annotations

import os

import pytest
from conftest import jax_saved_residuals

from zoo import MODELS, Model, NotBuildable
from zoo import oracle as hand
from zoo.runs import (
    Run,
    assert_clean,
    cli,
    compiled_budget,
    fit_budget,
    out_folder,
    residual_budget,
)

pytest.importorskip("flax")
pytest.importorskip("equinox")

MEASURES = ("residual", "compiled")


def each_model():
    return pytest.mark.parametrize("model", MODELS, ids=[m.id for m in MODELS])


def applies(model: Model, command: str) -> None:
    if command in model.skip:
        pytest.skip(f"{model.id} leaves {command} out: {model.skip[command]}")


def answered(run: Run) -> dict:
    """The JSON of a command that must have answered; else the test fails
    saying how it ended."""
    if run.returncode not in (0, 1) or not run.stdout.strip():
        pytest.fail(f"no answer: {run.command}\n  -> exit {run.returncode}: {run.first_error()}")
    return run.json()


# ---- the runs (each once per module) ------------------------------------------------


def baseline(model: Model) -> str:
    return os.path.join(out_folder(), f"{model.id}.report.json")


def report(model: Model) -> Run:
    return cli("report", model.spec, "--compiled", "--format", "json", "-o", baseline(model))


def suggest(model: Model, measure: str) -> Run:
    if measure == "compiled":
        budget = compiled_budget(model)
        return cli("suggest", model.spec, "--budget", str(budget), "--compiled", "--format", "json")
    return cli("suggest", model.spec, "--budget", str(residual_budget(model)), "--format", "json")


def fit(model: Model, optimize: bool) -> Run:
    batch = hand.example_batch(model) or 2
    m = str(model.multiple)
    if optimize:  # the exact search at the example's batch alone: suggest --compiled's work
        return cli("fit", model.spec, "--optimize", "--budget", str(compiled_budget(model)),
                   "--max-batch", str(batch), "--multiple", m, "--format", "json")  # fmt: skip
    return cli("fit", model.spec, "--budget", str(fit_budget(model) if model.scales else 2**20),
               "--max-batch", str(2 * batch), "--multiple", m,
               "--policy", "as_written", "--policy", "nothing_saveable",
               "--format", "json")  # fmt: skip


# ---- report and check ---------------------------------------------------------------


@each_model()
def test_report_is_jax_residuals_and_hand_peak(model):
    applies(model, "report")
    run = report(model)
    assert_clean(run, (0,))
    with open(baseline(model)) as fh:
        import json

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
def test_compare_lists_every_candidate(model):
    """Every candidate is a row; one JAX refuses is a row carrying its error."""
    applies(model, "compare")
    run = cli("compare", model.spec, "--format", "json")
    assert_clean(run, (0,))
    rows = run.json()["rows"]
    assert any(r["error"] is None for r in rows), run.command
    assert all(r["error"] is None or r["error"].strip() for r in rows), run.command


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


# ---- suggest ------------------------------------------------------------------------


def figure(measure: str, row: dict) -> int:
    """The figure an answer is judged by: the compiled peak, or every byte
    saved (device and host: JAX's list does not say which)."""
    if measure == "compiled":
        return row["compiled"]["peak_bytes"]
    return row["device_bytes"] + row["host_bytes"]


def by_hand(measure: str, fn, args) -> int:
    return hand.hand_peak(fn, args) if measure == "compiled" else hand.saved_bytes(fn, args)


@pytest.mark.parametrize("measure", MEASURES)
@each_model()
def test_suggest_answers(model, measure):
    applies(model, f"suggest_{measure}" if measure == "compiled" else "suggest")
    run = suggest(model, measure)
    assert_clean(run, (0, 1))
    got = answered(run)
    assert got["best"]["error"] is None, f"the answer is a failed row: {run.command}"
    if got["fits"]:
        assert figure(measure, got["best"]) <= got["budget"], run.command


@pytest.mark.parametrize("model", [m for m in MODELS if m.multiple > 1], ids=lambda m: m.id)
def test_suggest_judges_residual_bytes_per_device(model):
    """Contract 17: a byte figure is one device's. A budget of the code as
    written's residual bytes per device (JAX's list, each sharded dimension
    divided by its mesh axes) is met by the code as written."""
    args = hand.example_args(model)
    budget = hand.saved_bytes(model.target_fn(), args, per_device=True)
    run = cli("suggest", model.spec, "--budget", str(budget), "--format", "json")
    assert_clean(run, (0, 1))
    assert answered(run)["fits"], f"as written saves {budget} B per device: {run.command}"


@pytest.mark.parametrize("measure", MEASURES)
@each_model()
def test_suggest_figures_are_the_hand_built_configurations(model, measure):
    applies(model, f"suggest_{measure}" if measure == "compiled" else "suggest")
    run = suggest(model, measure)
    best = answered(run)["best"]
    own = hand.registered(model).policies
    try:
        fn = hand.function_by_hand(model, best, own)
    except NotBuildable as exc:
        pytest.fail(f"the answer cannot be built by hand: {exc}\n  {run.command}")
    assert figure(measure, best) == by_hand(measure, fn, hand.example_args(model)), (
        f"{best['policy']} {best['sites']}: {run.command}"
    )


@pytest.mark.parametrize("measure", MEASURES)
@each_model()
def test_suggest_snippet_runs_as_pasted(model, measure):
    applies(model, f"suggest_{measure}" if measure == "compiled" else "suggest")
    run = suggest(model, measure)
    best = answered(run)["best"]
    try:
        pasted = hand.paste(best["python"], model)
    except hand.NotPasteable as exc:
        if "structure" in str(exc):
            pytest.skip(f"not pasted mechanically: {exc}")
        pytest.fail(f"the snippet cannot be pasted: {exc}\n{best['python']}\n  {run.command}")
    try:
        got = by_hand(measure, pasted.function, hand.example_args(model))
    except Exception as exc:  # JAX refuses the pasted code: the finding, in its words
        said = str(exc).splitlines()[0] if str(exc) else ""
        pytest.fail(
            f"pasted, it does not run: {type(exc).__name__}: {said}\n{best['python']}\n"
            f"  {run.command}"
        )
    assert got == figure(measure, best), (
        f"pasted, it gives {got}, printed with {figure(measure, best)}:\n"
        f"{best['python']}\n  {run.command}"
    )


# ---- fit ----------------------------------------------------------------------------


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


# ---- a deviceless TPU, on a few models ----------------------------------------------

TPU = "tpu:v5e:2x2"


@pytest.mark.parametrize("command", ["report", "suggest"])
@pytest.mark.parametrize("model", [m for m in MODELS if m.tpu], ids=lambda m: m.id)
def test_a_deviceless_tpu(model, command):
    from remat_tui.core.setup import devices

    if not devices.libtpu_installed():
        pytest.skip("libtpu is not installed (the tpu extra): no deviceless TPU compiles")
    if command == "report":
        run = cli("report", model.spec, "--compiled", "--device", TPU, "--format", "json")
        assert_clean(run, (0,))
    else:
        budget = str(compiled_budget(model))
        run = cli("suggest", model.spec, "--budget", budget, "--compiled", "--device", TPU,
                  "--format", "json")  # fmt: skip
        assert_clean(run, (0, 1))
        answered(run)
