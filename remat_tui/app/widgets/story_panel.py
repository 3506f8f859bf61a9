"""Provides StoryPanel: the selected residual's story (Contract 14) beneath
the residual table, shown and hidden with `y` ("why is it saved"): the rule
that saved it, the equation and calls that made it, the backward equations
that read it and, once the configuration is compiled (`p`), what XLA made of
it, marked where the jaxpr and the compile disagree.

The analysis shown carries the jaxpr's part; the compile arrives apart (from
the compile child, which knows no residuals), so the panel ties the two
(core/xla/fates/residuals.py) the first time it tells a residual of that pair, and
keeps the result for the next selection.

The panel is a few lines high; a longer story scrolls in it (the wheel, or
its own arrows once tab focuses it), so that the XLA line at its end can be
read at any height.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from remat_tui.core.units import human_bytes
from remat_tui.report import story
from remat_tui.report.phrases import what, where

if TYPE_CHECKING:
    from remat_tui.core.model import Analysis
    from remat_tui.core.xla.compile.compiled import Compiled

NOT_COMPILED = "p compiles this configuration: then what XLA made of it"


class StoryPanel(VerticalScroll):
    """The story of one residual, in a few lines that scroll."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._linked: tuple | None = None  # (id of analysis, id of compile, residuals told)

    def compose(self) -> ComposeResult:
        yield Static("", id="story-text", markup=False)

    @property
    def said(self) -> str:
        """The story told now, as plain text."""
        return str(self.query_one("#story-text", Static).render())

    def update(self, text: Content | str) -> None:
        """Tell `text`, from its first line."""
        self.query_one("#story-text", Static).update(text)
        self.scroll_home(animate=False)

    def tell(self, a: Analysis, index: int, compiled: Compiled | None) -> None:
        """Say residual `index` of the analysis `a`; `compiled` is its compile
        (a Compiled), or None while there is none."""
        if a is None or not 0 <= index < len(a.residuals):
            self.update("no residual selected")
            return
        r = self._told(a, compiled)[index]
        at = f" · {where(r)}" if where(r) else ""
        head = f"R{index + 1}  {r.aval} · {human_bytes(r.bytes)} · {r.kind} {what(r)}{at}"
        rows = story.lines(r, index)
        if r.story is not None and r.story.xla is None:
            missing = NOT_COMPILED if compiled is None else "no breakdown of the compile"
            rows.append(("XLA", missing))
        parts: list[Content | str] = [Content.styled(head, "bold")]
        for label, words in rows:
            parts += ["\n", Content.styled(f"{label:<8} ", "dim"), _words(words)]
        text = Content.assemble(*parts)
        self.border_title = "Why it is saved (y)"
        self.update(text)

    def _told(self, a: Analysis, compiled: Compiled | None) -> list:
        """`a`'s residuals, each with what XLA made of it where `compiled` says."""
        if compiled is None or getattr(compiled, "memory", None) is None:
            return a.residuals
        key = (id(a), id(compiled))
        if self._linked is None or self._linked[:2] != key:
            from remat_tui.core.xla.fates.residuals import link

            self._linked = (*key, link(a.residuals, compiled)[0])
        return self._linked[2]


def _words(words: str) -> Content:
    """The story's words, the disagreement marked."""
    if story.DISAGREES not in words:
        return Content(words)
    before, _, after = words.partition(f"[{story.DISAGREES}]")
    mark = Content.styled(f"[{story.DISAGREES}]", "bold red")
    return Content.assemble(Content(before), mark, Content(after))
