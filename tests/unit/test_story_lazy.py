"""A full analysis tells its residuals' stories when one is first read
(core/trace/story.py `Stories`): none before, all at once, once across
threads, and each equal to the story told at once from the same trace."""

import pickle
import threading

import pytest

from remat_tui.core.model import Deferred
from remat_tui.core.setup.config import Config
from remat_tui.core.trace import linemap, recomputation, story
from remat_tui.core.trace.analysis import full_view
from remat_tui.core.trace.traced import trace_config

CASES = [("loss", "dots_saveable"), ("f2", "as_written"), ("f", "nothing_saveable")]


def _told_at_once(t) -> list:
    """The stories told at once, from the trace's own jaxprs."""
    bwd = t.backward()
    split = t.backward_residuals
    recompute = recomputation.recomputation(bwd, set(bwd.invars[:split]), set(bwd.invars[split:]))
    _, lay = linemap.layout(bwd)
    return story.Stories(t, bwd, linemap.Readers(lay), recompute).all()


def _deferred(a) -> list:
    return [r.__dict__["_story"] for r in a.residuals]


@pytest.mark.parametrize("name,spec", CASES)
def test_stories_are_told_on_first_read_and_equal_those_told_at_once(notebook_targets, name, spec):
    t = trace_config(notebook_targets[name], Config.make(spec))
    a = full_view(t)
    pending = _deferred(a)
    assert pending and all(isinstance(d, Deferred) for d in pending)
    stories = pending[0].stories
    assert stories._told is None  # nothing told by the analysis itself
    eager = _told_at_once(t)
    lazy = [r.story for r in reversed(a.residuals)][::-1]  # the last read first
    assert lazy == eager
    assert stories._inputs is None  # the jaxprs let go once told
    assert all(r.story is s for r, s in zip(a.residuals, lazy, strict=True))  # kept
    # The JSON reads the same stories.
    assert [d["story"] for d in a.to_dict()["residuals"]] == [s.to_dict() for s in eager]


def test_stories_are_told_once_across_threads(notebook_targets, monkeypatch):
    calls = []
    tell = story._tell

    def counted(*inputs):
        calls.append(threading.get_ident())
        return tell(*inputs)

    monkeypatch.setattr(story, "_tell", counted)
    a = full_view(trace_config(notebook_targets["loss"], Config.make("dots_saveable")))
    start = threading.Barrier(4)
    read: list = []

    def reader():
        start.wait()
        read.append([r.story for r in a.residuals])

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(calls) == 1
    assert all(all(x is y for x, y in zip(got, read[0], strict=True)) for got in read)


def test_a_residual_pickles_with_its_story_told(notebook_targets):
    a = full_view(trace_config(notebook_targets["loss"], Config.make("dots_saveable")))
    r = a.residuals[0]
    back = pickle.loads(pickle.dumps(r))
    assert not isinstance(back.__dict__["_story"], Deferred)
    assert back == r and back.story == r.story
