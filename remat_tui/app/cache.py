"""Provides the app's bounded cache of analyses: least recently used first out,
each analysis's drawing dropped with it.

Plain functions over the app's two dicts (analyses by request key, drawings by
id() of an analysis): a dict keeps insertion order, so the oldest entry is the
first, and a hit moves its entry to the end.
"""

from __future__ import annotations

LIMIT = 32  # analyses kept; a drawing is kept only for a kept analysis


def touch(cache: dict, key: tuple):
    """The cached analysis for `key`, now the most recently used."""
    analysis = cache[key] = cache.pop(key)
    return analysis


def remember(cache: dict, drawings: dict, key: tuple, analysis, keep=()) -> int:
    """Cache `analysis` under `key`, then evict the least recently used analyses
    (and their drawings) beyond LIMIT, never one in `keep` (the one on screen,
    the as_written baseline the status line compares with). Returns how many
    were evicted."""
    cache.pop(key, None)
    cache[key] = analysis
    if len(cache) <= LIMIT:
        return 0
    kept = {id(a) for a in keep if a is not None}
    evict = [k for k, a in cache.items() if id(a) not in kept][: len(cache) - LIMIT]
    for old in evict:
        evicted = cache.pop(old)
        if id(evicted) not in {id(a) for a in cache.values()}:  # one analysis, two keys
            drawings.pop(id(evicted), None)
    return len(evict)
