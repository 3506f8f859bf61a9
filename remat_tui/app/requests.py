"""Provides AnalysisRequests, the App's side of analysing: what a request is
(target and Config: the cache key), the worker that traces it, and what
happens when its answer or its error arrives. A mixin of RematApp: its
handlers follow Textual's naming convention (on_<message>), which Textual
finds on mixins too.
"""

from __future__ import annotations

import gc
import time
import traceback

from textual import work
from textual.widgets import Static

from remat_tui.app import cache as analysis_cache
from remat_tui.app.arguments import prepared
from remat_tui.app.hints import with_suggestion
from remat_tui.app.messages import AnalysisFailed, AnalysisReady, Progress
from remat_tui.app.status import nothing_shown
from remat_tui.core.setup import policies
from remat_tui.core.setup.config import Config
from remat_tui.errors import RematError

# Requests closer together than this are a burst (keys held down or typed
# ahead): its trace starts once it pauses this long, so the analyses of the
# configurations passed on the way never start, and never take the CPU the
# screen needs. The first request after a pause starts at once.
BURST_SECONDS = 0.12


class AnalysisRequests:
    """Requests, the cache and the analysis worker (mixed into RematApp)."""

    _last_request_at = float("-inf")

    def key(self, spec_text: str, sites: dict | None = None) -> tuple:
        """(target, Config): what an analysis is asked for, and the cache key."""
        overrides = self.site_overrides if sites is None else sites
        config = Config(spec_text, Config().with_sites(overrides).sites, self.device)
        return (self.target.name, config, self.reloads)

    def baseline_key(self) -> tuple:
        """as_written everywhere: what the status line's change is measured against."""
        return self.key(policies.AS_WRITTEN, sites={})

    def apply_policy(self, text: str) -> None:
        """Parse and show a policy: from the cache at once, or traced in the background."""
        if self.target is None:
            return
        try:
            spec = policies.parse(text, self.target.policies)
        except RematError as exc:
            self.show_error(with_suggestion(exc.message, text, self.target.policies))
            return
        self.spec = spec
        self.name_states = self.scoped_states()
        key = self.key(spec.canonical)
        self.request += 1
        now = time.monotonic()
        if key in self.cache:
            self.pending = None
            self.show(analysis_cache.touch(self.cache, key))
        else:
            self.pending = key
            self.activity.begin(f"tracing {key[1].label()}")
            if now - self._last_request_at < BURST_SECONDS:
                self.set_timer(
                    BURST_SECONDS, lambda r=self.request: self.analyse_if_latest(r, key, spec)
                )
            else:
                self.analyse(self.request, key, spec)
        self._last_request_at = now
        self.refresh_sidebar()

    def analyse_if_latest(self, request: int, key: tuple, spec) -> None:
        """The end of a burst: trace its last request (an earlier one has nothing to do)."""
        if request == self.request:
            self.analyse(request, key, spec)

    @work(thread=True, group="analysis", exit_on_error=False)
    def analyse(self, request: int, key: tuple, spec) -> None:
        from remat_tui.core.trace.analysis import analyze
        from remat_tui.core.trace.configured import Cancelled

        def stage(what: str) -> None:
            self.post_message(Progress(what, request if request >= 0 else None))

        if request != self.request and key != self.baseline_key():
            return  # superseded while it waited for a thread: a burst of keys traces once
        try:
            # Example arguments are built once per target (per device set, for a
            # sharded target), not once per policy.
            on_stage = stage if request == self.request else None
            target = prepared(self.target, key[1].device, on_stage)
            if request == self.request:
                stage(f"tracing {key[1].label()}")
            result = analyze(
                target,
                config=key[1],
                cancelled=lambda: request != self.request and key != self.baseline_key(),
            )
        except Cancelled:
            return
        except RematError as exc:
            self.post_message(AnalysisFailed(request, key, exc.message))
            return
        except Exception as exc:  # our bug: report it in place, keep the last good state
            self.log.error(traceback.format_exc())
            self.post_message(AnalysisFailed(request, key, f"internal error: {exc!r}"))
            return
        self.post_message(AnalysisReady(request, key, result))

    def on_analysis_ready(self, message: AnalysisReady) -> None:
        evicted = analysis_cache.remember(
            self.cache,
            self.drawings,
            message.key,
            message.analysis,
            keep=(self.shown, self.cache.get(self.baseline_key())),
        )
        self.call_after_refresh(self.settle_memory, bool(evicted))
        if message.request == self.request:
            self.pending = None
            self.activity.end()
            self.show(message.analysis)
        elif self.shown is not None and message.key == self.baseline_key():
            self.update_status(self.shown)  # the baseline for the % difference arrived

    def settle_memory(self, evicted: bool = False) -> None:
        """Once the new analysis is on screen: collect the trace's garbage, then move
        what is left (the cached analyses, alive as long as the app) out of the
        collector's sight, so its full collections, which would otherwise walk
        every cached jaxpr equation, stop stalling frames and traces. When the
        cache evicted analyses, what was frozen is handed back to the collector
        first: an evicted analysis caught in a reference cycle is freed only by
        a collection that can see it (one full walk, only when the cache is full)."""
        if evicted:
            gc.unfreeze()
        gc.collect()
        gc.freeze()

    def on_analysis_failed(self, message: AnalysisFailed) -> None:
        if message.request == self.request:
            self.pending = None
            self.activity.end()
            self.show_error(message.message)
            if self.shown is None:  # nothing to fall back on: say so, no stale spinner
                self.update_title()
                self.query_one("#status", Static).update(
                    nothing_shown(bool(self.reloader.watched)), layout=False
                )
            else:  # the sidebar, title and device go back to what is shown
                self.spec = policies.parse(self.shown.policy, self.target.policies)
                self.site_overrides = self.shown.config.site_overrides
                # (a device that failed, e.g. a topology libtpu cannot load, would
                # otherwise make every later policy fail the same way)
                self.device = self.shown.config.device or self.device
                self.name_states = self.scoped_states()
                self.update_title()
                self.update_status(self.shown)
                self.refresh_sidebar()

    def ensure_baseline(self) -> None:
        """Trace as_written too (once per device): the status line compares with it."""
        key = self.baseline_key()
        if key not in self.cache and self.pending is None:
            self.analyse(-1, key, policies.parse(policies.AS_WRITTEN))

    def notes_for(self, a) -> list[str]:
        """Why this configuration may change nothing (core/search/notes.py), measured
        against as_written when that analysis is at hand."""
        from remat_tui.core.search.notes import Baseline, notes_for

        base = self.cache.get(self.baseline_key())
        return notes_for(a, Baseline.of(base) if base is not None else None)
