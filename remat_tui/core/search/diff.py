"""Provides diff (Contract 6): what two configurations save differently.

Residuals are matched by JAX's own words (`text`: aval, kind and source
line) and where the value was computed (its origin: name, primitive and the
user's line), as a multiset: a value saved under both is in `both`, whatever
its position in either list. JAX words every stacked output of a scan alike
(`output of scan from model.py:95`); the origin tells them apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from remat_tui.core.display import Displayable
from remat_tui.core.model import Analysis, Residual
from remat_tui.core.search.rows import Row, row_of
from remat_tui.core.setup.config import Config
from remat_tui.core.trace.analysis import costs_view
from remat_tui.core.trace.configured import as_target
from remat_tui.core.trace.traced import trace_config
from remat_tui.registry import Target


@dataclass
class Diff(Displayable):
    """What `diff` returns: configuration A against B.

    Attributes:
        a: A's `Row`.
        b: B's `Row`.
        only_a: residuals A saves and B does not, as
            `{"text", "aval", "bytes", "global_bytes", "memory", "origin"}`
            (`bytes` one device's, `global_bytes` the array's whole size).
        only_b: residuals B saves and A does not.
        both: residuals both save.
    """

    a: Row
    b: Row
    only_a: list[dict]
    only_b: list[dict]
    both: list[dict]

    @property
    def bytes_delta(self) -> int:
        """Device residual bytes of B minus A, one device's."""
        return self.b.device_bytes - self.a.device_bytes

    @property
    def host_bytes_delta(self) -> int:
        return self.b.host_bytes - self.a.host_bytes

    @property
    def recompute_flops_delta(self) -> int:
        return self.b.recompute_flops - self.a.recompute_flops

    def to_dict(self) -> dict:
        return {
            "schema": 1,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "only_a": self.only_a,
            "only_b": self.only_b,
            "both": self.both,
            "bytes_delta": self.bytes_delta,
            "host_bytes_delta": self.host_bytes_delta,
            "recompute_flops_delta": self.recompute_flops_delta,
        }


def diff(
    fn: Target | Callable,
    a: Config,
    b: Config,
    args: tuple | None = None,
    kwargs: dict | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Diff:
    """Analyse both configurations (lean: no jaxpr text) and match their residuals."""
    target = as_target(fn, args, kwargs)
    first = costs_view(trace_config(target, a, cancelled), cancelled)
    second = costs_view(trace_config(target, b, cancelled), cancelled)
    return diff_analyses(first, second)


def diff_analyses(first: Analysis, second: Analysis) -> Diff:
    """The diff of two analyses already made (the app's marked and current ones)."""
    left = {_key(r): r for r in first.residuals}
    right = {_key(r): r for r in second.residuals}
    count_a = Counter(_key(r) for r in first.residuals)
    count_b = Counter(_key(r) for r in second.residuals)
    only_a = _entries(count_a - count_b, left)
    only_b = _entries(count_b - count_a, right)
    both = _entries(count_a & count_b, left)
    return Diff(row_of(first), row_of(second), only_a, only_b, both)


def _key(r: Residual) -> tuple:
    o = r.origin
    if o is None:
        return (r.text, None, None, None)
    line = (o.source.file, o.source.line) if o.source else None
    return (r.text, o.name, o.primitive, line)


def _entries(counts: Counter, residuals: dict) -> list[dict]:
    out = []
    for key, n in counts.items():
        r = residuals[key]
        entry = {
            "text": r.text,
            "aval": r.aval,
            "bytes": r.device_share,
            "global_bytes": r.bytes,
            "memory": r.memory,
        }
        entry["origin"] = r.origin.label() if r.origin is not None else None
        out.extend([entry] * n)
    return out
