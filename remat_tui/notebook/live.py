"""Provides Live: one target's analyses on request, for the widget (widget.py)
and free of the widget stack, so it is tested on its own.

A Config asked for before is answered at once from the cache (the core's LRU:
the analysis and its HTML, so a switch back is instant); a new one is traced
in a daemon thread, so the kernel keeps running the user's other cells
meanwhile. Threads cannot be killed: a request superseded by a newer one is
asked to stop at the core's next checkpoint (`cancelled`) and, should it
finish anyway, is cached but never shown. New traces also reuse the core's
own cache of primal programs (core/trace/primal.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from remat_tui.core.model import Analysis
from remat_tui.core.runtime.lru import LRU
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.analysis import analyze
from remat_tui.core.trace.configured import Cancelled
from remat_tui.errors import RematError
from remat_tui.registry import Target

LIMIT = 32  # analyses kept (as the app keeps), each with its HTML


@dataclass(frozen=True)
class Shown:
    """An answer: the analysis of `config`, its display, and how it came."""

    config: Config
    analysis: Analysis
    html: str
    seconds: float  # the trace's wall time; 0 for an answer from the cache
    cached: bool


class Live:
    """Requests for one target; `on_answer(Shown)` and `on_error(config, message)`
    are called for the latest request only, from the thread that answered it."""

    def __init__(
        self,
        target: Target,
        render: Callable[[Analysis], str],
        on_answer: Callable[[Shown], None],
        on_error: Callable[[Config, str], None],
    ):
        self.target = target
        self.render = render
        self.on_answer = on_answer
        self.on_error = on_error
        self.cache: LRU[tuple[Analysis, str]] = LRU(LIMIT)  # Config -> (Analysis, html)
        self._lock = threading.RLock()
        self._latest = 0  # the latest request's number
        self._settled = threading.Event()  # set while the latest request is answered
        self._settled.set()
        self.threads: list[threading.Thread] = []  # started, for tests to join

    def request(self, config: Config) -> Shown | None:
        """Answer `config`: from the cache at once (returned, and passed to
        `on_answer`), or traced in a thread (None now; `on_answer` later)."""
        with self._lock:
            self._latest += 1
            number = self._latest
            hit = self.cache.get(config)
            if hit is None:
                self._settled.clear()
        if hit is not None:
            analysis, html = hit
            shown = Shown(config, analysis, html, seconds=0.0, cached=True)
            self._answer(number, lambda: self.on_answer(shown))
            return shown
        thread = threading.Thread(
            target=self._trace, args=(number, config), name="remat-tui-trace", daemon=True
        )
        self.threads = [t for t in self.threads if t.is_alive()] + [thread]
        thread.start()
        return None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the latest request is answered (shown or failed); False
        on timeout. For scripts and tests: a notebook never needs to wait."""
        return self._settled.wait(timeout)

    @property
    def busy(self) -> bool:
        return not self._settled.is_set()

    def _trace(self, number: int, config: Config) -> None:
        start = time.perf_counter()
        try:
            analysis = analyze(self.target, config=config, cancelled=lambda: number != self._latest)
            html = self.render(analysis)
        except Cancelled:
            return
        except Exception as exc:  # said in place (a bug of ours or JAX's too): the kernel lives on
            message = exc.message if isinstance(exc, RematError) else f"{type(exc).__name__}: {exc}"
            self._answer(number, lambda: self.on_error(config, message))
            return
        self.cache.put(config, (analysis, html))
        shown = Shown(config, analysis, html, time.perf_counter() - start, cached=False)
        self._answer(number, lambda: self.on_answer(shown))

    def _answer(self, number: int, deliver: Callable[[], None]) -> None:
        """Deliver an answer if its request is still the latest; then, if it
        is, the latest request is settled (after delivery, so a caller woken
        by `wait` sees what was delivered)."""
        with self._lock:
            if number != self._latest:
                return
            try:
                deliver()
            finally:
                if number == self._latest:
                    self._settled.set()
