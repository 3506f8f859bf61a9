"""Provides a checkpoint policy's decision at one equation, asked as JAX asks
it: `policy(primitive, *input avals, **params)`, its answer read into one word
("save", "offload" or "recompute"). JAX answers with a bool, or with the
`Saveable`, `Recompute` and `Offloadable(src, dst)` objects of its partial
evaluation, none of them public; the equation's primitive and params are
JAX's private structure too. `trace.rules` puts the answer in words.
"""

from __future__ import annotations

from dataclasses import dataclass

from remat_tui.core.jaxcompat.objects import JaxprEqn, Var
from remat_tui.core.jaxcompat.policies import Policy
from remat_tui.core.jaxcompat.remat import policy_question
from remat_tui.core.jaxcompat.version import expects

SAVE, OFFLOAD, RECOMPUTE = "save", "offload", "recompute"


@dataclass(frozen=True)
class Decision:
    """What a policy said at one equation: `what` is SAVE, OFFLOAD or
    RECOMPUTE; `dst` the memory an offload moves the value to."""

    what: str
    dst: str | None = None


def decide(policy: Policy, eqn: JaxprEqn) -> Decision:
    """`policy`'s decision at `eqn`, called exactly as JAX's partial evaluation
    calls it on the equations under a checkpoint (it ran on this very
    equation while JAX traced, so it does not raise now): `policy_question`
    says how, for both remat implementations."""
    primitive, avals, params = policy_question(eqn)
    return read(policy(primitive, *avals, **params))


@expects("a checkpoint policy answering a bool, Saveable, Recompute or Offloadable")
def read(answer: object) -> Decision:
    """A policy's answer in one word."""
    if isinstance(answer, bool):
        return Decision(SAVE if answer else RECOMPUTE)
    kind = type(answer).__name__
    if kind == "Offloadable":
        return Decision(OFFLOAD, getattr(answer, "dst", None))
    if kind == "SaveableType":
        return Decision(SAVE)
    if kind == "RecomputeType":
        return Decision(RECOMPUTE)
    raise KeyError(f"a policy answer of type {kind}")


def is_dot(eqn: JaxprEqn) -> bool:
    return eqn.primitive.name == "dot_general"


def is_conv(eqn: JaxprEqn) -> bool:
    return eqn.primitive.name == "conv_general_dilated"


def reads(eqn: JaxprEqn, var: object) -> bool:
    """Whether `eqn` takes `var` among its inputs."""
    return any(v is var for v in eqn.invars if isinstance(v, Var))
