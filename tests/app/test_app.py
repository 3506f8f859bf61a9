"""The app, driven by the keys a user presses; residuals checked against JAX."""

import json
import os

import pytest
from conftest import ROOT, example, jax_saved_residuals, local_devices_only, wait_for

from remat_tui.app.main import RematApp
from remat_tui.app.messages import AnalysisReady
from remat_tui.app.widgets.codeview import CodeView
from remat_tui.core.setup import policies
from remat_tui.core.setup.devices import available_devices
from remat_tui.core.setup.loading import resolve_arguments

SIZE = (150, 42)


def list_ids(app, list_id: str) -> list[str]:
    options = app.query_one(f"#{list_id}")
    return [options.get_option_at_index(i).id for i in range(options.option_count)]


def listed_policies(app) -> list[str]:
    """The Policies list as the sidebar shows it (a composed policy applied
    that is not listed comes last)."""
    return list_ids(app, "policies")


def marked_device(app) -> str | None:
    """The device the Device list marks (●) as the one analysed."""
    options = app.query_one("#devices")
    marked = (options.get_option_at_index(i) for i in range(options.option_count))
    return next((o.id for o in marked if str(o.prompt).startswith("●")), None)


def name_marks(app) -> dict[str, str]:
    """The Names list's marks: R recompute, S save, O offload (· not by name)."""
    options = app.query_one("#names")
    shown = (options.get_option_at_index(i) for i in range(options.option_count))
    return {o.id: str(o.prompt)[0] for o in shown}


async def settle(app, pilot):
    """Wait until loading and every analysis worker are done, then redraw."""
    for _ in range(600):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if (
            app.loaded.target is not None
            and app.analyses.pending is None
            and not any(w.is_running for w in app.workers)
        ):
            return
        if app.query_one("#error").display and app.loaded.target is None:
            return
    raise AssertionError("the app never settled")


async def press_p_until_compiled(app, pilot):
    """`p`, then wait until a compile (or its failure) has come back."""
    await pilot.press("p")
    await wait_for(
        pilot, lambda: app.compiles.known or app.compiles.compiling is None, "the compile"
    )


async def steady_frame(pilot, tries: int = 100):
    """Wait until two frames 0.1 s apart are the same: whatever redraws a
    screen queued are drawn, however loaded the machine (snapshots wait so)."""
    await pilot.wait_for_scheduled_animations()
    frames = []

    def steady() -> bool:  # the first call only takes the first frame
        frames.append(pilot.app.export_screenshot())
        return len(frames) > 1 and frames[-1] == frames[-2]

    await wait_for(pilot, steady, "the screen to stop redrawing", timeout=tries * 0.1, every=0.1)


def type_ahead(app, keys) -> None:
    """Send `keys` to the app at once, as a terminal does for a fast typist.
    Pilot's press lets the app go idle after each key, which hides a key
    lost while a screen opens."""
    from textual import events

    for key in keys:
        app.post_message(events.Key(key, "\r" if key == "enter" else key))


def table_avals(app):
    from remat_tui.app.widgets.residual_table import ResidualTable

    return [row[1] for row in app.query_one(ResidualTable).rows]


def assert_shows_jax_residuals(app, spec):
    t = app.loaded.target
    args, kwargs = resolve_arguments(t)
    want = jax_saved_residuals(t.fn, spec, args, kwargs, t.policies)
    assert [r.text for r in app.loaded.shown.residuals] == want
    assert table_avals(app) == [line.split(" ")[0] for line in want]
    fwd = app.query_one("#forward", CodeView)
    assert fwd.marked == set(app.loaded.shown.forward.residual_lines)
    assert fwd.lines == app.loaded.shown.forward.lines


async def test_switch_policies_by_key():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert_shows_jax_residuals(app, "as_written")
        await pilot.press("2")
        await settle(app, pilot)
        assert app.loaded.shown.policy == "nothing_saveable"
        assert_shows_jax_residuals(app, "nothing_saveable")
        bwd = app.query_one("#backward", CodeView)
        assert bwd.recompute == app.loaded.shown.backward.recompute_lines and bwd.recompute
        await pilot.press("0")  # back to a cached policy: shown at once, no worker
        assert app.loaded.shown.policy == "as_written" and app.analyses.pending is None


async def test_cycle_names_composes_the_policy():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("n", "down", "space")  # layer1: recompute -> save
        await settle(app, pilot)
        assert app.loaded.shown.policy == "save_only_these_names('layer1')"
        assert_shows_jax_residuals(app, "save_only_these_names('layer1')")
        await pilot.press("space")  # layer1: save -> offload
        await settle(app, pilot)
        spec = app.loaded.shown.policy
        assert spec.startswith(
            "save_and_offload_only_these_names(names_which_can_be_saved=[], "
            "names_which_can_be_offloaded=['layer1']"
        )
        assert_shows_jax_residuals(app, spec)
        assert any(r.memory == "host" for r in app.loaded.shown.residuals)
        snippet = str(app.query_one("#snippet").render())
        assert snippet == app.loaded.shown.python and "jax.checkpoint(loss" in snippet


async def test_change_device():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        # the four forced CPU devices first, then any TPU topologies libtpu offers
        assert list_ids(app, "devices") == available_devices()
        assert list_ids(app, "devices")[:4] == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
        await pilot.press("d", "down", "down", "enter")
        await settle(app, pilot)
        assert marked_device(app) == "cpu:2" and app.loaded.shown.device["id"] == 2
        assert (
            app.wanted.with_policy(policies.parse("as_written")).key(app.loaded.reloads)
            in app.analyses.cache
            and app.wanted.with_policy(policies.parse("as_written"))
            .key(app.loaded.reloads)[1]
            .device
            == "cpu:2"
        )


async def test_selecting_a_row_ties_panes_and_source_together():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("r", *["down"] * (len(app.loaded.shown.residuals) - 1))
        await pilot.pause()
        r = app.loaded.shown.residuals[-1]
        fwd = app.query_one("#forward", CodeView)
        assert fwd.selected == frozenset(r.forward_lines)
        top = fwd.scroll_offset.y
        assert top <= r.forward_lines[0] < top + fwd.scrollable_content_region.height
        source = app.query_one("#source", CodeView)
        assert source.selected == frozenset({r.source.line - 1})
        assert app.query_one("#backward", CodeView).selected == frozenset(r.backward_lines)


async def test_superseded_result_is_dropped(monkeypatch):
    import threading

    from remat_tui.core.trace import analysis

    real_analyze = analysis.analyze
    release, held = threading.Event(), threading.Event()

    def analyze(target, config, **kwargs):
        result = real_analyze(target, config=config, **kwargs)
        if config.policy == "nothing_saveable":
            held.set()
            release.wait(30)  # finishes only after the newer request has been shown
        return result

    monkeypatch.setattr(analysis, "analyze", analyze)
    app = RematApp(example("notebook.py"), "f")
    seen = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(app, pilot)
        app.asking.policy("nothing_saveable")  # slow: held back until released
        await wait_for(pilot, held.is_set, "the first trace to be held")
        app.asking.policy("dots_saveable")  # the newer request answers first
        await wait_for(
            pilot, lambda: app.loaded.shown.policy == "dots_saveable", "the newer answer"
        )
        release.set()
        await settle(app, pilot)
        late = [
            m
            for m in seen
            if isinstance(m, AnalysisReady) and m.key[1].policy == "nothing_saveable"
        ]
        assert late and late[0].request < app.analyses.request  # the stale answer did arrive...
        assert app.loaded.shown.policy == "dots_saveable"  # ...and was not shown
        assert (
            app.wanted.with_policy(policies.parse("nothing_saveable")).key(app.loaded.reloads)
            in app.analyses.cache
        )  # but kept for later
        await pilot.press("2")  # nothing_saveable again: instant, from the cache
        assert app.loaded.shown.policy == "nothing_saveable" and app.analyses.pending is None


async def test_bad_policy_shows_error_and_keeps_last_analysis():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown
        app.asking.policy("save_only_these_names(layer1)")
        await pilot.pause()
        error = app.query_one("#error")
        assert error.display and "expected a quoted name" in str(error.render())
        assert app.loaded.shown is shown and app.is_running


async def test_broken_target_file_shows_error_in_place(tmp_path):
    path = tmp_path / "broken.py"
    # Square brackets in a message must show as written, not be taken for markup.
    path.write_text("raise RuntimeError('config [/model] missing W[idx]')\n")
    app = RematApp(str(path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = str(app.query_one("#error").render())
        assert "RuntimeError: config [/model] missing W[idx]" in shown
        assert app.is_running and app.loaded.load_error


# A target declaring a policy that raises while JAX traces (key 6: after the six built-ins).
EXPLODING_POLICY = (
    "import jax.numpy as jnp, remat_tui\n"
    "def bad_policy(prim, *args, **params):\n"
    "    raise ValueError('policy exploded')\n"
    "@remat_tui.target(args=lambda: (jnp.ones(3),), policies={'bad': bad_policy})\n"
    "def f(x):\n    return jnp.sin(jnp.sin(x))\n"
)


async def test_failed_trace_keeps_the_sidebar_on_what_is_shown(write_target):
    path = write_target(EXPLODING_POLICY)
    app = RematApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("6")  # the declared policy, after the six built-ins
        await settle(app, pilot)
        assert "policy exploded" in str(app.query_one("#error").render())
        assert app.loaded.shown.policy == "as_written" and app.wanted.spec.canonical == "as_written"


async def test_garbage_collection_is_paused_for_a_trace_and_always_resumed(
    write_target, monkeypatch
):
    """Paused while the trace runs (app/controllers/analyses.py says why), and on again
    once its answer is drawn, after a trace that failed, and after traces a
    burst of keys cancelled: a pause left behind would leak for good."""
    import gc

    from remat_tui.core.trace import analysis

    real_analyze = analysis.analyze
    enabled_while_tracing = []

    def analyze(target, config, **kwargs):
        enabled_while_tracing.append(gc.isenabled())
        return real_analyze(target, config=config, **kwargs)

    monkeypatch.setattr(analysis, "analyze", analyze)

    async def resumed(pilot) -> bool:
        """Collection back on within a second (it resumes once the answer's
        frame is drawn, which may come just after the app settles)."""
        await wait_for(pilot, gc.isenabled, "collection to resume", timeout=1, every=0.01)
        return True

    path = write_target(EXPLODING_POLICY)
    app = RematApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("2")  # traced and shown
        await settle(app, pilot)
        assert app.loaded.shown.policy == "nothing_saveable" and await resumed(pilot)
        await pilot.press("6")  # the declared policy fails to trace
        await settle(app, pilot)
        assert "policy exploded" in str(app.query_one("#error").render()) and await resumed(pilot)
        await pilot.press("3", "4", "5", "3")  # a burst: the traces on the way are cancelled
        await settle(app, pilot)
        assert app.loaded.shown.policy == "dots_saveable" and await resumed(pilot)
    assert enabled_while_tracing and not any(enabled_while_tracing)
    assert gc.isenabled()


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
            r.text for r in app.loaded.shown.residuals
        ]
    elif fmt == "html":
        assert text.startswith("<!DOCTYPE html>") and app.loaded.shown.residuals[-1].aval in text
    elif fmt == "md":
        assert text.startswith("# remat-tui report")
    else:
        assert text.lstrip().startswith("<svg") and "Residuals" in text


def _snapshot_app(policy):
    return RematApp("examples/mlp.py", policy=policy, show_timings=False)


async def settled_frame(pilot):
    """For a snapshot: every worker done, then a frame that stays."""
    await settle(pilot.app, pilot)
    await steady_frame(pilot)


@pytest.mark.parametrize("policy", ["as_written", "save_only_these_names('layer1')"])
def test_snapshot_main_screen(snap_compare, monkeypatch, policy):
    monkeypatch.chdir(ROOT)
    local_devices_only(monkeypatch)
    assert os.path.exists("examples/mlp.py")
    assert snap_compare(_snapshot_app(policy), terminal_size=SIZE, run_before=settled_frame)


async def test_space_outside_the_names_list_does_not_start_a_trace():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        requests = app.analyses.request
        await pilot.press("r", "space")  # residual table focused: space only moves to names
        await pilot.pause()
        assert app.analyses.request == requests and app.focused.id == "names"


async def test_policy_warnings_stay_on_screen():
    app = RematApp(example("mlp.py"), policy="save_only_these_names('layer1', 'nope')")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        notice = app.query_one("#error")
        assert notice.display and notice.has_class("-warning")
        assert "no checkpoint_name 'nope'" in str(notice.render())
        await pilot.press("0")  # a policy without warnings clears it
        await settle(app, pilot)
        assert not notice.display


async def test_palette_explains_a_malformed_spec():
    from remat_tui.app.commands import RematCommands

    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        provider = RematCommands(app.screen)
        hits = [hit async for hit in provider.search("save_only_these_names(layer0)")]
        assert any("Not a policy" in str(h.match_display) for h in hits)
        hits = [hit async for hit in provider.search("save_only_these_names('layer0')")]
        assert any(
            "Apply policy save_only_these_names('layer0')" in str(h.match_display) for h in hits
        )


async def test_the_residual_title_keeps_device_and_host_bytes_apart():
    from remat_tui.app.widgets.residual_table import ResidualTable
    from remat_tui.core.units import human_bytes

    offload = (
        "save_and_offload_only_these_names(names_which_can_be_saved=['layer0'], "
        "names_which_can_be_offloaded=['layer2'])"
    )
    app = RematApp(example("mlp.py"), policy=offload)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        totals = app.loaded.shown.totals
        assert totals.host_bytes and totals.device_bytes
        title = str(app.query_one(ResidualTable).border_title)
        assert f"· {human_bytes(totals.device_bytes)} device" in title
        assert f"· {human_bytes(totals.host_bytes)} host" in title
        assert human_bytes(totals.bytes) not in title  # never their sum
