"""Provides `remat-tui suggest`: the least-cost configuration that fits a
budget, the exact search's bound, best and gap on standard error as they
narrow.

The first Ctrl-C stops the search after the compile under way (XLA cannot be
interrupted mid-compile) and the best answer verified so far is written,
with the gap left, exit status 130; a second Ctrl-C quits at once.

Imports only the standard library and light modules at module level.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import TYPE_CHECKING

from remat_tui.cli import interrupts
from remat_tui.cli.analysing import search_options
from remat_tui.cli.options import (
    COMPILED_HELP,
    Commands,
    check_measure,
    compile_options,
    measure_options,
    output_options,
    refuse_topology,
    size_of,
    skip_option,
    target_options,
    verify_option,
)
from remat_tui.cli.rendering import failed_runs
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.cli.rendering import Rendered
    from remat_tui.core.search.exact.search import Narrowing
    from remat_tui.core.search.rows import Row
    from remat_tui.registry import Target


def add_parser(commands: Commands) -> None:
    suggest = commands.add_parser(
        "suggest",
        help="the least-cost configuration that fits a budget",
        description="The configuration with the least cost whose memory fits a budget "
        "(residual bytes per device, or the compiled peak with --compiled). The cost: the "
        "estimated step time once compiled (the measured one with --measure), else the "
        "recompute FLOPs. It searches the outer policies and the sites' itself, so it takes "
        "no --policy.",
    )
    target_options(suggest)
    # Refused with a message (`check`), not argparse's "unrecognized arguments".
    suggest.add_argument("--policy", default=None, help=argparse.SUPPRESS)
    output_options(suggest, COMPILED_HELP)
    measure_options(suggest)
    compile_options(suggest, search=True)
    skip_option(suggest)
    suggest.add_argument("--budget", required=True, metavar="SIZE", help="e.g. 2GiB, 1.5e9")
    verify_option(
        suggest,
        "verify the answer's gradients; an answer whose gradients differ is dropped, said "
        "with why, for the next best",
    )


def check(opts: argparse.Namespace) -> dict:
    """No --policy; the budget in bytes."""
    check_measure(opts)
    if opts.policy is not None:
        raise RematError(
            f"suggest --policy {opts.policy}: suggest searches the outer policies and the "
            "sites' itself and takes no --policy. To weigh given outer policies, use "
            f"remat-tui compare --policy {opts.policy} (repeatable); to set a site's, --site."
        )
    return {"budget": size_of("--budget", opts.budget)}


def run(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    """suggest, rendered: (text, warnings, status)."""
    from remat_tui.core.search.suggest.pipeline import suggest
    from remat_tui.core.trace.configured import Cancelled
    from remat_tui.report.suggest import render_suggest

    refuse_topology(opts)
    options = search_options(opts)
    stop = threading.Event()
    with interrupts.first_interrupt_stops(stop):
        try:
            result = suggest(target, checks["budget"], cancelled=stop.is_set,
                             narrowing=_narrowing, verify=opts.verify,
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
        failing = failed_runs([r.config.label() for r in failed], _first_error(failed))
        return failing or (130 if result.cancelled else 0)

    return render_suggest(result, fmt), [], status


def _narrowing(n: Narrowing) -> None:
    from remat_tui.report.suggest import narrowing_line

    print(f"remat-tui: exact search: {narrowing_line(n)}", file=sys.stderr, flush=True)


def _first_error(failed: list[Row]) -> str | None:
    """The first failed run's error, for failed_runs."""
    measured = failed[0].measured if failed else None
    return measured.error if measured else None
