"""Provides `rerun_beneath`: why saving a checkpoint_name spares (almost) no
recompute, in the words of the user's own program: the work beneath the
named value that the backward pass still re-runs, read from the traced
program with the name saved (`search.notes.unchanged`'s `spare_verdict` says it).

How it is read: in the forward pass, the name is applied to a value some
equation made (`sin`'s output, say). Walking back from that equation through
what it reads, the nearest equations the backward pass re-runs are the
answer: the backward pass needs their outputs, which the saved copy is not
(sin's derivative reads sin's input, the dot before it; tanh's reads tanh's
own output, so tanh itself is re-run). A backward equation is tied to the
forward one it re-runs by the traceback object JAX keeps for both through
partial evaluation, exactly, even where one line of the user's runs for
several layers; the same traceback on another primitive is that equation's
derivative (sin's `cos`), which says what reads the re-run work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from remat_tui.core import jaxcompat as jc
from remat_tui.core.trace import recomputation
from remat_tui.core.trace.traced import Trace

SHOWN = 3  # re-run equations named at most
WALKED = 400  # equations looked at, at most, walking back from the named value


@dataclass(frozen=True)
class Beneath:
    """What the backward pass re-runs beneath a saved name."""

    maker: str  # the equation that made the named value: "sin (model.py:4)"
    reruns: tuple[str, ...]  # the nearest re-run equations beneath it, the same way
    maker_reruns: bool  # the maker itself is among them (its own output is needed)
    derivative: tuple[str, ...]  # the maker's derivative work re-run (sin's "cos")


def rerun_beneath(t: Trace, name: str) -> Beneath | None:
    """For `t` traced with `name` saved: the equation that made the named value
    and the nearest work beneath it the backward pass still re-runs; None
    where the program does not tell (no such name, or nothing re-run there)."""
    found = _named_value_maker(t.forward, name)
    if found is None:
        return None
    maker, producers = found
    bwd = t.backward()
    split = t.backward_residuals
    again = recomputation.recomputation(bwd, set(bwd.invars[:split]), set(bwd.invars[split:]))
    rerun = [e for e, _ in jc.nested_eqns(bwd) if id(e) in again.eqn_ids]
    keys = {_key(e) for e in rerun}
    nearest = _nearest(maker, producers, lambda e: _key(e) in keys)
    if not nearest:
        return None
    words = tuple(dict.fromkeys(_words(e) for e in nearest))
    origin = id(maker.source_info.traceback)
    derivative = tuple(
        dict.fromkeys(
            jc.primitive_name(e)
            for e in rerun
            if id(e.source_info.traceback) == origin and _key(e) != _key(maker)
        )
    )
    return Beneath(
        _words(maker), words[:SHOWN], any(e is maker for e in nearest), derivative[:SHOWN]
    )


def _key(eqn: jc.JaxprEqn) -> tuple[int, str]:
    """An equation as its re-run in the backward pass is known: its traceback
    (kept through partial evaluation) and its primitive."""
    return id(eqn.source_info.traceback), jc.primitive_name(eqn)


def _named_value_maker(
    jaxpr: jc.Jaxpr, name: str
) -> tuple[jc.JaxprEqn, dict[jc.Var, jc.JaxprEqn]] | None:
    """(the equation making the value first tagged `name`, its jaxpr's
    {var: the equation making it}), searching bodies too; None if not found."""
    makers = {v: e for e in jaxpr.eqns for v in e.outvars}
    for eqn in jaxpr.eqns:
        if jc.checkpoint_name(eqn) == name:
            tagged = eqn.invars[0]
            maker = makers.get(tagged) if isinstance(tagged, jc.Var) else None
            return (maker, makers) if maker is not None else None
        for body in jc.bodies(eqn):
            found = _named_value_maker(body.jaxpr, name)
            if found is not None:
                return found
    return None


def _nearest(start: jc.JaxprEqn, makers: dict, rerun: Callable[[jc.JaxprEqn], bool]) -> list:
    """The equations nearest `start` (itself included) that `rerun` accepts,
    walking back through what each reads, not past an accepted one (names and
    copies are looked through: they do no work)."""
    nearest, seen, frontier = [], {id(start)}, [start]
    while frontier and len(seen) < WALKED:
        eqn = frontier.pop(0)
        if rerun(eqn) and not _passes_through(eqn):
            nearest.append(eqn)
            continue
        for v in eqn.invars:
            maker = makers.get(v) if isinstance(v, jc.Var) else None
            if maker is not None and id(maker) not in seen:
                seen.add(id(maker))
                frontier.append(maker)
    return nearest


def _passes_through(eqn: jc.JaxprEqn) -> bool:
    """A checkpoint_name or a copy JAX inserts: no work of its own, so the walk
    looks through it to the work that made its input."""
    return jc.checkpoint_name(eqn) is not None or jc.primitives.is_copy(eqn)


def _words(eqn: jc.JaxprEqn) -> str:
    source = jc.user_source(eqn.source_info)
    where = f" ({source.where()})" if source is not None else ""
    return f"{jc.primitive_name(eqn)}{where}"
