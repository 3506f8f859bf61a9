"""The app as a new user meets it and as a daily user lives with it (issue 8):
loading states, line marks, policies, export, layout, target picking, hot reload."""

from conftest import example, local_devices_only, wait_for
from test_app import SIZE, listed_policies, settle, settled_frame

from remat_tui.app.main import RematApp
from remat_tui.app.widgets.codeview import CodeView


def row_backgrounds(view: CodeView, line: int) -> set:
    """The background colours of every cell of `line` as the pane draws it."""
    view.scroll_to(y=line, animate=False, immediate=True)
    strip = view.render_line(line - view.scroll_offset.y)
    return {seg.style.bgcolor for seg in strip if seg.text}


async def test_line_marks_cover_the_whole_row_code_included():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        fwd = app.query_one("#forward", CodeView)
        await pilot.pause()
        selected = min(fwd.selected)
        marked = min(fwd.marked - fwd.selected)
        plain = next(i for i in range(len(fwd.lines)) if i not in fwd.marked | fwd.selected)
        fwd.render_lines(fwd.region)  # the frame's styles
        styles = fwd.frame_styles
        base = styles["base"]
        for line, component in ((selected, "codeview--selected"), (marked, "codeview--marked")):
            want = (base + styles[component]).bgcolor
            assert row_backgrounds(fwd, line) == {want}, (line, component)
        assert row_backgrounds(fwd, plain) == {base.bgcolor}


async def test_a_failed_first_trace_leaves_no_loading_state(write_target):
    path = write_target(
        "import jax.numpy as jnp, remat_tui\n"
        "@remat_tui.target(args=lambda: (jnp.ones(3),))\n"
        "def f(x):\n    return jnp.sin(undefined_name * x)\n"
    )
    app = RematApp(path)
    async with app.run_test(size=SIZE) as pilot:
        for key in ("", "2"):  # the first trace, then another policy: both fail
            if key:
                await pilot.press(key)
            await settle(app, pilot)
            app.showing.tick()
            error = str(app.query_one("#error").render())
            title = str(app.query_one("#title").render())
            status = str(app.query_one("#status").render())
            assert "NameError" in error and "undefined_name" in error
            assert "loading" not in title and "f" in title
            assert "Nothing analysed" in status and "tracing" not in status, status
        assert "nothing_saveable" in str(app.query_one("#title").render())


async def test_status_says_what_it_is_doing_stage_by_stage(write_target):
    from remat_tui.app.messages import Progress

    path = write_target(
        "import jax.numpy as jnp, remat_tui\n"
        "@remat_tui.target(args=lambda: (jnp.ones(3),))\n"
        "def f(x):\n    return jnp.sin(x)\n"
    )
    seen = []
    app = RematApp(path)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(app, pilot)
        stages = [m.what for m in seen if isinstance(m, Progress)]
        assert stages[:3] == ["importing JAX", f"importing {path}", "building example arguments"]
        assert stages[-1].startswith("tracing policy as_written")
        assert app.activity.what is None  # idle: the status line shows the summary
        assert "traced in" in str(app.query_one("#status").render())


RELOAD_TARGET = """import jax.numpy as jnp, remat_tui
from layers import layer

@remat_tui.target(args=lambda: (jnp.ones((4, 4)), jnp.ones(4)))
def f(W, x):
    for _ in range(LAYERS):
        x = layer(W, x)
    return jnp.sum(x)

LAYERS = 3
"""


async def wait_until(pilot, condition, what: str, settled: bool = True):
    """A bounded wait for something a file-watch event sets off (no fixed sleeps),
    then (`settled`) for the workers it started."""
    await wait_for(pilot, condition, what, timeout=30)
    if settled:
        await settle(pilot.app, pilot)


async def test_hot_reload_follows_saves_of_the_target_and_its_modules(tmp_path):
    from remat_tui.app.widgets.residual_table import ResidualTable

    (tmp_path / "layers.py").write_text(
        "import jax.numpy as jnp\ndef layer(W, x):\n    return jnp.sin(W @ x)\n"
    )
    target = tmp_path / "model.py"
    target.write_text(RELOAD_TARGET)
    app = RematApp(str(target), policy="dots_saveable")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert str(tmp_path / "layers.py") in app.reloader.watched
        before = app.loaded.shown
        await pilot.press("r", "down", "down")
        fwd = app.query_one("#forward", CodeView)
        fwd.scroll_to(y=2, animate=False, immediate=True)
        selected = before.residuals[2]

        target.write_text(RELOAD_TARGET.replace("LAYERS = 3", "LAYERS = 5"))
        await wait_until(pilot, lambda: app.loaded.shown is not before, "the reloaded analysis")
        after = app.loaded.shown
        assert after.policy == "dots_saveable" and app.loaded.reloads == 1  # same request
        assert len(after.residuals) > len(before.residuals)
        table = app.query_one(ResidualTable)
        assert after.residuals[table.cursor].aval == selected.aval  # selection kept
        assert fwd.scroll_offset.y == 2  # scroll kept

        # A local module's save reloads too, with the module's new code.
        (tmp_path / "layers.py").write_text(
            "import jax.numpy as jnp\ndef layer(W, x):\n    return jnp.tanh(W @ x)\n"
        )
        await wait_until(pilot, lambda: app.loaded.shown is not after, "the module's reload")
        assert (
            "tanh" in app.loaded.shown.forward.text and "sin" not in app.loaded.shown.forward.text
        )

        # A broken save: the error in place, the last good analysis kept...
        good = app.loaded.shown
        target.write_text(RELOAD_TARGET + "def broken(:\n")
        error = app.query_one("#error")
        await wait_until(pilot, lambda: error.display, "the error")
        assert "syntax error" in str(error.render()) and app.loaded.shown is good
        # ...until the next good save.
        target.write_text(RELOAD_TARGET.replace("LAYERS = 3", "LAYERS = 2"))
        await wait_until(pilot, lambda: app.loaded.shown is not good, "the fixed file")
        assert not error.display and len(app.loaded.shown.residuals) < len(before.residuals)


async def test_a_save_under_an_open_screen_says_that_screen_is_of_the_old_code(tmp_path):
    from remat_tui.app.screens.compare import CompareScreen

    (tmp_path / "layers.py").write_text(
        "import jax.numpy as jnp\ndef layer(W, x):\n    return jnp.sin(W @ x)\n"
    )
    target = tmp_path / "model.py"
    target.write_text(RELOAD_TARGET)
    app = RematApp(str(target))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        target.write_text(RELOAD_TARGET.replace("LAYERS = 3", "LAYERS = 5"))
        await wait_until(pilot, lambda: app.loaded.reloads == 1, "the reload", settled=False)
        said = [n.message for n in app._notifications]
        assert any("shows the code before the save" in m for m in said), said
        assert isinstance(app.screen, CompareScreen)  # nothing closed under the user
        await settle(app, pilot)


async def test_a_save_supersedes_a_reload_in_progress(tmp_path, monkeypatch):
    import threading

    from remat_tui.app.controllers import reload
    from remat_tui.app.messages import AnalysisReady

    target = tmp_path / "model.py"
    source = RELOAD_TARGET.replace("from layers import layer", "layer = lambda W, x: W @ x")
    target.write_text(source)
    real_import, release, calls = reload.import_targets, threading.Event(), []

    def held_import(path):  # the first reload reads the file, then is held back
        result = real_import(path)
        calls.append(path)
        if len(calls) == 1:
            release.wait(30)
        return result

    def layers(a):
        return a.forward.text.count("dot_general")

    seen = []
    app = RematApp(str(target))
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(app, pilot)
        monkeypatch.setattr(reload, "import_targets", held_import)
        target.write_text(source.replace("LAYERS = 3", "LAYERS = 5"))
        await wait_until(pilot, lambda: calls, "the first reload", settled=False)
        target.write_text(source.replace("LAYERS = 3", "LAYERS = 6"))
        await wait_until(pilot, lambda: app.reloader.generation >= 2, "the save", settled=False)
        release.set()
        await wait_until(pilot, lambda: layers(app.loaded.shown) == 6, "the newer save's analysis")
        shown = [layers(m.analysis) for m in seen if isinstance(m, AnalysisReady)]
        assert 5 not in shown and app.loaded.reloads == 1  # the held reload was dropped


async def test_a_number_past_the_policies_says_so():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        requests = app.analyses.request
        await pilot.press("9")
        await pilot.pause()
        assert app.analyses.request == requests
        notes = [n.message for n in app._notifications]
        assert any("no policy 9" in n and "0-5" in n for n in notes), notes


def policies_list(app):
    from textual.widgets import OptionList

    options = app.query_one("#policies", OptionList)
    ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
    return ids, ids[options.highlighted]


async def test_palette_spec_joins_the_policies_list_and_is_highlighted():
    from remat_tui.app.commands import RematCommands

    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        provider = RematCommands(app.screen)
        spec = "save_only_these_names('layer0')"
        hits = [h async for h in provider.search(spec)]
        next(h for h in hits if "Apply policy" in str(h.match_display)).command()
        await settle(app, pilot)
        ids, highlighted = policies_list(app)
        assert app.loaded.shown.policy == spec and ids[-1] == spec and highlighted == spec
        await pilot.press("0")
        await settle(app, pilot)
        assert policies_list(app)[1] == "as_written"
        await pilot.press(str(len(ids) - 1))  # the typed spec has a number key now
        await settle(app, pilot)
        assert app.loaded.shown.policy == spec
        # A policy composed from names is listed (last, no key) while it is applied.
        await pilot.press("n", "down", "space")
        await settle(app, pilot)
        ids, highlighted = policies_list(app)
        assert highlighted == app.loaded.shown.policy == ids[-1] not in app.loaded.listed
        assert app.loaded.shown.policy == "save_only_these_names('layer0', 'layer1')"


async def test_palette_completes_a_partial_spec_and_suggests_for_a_typo():
    from remat_tui.app.commands import RematCommands

    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        provider = RematCommands(app.screen)
        shown = [str(h.match_display) async for h in provider.search("save_on")]
        assert "Apply policy save_only_these_names('layer0')" in shown
        assert "Apply policy save_only_these_names('layer0', 'layer1', 'layer2')" in shown
        hits = [h async for h in provider.search("dots_savable")]
        meant = next(h for h in hits if "Did you mean" in str(h.match_display))
        assert str(meant.match_display) == "Did you mean dots_saveable?"
        meant.command()
        await settle(app, pilot)
        assert app.loaded.shown.policy == "dots_saveable"
        # A typo applied directly (e.g. from --policy) says it in the error too.
        app.asking.policy("save_only_these_name('layer1')")
        await pilot.pause()
        error = str(app.query_one("#error").render())
        assert "Did you mean save_only_these_names('layer1')?" in error


async def test_export_format_follows_the_file_name_and_a_failed_write_keeps_the_path(tmp_path):
    from textual.widgets import Input, RadioSet

    from remat_tui.app.screens import ExportScreen

    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("e")
        await pilot.pause()
        assert app.screen.query_one(RadioSet).pressed_button.name == "html"
        path_input = app.screen.query_one("#path", Input)
        path_input.value = str(tmp_path / "x.md")  # html is pressed; the name says md
        await pilot.press("enter")
        await pilot.pause()
        assert (tmp_path / "x.md").read_text().startswith("# remat-tui report")

        await pilot.press("e")
        await pilot.pause()
        app.screen.query_one("#path", Input).value = str(tmp_path / "x.txt")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)  # refused, in place
        assert ".txt is none of" in str(app.screen.query_one("#export-error").render())

        missing = str(tmp_path / "no such folder" / "x.json")
        app.screen.query_one("#path", Input).value = missing
        await pilot.press("enter")  # (a toast may cover the button)
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)  # the write failed: the dialog is back
        assert app.screen.query_one("#path", Input).value == missing
        assert "export failed" in str(app.screen.query_one("#export-error").render())


async def test_narrow_terminals_keep_readable_panes():
    from textual.widgets import OptionList

    app = RematApp(example("mlp.py"))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        assert app.query_one("#source").display and app.query_one("#sidebar").display
        policies = app.query_one("#policies", OptionList)
        # One line per policy: a long name ends in an ellipsis, never wraps mid-word.
        assert policies.virtual_size.height == policies.option_count
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        sidebar = app.query_one("#sidebar")
        assert not sidebar.display  # hidden, so the jaxpr panes keep their width
        assert app.query_one("#forward").size.width >= 35
        await pilot.press("l")
        await pilot.pause()
        assert sidebar.display
        await pilot.press("l", "n")  # hidden again; n shows it to focus the names
        await pilot.pause()
        assert sidebar.display and app.focused.id == "names"


async def test_pane_titles_say_why_a_pane_is_scrolled():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        bwd = app.query_one("#backward", CodeView)
        title = str(bwd.border_title)
        assert title.startswith("backward · R1 read at line ")
        line = int(title.rsplit(" ", 1)[1]) - 1
        top = bwd.scroll_offset.y
        assert top > 0 and top <= line < top + bwd.scrollable_content_region.height


def test_help_wraps_descriptions_in_their_own_column():
    from rich.console import Console

    from remat_tui.app.screens.help import key_table

    console = Console(width=60, record=True)
    console.print(key_table())
    lines = console.export_text().splitlines()
    start = lines[0].index("policy")  # where descriptions begin
    wrapped = [line for line in lines if line[:start].strip() == "" and line.strip()]
    assert wrapped and all(line[start - 1] == " " and line[start] != " " for line in wrapped)


async def test_another_target_of_the_file_is_one_key_away():
    from remat_tui.app.commands import RematCommands
    from remat_tui.app.screens import PickScreen

    app = RematApp(example("notebook.py"), "f")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, PickScreen)
        await pilot.press("down", "enter")  # f2
        await settle(app, pilot)
        assert app.loaded.target.name == app.loaded.shown.target_name == "f2"
        assert "notebook.py:f2" in str(app.query_one("#title").render())
        provider = RematCommands(app.screen)
        hits = [h async for h in provider.search("open target f4")]
        next(h for h in hits if str(h.match_display) == "Open target: f4").command()
        await settle(app, pilot)
        assert app.loaded.shown.target_name == "f4"


def test_snapshot_narrow(snap_compare, monkeypatch):
    from conftest import ROOT

    monkeypatch.chdir(ROOT)
    local_devices_only(monkeypatch)
    app = RematApp("examples/mlp.py", policy="nothing_saveable", show_timings=False)
    assert snap_compare(app, terminal_size=(100, 30), run_before=settled_frame)


def test_snapshot_compact(snap_compare, monkeypatch):
    from conftest import ROOT

    monkeypatch.chdir(ROOT)
    local_devices_only(monkeypatch)
    app = RematApp("examples/mlp.py", show_timings=False)
    assert snap_compare(app, terminal_size=(80, 24), run_before=settled_frame)


async def test_typed_policies_stay_listed_after_a_reload_and_a_target_switch(tmp_path):
    from remat_tui.app.messages import PolicyWanted
    from remat_tui.core.setup import policies

    path = tmp_path / "two.py"
    source = (
        "import jax.numpy as jnp, remat_tui\n"
        "from jax.ad_checkpoint import checkpoint_name\n"
        "@remat_tui.target(args=lambda: (jnp.ones(3),))\n"
        "def f(x):\n    return jnp.sum(jnp.sin(checkpoint_name(jnp.sin(x), 'h')))\n"
        "@remat_tui.target(args=lambda: (jnp.ones(3),))\n"
        "def g(x):\n    return jnp.sum(jnp.cos(checkpoint_name(jnp.cos(x), 'h')))\n"
    )
    path.write_text(source)
    typed = "save_only_these_names('h')"
    app = RematApp(str(path), "f")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.post_message(PolicyWanted(policies.parse(typed), listed=True))  # as the palette does
        await settle(app, pilot)
        before = app.loaded.shown
        path.write_text(source.replace("jnp.sin(x)", "jnp.tanh(x)"))
        await wait_until(pilot, lambda: app.loaded.shown is not before, "the reload")
        assert typed in listed_policies(app) and app.loaded.shown.policy == typed
        assert policies_list(app)[1] == typed
        await pilot.press("t", "down", "enter")  # g
        await settle(app, pilot)
        assert app.loaded.shown.target_name == "g" and typed in listed_policies(app)


async def test_the_app_quits_when_its_terminal_hangs_up():
    import os
    import signal

    before = signal.getsignal(signal.SIGHUP)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as importing JAX with libtpu leaves it
    try:
        app = RematApp(example("mlp.py"))
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            os.kill(os.getpid(), signal.SIGHUP)
            await pilot.pause()
            await pilot.pause()
            assert not app.is_running or app.return_code == 129
        assert app.return_code == 129
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN  # put back on close
    finally:
        signal.signal(signal.SIGHUP, before)


async def test_an_unknown_target_keeps_its_error_on_screen_with_the_picker_open():
    """`remat-tui examples/mlp.py:nope` (issue 30): the file has one target,
    `loss`; a typo must not open it on its own with the error gone a second
    later. The picker stays open, the error in it and above the panes, until
    the user picks; nothing is analysed meanwhile."""
    from textual.widgets import OptionList

    from remat_tui.app.screens import PickScreen

    app = RematApp(example("mlp.py"), "nope", show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.loaded.targets, "the file's targets")
        await wait_for(pilot, lambda: isinstance(app.screen, PickScreen), "the target picker")
        picker = app.screen
        await app.workers.wait_for_complete()  # a target started would be tracing now
        await pilot.pause()
        assert app.screen is picker and app.loaded.target is None and app.loaded.shown is None
        said = "no target named 'nope'"
        assert said in str(picker.query_one("#pick-error").render())
        assert said in str(app.main_screen.query_one("#error").render())
        choices = picker.query_one(OptionList)
        assert choices.has_focus and choices.option_count == len(app.loaded.targets) == 1
        await pilot.press("enter")  # the only target, picked by the user
        await settle(app, pilot)
        assert app.loaded.shown is not None and app.loaded.shown.target_name == "loss"


async def test_a_reload_that_drops_the_declared_policy_in_use_says_so_and_goes_on(tmp_path):
    """The policy shown is carried parsed across a reload, not parsed again:
    a declaration the code no longer makes is named in a warning, and the
    app shows the code as written."""
    path = tmp_path / "mine.py"
    source = (
        "import jax, jax.numpy as jnp, remat_tui\n"
        "mine = jax.checkpoint_policies.nothing_saveable\n"
        "@remat_tui.target(args=lambda: (jnp.ones(3),), policies={'mine': mine})\n"
        "def f(x):\n    return jnp.sum(jnp.sin(jnp.sin(x)))\n"
    )
    path.write_text(source)
    app = RematApp(str(path), "f", policy="mine")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.loaded.shown.policy == "mine"
        before = app.loaded.shown
        path.write_text(source.replace(", policies={'mine': mine}", ""))
        await wait_until(pilot, lambda: app.loaded.shown is not before, "the reload")
        await settle(app, pilot)
        assert app.loaded.shown.policy == "as_written"
        assert "no longer declares 'mine'" in str(app.query_one("#error").render())
