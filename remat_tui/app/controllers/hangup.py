"""Provides `quit_on_hangup`: the app quits when its terminal goes away.

Importing JAX can leave SIGHUP ignored (with libtpu installed, its start-up
ignores SIGHUP process-wide). The app then outlives a closed terminal window
or tmux session, spinning on a terminal that is gone. Once JAX is loaded, the
App puts a handler back that quits it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App

# what signal.getsignal answers
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
_before: dict[int, Handler] = {}  # id(app) -> the SIGHUP handler it replaced


def _settable() -> bool:
    return hasattr(signal, "SIGHUP") and threading.current_thread() is threading.main_thread()


def quit_on_hangup(app: App) -> None:
    """On SIGHUP, exit `app` (only from the main thread, where handlers are set)."""
    if _settable():
        _before.setdefault(id(app), signal.getsignal(signal.SIGHUP))
        signal.signal(signal.SIGHUP, lambda *_: app.exit(return_code=129))


def release(app: App) -> None:
    """The app is closing: the handler it replaced is back."""
    before = _before.pop(id(app), None)
    if before is not None and _settable():
        signal.signal(signal.SIGHUP, before)
