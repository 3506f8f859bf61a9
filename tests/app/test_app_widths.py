"""The screens at the widths users run them (issue 30): 120×35 and 180×45,
on a Linen ViT whose checkpointed block has a long name and runs ×12
(tests/models/vit_deep_linen.py). The compare table names every row
distinctly where it is drawn, never runs under its chart, and the layout
keeps every figure of a compiled row on a 120-column screen."""

import os

import pytest
from conftest import ROOT, local_devices_only
from test_app import settled_frame, steady_frame
from test_app_compare import open_compare
from textual.widgets import DataTable
from textual_plotext import PlotextPlot

from remat_tui.app.main import RematApp
from remat_tui.app.screens.table_layout import (
    CHART_GAP,
    CHART_MIN,
    KEY_MIN,
    LABEL_MIN,
    NOTES_MAX,
    PADDING,
    SCROLLBAR,
    fitted_labels,
    lay_out,
)
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.report.comparisons import COLUMNS

VIT = "tests/models/vit_deep_linen.py"
SIZES = [(120, 35), (180, 45)]
SITE = "EncoderBlockWithPreLayerNorm.__call__"


def vit_app(monkeypatch) -> RematApp:
    monkeypatch.chdir(ROOT)  # a relative path: the same title on every machine
    local_devices_only(monkeypatch)
    assert os.path.exists(VIT)
    return RematApp(VIT, show_timings=False)


def same_cpu_everywhere(monkeypatch) -> None:
    """The CPU's rates as one machine measured them, for snapshots: whether
    offloading this model's 36 KiB is slower than recomputing it (a row's ★
    and note) is close enough on CPU to turn with the machine's speed."""
    import tempfile

    from remat_tui.core.xla.estimates import chips, cpu_rates

    rates = cpu_rates.Rates(flops=1e11, bandwidth=2e10, transcendentals=1e9, overhead=5e-6)
    monkeypatch.setattr(cpu_rates, "measure", lambda: rates)
    # No calibration kept from an earlier test: these rates are calibrated and kept.
    monkeypatch.setenv("XDG_CACHE_HOME", tempfile.mkdtemp(prefix="remat-tui-same-cpu-"))
    monkeypatch.setattr(chips, "_cpu", None)


def drawn_column(table: DataTable, head: str) -> list[str]:
    """Each row's cell of the column `head` as the table draws it on screen:
    cut where the table's region ends."""
    from textual.geometry import Region

    columns = list(table.columns.values())
    at = [str(c.label) for c in columns].index(head)
    start = sum(c.get_render_width(table) for c in columns[:at]) + table.cell_padding
    end = start + columns[at].get_render_width(table) - 2 * table.cell_padding
    end = min(end, table.region.width)
    region = Region(0, 0, table.region.width, table.region.height)
    lines = [strip.text for strip in table.render_lines(region)]
    rows = min(table.row_count, table.region.height - 1)
    return [lines[1 + i][start:end].rstrip() for i in range(rows)]  # line 0: the headers


@pytest.mark.parametrize("size", SIZES)
async def test_compare_names_each_row_where_it_is_drawn(monkeypatch, size):
    """At 180×45 five rows read `site Encoder1` and the chart's y labels sat
    against the cut cells: now every configuration reads apart on screen,
    and a chart beside the table has the table's whole width beside it."""
    app = vit_app(monkeypatch)
    async with app.run_test(size=size) as pilot:
        screen = await open_compare(app, pilot)
        await steady_frame(pilot)
        table, chart = screen.query_one(DataTable), screen.query_one(PlotextPlot)
        labels = drawn_column(table, "configuration")
        configs = [r.config for r in screen.rows]
        assert len(set(configs)) == len(configs) > 10
        # The rows the table has room for are drawn (structure rows make
        # more than 120x35 shows; the rest scroll), each reading apart.
        assert len(labels) == min(len(configs), table.region.height - 1) > 10
        assert len(set(labels)) == len(labels), labels
        assert not table.region.overlaps(chart.region)
        if chart.region.y == table.region.y:  # beside: the table whole, the chart apart
            assert table.virtual_size.width <= table.region.width
            assert chart.region.x >= table.region.right + CHART_GAP
        assert chart.region.width >= CHART_MIN and chart.region.height >= 10


def configs_of_a_site(key: str) -> list[Config]:
    """What compare weighs: every built-in outer, and each at the site `key`."""
    specs = policies.builtin_specs()
    return [Config.make(policy=s) for s in specs] + [
        Config.make(sites={key: s}) for s in specs if s != policies.AS_WRITTEN
    ]


@pytest.mark.parametrize("width", [LABEL_MIN, 30, 40, 50, 70, 200])
def test_labels_keep_the_spec_and_spell_a_site_alike(width):
    configs = configs_of_a_site(SITE)
    labels = fitted_labels(configs, width)
    assert all(len(text) <= width for text in labels)
    assert len(set(labels)) == len(configs)  # distinct configurations read apart
    site_rows = [t for t, c in zip(labels, configs, strict=True) if c.sites]
    spelt = {t.split(": ")[0] for t in site_rows}
    assert len(spelt) == 1  # the same site, the same words in every row
    for text, config in zip(labels, configs, strict=True):
        spec = dict(config.site_specs).get(SITE, config.spec).short()
        if len(spec) + KEY_MIN + len(": ") <= width:  # room for it: the spec whole
            assert text.endswith(spec), (text, spec)
    if width >= len(f"site {SITE}: ") + max(len(s.short()) for s in policies.BUILTINS):
        assert all(SITE in t for t in site_rows)  # and where all fits, nothing is cut


def compiled_cells(label: str) -> tuple[str, ...]:
    """A compiled row's cells (COLUMNS), each as wide as compare makes them."""
    figures = {
        "": "★",
        "device": "116.7 KiB",
        "host": "36.0 KiB",
        "recompute": "101.6 kFLOP",
        "% fwd": "180%",
        "peak": "279.3 KiB",
        "temp": "172.3 KiB",
        "most at peak": "argument 39%",
        "est. step": "~240 µs",
        "configuration": label,
        "notes": "offloading is slower than recomputing: its host transfers",
    }
    return tuple(figures[c] for c in COLUMNS)


@pytest.mark.parametrize("width", [120, 150, 180, 240])
def test_a_compiled_table_keeps_every_figure_on_screen_from_120_columns(width):
    labels = [f"site {SITE}: {s.short()}" for s in policies.BUILTINS]
    cells = [compiled_cells(label) for label in labels]
    layout = lay_out(COLUMNS, cells, labels, width, trailing=("notes",), cap=NOTES_MAX)
    heads = [COLUMNS[i] for i in layout.order]
    assert heads[:2] == ["", "configuration"] and heads[-1] == "notes"
    figures = sum(w + PADDING for w in layout.widths[:-1])  # all but the notes
    assert figures <= width  # every figure on screen, the configuration too
    assert layout.label_width >= LABEL_MIN
    if layout.beside:
        assert layout.table_width + CHART_GAP + CHART_MIN <= width
        assert layout.label_width == max(len(t) for t in labels)
    else:
        assert layout.table_width == width


@pytest.mark.parametrize("width", [120, 150, 180])
def test_suggests_table_keeps_every_figure_on_screen_from_120_columns(width):
    """The answer beside the code as written, compiled, with a long site
    name and a long note: at 120 columns the figures ran past the screen's
    edge (`12.0 Mi`) behind the row names and an uncapped note."""
    from remat_tui.app.screens.suggest import LEFT_TO_THE_BODY, table_layout
    from remat_tui.report.comparisons import COLUMNS as ROW_COLUMNS

    heads = ("", *ROW_COLUMNS)
    site = Config.make(sites={SITE: "dots_with_no_batch_dims_saveable"})
    configs = [site, Config.make()]
    labels = [f"site {SITE}: dots_with_no_batch_dims_saveable", "as_written"]
    names = ("suggested", "as written")
    cells = [(n, *compiled_cells(t)) for n, t in zip(names, labels, strict=True)]
    layout, shown = table_layout(heads, cells, configs, width)
    order = [heads[i] for i in layout.order]
    assert order[:3] == ["", "", "configuration"] and order[-1] == "notes"
    assert not set(order) & set(LEFT_TO_THE_BODY)
    figures = sum(w + PADDING for w in layout.widths[:-1]) + SCROLLBAR  # all but the notes
    assert figures <= width  # every figure on screen, the configuration too
    assert layout.label_width >= LABEL_MIN
    for row, cell_row in zip(shown, cells, strict=True):  # the figures as the row has them
        assert all(row[i] == cell_row[i] for i in layout.order)


def test_a_modules_call_is_said_by_its_class_where_the_name_is_cut():
    """`TBlock.__call__` at 30 cells read `TBloc…: everything_saveable`; the
    class alone names it: `TBlock: everything_saveable`."""
    configs = configs_of_a_site("TBlock.__call__")
    labels = fitted_labels(configs, 30)
    site_rows = [t for t, c in zip(labels, configs, strict=True) if c.sites]
    assert all(t.startswith("TBlock: ") for t in site_rows), site_rows
    assert len(set(labels)) == len(configs)
    assert "TBlock: everything_saveable" in labels


# ---- snapshots -----------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_main_screen_with_a_long_site_name(snap_compare, monkeypatch, size):
    app = vit_app(monkeypatch)
    assert snap_compare(app, terminal_size=size, run_before=settled_frame)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_compare_with_a_long_site_name(snap_compare, monkeypatch, size):
    async def run_before(pilot):
        await open_compare(pilot.app, pilot)
        await steady_frame(pilot)

    same_cpu_everywhere(monkeypatch)
    assert snap_compare(vit_app(monkeypatch), terminal_size=size, run_before=run_before)


async def test_the_fit_charts_legend_tells_long_names_apart(monkeypatch):
    """The fit chart's legend cut each line's name at 32 cells: four lines
    read `site EncoderBlockWithPreLayerNor`. Names are fitted as the table's
    are, the site cut, the policy kept."""
    from types import SimpleNamespace

    from remat_tui.app.screens.fit import FitScreen

    specs = [s for s in policies.builtin_specs() if s != policies.AS_WRITTEN]
    configs = [Config.make(sites={SITE: s}) for s in specs]
    rows = [
        SimpleNamespace(
            policy=policies.AS_WRITTEN,
            config=config,
            best=i == 0,
            probes=[SimpleNamespace(batch=b, examples_per_second=b / (i + 1)) for b in (1, 2)],
        )
        for i, config in enumerate(configs)
    ]
    app = vit_app(monkeypatch)
    async with app.run_test(size=(120, 35)) as pilot:
        await settled_frame(pilot)
        screen = FitScreen(app.loaded.target, app.loaded.shown.config, app.loaded.shown.config)
        await app.push_screen(screen)
        screen.rows = rows
        screen.draw_chart()
        assert len(screen.chart_legend) == len(rows)
        assert len(set(screen.chart_legend)) == len(rows), screen.chart_legend
        for text, spec in zip(screen.chart_legend, specs, strict=True):
            assert policies.parse(spec).short()[:8] in text
