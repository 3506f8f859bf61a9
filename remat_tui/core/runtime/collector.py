"""Provides `paused`: Python's automatic garbage collection paused while an
analysis traces and makes its views.

A trace allocates hundreds of thousands of objects, nearly all of which live
on in its jaxprs and the analysis. Left alone, the collector runs full
collections while they pile up (measured on the 24-layer unrolled
transformer, JAX 0.10.2, Python 3.11: 0.1-0.4 s of one analysis), each a
pass over the whole heap that frees next to nothing, since the trace still
holds what it made. Paused, the garbage an analysis does leave is collected
once, on the collector's own schedule afterwards (or by the app, which pauses
the same way and collects once its answer is on screen: app/controllers/analyses.py):
bench/bench_analyze.py measures the call and the call plus that one
collection, and both come out cheaper than with the collector left running.

When it resumes, what the pause let pile up is handed to the oldest
generation without a pass over it (`gc.freeze()` then `gc.unfreeze()`: two
list splices). Left in the youngest, the first allocation after the pause
would start a young collection over every object the analysis made (about
130,000 on that transformer, 20-60 ms of one analysis) to free a dozen; the
oldest generation is passed over only by full collections, which run on the
collector's own schedule. Skipped where anything is frozen already (the app
freezes its cached analyses, a server may freeze before forking): unfreezing
would hand their objects back to the collector.

Nested and thread-safe: the collector resumes when the outermost pause ends,
and only if it was running when that pause began (a caller that disabled it
keeps it disabled). Memory that a cycle holds while paused is freed by the
next full collection, never lost.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # pauses open, across threads
_resume = False  # whether the outermost pause found the collector running


@contextmanager
def paused() -> Iterator[None]:
    """Automatic collection off for the block (and any block nested in it)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                if gc.get_freeze_count() == 0:
                    gc.freeze()  # every generation into the frozen one: no pass
                    gc.unfreeze()  # ... and back, into the oldest
                gc.enable()
