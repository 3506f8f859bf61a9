"""The compare screen: rows as compare() gives them, sorting, the chart, and a
row opened in the main screen (checked against JAX's own residual list)."""

import os

import pytest
from conftest import example, jax_saved_residuals, wait_for
from test_app import SIZE, listed_policies, settle, steady_frame
from textual.widgets import DataTable

from remat_tui.app.main import RematApp
from remat_tui.app.screens.compare import CompareScreen
from remat_tui.core.setup import policies
from remat_tui.core.setup.loading import resolve_arguments

TARGET = "scanned_checkpointed"


async def open_compare(app, pilot) -> CompareScreen:
    await settle(app, pilot)
    await pilot.press("c")
    screen = app.screen
    assert isinstance(screen, CompareScreen)
    # The comparison runs in the screen's worker; done: every row, ★ marked
    # (rows show as they come).
    await wait_for(pilot, lambda: screen.done_at is not None, "the comparison", timeout=60)
    return screen


async def test_compare_screen_rows_sort_and_open():
    app = RematApp(example("transformer.py"), TARGET, show_timings=False)
    async with app.run_test(size=(180, 48)) as pilot:
        screen = await open_compare(app, pilot)
        table = screen.query_one(DataTable)
        assert table.row_count == len(screen.rows) > 10
        stars = [table.get_row_at(i)[0] for i in range(table.row_count)]
        assert stars.count("★") == sum(r.pareto for r in screen.rows) > 0
        memory = [screen.rows[int(k.value)].weighed_bytes for k in table.rows]
        assert memory == sorted(memory)  # sorted by memory first
        await pilot.press("f")
        flops = [screen.rows[int(k.value)].recompute_flops for k in table.rows]
        assert flops == sorted(flops)
        chosen = screen.rows[int(next(iter(table.rows)).value)].config  # least recompute
        await pilot.press("enter")
        await settle(app, pilot)
        assert not isinstance(app.screen, CompareScreen)
        assert app.loaded.shown.config == chosen
        fn = app.loaded.target.fn.__globals__["make_scanned_checkpointed"]
        spec = dict(chosen.sites).get("block") or chosen.policy
        args, kwargs = resolve_arguments(app.loaded.target)
        if chosen.sites:
            parsed = policies.parse(spec)
            hand = fn(policies.build(parsed)) if parsed.kind != "as_written" else None
            if hand is not None:
                want = jax_saved_residuals(hand, "as_written", args, kwargs)
                assert [r.text for r in app.loaded.shown.residuals] == want


async def test_main_screen_keys_are_off_over_the_compare_screen():
    app = RematApp(example("transformer.py"), TARGET, show_timings=False)
    async with app.run_test(size=(180, 48)) as pilot:
        screen = await open_compare(app, pilot)
        shown, request = app.loaded.shown, app.analyses.request
        await pilot.press("2", "space", "d", "o")  # policy, name, device, sort: main screen's
        await pilot.pause()
        assert (
            app.screen is screen and app.analyses.request == request and app.loaded.shown is shown
        )
        await pilot.press("escape", "2")  # back on the main screen they work
        await settle(app, pilot)
        assert app.loaded.shown.policy == listed_policies(app)[2]


async def test_the_palette_over_the_compare_screen_offers_only_help():
    from remat_tui.app.commands import RematCommands

    app = RematApp(example("transformer.py"), TARGET, show_timings=False)
    async with app.run_test(size=(180, 48)) as pilot:
        screen = await open_compare(app, pilot)
        over = RematCommands(screen)
        found = [h async for h in over.discover()]
        assert [str(h.display) for h in found] == ["Help: keys"]
        assert [h async for h in over.search("nothing_saveable")] == []
        assert [h async for h in over.search("sugg")] == []
        main = RematCommands(app.screen_stack[0])  # over the main screen: everything
        assert len([h async for h in main.discover()]) > 5
        assert [h async for h in main.search("nothing_saveable")]


def test_compare_screen_snapshot(snap_compare):
    async def run_before(pilot):
        await open_compare(pilot.app, pilot)
        # the chart and the detail panel redraw after the last row
        await steady_frame(pilot)

    app = RematApp(example("transformer.py"), TARGET, show_timings=False)
    assert snap_compare(app, terminal_size=(180, 48), run_before=run_before)


async def test_p_compiles_what_is_shown_and_leads_with_the_peak():
    from remat_tui.core.units import human_bytes
    from remat_tui.core.xla.compile.costs import compile_answer

    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.compiles.known, "the compile (in its own worker)")
        status = str(app.query_one("#status").render())
        child = app.compiles.process.pid  # compiled in a child process, not here
        assert child is not None and child != os.getpid()
        want = compile_answer(
            app.loaded.target, app.loaded.shown.config
        ).result  # compiled here: the same numbers
        assert "(compiled, gradient alone)" in status and "saved by autodiff" in status
        assert f"peak {human_bytes(want.peak_bytes)}/device" in status
        await pilot.press("2")  # another policy: compiled too, its own numbers
        await settle(app, pilot)
        await wait_for(pilot, lambda: len(app.compiles.known) == 2, "the second compile")
        await pilot.press("p")
        assert "(compiled" not in str(app.query_one("#status").render())
    assert app.compiles.process.pid is None  # the child went with the app


@pytest.mark.parametrize(
    "largest, units, want",
    [
        (144_971.3 * 2**20, "bytes", "GiB"),  # not "144971.3 MiB"
        (42_002.6e9, "flops", "TFLOP"),  # not "42002.6 GFLOP"
        (900, "bytes", "B"),
        (3 * 2**20, "bytes", "MiB"),
        (0, "flops", "FLOP"),
    ],
)
def test_chart_axes_use_the_unit_their_values_read_best_in(largest, units, want):
    from remat_tui.core.units import BYTE_UNITS, FLOP_UNITS, axis_unit

    unit, size = axis_unit(largest, BYTE_UNITS if units == "bytes" else FLOP_UNITS)
    assert unit == want
    assert largest / size < 1024


async def test_the_chart_labels_its_axes_and_marks_the_budget():
    app = RematApp(example("transformer.py"), TARGET, show_timings=False)
    app.opening.last_budget = "400MiB"
    async with app.run_test(size=(180, 48)) as pilot:
        screen = await open_compare(app, pilot)
        memory, recompute = screen.chart_axes
        assert memory.startswith("memory (MiB") and recompute == "recompute (GFLOP)"
        assert screen.chart_budget == 400 * 2**20  # drawn as a vertical line


def test_the_chart_plots_steps_measured_on_a_chip_the_table_does_not_know():
    # A step run on a device whose chip has no row in the table has no estimate
    # (`time` None) but its measured time: the chart plots that, its axis
    # naming no chip (it read the estimate's chip, and raised).
    from textual_plotext import PlotextPlot

    from remat_tui.app.screens.compare_chart import draw_compare_chart
    from remat_tui.core.search.rows import Row
    from remat_tui.core.setup.config import Config
    from remat_tui.core.xla.run.measure import Measured

    rows = [
        Row(Config.make(spec), "", device_bytes=nbytes, host_bytes=0, recompute_flops=flops,
            forward_flops=1, residuals=(), measured=Measured(5, seconds, seconds, None),
            pareto=True)
        for spec, nbytes, flops, seconds in [
            ("nothing_saveable", 2**20, 10**9, 0.004),
            ("everything_saveable", 2**24, 0, 0.002),
        ]
    ]  # fmt: skip
    drawn = draw_compare_chart(PlotextPlot(), rows, None, compiled=True)
    assert drawn is not None and drawn.axes[1] == "measured step (ms)"


def test_the_charts_budget_is_said_in_bytes_not_as_typed():
    """`3.3e9` typed for suggest: the chart's title said `budget 3.3e9`."""
    from textual_plotext import PlotextPlot

    from remat_tui.app.screens.compare_chart import draw_compare_chart
    from remat_tui.core.search.rows import Row
    from remat_tui.core.setup.config import Config
    from remat_tui.core.units import human_bytes

    rows = [
        Row(Config.make(spec), "", device_bytes=nbytes, host_bytes=0, recompute_flops=flops,
            forward_flops=1, residuals=(), pareto=True)
        for spec, nbytes, flops in [("nothing_saveable", 2**30, 10**9), ("everything_saveable",
                                                                         2**32, 0)]
    ]  # fmt: skip
    drawn = draw_compare_chart(PlotextPlot(), rows, "3.3e9", compiled=False)
    assert drawn is not None and drawn.budget == 3_300_000_000
    assert drawn.title.endswith(f"budget {human_bytes(3_300_000_000)}") and "e9" not in drawn.title


# ---- the configuration in full, and compiled rows (issues found in use) -----------------

SMALL = """
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui


@remat_tui.target(args=lambda: (jnp.ones((16, 16)), jnp.ones((8, 16))))
def loss(W, x):
    h = checkpoint_name(jnp.tanh(x @ W), "h")
    return jnp.sum(jnp.sin(h @ W))
"""


def visible_text(widget) -> str:
    """What `widget` draws in its region on screen, its lines joined and all
    white space dropped (a long token is folded where it meets the edge)."""
    from textual.geometry import Region

    lines = widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))
    return "".join("".join(strip.text for strip in lines).split())


def squeezed(text: str) -> str:
    return "".join(text.split())


async def test_the_highlighted_rows_whole_configuration_is_readable():
    """On a screen too narrow for the configuration column (a user saw `site b`
    of `site block: save_only_these_names(...)`), the highlighted row's whole
    configuration, the code to paste and its notes are beneath the table,
    wrapped, in full."""
    from textual.widgets import Static

    from remat_tui.app.screens.compare import detail, full_label

    app = RematApp(example("transformer.py"), TARGET, show_timings=False)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_compare(app, pilot)
        table = screen.query_one(DataTable)
        order = [screen.rows[int(k.value)] for k in table.rows]
        longest = max(range(len(order)), key=lambda i: len(order[i].python))
        for i in (0, longest):
            table.move_cursor(row=i)
            row = order[i]
            label = full_label(row.config)
            shown = screen.query_one("#detail-configuration-value", Static)
            paste = screen.query_one("#detail-paste-value", Static)
            in_panel = squeezed(label)
            await wait_for(
                pilot, lambda w=shown, s=in_panel: visible_text(w) == s, f"row {i} in the panel"
            )
            await pilot.wait_for_scheduled_animations()  # laid out, for the regions below
            assert visible_text(shown) == squeezed(label)
            # (a structure's helper is left out: the report and an export have it)
            assert visible_text(paste) == squeezed(detail(row)["paste"])
            for widget in (shown, paste):  # on screen (and, as above, whole in its region)
                assert screen.region.contains_region(widget.region)
        # the site override spelt in full (the column shortens it to what it saves)
        site_rows = [r for r in order if any(k == "block" for k, _ in r.config.sites)]
        assert any(
            f"site block: {spec}" == full_label(r.config)
            for r in site_rows
            for _, spec in r.config.sites
            if spec.startswith("save_and_offload_only_these_names(")
        )


async def test_compare_with_compiling_on_shows_each_rows_peak_and_temp(write_target):
    """With `p` on in the main screen, compare compiles every row: the peak and
    temp columns are filled (they stayed empty: the screen never asked for
    compiled numbers), and the shown configuration's peak is the status line's.
    With `p` off those columns are not drawn at all."""
    from remat_tui.core.units import human_bytes
    from remat_tui.core.xla.compile.costs import compile_answer

    app = RematApp(write_target(SMALL), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(app, pilot)
        heads = [str(c.label) for c in screen.query_one(DataTable).columns.values()]
        assert "peak" not in heads and "temp" not in heads  # nothing compiled: no room spent
        assert all(r.compiled is None for r in screen.rows)
        await pilot.press("escape")
        await settle(app, pilot)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.compiles.known, "the main screen's compile")
        shown = app.compiles.known[app.scene().key_of(app.loaded.shown)]
        screen = await open_compare(app, pilot)
        assert screen.compiled
        table = screen.query_one(DataTable)
        heads = [str(c.label) for c in table.columns.values()]
        peak, temp = heads.index("peak"), heads.index("temp")
        assert all(r.compiled is not None and r.compiled.fits for r in screen.rows)
        for key in table.rows:
            row = screen.rows[int(key.value)]
            cells = table.get_row(key)
            assert cells[peak] == human_bytes(row.compiled.peak_bytes)
            assert cells[temp] == human_bytes(row.compiled.temp_bytes)
            assert row.weighed_bytes == row.compiled.peak_bytes  # what the sort and the chart weigh
        (written,) = [r for r in screen.rows if r.config == app.loaded.shown.config]
        assert written.compiled.peak_bytes == shown.peak_bytes  # the status line's peak
        other = next(r for r in screen.rows if r.config.policy == "nothing_saveable")
        assert (
            other.compiled.peak_bytes
            == compile_answer(app.loaded.target, other.config).result.peak_bytes
        )
        status = str(screen.query_one("#compare-status").render())
        assert "memory: compiled peak per device (gradient alone)" in status
        assert screen.chart_axes[0].startswith("peak per device (")
        # Compiled rows are weighed by their estimated step time: its column, the
        # chart's other axis, and `t` sorts by it.
        step = heads.index("est. step")
        assert all(r.time is not None for r in screen.rows)
        assert all(table.get_row(k)[step].startswith("~") for k in table.rows)
        assert screen.chart_axes[1].startswith("est. step (") and "cpu" in screen.chart_axes[1]
        await pilot.press("t")
        await pilot.pause()
        order = [screen.rows[int(k.value)] for k in table.rows]
        assert [r.cost for r in order] == sorted(r.cost for r in order)


async def test_rows_show_as_they_are_measured():
    """The table fills while the comparison runs: the first row is on screen
    before the last is measured, and the finished table holds every row."""
    app = RematApp(example("transformer.py"), TARGET, show_timings=False)
    async with app.run_test(size=(180, 48)) as pilot:
        screen = await open_compare(app, pilot)
        assert screen.first_row_at is not None and screen.first_row_at < screen.done_at
        assert screen.query_one(DataTable).row_count == len(screen.rows)


async def test_a_candidate_jax_refuses_is_a_row_last_with_jaxs_words():
    """The rope's checkpoint under everything_saveable, which JAX refuses:
    its row is in the table with JAX's words and no numbers, after every
    row that has some, whatever the order (it sorted first, at 0 bytes)."""
    from conftest import ROOT

    app = RematApp(f"{ROOT}/tests/models/unnamed_loops.py", "rope", show_timings=False)
    async with app.run_test(size=(180, 48)) as pilot:
        screen = await open_compare(app, pilot)
        table = screen.query_one(DataTable)
        for key in ("m", "f"):  # memory, then recompute
            if key == "f":
                await pilot.press("f")
            shown = [screen.rows[int(k.value)] for k in table.rows]
            assert [r.refused for r in shown] == [False] * (len(shown) - 1) + [True]
        last = table.get_row_at(table.row_count - 1)
        assert any("JAX refused it" in str(cell) for cell in last)
