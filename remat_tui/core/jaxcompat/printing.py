"""Provides `str(jaxpr)` together with the equation behind every region of
every printed line, read from JAX's own printer's source map."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from remat_tui.core.jaxcompat.bodies import bodies, replace_body
from remat_tui.core.jaxcompat.objects import Jaxpr
from remat_tui.core.jaxcompat.private import core as _core


@dataclass(eq=False)
class EqnRef:
    """Stands in for an equation's traceback while printing, so the printer's
    source map tells us which equation each output line belongs to.
    `path` is the chain of (eqn index) from the top-level jaxpr down."""

    eqn: Any
    path: tuple[int, ...]
    depth: int = 0  # len(path): how deep in bodies the equation is (1: top level)


Region = tuple[int, int, EqnRef]  # start column, end column, equation


def format_jaxpr(jaxpr: Jaxpr) -> tuple[str, list[list[Region]]]:
    """`str(jaxpr)` plus, for every output line, the regions of it that each
    equation drew. The text is identical to `str(jaxpr)`: tracebacks are not
    printed, so swapping them for references changes only the source map."""
    tagged = _Tagger().jaxpr(jaxpr, ())
    source_map: list[list[tuple[int, int, Any]]] = []
    # use_color=False: JAX colours its output when stdout is a terminal.
    text = _core.pp_toplevel_jaxpr(tagged).format(use_color=False, source_map=source_map)
    # A jaxpr in a param that bodies() does not list keeps its tracebacks.
    if not all(type(r[2]) is EqnRef for regions in source_map for r in regions):
        source_map = [[r for r in regions if type(r[2]) is EqnRef] for regions in source_map]
    return text, source_map


class _Tagger:
    """Copies a jaxpr with each equation's traceback replaced by an EqnRef.

    Jaxprs shared between equations stay shared (memoised by identity), so the
    printer still pulls them out as `let` bindings exactly as for the original.
    """

    def __init__(self) -> None:
        self.done: dict[int, Any] = {}
        self.wrapped: dict[int, Any] = {}  # closed jaxprs, shared as in the original

    def jaxpr(self, jaxpr: Jaxpr, path: tuple[int, ...]) -> Jaxpr:
        key = id(jaxpr)
        if key in self.done:
            return self.done[key]
        eqns = []
        for i, eqn in enumerate(jaxpr.eqns):
            ref = EqnRef(eqn, path + (i,), len(path) + 1)
            tagged = eqn
            for body in bodies(eqn):
                new = self.jaxpr(body.jaxpr, ref.path)
                tagged = replace_body(tagged, body.slot, new, self.wrapped)
            eqns.append(tagged.replace(source_info=eqn.source_info.replace(traceback=ref)))
        out = jaxpr.replace(eqns=eqns)
        self.done[key] = out
        return out
