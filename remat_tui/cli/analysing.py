"""Provides what several commands ask of the core alike: one configuration
analysed (`analysis`: report, memory) and the options a search takes from
the command line (`search_options`: compare, suggest).

Imports only the standard library at module level: the core loads when a
command runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from remat_tui.cli.options import site_overrides
from remat_tui.cli.progress import Progress

if TYPE_CHECKING:
    from remat_tui.core.model import Analysis
    from remat_tui.registry import Target


def analysis(
    target: Target, opts: argparse.Namespace, compiled: bool, vs_written: bool = False
) -> Analysis:
    """The one configuration report and memory are about, analysed; with
    `vs_written`, its compiled peak weighed against the code as written's
    (one more compile)."""
    from remat_tui.core.trace.analysis import analyze
    from remat_tui.core.xla.compiled_analysis import analyze_compiled

    options = {"policy": opts.policy, "device": opts.device, "sites": site_overrides(opts.site)}
    if opts.structure is not None:
        from remat_tui.core.setup.config import Config

        options["config"] = Config.make(**options, declared=target.policies,
                                        structure=opts.structure)  # fmt: skip
    if not compiled:
        return analyze(target, **options)
    if getattr(opts, "measure", False):
        options |= {"measure": True, "runs": opts.runs}
    return analyze_compiled(target, **options, vs_written=vs_written)


def search_options(opts: argparse.Namespace) -> dict:
    """What compare and suggest take alike from the command line."""
    return {
        "sites": site_overrides(opts.site),
        "compiled": opts.compiled,
        "device": opts.device,
        "progress": Progress(),
        "measure": opts.measure,
        "runs": opts.runs,
        "skip": opts.skip,
    }
