"""Provides checkpoints and names as JAX binds them, in both implementations:
remat2 (`remat_p`, a primitive whose params hold the body and the policy) and,
with `JAX_REMAT3=1` on JAX 0.11+, remat3 (`call_hi_primitive` equations whose
`_prim` param is a `RematTraced` or `CheckpointName` object)."""

from __future__ import annotations

from typing import Any

import jax

from remat_tui.core.jaxcompat.objects import Jaxpr, JaxprEqn
from remat_tui.core.jaxcompat.policies import Policy
from remat_tui.core.jaxcompat.private import ad_checkpoint as _ac
from remat_tui.core.jaxcompat.sources import in_library, outermost_own_function
from remat_tui.core.jaxcompat.version import expects

remat_p = _ac.remat_p
name_p = _ac.name_p
# Adapter "remat3" (JAX 0.11+): the hi-primitive classes; None before them.
RematTraced: Any = getattr(_ac, "RematTraced", None)
_NAME_CLASSES = tuple(
    c for c in (getattr(_ac, "CheckpointName", None), getattr(_ac, "CheckpointNameFwd", None)) if c
)


def remat3_enabled() -> bool:
    """Whether this JAX binds jax.checkpoint as remat3 (JAX_REMAT3=1)."""
    state = getattr(jax.config, "jax_remat3", None)
    return bool(state)


def _hi(eqn: JaxprEqn) -> Any:
    """The hi-primitive object of a `call_hi_primitive` equation, else None
    (a linearized one, in the linear program, is not a checkpoint)."""
    return eqn.params.get("_prim") if eqn.primitive.name == "call_hi_primitive" else None


def is_remat(eqn: JaxprEqn) -> bool:
    """A jax.checkpoint equation: in the backward pass, it re-runs forward work."""
    if eqn.primitive is remat_p:
        return True
    return RematTraced is not None and isinstance(_hi(eqn), RematTraced)


@expects("a checkpoint equation to hold its body jaxpr")
def remat_body(eqn: JaxprEqn) -> Jaxpr:
    """The open jaxpr a checkpoint equation runs."""
    hi = _hi(eqn)
    return hi.jaxpr if hi is not None else eqn.params["jaxpr"]


@expects("a checkpoint equation to hold its policy")
def remat_policy(eqn: JaxprEqn) -> Policy | None:
    """The policy a checkpoint equation was bound with (None: JAX's default,
    nothing_saveable; remat3 also stores nothing_saveable as None)."""
    hi = _hi(eqn)
    return hi.policy if hi is not None else eqn.params["policy"]


@expects("a checkpoint equation to hold its prevent_cse")
def remat_prevent_cse(eqn: JaxprEqn) -> bool:
    """The `prevent_cse` a checkpoint equation was bound with (True, JAX's
    default, unless the user wrote prevent_cse=False, as inside a scan)."""
    hi = _hi(eqn)
    return bool(hi.prevent_cse if hi is not None else eqn.params["prevent_cse"])


@expects("a checkpoint equation whose policy can be replaced")
def with_policy(eqn: JaxprEqn, policy: Policy | None) -> JaxprEqn:
    """The checkpoint equation bound with `policy` instead, all else kept."""
    hi = _hi(eqn)
    if hi is None:
        return eqn.replace(params={**eqn.params, "policy": policy})
    if policy is jax.checkpoint_policies.nothing_saveable:
        policy = None  # what jax.checkpoint passes remat3 for it
    rebound = RematTraced(hi.jaxpr, policy, hi.prevent_cse)
    return eqn.replace(params={**eqn.params, "_prim": rebound})


def checkpoint_name(eqn: JaxprEqn) -> str | None:
    """The `checkpoint_name` an equation applies, if it is one."""
    if eqn.primitive is name_p:
        return eqn.params["name"]
    hi = _hi(eqn)
    if hi is not None and _NAME_CLASSES and isinstance(hi, _NAME_CLASSES):
        return hi.name
    return None


def policy_question(eqn: JaxprEqn) -> tuple:
    """(primitive, input avals, params): what JAX asks a checkpoint policy
    about an equation. remat2 asks about the equation itself; remat3 asks
    about a checkpoint_name as `name_p` with its name (its equation is a
    `call_hi_primitive` holding a `CheckpointName`)."""
    hi = _hi(eqn)
    if hi is not None and _NAME_CLASSES and isinstance(hi, _NAME_CLASSES):
        return name_p, list(hi.in_avals), {"name": hi.name}
    return eqn.primitive, [v.aval for v in eqn.invars], dict(eqn.params)


def remat_function(eqn: JaxprEqn) -> str:
    """The name of the function a checkpoint equation checkpoints: as JAX
    recorded it, unless that is a library's wrapper (Linen's `core_fn`,
    Equinox's `fun_checkpoint`): then the user's function the body was
    traced from."""
    body = remat_body(eqn)
    info = body.debug_info
    name = getattr(info, "func_name", None) if info is not None else None
    where = (getattr(info, "func_src_info", None) or "").rpartition(" at ")[2]
    if name and not in_library(where):
        return name
    return outermost_own_function(body) or name or "<checkpointed>"
