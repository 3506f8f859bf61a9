"""Provides `verify_rows`: compare's rows, each run on the device against the
code as written (`xla.verify.runs`, Contract 18), for `compare --verify`.

Each row JAX traced is verified; a row it refused has no program to run and
is left unverified (`gradients` None). The verdict goes to the row as its
JSON (`Row.gradients`); a row whose gradients differ gets a note naming the
leaves, and is never Pareto-optimal (`search.compare`'s `mark_pareto`). A step that
raises when run, or does not fit the device, claims nothing: its verdict is
"not_run", with the reason. A deviceless TPU topology runs nothing, so every
row is "not_run" (the CLI refuses `--verify` there before any compile).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from remat_tui.core.setup.devices import device_label
from remat_tui.core.trace.configured import check_cancelled
from remat_tui.core.xla.verify.runs import DIFFER, NOT_RUN, SEED, Verification, verify
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.core.search.rows import Row
    from remat_tui.registry import Target


def verify_rows(
    target: Target, rows: list[Row], cancelled: Callable[[], bool] | None = None
) -> None:
    """Set each traced row's `gradients` (the module doc); the code as
    written, run once, is every row's reference."""
    for row in rows:
        if row.refused:
            continue
        check_cancelled(cancelled)
        v = verified(target, row, cancelled)
        row.gradients = v
        # said as suggest says an answer it drops (`search.suggest.verified`)
        if v.verdict == DIFFER:
            leaves = ", ".join(f"{x.path} by {x.max_abs:.1e}" for x in v.differing)
            row.notes.append(f"its gradients differ from the code as written's ({leaves}): never ★")


def verified(target: Target, row: Row, cancelled: Callable[[], bool] | None) -> Verification:
    """`row`'s verification; a step that raised when run says so as "not_run"."""
    try:
        return verify(target, row.config, cancelled)
    except RematError as exc:
        config = row.config
        return Verification(
            NOT_RUN, (), config.with_device(None).label(), device_label(config.jax_device),
            "train" if target.trains else "gradient", {"seed": SEED, "given": 0, "drawn": 0},
            0.0, exc.message,
        )  # fmt: skip
