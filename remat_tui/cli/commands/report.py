"""Provides `remat-tui report`: one configuration in full, with its CI gates
(--max-residual-bytes, --max-peak-bytes: exit status 1 when exceeded) and
--verify (exit status 1 when the gradients differ).

Imports only the standard library and light modules at module level.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from remat_tui.cli import analysing
from remat_tui.cli.options import (
    Commands,
    check_measure,
    compile_options,
    measure_options,
    output_options,
    policy_option,
    refuse_topology,
    size_of,
    structure_option,
    target_options,
    verify_option,
)
from remat_tui.cli.rendering import failed_runs
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.cli.rendering import Rendered
    from remat_tui.core.model import Analysis
    from remat_tui.registry import Target


def add_parser(commands: Commands) -> None:
    report = commands.add_parser(
        "report",
        help="one configuration",
        description="Print the saved residuals, both jaxprs and totals of one target "
        "under one policy.",
    )
    target_options(report)
    policy_option(report)
    structure_option(report)
    output_options(
        report,
        "also compile the step (the loss and its gradient with respect to the first "
        "argument or the target's params=, or the training step) for the device, without "
        "running it, and lead with XLA's peak bytes per device",
    )
    measure_options(report)
    compile_options(report, search=False)
    report.add_argument(
        "--vs-written",
        action="store_true",
        help="with --compiled: also compile the code as written and say why the peak moved "
        "so much less than the residual bytes against it, where it did (one more compile)",
    )
    report.add_argument(
        "--max-residual-bytes",
        metavar="SIZE",
        help="exit 1 if the residual bytes on a device exceed SIZE (512MiB, 2GiB, "
        "1.5e9 or a byte count); the report is written first",
    )
    report.add_argument(
        "--max-peak-bytes",
        metavar="SIZE",
        help="with --compiled: exit 1 if the compiled peak per device exceeds SIZE",
    )
    verify_option(
        report, "also verify this configuration's gradients, in one line; exit 1 if they differ"
    )


def check(opts: argparse.Namespace) -> dict:
    """--vs-written's and the measuring options' sense, and the gates in bytes."""
    if opts.vs_written and not opts.compiled and not opts.measure:
        raise RematError(
            "--vs-written needs --compiled: it weighs the compiled peak against the code as "
            "written's. Add --compiled."
        )
    check_measure(opts)
    return {"limits": _limits(opts)}


def _limits(opts: argparse.Namespace) -> dict[str, int]:
    """The CI gates asked for: {option: bytes}."""
    if opts.max_peak_bytes is not None and not opts.compiled:
        raise RematError(
            "--max-peak-bytes needs --compiled: the peak comes from compiling the "
            "gradient. Add --compiled, or gate on --max-residual-bytes."
        )
    limits = {}
    for option, value in (
        ("--max-residual-bytes", opts.max_residual_bytes),
        ("--max-peak-bytes", opts.max_peak_bytes),
    ):
        if value is not None:
            limits[option] = size_of(option, value)
    return limits


def run(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    from remat_tui.core.xla.run.shared_runs import sharing
    from remat_tui.report import render

    refuse_topology(opts)
    with sharing(opts.verify):  # --measure's first run is --verify's (core/xla/run/shared_runs.py)
        analysis = analysing.analysis(target, opts, opts.compiled, opts.vs_written)
    error = analysis.measured.get("error") if analysis.measured else None
    failed = [analysis.config.label()] if error else []
    if opts.verify:
        from dataclasses import replace

        from remat_tui.core.xla.verify.runs import verify

        analysis = replace(analysis, gradients=verify(target, analysis.config))

    # The verdicts are printed after the report is written.
    def status() -> int:
        return (
            failed_runs(failed, error) or _gates(analysis, checks["limits"]) or _differing(analysis)
        )

    return render(analysis, fmt), analysis.warnings, status


def _gates(analysis: Analysis, limits: dict[str, int]) -> int:
    """Exit status 1, with a message per excess, when a gate is exceeded."""
    from remat_tui.core.units import human_bytes
    from remat_tui.report.compiled import residual_bytes

    measured = {"--max-residual-bytes": ("residual bytes on a device", residual_bytes(analysis))}
    if analysis.compiled is not None:
        c = analysis.compiled
        # A compile that did not fit the device is over any budget: XLA's need
        # where it said, else one byte over (the device's own limit was exceeded).
        peak = (
            c.peak_bytes
            if c.fits
            else max(c.needed_bytes or 0, limits.get("--max-peak-bytes", 0) + 1)
        )
        measured["--max-peak-bytes"] = ("compiled peak per device", peak)
    target = f"{analysis.target_file or ''}:{analysis.target_name}".lstrip(":")
    status = 0
    for option, limit in limits.items():
        what, value = measured[option]
        if value > limit:
            print(
                f"remat-tui: over budget: {target} under {analysis.config.label()}: "
                f"{what} {human_bytes(value)} ({value:,} B) exceeds {option} "
                f"{human_bytes(limit)} ({limit:,} B) by {human_bytes(value - limit)} "
                f"({value - limit:,} B)",
                file=sys.stderr,
            )
            status = 1
    return status


def _differing(analysis: Analysis) -> int:
    """--verify: exit status 1, said, when the gradients differ."""
    v = analysis.gradients
    if v is None or v.verdict != "differ":
        return 0
    print(
        f"remat-tui: gradients differ: {analysis.config.label()} does not compute what the code "
        f"as written computes ({', '.join(x.path for x in v.differing)})",
        file=sys.stderr,
    )
    return 1
