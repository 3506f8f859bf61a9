"""One analysis pauses Python's automatic garbage collection while it traces
(core/runtime/collector.py says why) and always leaves it as it found it."""

import gc
import threading

import jax.numpy as jnp
import pytest

import remat_tui
from remat_tui.core.runtime import collector
from remat_tui.core.trace import analysis
from remat_tui.errors import RematError


def f(w, x):
    return jnp.sum(jnp.sin(w @ x))


ARGS = (jnp.ones((3, 3)), jnp.ones(3))


@pytest.fixture
def collection_seen(monkeypatch):
    """Whether collection was on when the trace and its views ran."""
    seen = []
    real_trace, real_view = analysis.trace, analysis.full_view

    def trace(*a, **k):
        seen.append(gc.isenabled())
        return real_trace(*a, **k)

    def full_view(*a, **k):
        seen.append(gc.isenabled())
        return real_view(*a, **k)

    monkeypatch.setattr(analysis, "trace", trace)
    monkeypatch.setattr(analysis, "full_view", full_view)
    return seen


def test_analyze_pauses_collection_and_resumes_it(collection_seen):
    assert gc.isenabled()
    a = remat_tui.analyze(f, args=ARGS, policy="nothing_saveable")
    assert a.residuals
    assert collection_seen == [False, False]
    assert gc.isenabled()


def test_collection_resumes_after_an_analysis_that_fails(collection_seen):
    def broken(w, x):
        raise ValueError("the model is broken")

    with pytest.raises(RematError, match="the model is broken"):
        remat_tui.analyze(broken, args=ARGS)
    assert collection_seen == [False]
    assert gc.isenabled()


def test_a_caller_that_disabled_collection_keeps_it_disabled():
    gc.disable()
    try:
        remat_tui.analyze(f, args=ARGS)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_pauses_nest_across_threads():
    """Collection resumes when the last pause ends, not the first."""
    inner_open, outer_may_end = threading.Event(), threading.Event()

    def other_thread():
        with collector.paused():
            inner_open.set()
            outer_may_end.wait(5)

    worker = threading.Thread(target=other_thread)
    with collector.paused():
        worker.start()
        assert inner_open.wait(5)
    assert not gc.isenabled()  # the other thread's pause is still open
    outer_may_end.set()
    worker.join(5)
    assert gc.isenabled()


def test_what_a_pause_made_goes_to_the_oldest_generation_without_a_pass():
    """A young collection right after the pause would pass over everything the
    analysis made; the collector resumes with it in the oldest generation and
    nothing young to collect. Nothing frozen first: an app test in the same
    worker froze its analyses, and the collector then leaves the pile alone."""
    gc.unfreeze()
    started = []

    def heard(phase, info):
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(heard)  # before the pause ends: resuming allocates
    try:
        with collector.paused():
            made = [[] for _ in range(2000)]  # more than a young collection's threshold
        after = [[] for _ in range(gc.get_threshold()[0] // 4)]
    finally:
        gc.callbacks.remove(heard)
    assert started == []  # no collection began as the collector resumed
    assert any(o is made for o in gc.get_objects(generation=2))
    assert after


def test_objects_frozen_by_someone_else_stay_frozen():
    kept = [[] for _ in range(10)]
    gc.freeze()
    try:
        with collector.paused():
            made = [[] for _ in range(10)]
        # gc.get_objects() lists the generations, not what is frozen
        assert not any(o is kept for o in gc.get_objects())
        assert any(o is made for o in gc.get_objects())
    finally:
        gc.unfreeze()
