"""The app keeps cached analyses out of the collector's sight (gc.freeze after
each analysis), yet frees an evicted analysis caught in a reference cycle."""

import gc
import weakref

from remat_tui.app.requests import AnalysisRequests


class Node:
    pass


def test_an_evicted_object_in_a_cycle_is_freed_once_the_cache_evicts():
    cyclic = Node()
    cyclic.itself = cyclic  # freed only by a collection that sees it
    ref = weakref.ref(cyclic)
    gc.collect()
    gc.freeze()  # as settle_memory leaves things after an earlier analysis
    try:
        del cyclic
        AnalysisRequests.settle_memory(None, evicted=False)
        assert ref() is not None  # frozen: no collection sees it (the speed it buys)
        AnalysisRequests.settle_memory(None, evicted=True)
        assert ref() is None  # the cache evicted: what was frozen is collected
    finally:
        gc.unfreeze()
