"""Provides the command line's parsers: `app_parser` (`remat-tui FILE[:NAME]`,
the app) and `headless_parser` (a subcommand each: report, compare, suggest,
memory, diff, and fit from cli_fit.py), built from one set of shared options
(target, policy, sites, device, format, output, measuring).

Imports only the standard library and light modules, so `--help` is instant.
"""

from __future__ import annotations

import argparse

from remat_tui import __version__, cli_fit
from remat_tui.report import FORMATS  # light: the report modules import no jax

SITE_HELP = (
    "set the policy of a jax.checkpoint in the code: a site id or the checkpointed "
    "function's name, e.g. --site block=nothing_saveable (as_written removes that "
    "checkpoint); repeatable"
)
COMPILED_HELP = (
    "also compile each configuration's step (the loss and its gradient with respect to "
    "the first argument or the target's params=, as jax.value_and_grad takes it; or the "
    "training step), without running it, for its memory and time"
)


def target_options(parser: argparse.ArgumentParser) -> None:
    """What every command takes: the target, its site overrides and the device."""
    parser.add_argument(
        "target",
        metavar="FILE[:NAME]",
        help="a Python file registering targets with @remat_tui.target; "
        ":NAME picks one when it has several",
    )
    parser.add_argument(
        "--site", action="append", default=[], metavar="ID|FUNCTION=SPEC", help=SITE_HELP
    )
    parser.add_argument(
        "--device",
        default=None,
        metavar="D",
        help=(
            "device to analyse on, e.g. cpu:0, gpu:1 or tpu:v5e:2x2 (default: JAX's default; "
            "cpu:1 and up need XLA_FLAGS=--xla_force_host_platform_device_count=N)"
        ),
    )


def policy_option(parser: argparse.ArgumentParser, **kwargs) -> None:
    kwargs.setdefault("default", "as_written")
    kwargs.setdefault(
        "help",
        "a jax.checkpoint policy, written as after jax.checkpoint_policies. "
        "(default: as_written, no checkpoint)",
    )
    parser.add_argument("--policy", metavar="SPEC", **kwargs)


def structure_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--structure",
        default=None,
        metavar="SPEC",
        help="rebuild a scan of the code: nested(G) (its layers as G checkpointed groups) or "
        "split(K, POLICY_A, POLICY_B) (its first K layers under A, the rest under B); "
        "scan=I picks the scan where there are several. The report's python is the code "
        "to write",
    )


def output_options(parser: argparse.ArgumentParser, compiled_help: str | None) -> None:
    """What every headless command takes: format and output; and compiling,
    where the command has a use for it."""
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="output format (default: from -o's extension, .json .md .html .txt; else text)",
    )
    parser.add_argument(
        "-o", "--output", metavar="PATH", help="write to PATH (atomically) instead of stdout"
    )
    if compiled_help is not None:
        parser.add_argument("--compiled", action="store_true", help=compiled_help)


def measure_options(parser: argparse.ArgumentParser) -> None:
    """Running the compiled step on the device: where a command can rank by it."""
    parser.add_argument(
        "--measure",
        action="store_true",
        help="also run each compiled step on the device (a local one: not a TPU topology) "
        "and time it; measured times rank where there are some (implies --compiled)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=5,
        metavar="N",
        help="with --measure: timed runs of each step, after one warm-up (default 5)",
    )


def app_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remat-tui",
        description="See what JAX autodiff saves for the backward pass and what "
        "jax.checkpoint policies change. Headless: remat-tui {report,compare,suggest,"
        "diff,memory,fit} --help.",
    )
    parser.add_argument("--version", action="version", version=f"remat-tui {__version__}")
    target_options(parser)
    policy_option(parser)
    parser.add_argument(
        "--web", action="store_true", help="serve the app to a browser on localhost instead"
    )
    parser.add_argument(
        "--port", type=int, default=None, metavar="N", help="port for --web (default: 8000)"
    )
    return parser


def headless_parser() -> argparse.ArgumentParser:
    """One parser, a subcommand each, sharing the target and output options."""
    parser = argparse.ArgumentParser(prog="remat-tui")
    commands = parser.add_subparsers(dest="command", required=True)
    for add in (_report, _compare, _suggest, _memory, _diff):
        add(commands)
    cli_fit.add_parser(commands, target_options, policy_option, output_options, measure_options)
    return parser


def _report(commands) -> None:
    """report: one configuration in full."""
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


def _compare(commands) -> None:
    """compare: every configuration worth comparing."""
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


def _suggest(commands) -> None:
    """suggest: the least recompute that fits a budget."""
    suggest = commands.add_parser(
        "suggest",
        help="the least recompute that fits a budget",
        description="The configuration with the least recomputation whose memory fits "
        "a budget (residual bytes on device, or the compiled peak with --compiled).",
    )
    target_options(suggest)
    output_options(suggest, COMPILED_HELP)
    measure_options(suggest)
    suggest.add_argument("--budget", required=True, metavar="SIZE", help="e.g. 2GiB, 1.5e9")


def _memory(commands) -> None:
    """memory: where the compiled peak goes."""
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


def _diff(commands) -> None:
    """diff: what two configurations save differently."""
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
