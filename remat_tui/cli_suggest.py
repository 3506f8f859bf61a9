"""Provides `remat-tui suggest`'s runner (cli.py's `_headless` calls it with
the options compare and suggest share): the exact search's bound, best and
gap on standard error as they narrow, and Ctrl-C.

The first Ctrl-C stops the search after the compile under way (XLA cannot be
interrupted mid-compile) and the best answer verified so far is written,
with the gap left, exit status 130; a second Ctrl-C quits at once.

Imports only the standard library at module level, as cli.py does.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from remat_tui.cli_fit import first_interrupt_stops

if TYPE_CHECKING:
    from remat_tui.cli_check import Rendered
    from remat_tui.core.search.exact.search import Narrowing
    from remat_tui.registry import Target


def run(
    target: Target,
    opts: argparse.Namespace,
    fmt: str,
    checks: dict,
    options: dict,
    failed_runs: Callable[[list[str], dict | None], int],
) -> Rendered:
    """suggest, rendered: (text, warnings, status). `options`: cli.py's
    search options; `failed_runs(labels, measured)`: the exit status and
    message for candidates whose step raised when run."""
    from remat_tui.core.search.suggest.pipeline import suggest
    from remat_tui.core.trace.configured import Cancelled
    from remat_tui.report.suggest import render_suggest

    stop = threading.Event()
    unit = "seconds" if opts.compiled else "flops"
    with first_interrupt_stops(stop):
        try:
            result = suggest(target, checks["budget"], cancelled=stop.is_set,
                             narrowing=lambda n: _narrowing(n, unit), verify=opts.verify,
                             **options)  # fmt: skip
        except Cancelled:
            print("remat-tui: cancelled before any answer was verified", file=sys.stderr)
            return "", [], lambda: 130
    if result.cancelled:
        print(
            "remat-tui: cancelled: the best answer verified so far is below, with the gap left",
            file=sys.stderr,
        )
    failed = [r for r in result.rows if r.measure_failed]

    def status() -> int:
        failing = failed_runs(
            [r.config.label() for r in failed], failed[0].measured if failed else None
        )
        return failing or (130 if result.cancelled else 0)

    return render_suggest(result, fmt), [], status


def _narrowing(n: Narrowing, unit: str) -> None:
    from remat_tui.report.suggest import narrowing_line

    print(f"remat-tui: exact search: {narrowing_line(n, unit)}", file=sys.stderr, flush=True)
