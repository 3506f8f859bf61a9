"""The app as a new user meets it and as a daily user lives with it (issue 8):
loading states, line marks, policies, export, layout, target picking, hot reload."""

from conftest import example
from test_app import SIZE, settle

from remat_tui.app.codeview import CodeView
from remat_tui.app.main import RematApp


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
