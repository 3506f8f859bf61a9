"""The app, driven by the keys a user presses; residuals checked against JAX."""

import json
import os

import pytest
from conftest import ROOT, example, jax_saved_residuals

from remat_tui.app.codeview import CodeView
from remat_tui.app.main import RematApp
from remat_tui.app.messages import AnalysisReady
from remat_tui.core.loading import resolve_arguments

SIZE = (150, 42)


async def settle(app, pilot):
    """Wait until loading and every analysis worker are done, then redraw."""
    for _ in range(600):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if (
            app.target is not None
            and app.pending is None
            and not any(w.is_running for w in app.workers)
        ):
            return
        if app.query_one("#error").display and app.target is None:
            return
    raise AssertionError("the app never settled")


def table_avals(app):
    from remat_tui.app.residual_table import ResidualTable

    return [row[1] for row in app.query_one(ResidualTable).rows]


def assert_shows_jax_residuals(app, spec):
    t = app.target
    args, kwargs = resolve_arguments(t)
    want = jax_saved_residuals(t.fn, spec, args, kwargs, t.policies)
    assert [r.text for r in app.shown.residuals] == want
    assert table_avals(app) == [line.split(" ")[0] for line in want]
    fwd = app.query_one("#forward", CodeView)
    assert fwd.marked == set(app.shown.forward.residual_lines)
    assert fwd.lines == app.shown.forward.lines


async def test_switch_policies_by_key():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert_shows_jax_residuals(app, "as_written")
        await pilot.press("2")
        await settle(app, pilot)
        assert app.shown.policy == "nothing_saveable"
        assert_shows_jax_residuals(app, "nothing_saveable")
        bwd = app.query_one("#backward", CodeView)
        assert bwd.recompute == app.shown.backward.recompute_lines and bwd.recompute
        await pilot.press("0")  # back to a cached policy: shown at once, no worker
        assert app.shown.policy == "as_written" and app.pending is None


async def test_cycle_names_composes_the_policy():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("n", "down", "space")  # layer1: recompute -> save
        await settle(app, pilot)
        assert app.shown.policy == "save_only_these_names('layer1')"
        assert_shows_jax_residuals(app, "save_only_these_names('layer1')")
        await pilot.press("space")  # layer1: save -> offload
        await settle(app, pilot)
        spec = app.shown.policy
        assert spec.startswith(
            "save_and_offload_only_these_names(names_which_can_be_saved=[], "
            "names_which_can_be_offloaded=['layer1']"
        )
        assert_shows_jax_residuals(app, spec)
        assert any(r.memory == "host" for r in app.shown.residuals)
        snippet = str(app.query_one("#snippet").render())
        assert snippet == app.shown.python and "jax.checkpoint(loss" in snippet


async def test_change_device():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert len(app.devices) == 4
        await pilot.press("d", "down", "down", "enter")
        await settle(app, pilot)
        assert app.device == "cpu:2" and app.shown.device["id"] == 2
        assert ("loss", "as_written", "cpu:2") in app.cache


async def test_selecting_a_row_ties_panes_and_source_together():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("r", *["down"] * (len(app.shown.residuals) - 1))
        await pilot.pause()
        r = app.shown.residuals[-1]
        fwd = app.query_one("#forward", CodeView)
        assert fwd.selected == frozenset(r.forward_lines)
        top = fwd.scroll_offset.y
        assert top <= r.forward_lines[0] < top + fwd.scrollable_content_region.height
        source = app.query_one("#source", CodeView)
        assert source.selected == frozenset({r.source.line - 1})
        assert app.query_one("#backward", CodeView).selected == frozenset(r.backward_lines)


async def test_superseded_result_is_dropped():
    app = RematApp(example("notebook.py"), "f")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.shown
        stale = app.request - 1
        other = app.cache[("f", "as_written", app.device)]
        app.post_message(AnalysisReady(stale, ("f", "stale-policy", app.device), other))
        await pilot.pause()
        assert app.shown is shown  # not replaced by a stale answer
        assert ("f", "stale-policy", app.device) in app.cache  # but kept for later
        app.apply_policy("nothing_saveable")
        app.apply_policy("dots_saveable")  # supersedes the first before it finishes
        await settle(app, pilot)
        assert app.shown.policy == "dots_saveable"


async def test_bad_policy_shows_error_and_keeps_last_analysis():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.shown
        app.apply_policy("save_only_these_names(layer1)")
        await pilot.pause()
        error = app.query_one("#error")
        assert error.display and "expected a quoted name" in str(error.render())
        assert app.shown is shown and app.is_running


async def test_broken_target_file_shows_error_in_place(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('config missing')\n")
    app = RematApp(str(path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert "RuntimeError: config missing" in str(app.query_one("#error").render())
        assert app.is_running


@pytest.mark.parametrize("fmt", ["json", "html", "md", "svg"])
async def test_export(tmp_path, fmt):
    app = RematApp(example("mlp.py"))
    out = tmp_path / f"report.{fmt}"
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("e")
        await pilot.pause()
        path_input = app.screen.query_one("#path")
        path_input.value = str(tmp_path / "report.html")
        from textual.widgets import RadioSet

        radio = app.screen.query_one(RadioSet)
        index = ["html", "md", "json", "svg"].index(fmt)
        radio.query("RadioButton")[index].value = True
        await pilot.pause()
        assert path_input.value == str(out)
        await pilot.click("#export")
        await pilot.pause()
    text = out.read_text()
    if fmt == "json":
        assert [r["text"] for r in json.loads(text)["residuals"]] == [
            r.text for r in app.shown.residuals
        ]
    elif fmt == "html":
        assert text.startswith("<!DOCTYPE html>") and app.shown.residuals[-1].aval in text
    elif fmt == "md":
        assert text.startswith("# remat-tui report")
    else:
        assert text.lstrip().startswith("<svg") and "Residuals" in text


def _snapshot_app(policy):
    return RematApp("examples/mlp.py", policy=policy, show_timings=False)


async def _wait(pilot):
    await settle(pilot.app, pilot)


@pytest.mark.parametrize("policy", ["as_written", "save_only_these_names('layer1')"])
def test_snapshot_main_screen(snap_compare, monkeypatch, policy):
    monkeypatch.chdir(ROOT)
    assert os.path.exists("examples/mlp.py")
    assert snap_compare(_snapshot_app(policy), terminal_size=SIZE, run_before=_wait)
