"""Provides Ctrl-C while a search runs (fit, suggest): the first stops the
search after the compile under way (XLA cannot be interrupted mid-compile)
and the answer found so far is written, exit status 130; a second quits at
once.

Imports only the standard library.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType


@contextlib.contextmanager
def first_interrupt_stops(stop: threading.Event) -> Iterator[None]:
    """While a search runs: the first Ctrl-C sets `stop`, the next quits."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print(
            "remat-tui: stopping after the compile under way (Ctrl-C again quits now)",
            file=sys.stderr,
            flush=True,
        )

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
