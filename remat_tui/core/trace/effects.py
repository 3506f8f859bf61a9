"""Provides `effects`: the calls back to Python in a traced configuration
(`jax.pure_callback`, `io_callback`, `jax.debug.callback`) and whether its
backward pass runs each again, seen before anything runs (issue 43). JAX's
partial evaluation decides: a callback whose output the policy saves is
not in the recomputation, one in a recomputed region is, and the backward
program says which. A callback run again reads Python state again (a
counter, a random generator): its second value need not be its first, and
then the gradients move (`remat-tui verify` measures by how much).

A random draw from Python state made while tracing (a `jax.random` key from
a Python counter, `np.random` values) is no effect: JAX reads the state once,
as it traces, into a constant of the jaxpr, and recomputation reuses it
(tests/unit/test_effects.py checks the gradients are bitwise the same). A
draw at run time goes through a callback, and is one of these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from remat_tui.core.jaxcompat import callbacks

if TYPE_CHECKING:
    from remat_tui.core import jaxcompat as jc
    from remat_tui.core.trace.recomputation import Recomputation
    from remat_tui.core.trace.traced import Trace


@dataclass(frozen=True)
class Effect:
    """One call back to Python in the program.

    Attributes:
        kind: JAX's primitive: `pure_callback`, `io_callback` or `debug_callback`.
        where: the user's line (`model.py:39`).
        ordered: whether it runs with an ordered effect.
        reruns: whether this configuration's backward pass runs it again.
    """

    kind: str
    where: str
    ordered: bool
    reruns: bool

    def words(self) -> str:
        """The note said where the configuration runs it again."""
        head = f"{self.kind} at {self.where} runs again in the backward pass: this configuration "
        if self.kind == callbacks.DEBUG:
            what = "recomputes it, and what it does (a print, a log) happens again"
        else:
            what = (
                "recomputes it, and where it reads Python state (a counter, a random "
                "generator) its second value is not its first, and the gradients move"
            )
        order = " (an ordered effect: it happens again, in the backward pass's order)"
        return head + what + (order if self.ordered else "")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "where": self.where, "ordered": self.ordered,
                "reruns": self.reruns}  # fmt: skip


def effects(t: Trace, bwd: jc.Jaxpr, recompute: Recomputation) -> list[Effect]:
    """Every call back to Python the forward program makes, in program
    order, each marked with whether the backward program `bwd` runs it
    again (`recompute`: its re-run equations)."""
    found = callbacks.host_callbacks(t.forward)
    if not found:  # most programs: no backward walk for what cannot be there
        return []
    again = {callbacks.where_of(e) for e in callbacks.rerun_callbacks(bwd, recompute.eqn_ids)}
    return [Effect(c.kind, c.where, c.ordered, c.where in again) for c in found]
