"""The footer at every width from 80 to 160 columns: each key it shows is
shown whole, and nothing of a key runs on beside the palette key. Textual's
footer laid every key out however narrow the screen: at 120 columns the last
key read `v`, at 100 a stray `f` (of `diff`) stood right of `^p palette`, at
80 `? he`."""

import pytest
from conftest import example
from test_app import settle, steady_frame
from textual.widgets._footer import FooterKey

from remat_tui.app.main import RematApp
from remat_tui.app.widgets.footer import Footer

WIDTHS = range(80, 161)


def footer_line(app) -> str:
    """The footer's row as the screen draws it."""
    return app.screen._compositor.render_strips()[-1].text


def key_text(key: FooterKey) -> str:
    return f"{key.key_display} {key.description}"


def check_footer(app, width: int) -> None:
    footer = app.screen.query_one(Footer)
    line = footer_line(app)
    (palette,) = footer.query_children(".-command-palette")
    keys = [key for key in footer.query_children(FooterKey) if key is not palette]
    shown = [key for key in keys if key.display]
    at = palette.region.x
    # Left of the palette key: the shown keys, each whole and in order; right
    # of it: the palette key alone.
    assert line[:at].split() == " ".join(map(key_text, shown)).split(), width
    assert line[at:].split() == ["▏^p", "palette"], width
    assert any(key.description == "help" for key in shown), width  # `?` stays
    assert footer.compact == (width < 120), width  # every screen's, below 120 columns


async def test_the_main_screens_footer_shows_whole_keys_at_every_width():
    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        for width in WIDTHS:
            await pilot.resize_terminal(width, 40)
            await steady_frame(pilot)
            check_footer(app, width)
        footer = app.screen.query_one(Footer)
        assert all(key.display for key in footer.query_children(FooterKey))  # 160: all


@pytest.mark.parametrize("width", [80, 100, 120])
async def test_the_compare_screens_footer_shows_whole_keys(width):
    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=(width, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        await steady_frame(pilot)
        check_footer(app, width)
