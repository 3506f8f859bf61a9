"""Provides `remat-tui diff`: what two configurations save differently.

Imports only the standard library and light modules at module level.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from remat_tui.cli.options import (
    Commands,
    output_options,
    policy_option,
    site_overrides,
    target_options,
)

if TYPE_CHECKING:
    from remat_tui.cli.rendering import Rendered
    from remat_tui.registry import Target


def add_parser(commands: Commands) -> None:
    diff = commands.add_parser(
        "diff",
        help="what two configurations save differently",
        description="What configuration A saves that B does not, and back; byte and "
        "recompute deltas (B - A). --site sets side A's overrides.",
    )
    target_options(diff)
    policy_option(diff, help="side A's policy (default: as_written)")
    output_options(diff, None)
    diff.add_argument("--vs", default="as_written", metavar="B", help="side B's policy")
    diff.add_argument(
        "--vs-site",
        action="append",
        default=[],
        metavar="ID|FUNCTION=SPEC",
        help="a site override on side B; repeatable",
    )


def check(opts: argparse.Namespace) -> dict:
    return {}


def run(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    from remat_tui.core.search.diff import diff
    from remat_tui.core.setup.config import Config
    from remat_tui.report.comparisons import render_diff

    sides = (
        Config.make(opts.policy, site_overrides(opts.site), opts.device, target.policies),
        Config.make(opts.vs, site_overrides(opts.vs_site), opts.device, target.policies),
    )
    return render_diff(diff(target, *sides), fmt), [], lambda: 0
