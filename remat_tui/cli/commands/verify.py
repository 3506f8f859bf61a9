"""Provides `remat-tui verify` (Contract 18). It runs the step under one
configuration and under the code as written on the device, with the same
inputs, and compares the loss and every gradient (core/xla/verify/runs.py): exit
status 0 when they agree, 1 when they differ, 2 on bad input or where nothing
could be run (a deviceless TPU topology, a step that does not fit). Where
they differ, it names the fewest of the configuration's decisions that move
them, verifying subsets (core/xla/verify/bisect.py), one progress line on
stderr each.

Imports only the standard library and light modules at module level.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from remat_tui.cli.options import (
    Commands,
    compile_options,
    output_options,
    policy_option,
    site_overrides,
    structure_option,
    target_options,
)
from remat_tui.cli.progress import Progress
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.cli.rendering import Rendered
    from remat_tui.registry import Target


def add_parser(commands: Commands) -> None:
    verify = commands.add_parser(
        "verify",
        help="the same gradients as the code as written, run on the device",
        description="Run the step (the loss and its gradient, or the training step) under "
        "one configuration and under the code as written on the device, with the same "
        "inputs, and compare the loss and every gradient leaf: bitwise, and against a "
        "tolerance from the dtype and from the code as written compiled otherwise. Exit 0 "
        "when they agree, 1 when they differ, 2 on bad input or where the step cannot run "
        "(a deviceless TPU topology).",
    )
    target_options(verify)
    policy_option(verify)
    structure_option(verify)
    output_options(verify, None)
    compile_options(verify, search=False)
    verify.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="the seed of the random inputs drawn where the target gives shapes only "
        "(the same for both runs; default 0)",
    )


def check(opts: argparse.Namespace) -> dict:
    return {}


def run(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    from remat_tui.core.setup.config import Config
    from remat_tui.core.xla.verify.bisect import verify_explained
    from remat_tui.core.xla.verify.runs import DIFFER, NOT_RUN
    from remat_tui.report.verify import render

    config = Config.make(opts.policy, site_overrides(opts.site), opts.device, target.policies,
                         opts.structure)  # fmt: skip
    # a line on stderr per configuration the explanation verifies
    result = verify_explained(target, config, seed=opts.seed, progress=Progress())
    if result.verdict == NOT_RUN:
        raise RematError(f"verify {config.with_device(None).label()}: {result.reason}.")
    return render(result, fmt, target.label), [], lambda: 1 if result.verdict == DIFFER else 0
