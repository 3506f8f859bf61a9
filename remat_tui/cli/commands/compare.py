"""Provides `remat-tui compare`: every configuration worth comparing. Ctrl-C
writes the rows made so far, said to be stopped, exit status 130.

Imports only the standard library and light modules at module level.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from remat_tui.cli.analysing import search_options
from remat_tui.cli.options import (
    COMPILED_HELP,
    Commands,
    check_measure,
    compile_options,
    measure_options,
    output_options,
    policy_option,
    refuse_topology,
    site_overrides,
    skip_option,
    target_options,
    verify_option,
)
from remat_tui.cli.rendering import failed_runs
from remat_tui.core.units import count

if TYPE_CHECKING:
    from remat_tui.cli.rendering import Rendered
    from remat_tui.core.search.compare import Comparison
    from remat_tui.core.search.rows import Row
    from remat_tui.registry import Target


def add_parser(commands: Commands) -> None:
    compare = commands.add_parser(
        "compare",
        help="every configuration worth comparing",
        description="Residual bytes and recompute FLOPs of every built-in policy, the "
        "target's own, the checkpoint_name save/offload sets and, for code with "
        "jax.checkpoint sites, each policy at each site; Pareto-optimal rows marked.",
    )
    target_options(compare)
    policy_option(
        compare,
        action="append",
        default=None,
        help="compare only these outer policies (repeatable)",
    )
    output_options(compare, COMPILED_HELP)
    measure_options(compare)
    compile_options(compare, search=True)
    skip_option(compare)
    verify_option(
        compare,
        "also verify each row's gradients: ✓ the same, ≠ they differ (never ★), ? not run",
    )


def check(opts: argparse.Namespace) -> dict:
    check_measure(opts)
    return {}


def run(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    import time

    from remat_tui.core.search.compare import compare
    from remat_tui.report.comparisons import render_compare

    refuse_topology(opts)
    rows: list[Row] = []
    options = search_options(opts)
    began = time.perf_counter()
    try:
        result = compare(target, policies=opts.policy, on_row=rows.append, verify=opts.verify,
                         **options)  # fmt: skip
    except KeyboardInterrupt:
        if not rows:
            raise
        seconds = time.perf_counter() - began
        result = _cancelled_comparison(target, opts, rows, seconds)
        planned = options["progress"].total or len(rows)
        print(
            f"remat-tui: cancelled: {count(len(rows), 'row')} made so far, below",
            file=sys.stderr,
        )
        return render_compare(result, fmt, stopped_of=planned), [], lambda: 130
    failed = [r for r in result.rows if r.measure_failed]
    return (
        render_compare(result, fmt),
        [],
        lambda: failed_runs([r.config.label() for r in failed], _first_error(failed)),
    )


def _cancelled_comparison(
    target: Target, opts: argparse.Namespace, rows: list[Row], seconds: float
) -> Comparison:
    """The rows made before Ctrl-C, concluded as a comparison of their own
    (`seconds`: the time the comparison ran)."""
    from remat_tui.core.search.compare import conclude, measure_baseline
    from remat_tui.core.setup.config import Config

    base = Config.make(sites=site_overrides(opts.site), device=opts.device,
                       declared=target.policies)  # fmt: skip
    baseline, _ = measure_baseline(target, base, compiled=False)
    return conclude(target, rows, baseline, base, seconds)


def _first_error(failed: list[Row]) -> str | None:
    """The first failed run's error, for failed_runs."""
    measured = failed[0].measured if failed else None
    return measured.error if measured else None
