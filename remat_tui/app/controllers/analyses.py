"""Provides Analyses: the App's analysis controller. It holds the cache of
analyses and their drawings, counts requests, runs the worker that traces a
request (coalescing bursts of keys), and posts AnalysisReady or
AnalysisFailed back to the App, which decides what to draw. It also keeps
memory bounded: evicted analyses are collected, and JAX's own caches are
cleared every JAX_CACHES_EVERY analyses; and it pauses Python's automatic
garbage collection while it traces (PausedCollection).

Owned by the App (not mixed into it). It is given Textual's App for its
workers, timers and messages (it reads none of RematApp's state), and each
request brings the target to trace.
"""

from __future__ import annotations

import gc
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from textual.app import App

from remat_tui.app.arguments import prepared
from remat_tui.app.messages import AnalysisFailed, AnalysisReady, Progress
from remat_tui.app.screens.failure import failure_words
from remat_tui.app.state.drawing import Drawing, draw
from remat_tui.core.model import Analysis
from remat_tui.core.runtime.lru import LRU
from remat_tui.core.setup.caches import clear_jax_caches
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.registry import Target

LIMIT = 32  # analyses kept, each with its drawing

# Requests closer together than this are a burst (keys held down or typed
# ahead): its trace starts once it pauses this long, so the analyses of the
# configurations passed on the way never start, and never take the CPU the
# screen needs. The first request after a pause starts at once.
BURST_SECONDS = 0.12
# JAX's own caches are cleared after this many analyses arrive
# (core/setup/caches.py says why): what they hold between two clears stays bounded, and the cost,
# JAX tracing again what it had kept, is paid once per so many analyses.
JAX_CACHES_EVERY = 8


class Analyses:
    """Requests, the cache and the analysis worker, for one App."""

    def __init__(self, app: App):
        self.app = app  # Textual's: run_worker, set_timer, post_message, call_after_refresh
        self.cache: LRU[Analysis] = LRU(LIMIT)  # analyses by request key
        self.drawings: dict[int, Drawing] = {}  # by id() of a cached Analysis, dropped with it
        self.request = 0  # the latest request's number; older answers are not shown
        self.pending: tuple | None = None  # the key being traced for the latest request
        self.last_request_at = float("-inf")
        self.since_jax_caches = 0  # analyses received since JAX's caches were cleared
        self.closed = False  # the app is closing (close)

    def ask(self, target: Target, key: tuple, baseline: tuple) -> Analysis | None:
        """Request `key` (of `target`): the cached analysis (now the most
        recently used) to show at once, or None while it is traced in the
        background."""
        self.request += 1
        now, earlier = time.monotonic(), self.last_request_at
        self.last_request_at = now
        cached = self.cache.get(key)
        if cached is not None:
            self.pending = None
            return cached
        self.pending = key
        if now - earlier < BURST_SECONDS:
            request = self.request
            self.app.set_timer(
                BURST_SECONDS, lambda: self.trace_if_latest(target, request, key, baseline)
            )
        else:
            self.trace(target, self.request, key, baseline)
        return None

    def trace_if_latest(self, target: Target, request: int, key: tuple, baseline: tuple) -> None:
        """The end of a burst: trace its last request (an earlier one has nothing to do)."""
        if request == self.request:
            self.trace(target, request, key, baseline)

    def ensure(self, target: Target, key: tuple) -> None:
        """Trace `key` (the as_written baseline) unless cached or another trace is due."""
        if key not in self.cache and self.pending is None:
            self.trace(target, -1, key, key)

    def trace(self, target: Target, request: int, key: tuple, baseline: tuple) -> None:
        self.app.run_worker(
            lambda: self._trace(target, request, key, baseline),
            thread=True,
            group="analysis",
            exit_on_error=False,
        )

    def _trace(self, target: Target, request: int, key: tuple, baseline: tuple) -> None:
        from remat_tui.core.trace.analysis import analyze
        from remat_tui.core.trace.configured import Cancelled

        app = self.app

        def stage(what: str) -> None:
            app.post_message(Progress(what, request if request >= 0 else None))

        def superseded() -> bool:
            return request != self.request and key != baseline

        if superseded():
            return  # superseded while it waited for a thread: a burst of keys traces once
        config = key[1]
        try:
            # Example arguments are built once per target (per device set, for a
            # sharded target), not once per policy.
            on_stage = stage if request == self.request else None
            target = prepared(target, config.device, on_stage)
            if request == self.request:
                stage(f"tracing {config.label()}")
            collector.pause(self)  # resumed once the answer is drawn (_after_drawn)
            try:
                result = analyze(target, config=config, cancelled=superseded)
            except BaseException:
                collector.resume(self)
                raise
        except Cancelled:
            return
        except RematError as exc:
            app.post_message(AnalysisFailed(request, key, exc.message))
            return
        except Exception as exc:  # our bug: report it in place, keep the last good state
            app.log.error(traceback.format_exc())
            app.post_message(AnalysisFailed(request, key, failure_words(exc)))
            return
        if self.closed or not app.post_message(AnalysisReady(request, key, result)):
            collector.resume(self)  # the app is closing: its answer will never be drawn

    def ready(self, message: AnalysisReady, keep: tuple) -> bool:
        """Cache an answer (never evicting what is in `keep`); whether it
        answers the latest request (then the App shows it)."""
        evicted = self.cache.put(message.key, message.analysis, keep=keep)
        self._drop_drawings(evicted)
        latest = message.request == self.request
        if latest:
            self.pending = None
        self.since_jax_caches += 1
        # Now, before the App shows the answer and starts the work that follows
        # it (the Names verdicts, the baseline), and never while the latest
        # request's trace runs: that work would trace again what it just cached.
        # (5 ms; clearing while another thread traces is safe under the GIL,
        # as JAX's maintainers say in jax-ml/jax#19590.)
        cleared = self.since_jax_caches >= JAX_CACHES_EVERY and self.pending is None
        if cleared:
            self.since_jax_caches = 0
            clear_jax_caches()
        self.app.call_after_refresh(self._after_drawn, bool(evicted) or cleared)
        return latest

    def _after_drawn(self, freed: bool) -> None:
        """Once the answer is on screen: memory settled, and the garbage
        collection paused when its trace began (`_trace`) goes on."""
        settle_memory(freed)
        collector.resume(self)

    def drawing(self, a: Analysis) -> Drawing:
        """What the widgets need from `a`, made once per cached analysis."""
        found = self.drawings.get(id(a))
        if found is None:
            found = self.drawings[id(a)] = draw(a)
        return found

    def failed(self, message: AnalysisFailed) -> bool:
        """Whether a failure answers the latest request (then the App says so)."""
        latest = message.request == self.request
        if latest:
            self.pending = None
        return latest

    def forget_all_but(self, *kept: Iterable[Analysis]) -> None:
        """Every analysis goes, with its drawing, but those `kept` (after a
        reload: the one shown, until the new code's arrives)."""
        self._drop_drawings(self.cache.retain(lambda _, a: any(a is k for k in kept)))

    def _drop_drawings(self, gone: list) -> None:
        """The drawings of analyses no longer cached (one analysis can be cached
        under two keys: its drawing stays while either is)."""
        cached = {id(a) for a in self.cache.values()}
        for analysis in gone:
            if id(analysis) not in cached:
                self.drawings.pop(id(analysis), None)

    def close(self) -> None:
        """The app is closing: an answer on its way may never be drawn, so the
        garbage collection paused for it goes on now, and for any trace still
        running, when it ends."""
        self.closed = True
        collector.release(self)

    def names_seen(self) -> list[str]:
        """Every checkpoint_name seen in any cached analysis, first seen first."""
        seen: dict[str, None] = {}
        for a in self.cache.values():
            for n in a.names:
                seen.setdefault(n.name)
        return list(seen)


class PausedCollection:
    """Python's automatic garbage collection, paused from the start of a trace
    until its analysis is on screen, then collected once (settle_memory).

    A trace allocates millions of objects that live on in the analysis; left
    alone, the collector runs full collections over them two or three times
    per trace (35-120 ms each, measured on the unrolled transformer), in the
    trace's thread or in the UI thread between drawing the answer and writing
    its frame, while holding the GIL: 10-30% of a new policy's time on screen.
    Nested: traces in other threads (the baseline) pause it too. Counted by
    owner (an app's Analyses), so an app that closes releases its own pauses
    and a trace of its that ends later never resumes another app's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paused: Counter = Counter()  # pauses held, by owner

    def pause(self, owner: object) -> None:
        with self._lock:
            if not self._paused:
                gc.disable()
            self._paused[owner] += 1

    def resume(self, owner: object) -> None:
        """One of `owner`'s pauses ends (none held, e.g. released: nothing to do)."""
        with self._lock:
            held = self._paused.pop(owner, 0)
            if held > 1:
                self._paused[owner] = held - 1
            if held and not self._paused:
                gc.enable()

    def release(self, owner: object) -> None:
        """Every pause `owner` holds ends (its app is closing)."""
        with self._lock:
            self._paused.pop(owner, None)
            if not self._paused:
                gc.enable()


collector = PausedCollection()


def settle_memory(freed: bool = False) -> None:
    """Once the new analysis is on screen: collect the trace's garbage, then move
    what is left (the cached analyses, alive as long as the app) out of the
    collector's sight, so its full collections stop stalling frames and
    traces. When memory was let go (analyses evicted from the cache, JAX's
    caches cleared), what was frozen is handed back to the collector first:
    what was freed and caught in a reference cycle goes only in a collection
    that can see it."""
    if freed:
        gc.unfreeze()
    gc.collect()
    gc.freeze()
