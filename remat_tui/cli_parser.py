"""Provides the command line's parsers: `app_parser` (`remat-tui FILE[:NAME]`,
the app) and `headless_parser` (a subcommand each: report, compare, suggest,
memory, diff, and fit from cli_fit.py), built from one set of shared options
(target, policy, sites, device, format, output, measuring).

Imports only the standard library and light modules, so `--help` is instant.
"""

from __future__ import annotations

import argparse
from typing import Any

from remat_tui import __version__, cli_fit, cli_verify
from remat_tui.report import FORMATS  # light: the report modules import no jax

# The headless subcommands `headless_parser` parses; `cache` has a parser of its own.
SUBCOMMANDS = ("report", "compare", "suggest", "diff", "memory", "fit", "check", "verify")

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
    """What every command takes: the target, its site overrides, the device
    and the mesh."""
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
    parser.add_argument(
        "--mesh",
        default=None,
        metavar="AXIS=N,...",
        help=(
            "the mesh to build over the chosen device set's devices, e.g. data=4,model=2, "
            "for a target whose args factory takes a parameter named mesh "
            "(args=lambda mesh: ...); its sizes multiply to the number of devices"
        ),
    )


def policy_option(parser: argparse.ArgumentParser, **kwargs: Any) -> None:
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


def compile_options(parser: argparse.ArgumentParser, search: bool) -> None:
    """Where compiles are remembered and, for a search (`search`), where they run."""
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the compile cache (remat-tui cache shows it); "
        "every program is compiled",
    )
    if not search:
        return
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="compile in N worker processes at once (default: the machine's cores and memory, "
        "once a compile takes seconds; 1: one at a time, here)",
    )
    parser.add_argument(
        "--cluster",
        choices=("ray",),
        default=None,
        help="run the compiles as tasks on a Ray cluster (RAY_ADDRESS, else a local Ray; "
        "needs the ray extra); RAY_ADDRESS set does the same",
    )


def skip_option(parser: argparse.ArgumentParser) -> None:
    """Candidates a search leaves out (core/search/configs/skips.py)."""
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="SPEC|ID=SPEC",
        help="leave out every candidate with this policy (at that checkpoint, with ID= or "
        "FUNCTION=); repeatable; never the code as written",
    )


def measure_options(parser: argparse.ArgumentParser) -> None:
    """Running the compiled step on the device, and the CPU's calibration for
    the estimate: where a command can rank by time."""
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
    parser.add_argument(
        "--recalibrate",
        action="store_true",
        help="measure this CPU's rates again for the step-time estimate, and keep them "
        "(they are measured once per machine and kept in remat-tui's cache folder)",
    )


def app_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remat-tui",
        description="See what JAX autodiff saves for the backward pass and what "
        "jax.checkpoint policies change. Headless: remat-tui "
        f"{{{','.join(SUBCOMMANDS)}}} --help; the compile cache: remat-tui cache --help.",
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
    for add in (_report, _compare, _suggest, _memory, _diff, _check):
        add(commands)
    cli_fit.add_parser(
        commands, target_options, policy_option, output_options, measure_options,
        compile_options, skip_option, cli_verify.add_option,
    )  # fmt: skip
    cli_verify.add_parser(
        commands, target_options, policy_option, structure_option, output_options,
        compile_options,
    )  # fmt: skip
    return parser


def cache_parser() -> argparse.ArgumentParser:
    """`remat-tui cache [show|clear]`: the compile cache."""
    parser = argparse.ArgumentParser(
        prog="remat-tui cache",
        description="The compile cache: what remat-tui read from XLA for each program it "
        "compiled, kept so that the same program is not compiled again "
        "($XDG_CACHE_HOME/remat-tui, else ~/.cache/remat-tui; REMAT_TUI_CACHE_SIZE caps it, "
        "default 256MiB).",
    )
    parser.add_argument(
        "action", nargs="?", choices=("show", "clear"), default="show",
        help="show where it is and what it holds (default), or clear it",
    )  # fmt: skip
    return parser


def _report(commands: cli_fit.Commands) -> None:
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
    cli_verify.add_option(
        report, "also verify this configuration's gradients, in one line; exit 1 if they differ"
    )


def _compare(commands: cli_fit.Commands) -> None:
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
    compile_options(compare, search=True)
    skip_option(compare)
    cli_verify.add_option(
        compare,
        "also verify each row's gradients: ✓ the same, ≠ they differ (never ★), ? not run",
    )


def _suggest(commands: cli_fit.Commands) -> None:
    """suggest: the least-cost configuration that fits a budget."""
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
    # Refused with a message (cli.py), not argparse's "unrecognized arguments".
    suggest.add_argument("--policy", default=None, help=argparse.SUPPRESS)
    output_options(suggest, COMPILED_HELP)
    measure_options(suggest)
    compile_options(suggest, search=True)
    skip_option(suggest)
    suggest.add_argument("--budget", required=True, metavar="SIZE", help="e.g. 2GiB, 1.5e9")
    cli_verify.add_option(
        suggest,
        "verify the answer's gradients; an answer whose gradients differ is dropped, said "
        "with why, for the next best",
    )


def _memory(commands: cli_fit.Commands) -> None:
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
    compile_options(memory, search=False)
    memory.add_argument(
        "--memory-limit",
        metavar="SIZE",
        help="also compile for a TPU with SIZE of memory (XLA's xla_tpu_max_hbm_size_mib) and "
        "say what XLA's own rematerialization pass did to fit it: what it recomputes, and the "
        "peak, FLOPs and estimated time it changed against the device's own memory",
    )


def _diff(commands: cli_fit.Commands) -> None:
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


def _check(commands: cli_fit.Commands) -> None:
    """check: a guard for upgrades and refactors."""
    check = commands.add_parser(
        "check",
        help="compare with a saved baseline (for CI: JAX upgrades, refactors)",
        description="Analyse and compile one configuration and compare it with a baseline "
        "saved by --write: the residuals (by where they come from and their names), the "
        "compiled peak and the step-time estimate. Exit 0 unchanged, 1 changed (residuals "
        "appeared or disappeared, or the peak moved by more than --tolerance), 2 bad input. "
        "With --against, the baseline's own policy, sites and device are used unless given.",
    )
    target_options(check)
    policy_option(check, default=None, help="the outer policy (default: the baseline's, or "
                  "as_written with --write)")  # fmt: skip
    output_options(check, None)
    compile_options(check, search=False)
    saved = check.add_mutually_exclusive_group(required=True)
    saved.add_argument("--against", metavar="BASELINE.json", help="the baseline to compare with")
    saved.add_argument(
        "--write", metavar="BASELINE.json", help="save this configuration's report as the baseline"
    )
    check.add_argument(
        "--tolerance",
        default="1%",
        metavar="SHARE",
        help="how far the compiled peak may move and still be unchanged: 1%% (the default), "
        "0.5%%, 0.02",
    )
