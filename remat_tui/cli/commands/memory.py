"""Provides `remat-tui memory`: where the compiled peak goes, and with
--memory-limit what XLA's own rematerialization pass does to fit a limit.

Imports only the standard library and light modules at module level.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from remat_tui.cli import analysing
from remat_tui.cli.options import (
    Commands,
    compile_options,
    output_options,
    policy_option,
    size_of,
    structure_option,
    target_options,
)

if TYPE_CHECKING:
    from remat_tui.cli.rendering import Rendered
    from remat_tui.registry import Target


def add_parser(commands: Commands) -> None:
    memory = commands.add_parser(
        "memory",
        help="where the compiled peak goes",
        description="Compile one configuration (never run it) and show where its peak "
        "goes: live bytes over XLA's schedule, the buffers live at the peak with their "
        "category and line, bytes by category, and why the peak did not move with the "
        "residual bytes against the code as written.",
    )
    target_options(memory)
    policy_option(memory)
    structure_option(memory)
    output_options(memory, None)
    compile_options(memory, search=False)
    memory.add_argument(
        "--memory-limit",
        metavar="SIZE",
        help="also compile for a TPU with SIZE of memory (XLA's xla_tpu_max_hbm_size_mib) and "
        "say what XLA's own rematerialization pass did to fit it: what it recomputes, and the "
        "peak, FLOPs and estimated time it changed against the device's own memory",
    )


def check(opts: argparse.Namespace) -> dict:
    """--memory-limit in bytes."""
    if opts.memory_limit is None:
        return {}
    return {"memory_limit": size_of("--memory-limit", opts.memory_limit)}


def run(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    from remat_tui.report.memory import render

    # Why the peak did or did not move against the code as written is what
    # the memory view is for: the comparison is always asked for here.
    analysis = analysing.analysis(target, opts, compiled=True, vs_written=True)
    if "memory_limit" in checks:  # what XLA's own rematerialization pass does under a limit
        from dataclasses import replace

        from remat_tui.core.xla.fates.remat_pass import remat_pass

        limited = remat_pass(target, analysis.config, checks["memory_limit"])
        memory = {**(analysis.compiled.memory or {}), "xla_remat": limited.to_dict()}
        if analysis.compiled.memory is not None:
            analysis = replace(analysis, compiled=replace(analysis.compiled, memory=memory))
    return render(analysis, fmt), analysis.warnings, lambda: 0
