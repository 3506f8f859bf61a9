"""Provides a Comparison as a notebook display: the chart the reports draw
(memory against recompute, the Pareto front joined, each dot numbered as its
row) and a table with a row per configuration, Pareto-optimal rows starred
and shaded.

The table reads without a script, in compare's order. A small script makes
its headers sort on click where the notebook runs scripts (a live, trusted
notebook); where it does not (a saved notebook reopened untrusted, GitHub,
nbconvert's sanitiser) the script is dropped and the table stays as it is.
Columns come from report/comparisons.py (`columns`, `row_cells`), so a column the
reports gain shows here too; a column empty in every row is left out.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from remat_tui.core.units import count
from remat_tui.notebook import style
from remat_tui.notebook.style import tag, text
from remat_tui.registry import target_label
from remat_tui.report.comparisons import (
    any_measured,
    columns,
    comparison_legend,
    measured_ranks,
    pareto_svg,
    row_cells,
)

if TYPE_CHECKING:
    from remat_tui.core.search.compare import Comparison
    from remat_tui.core.search.rows import Row

# What each column sorts by, by its base name (`base_name`); any other column
# sorts by its text.
SORT_KEYS = {
    "": lambda r: int(r.pareto),
    "device": lambda r: r.device_bytes,
    "host": lambda r: r.host_bytes,
    "recompute": lambda r: r.recompute_flops,
    "% fwd": lambda r: r.recompute_share,
    "peak": lambda r: (r.compiled.peak_bytes or r.compiled.needed_bytes) if r.compiled else None,
    "temp": lambda r: r.compiled.temp_bytes if r.compiled else None,
    "est. step": lambda r: r.time.seconds if r.time else None,
    "measured": lambda r: r.measured.min_seconds if r.measured else None,
}
ALWAYS = {"", "device", "recompute", "configuration"}  # shown even when empty
NUMERIC = {"device", "host", "recompute", "% fwd", "peak", "temp", "est. step", "measured"}
MONO_COLUMNS = {"configuration"}
SMALL_COLUMNS = {"notes"}


def render(c: Comparison) -> str:
    title = tag(
        "div",
        "remat-tui compare · "
        + tag("code", text(target_label(c.target_file, c.target_name)), style.CODE)
        + f" · {count(len(c.rows), 'configuration')} · {text(c.device.get('platform'))}:"
        + f"{text(c.device.get('id'))} · {c.seconds:.1f} s",
        style.TITLE,
    )
    chart = style.svg_image(
        pareto_svg(c.rows, numbered=True),
        "memory against recompute FLOPs, one dot per row, numbered as the table",
    )
    legend = tag("div", text(comparison_legend(c)), f"{style.MUTED}; font-size: 12px")
    body = title + chart + table(c.rows) + legend + structure_code(c.rows)
    return tag("div", body, style.ROOT, class_="remat-tui")


def structure_code(rows: Sequence[Row]) -> str:
    """The code to write for each structure row (numbered as the table), folded."""
    out = []
    for k, row in enumerate(rows, 1):
        if row.config.structure is None:
            continue
        summary = tag("summary", f"#{k} {text(str(row.config.structure))}: the code to write")
        out.append(tag("details", summary + tag("pre", text(row.python), style.CODE)))
    return "".join(out)


def table(rows: Sequence[Row], numbers: list[str] | None = None) -> str:
    """The rows as a table whose headers sort it where scripts run; `numbers`
    names the rows in the first column (default 1, 2, ...: the chart's)."""
    heads = columns(rows)
    rank = measured_ranks(rows) if any_measured(rows) else None
    cells = [row_cells(r, rank) for r in rows]
    names = [base_name(h) for h in heads]
    shown = [i for i, n in enumerate(names) if n in ALWAYS or any(row[i] for row in cells)]
    table_id = f"remat-tui-{uuid.uuid4().hex[:12]}"
    head = tag("th", "#", style.NUM) + "".join(
        tag("th", text(heads[i] or "★"), style.NUM if names[i] in NUMERIC else style.HEAD)
        for i in shown
    )
    body = []
    for k, (row, row_text) in enumerate(zip(rows, cells, strict=True)):
        label = numbers[k] if numbers else str(k + 1)
        tds = [tag("td", text(label), style.NUM, data_sort=str(k))]
        for i in shown:
            tds.append(_cell(names[i], row, row_text[i]))
        body.append(tag("tr", "".join(tds), f"background: {style.PARETO_BG}" if row.pareto else ""))
    html = tag(
        "table",
        tag("thead", tag("tr", head)) + tag("tbody", "".join(body)),
        style.TABLE,
        id=table_id,
    )
    return html + _SORT_SCRIPT.replace("TABLE_ID", table_id)


def base_name(head: str) -> str:
    """A column's name without a sharded program's `(global)` or `/device`."""
    return re.sub(r" \(global\)$|/device$", "", head)


def _cell(name: str, row: Row, shown: str) -> str:
    key = SORT_KEYS.get(name)
    value = key(row) if key is not None else None
    sort = "" if value is None else repr(float(value))
    if name in MONO_COLUMNS:
        body, cell_style = tag("span", text(shown), style.CODE), style.CELL
    elif name in SMALL_COLUMNS:
        body, cell_style = text(shown), f"{style.CELL}; font-size: 12px"
    elif name == "":
        body, cell_style = text(shown), f"{style.NUM}; color: rgb(220, 50, 50)"
    else:
        body, cell_style = text(shown), style.NUM if name in NUMERIC else style.CELL
    return tag("td", body, cell_style, data_sort=sort if key is not None else shown)


# Progressive enhancement only (see the module docstring): sorts the rows by the
# clicked column's data-sort values, numerically when every one is a number,
# empty cells last; a second click reverses.
_SORT_SCRIPT = """<script>
(function () {
  var table = document.getElementById("TABLE_ID");
  if (!table || !table.tHead) return;
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.style.cursor = "pointer";
    th.title = "sort by this column (again: reverse)";
    th.addEventListener("click", function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var key = function (r) { var c = r.cells[col]; var k = c.getAttribute("data-sort");
                               return k === null ? c.textContent : k; };
      var numeric = rows.every(function (r) { var k = key(r); return k === "" || !isNaN(k); });
      var dir = th.getAttribute("data-dir") === "asc" ? -1 : 1;
      Array.prototype.forEach.call(heads, function (h) {
        h.removeAttribute("data-dir");
        var arrow = h.querySelector(".remat-tui-arrow"); if (arrow) arrow.remove();
      });
      th.setAttribute("data-dir", dir === 1 ? "asc" : "desc");
      var arrow = document.createElement("span");
      arrow.className = "remat-tui-arrow"; arrow.textContent = dir === 1 ? " ▲" : " ▼";
      th.appendChild(arrow);
      rows.map(function (r, i) { return [key(r), i, r]; }).sort(function (a, b) {
        if (a[0] === "" || b[0] === "") return (a[0] === "") - (b[0] === "") || a[1] - b[1];
        var d = numeric ? a[0] - b[0] : a[0].localeCompare(b[0]);
        return d * dir || a[1] - b[1];
      }).forEach(function (e) { body.appendChild(e[2]); });
    });
  });
})();
</script>"""
