"""Provides the look every notebook display shares, as inline styles.

Why inline styles only, and only these: a saved notebook reopened untrusted in
JupyterLab has its HTML outputs sanitised (no <style>, no <script>, no <svg>,
and inline styles limited to an allow-list whose colours are hex, rgb() and
rgba() with a leading zero: no CSS variables, no currentColor), and GitHub's
renderer strips <style> too. So every rule is a style attribute from that
list, text colours are left to the notebook's theme, and the accents are
translucent, reading on a light page and on a dark one alike. Charts are SVG
documents in an <img> data: URI, which those sanitisers keep, each with its
own light background.
"""

from __future__ import annotations

import base64
from collections.abc import Set as AbstractSet
from html import escape

FONT = "font-family: system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"
MONO = "font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"

# Translucent accents: amber for residuals, blue for recomputation, red for Pareto
# rows and warnings, grey for rules and panels.
RESIDUAL_BG = "rgba(255, 184, 0, 0.28)"
RECOMPUTE_BG = "rgba(64, 128, 255, 0.22)"
PARETO_BG = "rgba(220, 50, 50, 0.10)"
WARN_BG = "rgba(220, 50, 50, 0.12)"
PANEL_BG = "rgba(128, 128, 128, 0.08)"
RULE = "1px solid rgba(128, 128, 128, 0.35)"
MARK = "rgb(196, 120, 0)"  # the residual marks, legible on white and on black
RECOMPUTE_MARK = "rgb(64, 128, 255)"
TRANSFER_MARK = "rgb(0, 150, 136)"  # a transfer from host memory: teal, neither of the above
MUTED = "opacity: 0.75"

ROOT = f"{FONT}; font-size: 13px; line-height: 1.45; margin: 4px 0"
TABLE = "border-collapse: collapse; margin: 4px 0 8px 0"
CELL = f"border-bottom: {RULE}; padding: 2px 8px; text-align: left; vertical-align: top"
NUM = f"{CELL}; text-align: right; white-space: nowrap"
HEAD = f"{CELL}; font-weight: bold; white-space: nowrap"
# text-align: JupyterLab's stylesheet right-aligns table cells, a <pre> in one too
PRE = (
    f"{MONO}; font-size: 12px; line-height: 1.35; white-space: pre; margin: 0; "
    f"padding: 6px 8px; background: {PANEL_BG}; overflow-x: auto; overflow-y: auto; "
    "text-align: left"
)
# A jaxpr pane: its lines wrap (no line or mark is cut off in a narrow notebook),
# each a block with a hanging indent so a wrapped line reads as one.
PANE = (
    f"{MONO}; font-size: 12px; line-height: 1.35; white-space: pre-wrap; "
    f"word-wrap: break-word; margin: 0; padding: 6px 8px; background: {PANEL_BG}; "
    "overflow-y: auto; text-align: left"
)
PANE_LINE = "display: block; padding-left: 2em; text-indent: -2em"
CODE = f"{MONO}; font-size: 12px"
TITLE = "font-weight: bold; font-size: 14px; margin: 2px 0"
HEADING = "font-weight: bold; margin: 8px 0 2px 0"


def tag(name: str, content: str = "", style: str = "", **attrs: str) -> str:
    """`<name style="..." attr="...">content</name>`; attribute values escaped,
    `content` taken as HTML (escape text with `text` first)."""
    parts = [name]
    if style:
        parts.append(f'style="{escape(style)}"')
    parts += [f'{k.rstrip("_").replace("_", "-")}="{escape(str(v))}"' for k, v in attrs.items()]
    return f"<{' '.join(parts)}>{content}</{name}>"


def text(value: object) -> str:
    """Plain text made safe to put in HTML."""
    return escape(str(value))


def svg_image(svg: str, label: str) -> str:
    """An SVG document as an <img> with a data: URI (what sanitisers keep, see
    the module docstring); `label` is its alt text."""
    if not svg:
        return ""
    data = base64.b64encode(svg.encode()).decode()
    return (
        f'<img src="data:image/svg+xml;base64,{data}" alt="{escape(label)}" '
        'style="max-width: 100%; height: auto; margin: 4px 0">'
    )


def table(headers: list[str], rows: list[list[str]], numeric: AbstractSet[int] = frozenset(),
          row_styles: list[str] | None = None, **attrs: str) -> str:  # fmt: skip
    """A table of HTML cells (already escaped); columns in `numeric` right-aligned."""
    head = "".join(tag("th", h, NUM if i in numeric else HEAD) for i, h in enumerate(headers))
    body = []
    for k, row in enumerate(rows):
        cells = "".join(tag("td", c, NUM if i in numeric else CELL) for i, c in enumerate(row))
        body.append(tag("tr", cells, row_styles[k] if row_styles else ""))
    return tag("table", tag("thead", tag("tr", head)) + tag("tbody", "".join(body)), TABLE, **attrs)
