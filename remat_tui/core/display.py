"""Provides how the core's results display themselves in notebooks and with
rich, without the core rendering anything.

Every result a user gets back (Analysis, Comparison, Suggestion, Diff,
Compiled) inherits `Displayable`: its `_repr_html_`, `_repr_mimebundle_` and
`__rich__` look up a renderer for the result's class in `RENDERERS`, which the
notebook layer fills when it is imported (`remat_tui/notebook/hooks.py`
calls `register`). The public entry points (`remat_tui.analyze`, `compare`,
`suggest`, `diff`, `show`) import that layer, so results always display;
the core itself imports nothing to render (no rich, no reports: the
import-linter contracts in pyproject.toml hold it to that).

A result made by calling the core directly, before anything imported the
notebook layer, falls back to its plain repr: IPython then shows that text,
and rich prints it as text.
"""

from __future__ import annotations

from collections.abc import Callable

KINDS = ("html", "text", "rich")  # HTML fragment, plain text, rich renderable

# {class: {kind: renderer(result) -> str | rich renderable}}
RENDERERS: dict[type, dict[str, Callable]] = {}


def register(cls: type, **renderers: Callable) -> None:
    """Give `cls` (and its subclasses) renderers by kind: html=, text=, rich=."""
    unknown = set(renderers) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown renderer kinds {sorted(unknown)}; expected {KINDS}")
    RENDERERS.setdefault(cls, {}).update(renderers)


def renderer(cls: type, kind: str) -> Callable | None:
    """The renderer of `kind` registered for `cls` or its nearest base."""
    for base in cls.__mro__:
        found = RENDERERS.get(base, {}).get(kind)
        if found is not None:
            return found
    return None


class _PlainText:
    """Text rich prints as it is (a str returned by __rich__ would be read as markup)."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text


class Displayable:
    """Mixin for results: displays through the renderers registered for its class."""

    def _repr_html_(self) -> str | None:
        render = renderer(type(self), "html")
        return None if render is None else render(self)

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        """HTML for notebooks and, beside it, the plain-text report (not the
        dataclass repr, which holds every jaxpr line) for text-only viewers."""
        bundle = {}
        for mime, kind in (("text/html", "html"), ("text/plain", "text")):
            render = renderer(type(self), kind)
            if render is not None:
                bundle[mime] = render(self)
        return bundle

    def __rich__(self) -> object:
        render = renderer(type(self), "rich")
        return _PlainText(repr(self)) if render is None else render(self)
