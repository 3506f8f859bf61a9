"""The story panel (`y`): the selected residual's rule, maker and readers,
and once compiled (`p`) what XLA made of it, driven by the keys a user
presses."""

import os

from conftest import ROOT, example, local_devices_only, wait_for
from test_app import SIZE, press_p_until_compiled, settle, settled_frame

from remat_tui.app.main import RematApp
from remat_tui.app.widgets.residual_table import ResidualTable
from remat_tui.app.widgets.story_panel import NOT_COMPILED, StoryPanel
from remat_tui.report import story


def _said(app) -> str:
    return app.query_one(StoryPanel).said


async def test_y_tells_the_selected_residuals_story_and_p_adds_xlas_part():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        panel = app.query_one(StoryPanel)
        assert not panel.display
        await pilot.press("y")
        assert panel.display
        first = app.loaded.shown.residuals[0]
        assert _said(app).startswith("R1 ") and first.story.rule.words[:40] in _said(app)
        last = len(app.loaded.shown.residuals) - 1
        await pilot.press("r", *["down"] * last)
        await pilot.pause()
        r = app.loaded.shown.residuals[last]
        said = " ".join(_said(app).split())
        assert said.startswith(f"R{last + 1} ")
        assert " ".join(story.made_words(r).split())[:30] in said
        assert NOT_COMPILED in said  # no compile yet

        await press_p_until_compiled(app, pilot)
        await wait_for(pilot, lambda: NOT_COMPILED not in _said(app), "the story's XLA part")
        said = " ".join(_said(app).split())
        assert "XLA" in said and ("kept:" in said or "removed:" in said or "fused:" in said)

        await pilot.press("y")
        assert not panel.display


def drawn(app, widget) -> list[str]:
    """The lines of the screen `widget` covers, as drawn now."""
    import io

    from rich.console import Console

    console = Console(
        width=app.size.width, height=app.size.height, file=io.StringIO(), record=True,
        color_system=None, legacy_windows=False,
    )  # fmt: skip
    console.print(app.screen._compositor.render_update(full=True))
    lines = console.export_text().splitlines()
    r = widget.region
    return [line[r.x : r.right] for line in lines[r.y : r.bottom]]


PARAMS = """
import jax.numpy as jnp
import remat_tui

def args():
    return {"w1": jnp.ones((64, 64)), "w2": jnp.ones((64, 64))}, jnp.ones((8, 64))

def layer(w, x):
    return jnp.tanh(x @ w)

@remat_tui.target(args=args)
def loss(params, x):
    # w1 and h are read by many backward equations: long stories
    h = layer(params["w1"], layer(params["w1"], layer(params["w1"], x)))
    y = h * jnp.sin(h) + jnp.cos(h) * jnp.exp(h) + (h * h) @ params["w2"] + h / (1 + h * h)
    return jnp.sum(jnp.tanh(y))
"""


async def test_a_story_taller_than_its_panel_scrolls_to_its_xla_line(write_target):
    """At 120x35 the panel has room for 7 lines: a story with a call chain,
    many readers and its XLA part ran past them, out of reach. It scrolls (its
    arrows, once focused), and the XLA line is drawn at its end."""
    path = write_target(PARAMS, name="a_model_file_with_a_rather_long_name.py")
    app = RematApp(path, show_timings=False)
    async with app.run_test(size=(120, 35)) as pilot:
        await settle(app, pilot)
        await press_p_until_compiled(app, pilot)
        await pilot.press("y")
        panel = app.query_one(StoryPanel)
        # the longest story: every residual's, told in turn
        await pilot.press("r")
        longest, lines = 0, 0
        for i in range(len(app.loaded.shown.residuals)):
            await wait_for(pilot, lambda: NOT_COMPILED not in _said(app), "the XLA part")
            told = panel.query_one("#story-text").size.height
            if told > lines:
                longest, lines = i, told
            await pilot.press("down")
        await pilot.press("home")
        await pilot.press(*["down"] * longest)
        await settle(app, pilot)
        assert "XLA" in _said(app)
        assert lines > panel.scrollable_content_region.height  # it overflows the panel
        assert not any("XLA" in line for line in drawn(app, panel))  # its end out of sight
        told = _said(app)
        panel.focus()
        await pilot.pause()
        assert app.focused is panel
        await pilot.press("end")
        await pilot.pause()
        assert _said(app) == told  # the same story, scrolled
        assert any(line.strip(" │").startswith("XLA") for line in drawn(app, panel))


async def test_the_selected_row_stays_on_screen_when_the_story_opens():
    """The panel opens beneath the residual table and shortens it: the last
    row, selected, was left below the table's bottom edge, out of sight while
    the panel told its story."""
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = app.query_one(ResidualTable)
        last = len(app.loaded.shown.residuals)
        await pilot.press("r", "end")
        await settled_frame(pilot)

        def rows_drawn() -> list[str]:
            return [line.strip("│ ").split(" ")[0] for line in drawn(app, table)]

        assert f"R{last}" in rows_drawn()
        await pilot.press("y")
        await settled_frame(pilot)
        assert _said(app).startswith(f"R{last} ")
        assert f"R{last}" in rows_drawn()  # the row the story tells is in view


def test_snapshot_story_panel(snap_compare, monkeypatch):
    monkeypatch.chdir(ROOT)
    local_devices_only(monkeypatch)
    assert os.path.exists("examples/mlp.py")

    async def open_story(pilot):
        await settled_frame(pilot)
        await pilot.press("r", "down", "down", "down", "down", "down", "y")
        await settled_frame(pilot)

    app = RematApp("examples/mlp.py", show_timings=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=open_story)
