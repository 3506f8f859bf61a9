"""Provides `verified_answer`: suggest's answer run on the device against the
code as written (`xla.verify.runs`, Contract 18), and never an answer
whose gradients differ.

The answer is verified; one that differs is dropped, said with why (the
leaves past their tolerance), and the next best of the rows the search
compiled or analysed is chosen as suggest chooses (`choose`), and verified
in turn. With one dropped, the answer is no longer the search's proven
optimum: `exact` is False. Where the device cannot run a step (a deviceless
TPU topology), the verdict is "not_run" and nothing is claimed either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remat_tui.core.search.suggest.choice import choose
from remat_tui.core.trace.configured import check_cancelled
from remat_tui.core.xla.verify.leaves import json_number
from remat_tui.core.xla.verify.runs import DIFFER, Verification, verify

if TYPE_CHECKING:
    from remat_tui.core.search.rows import Row
    from remat_tui.registry import Target


@dataclass(frozen=True)
class Failed:
    """A configuration suggest would have answered with, whose gradients
    differ from the code as written's."""

    row: Row
    verification: Verification

    def why(self) -> str:
        """`params['W1']` by 2.5e-02, params['W2'] by 3.2e-02`."""
        return ", ".join(f"{x.path} by {x.max_abs:.1e}" for x in self.verification.differing)

    def to_dict(self) -> dict:
        v = self.verification
        return {
            "configuration": self.row.config.label(),
            "verdict": v.verdict,
            "differing": [x.path for x in v.differing],
            "max_abs": json_number(v.max_abs),
        }


def verified_answer(
    rows: list[Row],
    best: Row,
    fits: bool,
    baseline: Row,
    is_answer: Callable[[Row], bool],
    target: Target,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[Row, bool, Verification, list[Failed]]:
    """(the answer, whether it fits, its verification, the answers dropped
    before it): `best` (which `fits` or not) verified, and while its gradients differ, the next
    best of `rows` as suggest chooses (module doc: `choose` with suggest's
    `is_answer`); the code as written (`baseline`) where none is left."""
    failed: list[Failed] = []
    while True:
        check_cancelled(cancelled)
        v = verify(target, best.config, cancelled)
        if v.verdict != DIFFER or best is baseline:  # the code as written is the reference
            return best, fits, v, failed
        failed.append(Failed(best, v))
        rows = [r for r in rows if r is not best]
        # Nothing left that computes what the code computes: the code as written.
        best, fits = choose(rows or [baseline], is_answer)
