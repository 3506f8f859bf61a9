"""Provides `failure_words`: what a screen says in place when the work it runs
(a search, a comparison, a fit, a diff, the memory view) raised."""

from __future__ import annotations

from remat_tui.errors import RematError


def failure_words(exc: BaseException) -> str:
    """A RematError's own message (bad input, said so it can be fixed); for
    anything else, which is remat-tui's bug, the exception's type and message
    without our traceback, and what to do about it."""
    if isinstance(exc, RematError):
        return exc.message
    said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return (
        f"an error inside remat-tui, not in your code ({said}); "
        "please report it with the target that shows it"
    )
