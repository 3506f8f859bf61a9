"""Suggest (f) and diff (m, v) in the app: the app's answers equal the Python
API's (remat_tui.suggest / remat_tui.diff) on the same target, budget and
configurations, and the configurations they name give JAX's own residual
lists; a bad budget is refused in place; nothing fitting is said."""

import os
import threading
from collections import Counter

from conftest import ROOT, example, jax_saved_residuals, wait_for
from test_app import SIZE, listed_policies, settle

import remat_tui
from remat_tui.app.main import RematApp
from remat_tui.app.screens.budget import BudgetScreen
from remat_tui.app.screens.diff import DiffScreen, short
from remat_tui.app.screens.suggest import SuggestDone, SuggestScreen
from remat_tui.core.setup import policies
from remat_tui.core.setup.loading import resolve_arguments
from remat_tui.core.units import human_bytes, human_flops
from remat_tui.report.comparisons import config_label
from remat_tui.report.phrases import signed

TRANSFORMER = "scanned_checkpointed"


def jax_residuals(app, config) -> list[str]:
    """print_saved_residuals for `config`: an outer policy applied by hand, or
    (the transformer example) the block's jax.checkpoint policy edited by hand."""
    args, kwargs = resolve_arguments(app.loaded.target)
    fn = app.loaded.target.fn
    sites = dict(config.sites)
    if sites:
        (spec,) = set(sites.values())  # the example has one checkpointed function
        parsed = policies.parse(spec)
        if parsed.kind != policies.AS_WRITTEN:
            fn = fn.__globals__["make_scanned_checkpointed"](policies.build(parsed))
    return jax_saved_residuals(fn, config.policy, args, kwargs, app.loaded.target.policies)


def texts(entries) -> Counter:
    return Counter(e["text"] for e in entries)


async def ask_budget(app, pilot, budget: str) -> None:
    """b in the main screen, then `budget` typed into the prompt, then enter."""
    await pilot.press("b")
    await pilot.pause()
    assert isinstance(app.screen, BudgetScreen)
    await pilot.press(*budget, "enter")
    await pilot.pause()


async def answer(app, pilot) -> SuggestScreen:
    screen = app.screen
    assert isinstance(screen, SuggestScreen)
    # the search runs in the screen's worker
    await wait_for(pilot, lambda: screen.suggestion is not None, "the search", timeout=60)
    return screen


def status(screen, widget: str) -> str:
    return str(screen.query_one(widget).render())


async def test_suggest_equals_the_api_and_opens_what_jax_saves():
    app = RematApp(example("transformer.py"), TRANSFORMER, show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        # A budget between the smallest configuration and the code as written,
        # so the search must choose (both read off the API, nothing assumed).
        smallest = remat_tui.suggest(app.loaded.target, 0, device=app.wanted.device)
        low, high = smallest.best.weighed_bytes, smallest.baseline.weighed_bytes
        assert low < high
        budget = f"{(low + high) / 2 / 2**20:.3f}MiB"
        want = remat_tui.suggest(app.loaded.target, budget, device=app.wanted.device)

        await ask_budget(app, pilot, budget)
        screen = await answer(app, pilot)
        got = screen.suggestion
        assert got.budget == want.budget
        assert (got.fits, got.exact, got.searched) == (want.fits, want.exact, want.searched)
        assert got.best.config == want.best.config
        assert got.best.weighed_bytes <= want.budget
        head = status(screen, "#suggest-status")
        assert ("✓ fits" in head) == want.fits
        assert f"{want.searched} configurations searched" in head
        assert ("exact" in head) == want.exact
        text = status(screen, "#suggest-text")
        assert want.best.python in text and "paste:" in text
        assert f"{human_bytes(want.baseline.weighed_bytes - want.best.weighed_bytes)} less" in text

        await pilot.press("enter")  # open the suggestion in the main screen
        await settle(app, pilot)
        assert not isinstance(app.screen, SuggestScreen)
        assert app.loaded.shown.config == want.best.config
        assert [r.text for r in app.loaded.shown.residuals] == jax_residuals(app, want.best.config)


async def test_a_newer_budget_stops_the_running_search(monkeypatch):
    import remat_tui.core.search.suggest.evaluator as core_suggest  # where suggest analyses

    # Each search waits at its first batch until the newer budget is typed, so
    # the first one is surely running (not merely queued) when it is superseded.
    gate = threading.Event()
    evaluate = core_suggest.evaluate

    def gated(*args):
        gate.wait(30)
        return evaluate(*args)

    monkeypatch.setattr(core_suggest, "evaluate", gated)
    seen = []
    app = RematApp(example("transformer.py"), TRANSFORMER, show_timings=False)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await settle(app, pilot)
        await ask_budget(app, pilot, "1GiB")
        screen = app.screen
        first = screen.request
        assert any(w.is_running and w.group == "suggest" for w in app.workers)
        await pilot.press("b")  # another budget, from the suggest screen
        await pilot.pause()
        field = app.screen.query_one("#budget")
        assert isinstance(app.screen, BudgetScreen) and field.value == "1GiB"  # offered again
        field.value = "2.5e8"
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen and screen.request == first + 1
        gate.set()
        await answer(app, pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.suggestion.budget == 250_000_000
        assert app.opening.last_budget == "2.5e8"  # what f offers next, on either screen
        answered = {m.request for m in seen if isinstance(m, SuggestDone)}  # (they bubble)
        assert answered == {first + 1}  # the first search stopped without answering
        want = remat_tui.suggest(app.loaded.target, "2.5e8", device=app.wanted.device)
        assert screen.suggestion.best.config == want.best.config


async def test_a_bad_budget_is_refused_in_place_and_the_app_keeps_running():
    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = app.loaded.shown
        await ask_budget(app, pilot, "2 lots")
        assert isinstance(app.screen, BudgetScreen)  # still asking
        error = status(app.screen, "#budget-error")
        assert "'2 lots' does not parse" in error and "2GiB" in error
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0] and app.loaded.shown is shown
        await pilot.press("2")  # still answering keys
        await settle(app, pilot)
        assert app.loaded.shown.policy == listed_policies(app)[2]


async def test_nothing_fits_says_so_and_shows_the_smallest():
    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        want = remat_tui.suggest(app.loaded.target, "1B", device=app.wanted.device)
        assert not want.fits  # the arguments alone are saved: more than a byte
        await ask_budget(app, pilot, "1B")
        screen = await answer(app, pilot)
        got = screen.suggestion
        assert not got.fits and got.best.config == want.best.config
        assert got.best.weighed_bytes == min(r.weighed_bytes for r in got.rows)
        assert "nothing fits 1 B" in status(screen, "#suggest-status")
        text = status(screen, "#suggest-text")
        assert (
            f"the smallest is {config_label(want.best)} at {human_bytes(want.best.weighed_bytes)}"
            in text
        )
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.loaded.shown.config == want.best.config
        assert [r.text for r in app.loaded.shown.residuals] == jax_residuals(app, want.best.config)


async def test_mark_then_diff_equals_the_api_and_jax():
    app = RematApp(example("transformer.py"), TRANSFORMER, show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("v")  # nothing marked yet: said, no screen
        await pilot.pause()
        assert not isinstance(app.screen, DiffScreen)
        assert any("nothing marked" in n.message for n in app._notifications)

        await pilot.press("m")  # A: the code as written
        await pilot.pause()
        a = app.loaded.shown.config
        assert any("Marked as A" in n.message for n in app._notifications)
        await pilot.press("s", "2")  # B: policy 2 at the block's jax.checkpoint
        await settle(app, pilot)
        b = app.loaded.shown.config
        assert b != a and b.site_overrides
        await pilot.press("v")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DiffScreen)

        want = remat_tui.diff(app.loaded.target, a.policy, b.policy, sites_b=b.site_overrides)
        got = screen.diff
        assert texts(got.only_a) == texts(want.only_a)
        assert texts(got.only_b) == texts(want.only_b)
        assert texts(got.both) == texts(want.both)
        assert got.only_a or got.only_b  # the two save something different
        jax_a, jax_b = Counter(jax_residuals(app, a)), Counter(jax_residuals(app, b))
        assert texts(got.only_a) == jax_a - jax_b
        assert texts(got.only_b) == jax_b - jax_a
        assert texts(got.both) == jax_a & jax_b

        table = screen.query_one("#diff-table")
        assert table.row_count == len(got.only_a) + len(got.only_b) + len(got.both)
        cells = [table.get_row_at(i) for i in range(table.row_count)]
        only_a_rows = Counter(row[3] for row in cells if str(row[0]) == "only A")
        assert only_a_rows == Counter(short(t) for t in texts(want.only_a).elements())
        head = status(screen, "#diff-status")
        assert f"device bytes B - A: {signed(want.bytes_delta, human_bytes)}" in head
        assert f"host bytes B - A: {signed(want.host_bytes_delta, human_bytes)}" in head
        assert human_flops(abs(want.recompute_flops_delta)) in head
        assert f"only in A: {len(want.only_a)}" in head

        await pilot.press("a")  # A opens in the main screen again
        await settle(app, pilot)
        assert not isinstance(app.screen, DiffScreen) and app.loaded.shown.config == a


COUNTED = """
import jax, jax.numpy as jnp, remat_tui
from jax.ad_checkpoint import checkpoint_name

CALLS = []


def args():
    CALLS.append(1)  # how many times the example arguments are built
    return (jnp.ones((8, 8)), jnp.ones((4, 8)))


@remat_tui.target(args=args)
def loss(W, x):
    h = checkpoint_name(jnp.sin(x @ W), "h")
    return jnp.sum(jnp.tanh(h @ W))
"""


async def test_a_search_builds_the_example_arguments_once_and_f_offers_its_budget(
    write_target,
):
    app = RematApp(write_target(COUNTED), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        calls = app.loaded.target.fn.__globals__["CALLS"]
        built = len(calls)
        await ask_budget(app, pilot, "1MiB")
        screen = await answer(app, pilot)
        assert screen.analysed > 5  # many configurations searched...
        assert len(calls) == built  # ...over the arguments the app built already
        await pilot.press("b")  # a second budget, typed on the suggest screen
        await pilot.pause()
        await pilot.press(*"2MiB", "enter")
        await answer(app, pilot)
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("b")  # back on the main screen: the budget typed last
        await pilot.pause()
        assert isinstance(app.screen, BudgetScreen)
        assert app.screen.query_one("Input").value == "2MiB"


async def test_a_budget_typed_straight_after_f_is_the_one_searched():
    """Keys a terminal sends straight after `f`, before the prompt is drawn,
    land in the prompt (issue 30: they were lost, and enter searched the
    budget offered from before)."""
    from test_app import type_ahead

    app = RematApp(example("mlp.py"), show_timings=False)
    app.opening.last_budget = "700MiB"
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        type_ahead(app, ["b", *"2MiB", "enter"])
        await wait_for(pilot, lambda: isinstance(app.screen, SuggestScreen), "the search")
        screen = await answer(app, pilot)
        assert screen.suggestion.budget == 2 * 2**20
        assert app.opening.last_budget == "2MiB"


def contrast(fg, bg) -> float:
    """WCAG's contrast ratio of two rich colours (1: the same, 21: black on white)."""

    def luminance(color) -> float:
        def channel(c: int) -> float:
            c /= 255
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

        r, g, b = color.get_truecolor()
        return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)

    light, dark = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


async def test_every_section_label_of_the_diff_is_legible():
    """Issue 30: the diff's "both" labels were near-black on dark grey
    ($text-muted, an `auto` colour, has no background to contrast with inside
    a table cell). Each label, as the table draws it on its row's background
    (plain and zebra-striped), contrasts 3:1 or more (WCAG's floor for
    legible text that need not stand out)."""
    from textual.filter import dim_color

    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("m", "2")
        await settle(app, pilot)
        await pilot.press("v")
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        table = screen.query_one("#diff-table")
        table.move_cursor(row=table.row_count - 1)  # the cursor's row off the labels read
        await pilot.pause()
        seen = set()
        for y in range(1, min(table.row_count, table.size.height - 1)):  # row 0: the header
            for segment in table.render_line(y):
                label = segment.text.strip()
                if label in ("only A", "only B", "both") and y - 1 != table.cursor_row:
                    style = segment.style
                    color = style.color
                    if style.dim:  # drawn blended towards the background, as Textual does
                        color = dim_color(style.bgcolor, color)
                    assert contrast(color, style.bgcolor) >= 3, (label, style)
                    seen.add(label)
        assert "both" in seen


async def test_suggest_says_what_ranks_its_answer_and_why_some_were_not_compiled():
    """With p on, suggest ranks by the estimated step time: its words said
    "the least recompute" all the same, and "N could not change the answer"
    where the core says why (an offload the CPU's compile cannot do)."""
    from test_app import press_p_until_compiled

    from remat_tui.app.screens.suggest import LOOKS_FOR, RANKED_BY

    app = RematApp(example("mlp.py"), show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("b")
        await pilot.pause()
        assert "Suggest: the least recompute that fits" in str(
            app.screen.query_one("Label").render()
        )
        await pilot.press("escape")
        await press_p_until_compiled(app, pilot)
        await pilot.press("b")
        await pilot.pause()
        title = str(app.screen.query_one("Label").render())
        assert LOOKS_FOR["estimate"] in title and "recompute" not in title
        await pilot.press(*"1GiB", "enter")
        await pilot.pause()
        screen = await answer(app, pilot)
        s = screen.suggestion
        said = status(screen, "#suggest-status")
        assert s.fits and s.best.cost_source == "estimate"  # a chip's estimate: CPU's calibration
        assert RANKED_BY["estimate"] in said and "recompute" not in said.split("\n")[0]
        assert s.skipped  # the offload, which the CPU's compile has no host memory for
        assert f"{s.skipped} not compiled: {s.skipped_why}" in " ".join(said.split())
        assert "could not change the answer" not in said
        # what the search said as it went never ran past what it searched: a
        # compile was counted as another configuration analysed (38 of 32)
        assert 0 < screen.analysed <= s.searched and 0 < screen.compiles


async def test_suggest_dialog_gives_one_devices_bytes_on_a_mesh():
    """Contract 17 (issue 42): on the zoo's 2 x 2 mesh model the dialog's
    table has compare's headers, saying whose bytes it counts, and one
    device's residual bytes, as the status line and the budget do (it showed
    the global figure under a bare `device`)."""
    import math

    from jax._src.ad_checkpoint import saved_residuals

    from remat_tui.report.comparisons import config_label as label

    model = os.path.join(ROOT, "tests", "zoo", "models", "mesh_model.py")
    app = RematApp(model, "loss", show_timings=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        args, kwargs = resolve_arguments(app.loaded.target)
        per_device = sum(  # JAX's avals, each by what one device holds of it
            math.prod(aval.sharding.shard_shape(aval.shape)) * aval.dtype.itemsize
            for aval, _ in saved_residuals(app.loaded.target.fn, *args, **kwargs)
        )
        await ask_budget(app, pilot, "1MiB")
        screen = await answer(app, pilot)
        table = screen.query_one("DataTable")
        heads = [str(c.label) for c in table.columns.values()]
        assert "device/device" in heads and "device" not in heads, heads
        column = heads.index("device/device")
        written = next(
            table.get_row_at(i)
            for i in range(table.row_count)
            if str(table.get_row_at(i)[0]) == "as written"
        )
        assert screen.suggestion.baseline.device_bytes == per_device
        assert str(written[column]) == human_bytes(per_device), label(screen.suggestion.baseline)
