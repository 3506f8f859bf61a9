"""Provides the one least-recently-used cache every cache in remat-tui is:
primal programs, compiled numbers, built example arguments, the app's
analyses. Thread-safe: workers and the UI share them."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

V = TypeVar("V")  # what the cache holds


class LRU(Generic[V]):
    """At most `limit` entries; a hit makes its entry the most recently used."""

    def __init__(self, limit: int):
        self.limit = limit
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self.lock = threading.RLock()  # held by callers that build on a miss

    def get(self, key: Hashable, default: V | None = None) -> V | None:
        with self.lock:
            if key not in self._entries:
                return default
            self._entries.move_to_end(key)
            return self._entries[key]

    def put(self, key: Hashable, value: V, keep: Iterable[object] = ()) -> list[V]:
        """Store `value`, then evict the least recently used entries beyond the
        limit, never a value in `keep`; returns the evicted values."""
        with self.lock:
            self._entries.pop(key, None)
            self._entries[key] = value
            kept = {id(v) for v in keep if v is not None}
            evicted = []
            for old in list(self._entries):
                if len(self._entries) <= self.limit:
                    break
                if id(self._entries[old]) not in kept and old != key:
                    evicted.append(self._entries.pop(old))
            return evicted

    def __contains__(self, key: Hashable) -> bool:
        with self.lock:
            return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> list[V]:
        """The values, least recently used first."""
        with self.lock:
            return list(self._entries.values())

    def retain(self, keep: Callable[[Hashable, V], bool]) -> list[V]:
        """Drop every entry `keep(key, value)` rejects; returns the dropped values."""
        with self.lock:
            dropped = [k for k, v in self._entries.items() if not keep(k, v)]
            return [self._entries.pop(k) for k in dropped]

    def get_or_build(
        self,
        key: Hashable,
        build: Callable[[], V],
        valid: Callable[[V], bool] = lambda v: True,
    ) -> V:
        """The entry for `key`, or `build()` stored under it (once, even when
        two threads ask at once); an entry `valid` rejects is built again."""
        with self.lock:
            hit = self.get(key)
            if hit is not None and valid(hit):
                return hit
            value = build()
            self.put(key, value)
            return value

    def clear(self) -> None:
        with self.lock:
            self._entries.clear()
