"""Provides the layout of a table of configurations beside its chart (the
compare and fit screens) for the screen's width: which columns show, in which
order and how wide; the configuration column's labels fitted to its width;
and whether the chart has room beside the table or goes beneath it.

The configuration names the row, so it comes first after the mark, and it
is never cut to a prefix shared by other rows (`site Encoder1`): a long site
name is shortened before the policy, which is what tells rows apart. The
table gets the width its cells need; the chart goes beside it only when it
then still has CHART_MIN columns, else beneath it at the full width: the
chart's axis labels never sit against a cut-off cell.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len

from remat_tui.core.setup.config import Config
from remat_tui.core.setup.policies import AS_WRITTEN

CHART_MIN = 56  # the chart beside the table: y labels, a readable plot, the legend
CHART_GAP = 1  # between the table and the chart beside it
LABEL_MIN = 24  # the configuration column is never narrower (the panel beneath has it all)
NOTES_MAX = 28  # notes run long; the panel beneath has them in full
KEY_MIN = 6  # a site's name is shortened to no fewer cells than this (its `…` included)
PADDING = 2  # a DataTable column's cell padding, both sides
SCROLLBAR = 1  # the table's vertical scrollbar (app.tcss sets its size)


def label_parts(config: Config) -> tuple[str | None, list[tuple[str, str]], str | None]:
    """The configuration as a table row says it: the outer policy (None when
    the code runs as written and sites or a structure are set), a names
    policy as its names (PolicySpec.short), each site override (key, spec),
    and its structure (`nested(4)`) or None."""
    structure = config.structure
    changed = config.site_specs or structure is not None
    outer = None if config.spec.kind == AS_WRITTEN and changed else config.spec.short()
    sites = [(str(key), spec.short()) for key, spec in config.site_specs]
    return outer, sites, None if structure is None else str(structure)


def _joined(outer: str | None, sites: list[tuple[str, str]], structure: str | None,
            word: str = "site ") -> str:  # fmt: skip
    parts = ([outer] if outer else []) + [f"{word}{k}: {spec}" for k, spec in sites]
    return "; ".join(parts + ([structure] if structure else []))


CALL = ".__call__"  # a module's call: its class names it (`TBlock.__call__` is `TBlock`)


def _shortened(key: str, cells: int) -> str:
    """`key` in at most `cells`: whole, else a module's class without its
    `.__call__`, else cut at its end."""
    if cell_len(key) <= cells:
        return key
    if key.endswith(CALL) and cell_len(key) - len(CALL) <= cells:
        return key.removesuffix(CALL)
    return key[: cells - 1] + "…"


def fitted_labels(configs: list[Config], width: int) -> list[str]:
    """Each row's configuration, `configs`, in at most
    `width` cells: whole where every one fits; else the site names
    shortened, to one length in every row (the same site spelt the same), a
    module's `.__call__` dropped first (`site TBlock: dots_saveable`), then
    cut at their ends (`site EncoderBlo…: dots_saveable`), the longest with which every label
    fits, down to KEY_MIN cells; then without the word `site`; a label still
    too long loses its end."""
    parts = [label_parts(config) for config in configs]

    def joined(cells: int, word: str = "site ") -> list[str]:
        return [
            _joined(outer, [(_shortened(k, cells), spec) for k, spec in sites], structure, word)
            for outer, sites, structure in parts
        ]

    cells = max((cell_len(k) for _, sites, _ in parts for k, _ in sites), default=0)
    while cells > KEY_MIN and any(cell_len(text) > width for text in joined(cells)):
        cells -= 1
    texts = joined(cells)
    if any(cell_len(text) > width for text in texts):  # then `Encod…: nothing_saveable`
        texts = joined(cells, word="")
    return [text if cell_len(text) <= width else text[: width - 1] + "…" for text in texts]


def whole_label(config: Config) -> str:
    """The row's configuration as the table says it, uncut."""
    return _joined(*label_parts(config))


@dataclass(frozen=True)
class TableLayout:
    """Where the columns go: `order`, the indices into the headers shown, in
    their order; `widths`, each one's width; `label_width`, the configuration
    column's; `beside`, whether the chart is beside the table (else beneath);
    `table_width`, the table's width when beside (beneath: the screen's)."""

    order: tuple[int, ...]
    widths: tuple[int, ...]
    label_width: int
    beside: bool
    table_width: int


def lay_out(
    heads: tuple[str, ...],
    cells: list[tuple[str, ...]],
    labels: list[str],
    screen_width: int,
    trailing: tuple[str, ...] = (),
    cap: int | None = None,
    lead: int = 1,
) -> TableLayout:
    """The layout of a table with `heads` and rows of `cells` (the column
    `configuration` among them, whose whole texts are `labels`) on a screen
    `screen_width` wide. Columns with no value in any row are left out (all
    show while there are no rows), but for the first `lead` (the mark, a
    row's name), which the configuration follows. The columns named in
    `trailing` (notes) come last and take no room from the configuration:
    on a narrow screen they are scrolled to; `cap` bounds their width (where
    a panel beneath shows them whole)."""
    label = heads.index("configuration")
    shown = [
        i
        for i in range(len(heads))
        if i < lead or i == label or not cells or any(c[i] for c in cells)
    ]
    rest = [i for i in shown[lead:] if i != label]
    order = (
        *shown[:lead],
        label,
        *(i for i in rest if heads[i] not in trailing),
        *(i for i in rest if heads[i] in trailing),
    )

    def natural(i: int) -> int:
        texts = labels if i == label else [c[i] for c in cells]
        width = max([cell_len(heads[i])] + [cell_len(t) for t in texts])
        return min(width, cap) if cap and heads[i] in trailing else width

    widths = {i: natural(i) for i in order}
    numbers = sum(widths[i] + PADDING for i in order if i != label and heads[i] not in trailing)
    last = sum(widths[i] + PADDING for i in order if heads[i] in trailing)
    whole = numbers + last + widths[label] + PADDING + SCROLLBAR
    beside = whole + CHART_GAP + CHART_MIN <= screen_width
    if not beside:
        # The table has the screen's width; the configuration what the numbers
        # leave (the trailing columns are scrolled to where the screen is too
        # narrow).
        room = screen_width - numbers - PADDING - SCROLLBAR
        widths[label] = max(LABEL_MIN, min(widths[label], room))
    return TableLayout(
        order=order,
        widths=tuple(widths[i] for i in order),
        label_width=widths[label],
        beside=beside,
        table_width=whole if beside else screen_width,
    )


def capped_cell(text: str) -> str:
    """A cell of a capped column cut to NOTES_MAX cells."""
    return text if cell_len(text) <= NOTES_MAX else text[: NOTES_MAX - 1] + "…"
