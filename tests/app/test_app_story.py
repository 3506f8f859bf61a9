"""The story panel (`y`): the selected residual's rule, maker and readers,
and once compiled (`p`) what XLA made of it, driven by the keys a user
presses."""

import os

from conftest import ROOT, example, local_devices_only, wait_for
from test_app import SIZE, press_p_until_compiled, settle, settled_frame

from remat_tui.app.main import RematApp
from remat_tui.app.widgets.story_panel import NOT_COMPILED, StoryPanel
from remat_tui.report import story


def _said(app) -> str:
    return str(app.query_one(StoryPanel).render())


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
