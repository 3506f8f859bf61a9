"""Provides what structures (`trace.rebuilt_scans`) need of a `scan`
equation and of JAX's tracing: the loop's params read in one place
(`scan_loop`), its body run again as a Python step function (`body_step`),
and equations traced where the scan was written (`traced_at`,
`trace_abstract`), so that a scan rebuilt as nested or split scans keeps the
user's line."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jax

from remat_tui.core.jaxcompat.bodies import scan_layout
from remat_tui.core.jaxcompat.objects import (
    Jaxpr,
    JaxprEqn,
    consts_of,
    eval_jaxpr,
    like,
    open_jaxpr,
)
from remat_tui.core.jaxcompat.policies import Policy
from remat_tui.core.jaxcompat.private import core, source_info_util
from remat_tui.core.jaxcompat.remat import is_remat, remat_prevent_cse, with_policy
from remat_tui.core.jaxcompat.sources import calling_file, outermost_own_function
from remat_tui.core.jaxcompat.version import expects
from remat_tui.core.runtime.usercode import in_library


@dataclass(frozen=True)
class ScanLoop:
    """One `scan` equation's loop, as a rewrite needs it."""

    length: int
    reverse: bool
    unrolled: bool  # unroll other than 1 (or True): the loop body is copied
    num_consts: int
    num_carry: int
    body: Any  # the closed body jaxpr (invars: consts, carry, xs; outvars: carry, ys)
    effects: tuple[str, ...]  # the body's side effects, by name ("Debug", ...)

    @property
    def open_body(self) -> Jaxpr:
        return open_jaxpr(self.body)

    def split_inputs(self, ins: list) -> tuple[list, list, list]:
        """(consts, carry, xs) of the equation's inputs."""
        c, n = self.num_consts, self.num_carry
        return list(ins[:c]), list(ins[c : c + n]), list(ins[c + n :])


@expects("a scan equation with length, reverse, unroll and jaxpr")
def scan_loop(eqn: JaxprEqn) -> ScanLoop | None:
    """The loop of a scan equation; None for anything else."""
    layout = scan_layout(eqn)
    if layout is None:
        return None
    p = eqn.params
    unroll = p.get("unroll", 1)
    return ScanLoop(
        length=p["length"],
        reverse=bool(p.get("reverse", False)),
        unrolled=unroll is True or (unroll not in (1, False)),
        num_consts=layout[0],
        num_carry=layout[1],
        body=p["jaxpr"],
        effects=tuple(sorted(str(e) for e in eqn.effects if not _named_axis(e))),
    )


def _named_axis(effect: Any) -> bool:
    """An effect that only says the body uses a mesh axis (a collective inside
    a shard_map body): no side effect, a recomputed group gathers again, as
    any recomputation does."""
    return isinstance(effect, core.NamedAxisEffect)


def body_with_policies(loop: ScanLoop, policy: Policy) -> Any:
    """The loop's closed body with every checkpoint at its top level bound
    with `policy` instead."""
    body = loop.open_body
    eqns = [with_policy(e, policy) if is_remat(e) else e for e in body.eqns]
    return like(loop.body, body.replace(eqns=eqns))


def body_step(loop: ScanLoop, body: Any, consts: list) -> Callable:
    """`body` (a closed body jaxpr of `loop`'s shape) as the step function a
    `jax.lax.scan` takes, `(carry, x) -> (carry, y)` with tuples of leaves,
    closing over the loop's `consts`. Its equations are bound again with
    their own source lines."""
    inner, inner_consts = open_jaxpr(body), consts_of(body)

    def step(carry: tuple, x: tuple) -> tuple[tuple, tuple]:
        outs = eval_jaxpr(inner, inner_consts, *consts, *carry, *x)
        return tuple(outs[: loop.num_carry]), tuple(outs[loop.num_carry :])

    return step


def holds_checkpoint(loop: ScanLoop) -> bool:
    """Whether the body's top level applies a jax.checkpoint."""
    return any(is_remat(e) for e in loop.open_body.eqns)


def checkpoint_prevent_cse(loop: ScanLoop) -> bool:
    """The `prevent_cse` of the checkpoint at the body's top level (True,
    JAX's default, where it applies none): a rebuilt loop's checkpoint is
    bound with the user's."""
    return all(remat_prevent_cse(e) for e in loop.open_body.eqns if is_remat(e))


def step_name(loop: ScanLoop) -> str | None:
    """The name of the step function the scan runs: as JAX recorded it,
    unless that is a library's (Linen's `body_fn`): then the user's
    function its equations come from, if any."""
    info = loop.open_body.debug_info
    name = getattr(info, "func_name", None) if info is not None else None
    where = (getattr(info, "func_src_info", None) or "").rpartition(" at ")[2]
    if name and not in_library(where):
        return name
    return outermost_own_function(loop.open_body)


def library_of(eqn: JaxprEqn) -> str | None:
    """`flax.linen` or `flax.nnx` when one of Flax's lifted scans bound this
    scan (nn.scan, nnx.scan), else None: the user called jax.lax.scan."""
    path = (calling_file(eqn.source_info) or "").replace("\\", "/")
    if "/flax/nnx/" in path:
        return "flax.nnx"
    if "/flax/" in path:
        return "flax.linen"
    return None


@contextlib.contextmanager
def traced_at(eqn: JaxprEqn) -> Iterator[None]:
    """Equations bound inside are recorded as written where `eqn` was: its
    traceback and name stack (what `jax.core.eval_jaxpr` does per equation)."""
    info = eqn.source_info
    with source_info_util.user_context(info.traceback, name_stack=info.name_stack):
        yield


@expects("an equation's inputs to have shaped, typed values")
def trace_abstract(fn: Callable, invars: list) -> tuple[Any, str | None]:
    """(the open jaxpr of `fn` traced for the types of `invars`, None) or
    (None, why it cannot stand in for them): it must take exactly those
    types and hold no constants of its own. A type's sharding (an explicit
    mesh's, `f32[8,16@data]`) is part of it: the rebuilt loop is traced for
    the sharded inputs the scan had."""
    avals = [v.aval for v in invars]
    shapes = [_abstract(a) for a in avals]
    closed = jax.make_jaxpr(fn)(*shapes)
    jaxpr = open_jaxpr(closed)
    traced = [v.aval for v in jaxpr.invars]
    if traced != avals:
        want, got = next((a, b) for a, b in zip(avals, traced, strict=True) if a != b)
        return None, f"its input of type {want} can only be traced as {got}"
    if consts_of(closed):
        return None, "its body holds constants the rebuilt loop would have to carry"
    return jaxpr, None


def _abstract(aval: Any) -> jax.ShapeDtypeStruct:
    """The stand-in for a value of type `aval`, its sharding included (an
    unsharded type's is the empty mesh's), and, inside a shard_map body, the
    manual axes it varies over (`f32[8,16]{V:data}`)."""
    weak = getattr(aval, "weak_type", False)
    sharding = getattr(aval, "sharding", None)
    manual = getattr(aval, "manual_axis_type", None)
    if manual is not None and getattr(manual, "empty", True):
        manual = None
    return jax.ShapeDtypeStruct(
        aval.shape, aval.dtype, weak_type=weak, sharding=sharding, manual_axis_type=manual
    )
