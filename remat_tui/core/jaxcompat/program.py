"""Provides what `jax.vjp` and the machine expose beyond public API: the linear
program behind a vjp function, the TPU chips attached here, and quiet for the
logger JAX reports host callback errors on."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from remat_tui.core.jaxcompat.objects import Jaxpr, JaxprEqn


@dataclass(frozen=True)
class Linear:
    """The linear program behind a vjp function: what the backward pass transposes."""

    jaxpr: Any
    residuals: tuple  # its inputs that hold residuals
    tangents: tuple  # its inputs that hold the tangents of the primal arguments


def linear_program(vjp: object, num_args: int) -> Linear | None:
    """The linear program behind the function `jax.vjp` returned for `num_args`
    flattened arguments (also on the shape-only copy `return_shape=True`
    gives), or None if this JAX's vjp does not expose it. Adapter "linear
    residuals": JAX 0.10 makes the residuals its constvars; JAX 0.12 its
    leading inputs, before one tangent per argument."""
    jaxpr = getattr(vjp, "jaxpr", None)
    if not isinstance(jaxpr, Jaxpr):
        return None
    if jaxpr.constvars:
        return Linear(jaxpr, tuple(jaxpr.constvars), tuple(jaxpr.invars))
    invars = list(jaxpr.invars)
    if num_args > len(invars):
        return None
    cut = len(invars) - num_args
    return Linear(jaxpr, tuple(invars[:cut]), tuple(invars[cut:]))


def tpu_chips_here() -> int:
    """TPU chips attached to this machine, counted as JAX does before it loads
    libtpu (from PCI device ids; nothing is initialised)."""
    from remat_tui.core.jaxcompat.private import hardware_utils

    return hardware_utils().num_available_tpu_chips_and_device_id()[0]


def primitive_name(eqn: JaxprEqn) -> str:
    return eqn.primitive.name


@contextlib.contextmanager
def callback_errors_unlogged() -> Iterator[None]:
    """While a compiled step runs for measuring: a host callback that raises
    is not also logged by JAX (with a traceback of the caller's frames); the
    error reaches the caller, which says it once."""
    from remat_tui.core.jaxcompat.private import CALLBACK_LOGGER

    logger = logging.getLogger(CALLBACK_LOGGER)
    before = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = before


def forget_failed_effects() -> None:
    """After a step whose host callback raised (the caller has the error): the
    runtime tokens JAX keeps for ordered effects still hold it, and JAX would
    raise it again, with a traceback, at exit. Wait for them, then drop them."""
    from remat_tui.core.jaxcompat.private import dispatch

    tokens = getattr(dispatch(), "runtime_tokens", None)
    if tokens is None:
        return
    with callback_errors_unlogged():
        try:
            tokens.block_until_ready()
        except Exception:  # that same error
            pass
    if hasattr(tokens, "clear"):
        tokens.clear()
