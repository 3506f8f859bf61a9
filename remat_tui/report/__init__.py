"""Provides the report formats: Analysis -> json / md / html / text.

May use rich, never textual. `render` is what `remat-tui report`, the app's
export and a notebook all call.
"""

from __future__ import annotations

import json

from remat_tui.core.model import Analysis
from remat_tui.report import html, markdown, text

FORMATS = ("json", "md", "html", "text")


def render(analysis: Analysis, fmt: str) -> str:
    """The report in format `fmt` (one of FORMATS), ending in a newline."""
    if fmt == "json":
        return json.dumps(analysis.to_dict(), indent=2) + "\n"
    if fmt == "md":
        return markdown.render(analysis)
    if fmt == "html":
        return html.render(analysis)
    if fmt == "text":
        return text.render(analysis)
    raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")
