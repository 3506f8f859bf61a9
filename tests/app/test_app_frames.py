"""What keeps frames coming while keys arrive fast (issue 8's stress budget):
the footer is rebuilt only when the keys it shows change, and a burst of
requests traces only the configuration it ends on."""

from types import SimpleNamespace

from conftest import example, jax_saved_residuals
from test_app import SIZE, listed_policies, settle

from remat_tui.app.controllers import analyses
from remat_tui.app.main import RematApp
from remat_tui.app.widgets.footer import Footer
from remat_tui.core.setup.loading import resolve_arguments


def compact_watchers(footer: Footer) -> list:
    return getattr(footer, "__watchers", {}).get("compact", [])


async def test_focus_moves_and_screens_leave_the_footer_as_it_is():
    app = RematApp(example("transformer.py"), "scanned_checkpointed")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        footer = app.screen.query_one(Footer)
        keys = list(footer.children)
        assert keys and len(compact_watchers(footer)) <= len(keys)
        for _ in range(5):  # the focus moves, a screen opens and closes
            await pilot.press("n", "s", "r", "d", "escape")
        await pilot.pause()
        assert app.screen.query_one(Footer) is footer
        assert list(footer.children) == keys  # the same widgets: nothing rebuilt
        assert len(compact_watchers(footer)) <= len(keys)  # no watcher left behind


async def test_the_footer_follows_keys_that_do_change():
    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        footer = app.screen.query_one(Footer)
        before = {key.key for key in footer.query("FooterKey")}
        await pilot.press("c")  # the compare screen has keys of its own
        await pilot.pause()
        compare_footer = app.screen.query_one(Footer)
        assert compare_footer is not footer
        assert {key.key for key in compare_footer.query("FooterKey")} != before


async def test_a_burst_of_policy_keys_traces_where_it_ends(monkeypatch):
    # The keys arrive at one instant of the bursts' clock, however slowly a
    # loaded machine types them, and a burst ends only after a pause far longer
    # than any gap between two key presses (the end-of-burst timer runs on real
    # time): the test does not lean on time.
    monkeypatch.setattr(analyses, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    monkeypatch.setattr(analyses, "BURST_SECONDS", 3.0)
    app = RematApp(example("mlp.py"))
    traced: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        trace = app.analyses.trace

        def counting(target, request, key, baseline):
            traced.append(key[1].policy)
            return trace(target, request, key, baseline)

        app.analyses.trace = counting
        specs = listed_policies(app)
        app.analyses.last_request_at = float("-inf")  # a pause before the burst
        await pilot.press("2", "3", "4", "5")
        await settle(app, pilot)
        # The first key after a pause starts at once; the ones inside the burst
        # wait for it to end, and only the last is traced.
        assert traced == [specs[2], specs[5]]
        assert app.loaded.shown.policy == specs[5]
        args, kwargs = resolve_arguments(app.loaded.target)
        want = jax_saved_residuals(app.loaded.target.fn, specs[5], args, kwargs)
        assert [r.text for r in app.loaded.shown.residuals] == want


async def test_moving_the_focus_repaints_only_what_changed(monkeypatch):
    from textual._compositor import Compositor

    full = []
    render_full_update = Compositor.render_full_update

    def counting(self, *args, **kwargs):
        full.append(self)
        return render_full_update(self, *args, **kwargs)

    app = RematApp(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        monkeypatch.setattr(Compositor, "render_full_update", counting)
        for key in ("r", "n", "r", "n"):
            await pilot.press(key)
            await pilot.pause()
            assert app.focused is not None
        assert full == []  # partial updates: the two widgets whose focus style changed
