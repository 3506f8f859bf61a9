"""Checkpoint sites in the app: the Sites list, setting a site's policy by
keyboard, and name toggles applied at the site; each result checked against
print_saved_residuals of the same source with the policy changed by hand."""

from conftest import example, jax_saved_residuals
from test_app import SIZE, name_marks, settle

from remat_tui.app.main import RematApp
from remat_tui.app.widgets.residual_table import ResidualTable
from remat_tui.app.widgets.sidebar import Sidebar
from remat_tui.core.setup import policies
from remat_tui.core.setup.loading import resolve_arguments

TARGET = "scanned_checkpointed"


def hand_edited(app, spec: str) -> list[str]:
    """JAX's residuals for the example with its block's policy edited to `spec`."""
    module = app.loaded.target.fn.__globals__
    args, kwargs = resolve_arguments(app.loaded.target)
    fn = module["make_scanned_checkpointed"](policies.build(policies.parse(spec)))
    return jax_saved_residuals(fn, "as_written", args, kwargs)


def shown_texts(app) -> list[str]:
    return [r.text for r in app.loaded.shown.residuals]


async def test_site_policy_set_by_keyboard_matches_hand_edit():
    app = RematApp(example("transformer.py"), TARGET)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        (site,) = app.loaded.shown.sites
        assert site.function == "block" and site.trip_count == 24
        assert site.policy == "save_only_these_names('mlp_hidden')"
        sites_list = app.query_one("#sites")
        assert sites_list.display and "×24 block" in str(sites_list.get_option_at_index(0).prompt)

        await pilot.press("s", "2")  # focus Sites, then policy 2 at the selected site
        await settle(app, pilot)
        assert app.loaded.shown.config.site_overrides == {1: "nothing_saveable"}
        assert shown_texts(app) == hand_edited(app, "nothing_saveable")
        assert len(app.query_one(ResidualTable).rows) == len(app.loaded.shown.residuals)
        assert "jax.checkpoint(block" in app.loaded.shown.python  # pasted at the site, not outside
        assert app.loaded.shown.policy == "as_written"  # the outer policy did not move

        await pilot.press("space")  # cycle on: the next listed policy after nothing_saveable
        await settle(app, pilot)
        assert shown_texts(app) == hand_edited(app, app.loaded.shown.sites[0].override)


async def test_name_toggles_apply_at_the_site():
    app = RematApp(example("transformer.py"), TARGET)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        sidebar = app.query_one(Sidebar)
        assert name_marks(app)["mlp_hidden"] == "S"  # read from the policy in the code
        app.asking.cycle_name("query_proj")  # recompute -> save, at every site of `block`
        await settle(app, pilot)
        want = "save_only_these_names('mlp_hidden', 'query_proj')"
        assert app.loaded.shown.config.site_overrides == {"block": want}
        assert shown_texts(app) == hand_edited(app, want)
        assert "Names at block" in str(app.query_one("#names").border_title)
        assert sidebar.highlighted_site == 1


async def test_site_from_the_command_line_and_a_bad_one():
    app = RematApp(example("transformer.py"), TARGET, sites=["block=dots_saveable"])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert shown_texts(app) == hand_edited(app, "dots_saveable")
        shown = app.loaded.shown
        app.asking.site(9, "nothing_saveable")  # no such site: an error, the last state kept
        await settle(app, pilot)
        assert app.loaded.shown is shown
        error = app.query_one("#error")
        assert error.display and "no checkpoint site 9" in str(error.render())
        assert "1 (block" in str(error.render())


def test_cli_site_option_reaches_the_report(remat_tui_cmd, tmp_path):
    import json
    import subprocess

    out = subprocess.run(
        [
            remat_tui_cmd,
            "report",
            f"{example('transformer.py')}:{TARGET}",
            "--site",
            "1=as_written",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["sites"][0]["override"] == "as_written"
    for option, message in [
        ("blk=nothing_saveable", "no checkpoint site 'blk'"),
        ("block=save_only_these_names(h)", "site block: policy spec"),
        ("block", "expected ID=SPEC or FUNCTION=SPEC"),
    ]:
        bad = subprocess.run(
            [remat_tui_cmd, "report", f"{example('transformer.py')}:{TARGET}", "--site", option],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr


async def test_palette_sets_a_site_by_function_name():
    from remat_tui.app.commands import RematCommands

    app = RematApp(example("transformer.py"), TARGET)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        provider = RematCommands(app.screen)
        hits = [h async for h in provider.search("site block: save_only_these_names('key_proj')")]
        (hit,) = hits
        assert "Set site block to save_only_these_names('key_proj')" in str(hit.prompt)
        hit.command()
        await settle(app, pilot)
        assert shown_texts(app) == hand_edited(app, "save_only_these_names('key_proj')")
        bad = [h async for h in provider.search("site block: save_only_these_names(k)")]
        assert "Not a site policy" in str(bad[0].prompt)


async def test_names_follow_a_site_set_by_id_and_toggles_replace_it():
    app = RematApp(example("transformer.py"), TARGET)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.asking.site(1, "save_only_these_names('key_proj')")
        await settle(app, pilot)
        assert name_marks(app)["key_proj"] == "S"
        assert name_marks(app)["mlp_hidden"] == "R"
        app.asking.cycle_name("value_proj")
        await settle(app, pilot)
        want = "save_only_these_names('key_proj', 'value_proj')"
        assert app.loaded.shown.config.site_overrides == {"block": want}
        assert shown_texts(app) == hand_edited(app, want)


async def test_names_list_shows_the_total_over_iterations():
    app = RematApp(example("transformer.py"), TARGET)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        names = app.query_one("#names")
        prompts = [str(names.get_option_at_index(i).prompt) for i in range(names.option_count)]
        hidden = next(p for p in prompts if "mlp_hidden" in p)
        info = next(n for n in app.loaded.shown.names if n.name == "mlp_hidden")
        assert info.total_bytes == 24 * info.bytes  # saved once per layer of the scan
        assert hidden.endswith("24.0 MiB ×24"), hidden


async def test_residual_table_sorts_by_bytes_and_keeps_the_selection():
    from remat_tui.app.main import RematApp as App

    app = App(example("mlp.py"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = app.query_one(ResidualTable)
        await pilot.press("r", "down", "down")
        chosen = table.selected
        await pilot.press("o")
        sizes = [app.loaded.shown.residuals[i].bytes for i in table.order]
        assert sizes == sorted(sizes, reverse=True)
        assert table.selected == chosen  # the same residual, wherever it moved
        await pilot.press("r")
        table.cursor = 0
        await pilot.pause()
        biggest = max(
            range(len(app.loaded.shown.residuals)),
            key=lambda i: app.loaded.shown.residuals[i].bytes,
        )
        assert table.selected == biggest
        r = app.loaded.shown.residuals[biggest]
        assert app.query_one("#forward").selected == frozenset(r.forward_lines)
        await pilot.press("o")
        assert table.order == list(range(len(app.loaded.shown.residuals)))


async def test_a_long_site_name_leaves_its_trip_count_whole():
    """Issue 30: the Sites list cut `Encoder1DBlock.__call__ ×12` to `×1…`.
    At the list's widths (its sidebar narrows below 120 columns) the count is
    drawn whole, beside the site's number, and the name is what is cut."""
    from conftest import ROOT
    from textual.geometry import Region

    app = RematApp(f"{ROOT}/tests/models/vit_deep_linen.py", show_timings=False)
    async with app.run_test(size=(120, 35)) as pilot:
        await settle(app, pilot)
        (site,) = app.loaded.shown.sites
        assert site.trip_count == 12 and len(site.function) > 30
        sites_list = app.query_one("#sites")
        for width in (120, 100):
            await pilot.resize_terminal(width, 35)
            await pilot.pause()
            lines = sites_list.render_lines(Region(0, 0, *sites_list.size))
            first = next(strip.text for strip in lines if "1" in strip.text)
            assert "1 ×12 Encoder" in first, (width, first)
