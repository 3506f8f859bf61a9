"""Provides `remat-tui verify` (Contract 18): its options and the runner
cli.py's `_headless` calls. It runs the step under one configuration and
under the code as written on the device, with the same inputs, and compares
the loss and every gradient (core/xla/verify/runs.py): exit status 0 when they
agree, 1 when they differ, 2 on bad input or where nothing could be run (a
deviceless TPU topology, a step that does not fit). Where they differ, it
names the fewest of the configuration's decisions that move them, verifying
subsets (core/xla/verify/bisect.py), one progress line on stderr each.

Imports only the standard library at module level, as cli.py does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.cli_check import Rendered
    from remat_tui.cli_fit import Commands
    from remat_tui.core.setup.config import Config
    from remat_tui.registry import Target


def add_parser(
    commands: Commands,
    target_options: Callable[[argparse.ArgumentParser], None],
    policy_option: Callable[..., None],
    structure_option: Callable[[argparse.ArgumentParser], None],
    output_options: Callable[[argparse.ArgumentParser, str | None], None],
    compile_options: Callable[..., None],  # (parser, search=)
) -> None:
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


def add_option(parser: argparse.ArgumentParser, what: str) -> None:
    """`--verify` on report, compare, suggest and fit: `what` says what is
    verified and what comes of a difference."""
    parser.add_argument(
        "--verify",
        action="store_true",
        help=f"{what} (run on the device against the code as written with the same inputs, "
        "as remat-tui verify does; not on a deviceless TPU topology)",
    )


def refuse_topology(opts: argparse.Namespace) -> None:
    """--verify runs steps: on a deviceless TPU topology, one line and exit 2
    before anything is compiled, claiming nothing (as verify does)."""
    if not getattr(opts, "verify", False):
        return
    from remat_tui.core.setup.devices import device_label, resolve_device, topology_of

    dev = resolve_device(opts.device)
    if topology_of(dev) is not None:
        raise RematError(
            f"--verify runs the step, and {device_label(dev)} is a deviceless TPU topology: "
            "it compiles here but cannot run a step, so nothing would be verified and nothing "
            "is claimed. Verify on the TPU itself (--device tpu:0), or drop --verify."
        )


def run(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    from remat_tui.core.setup.config import Config, parse_site_option
    from remat_tui.core.xla.verify.bisect import verify_explained
    from remat_tui.core.xla.verify.runs import DIFFER, NOT_RUN
    from remat_tui.report.verify import render

    sites = dict(parse_site_option(text) for text in opts.site)
    config = Config.make(opts.policy, sites, opts.device, target.policies, opts.structure)
    result = verify_explained(target, config, seed=opts.seed, progress=_progress)
    if result.verdict == NOT_RUN:
        raise RematError(f"verify {config.with_device(None).label()}: {result.reason}.")
    return render(result, fmt, target.label), [], lambda: 1 if result.verdict == DIFFER else 0


def _progress(i: int, total: int, config: Config, stage: str) -> None:
    """One line on stderr per configuration the explanation verifies, as the
    other commands' progress lines: `remat-tui: [2/5] verifying policy ...`."""
    print(f"remat-tui: [{i + 1}/{total}] {stage} {config.label()}", file=sys.stderr, flush=True)
