"""Provides `remat-tui fit`: the largest batch that fits a budget, per
configuration (or, with --optimize, the best decisions at each batch).

The first Ctrl-C stops the search after the compile under way (XLA cannot be
interrupted mid-compile) and the rows found so far are written, exit status
130; a second Ctrl-C quits at once.

Imports only the standard library and light modules at module level.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import TYPE_CHECKING

from remat_tui.cli import interrupts
from remat_tui.cli.options import (
    Commands,
    check_measure,
    compile_options,
    measure_options,
    output_options,
    policy_option,
    refuse_topology,
    site_overrides,
    size_of,
    skip_option,
    target_options,
    verify_option,
)
from remat_tui.cli.progress import Progress
from remat_tui.core.units import count
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.cli.rendering import Rendered
    from remat_tui.registry import Target


def add_parser(commands: Commands) -> None:
    fit = commands.add_parser(
        "fit",
        help="the largest batch that fits a budget, per configuration",
        description="For each configuration, the largest batch whose compiled step (the "
        "training step where the target trains, else the gradient keeping the loss) fits a "
        "memory budget per device, its estimated (or, with --measure, measured) step time "
        "and examples per second, best first. The target's args factory must take `batch` "
        "(args=lambda batch=32: ...).",
    )
    target_options(fit)
    policy_option(
        fit,
        action="append",
        default=None,
        help="search only these outer policies, each row named as written (repeatable; "
        "default: the built-ins, the target's own and the checkpoint_name sets compare uses)",
    )
    output_options(fit, None)
    measure_options(fit)
    compile_options(fit, search=True)
    skip_option(fit)
    fit.add_argument("--budget", required=True, metavar="SIZE", help="per device: 16GiB, 1.5e9")
    fit.add_argument(
        "--multiple",
        type=int,
        default=1,
        metavar="N",
        help="try batches in steps of N: the answer is a multiple of N (default 1)",
    )
    fit.add_argument(
        "--max-batch", type=int, default=None, metavar="N", help="the largest batch to try"
    )
    fit.add_argument(
        "--optimize",
        action="store_true",
        help="per batch size, the best decisions under the budget (the exact search of "
        "suggest --compiled at each batch), ranked by examples per second",
    )
    verify_option(
        fit,
        "with --optimize: verify each batch's answer; one whose gradients differ is dropped, "
        "said with why, for the next best",
    )


def check(opts: argparse.Namespace) -> dict:
    """The budget in bytes, and the batch options' sense, before JAX loads."""
    check_measure(opts)
    if opts.multiple < 1:
        raise RematError(
            f"--multiple {opts.multiple}: batches are tried in steps of this many examples; "
            "give 1 or more (1: any batch; 8: 8, 16, 24, ...)."
        )
    if opts.optimize and opts.policy:
        raise RematError(
            "--optimize searches every decision at each batch; --policy names configurations "
            "to search instead: give one or the other."
        )
    if opts.verify and not opts.optimize:
        raise RematError(
            "--verify checks the configuration fit --optimize answers with at each batch; "
            "add --optimize, or verify one configuration with remat-tui verify."
        )
    if opts.max_batch is not None and opts.max_batch < opts.multiple:
        raise RematError(
            f"--max-batch {opts.max_batch}: the largest batch to try must be at least "
            f"--multiple ({opts.multiple})."
        )
    return {"budget": size_of("--budget", opts.budget)}


def run(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    """fit, rendered: (text, warnings, status)."""
    from remat_tui.core.search.fit.batches import fit
    from remat_tui.report.fit import render_fit

    refuse_topology(opts)
    stop = threading.Event()
    with interrupts.first_interrupt_stops(stop):
        result = fit(
            target,
            checks["budget"],
            policies=opts.policy,
            sites=site_overrides(opts.site),
            device=opts.device,
            multiple=opts.multiple,
            max_batch=opts.max_batch,
            measure=opts.measure,
            runs=opts.runs,
            cancelled=stop.is_set,
            progress=Progress().batch,
            optimize=opts.optimize,
            skip=opts.skip,
            verify=opts.verify,
        )
    if result.cancelled and not result.rows:
        print("remat-tui: cancelled before any row was found", file=sys.stderr)
        return "", [], lambda: 130
    if result.cancelled:
        print(
            f"remat-tui: cancelled: {count(len(result.rows), 'row')} found so far, below",
            file=sys.stderr,
        )
    failed = [r for r in result.rows if r.measured and r.measured.error and r.measured.fits]

    def status() -> int:
        if failed:
            first = (failed[0].measured and failed[0].measured.error or "").splitlines()[0]
            print(
                f"remat-tui: error: {len(failed)} configuration(s) raised when run on the "
                f"device: {first} The rows are in the "
                "report; fix the step, or drop --measure to rank by the estimate.",
                file=sys.stderr,
            )
            return 2
        return 130 if result.cancelled else 0

    return render_fit(result, fmt), [], status
