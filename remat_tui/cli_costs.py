"""Provides `remat-tui compare`, `remat-tui suggest` and `remat-tui diff`.

Standard library only at module level, like cli.py: jax loads when the
target is analysed. Progress goes to standard error, one line per
configuration, so a long comparison shows it is moving.
"""

from __future__ import annotations

import argparse
import sys

FORMATS = ("json", "md", "html", "text")


def _target_args(parser: argparse.ArgumentParser, sites_help: str) -> None:
    parser.add_argument("target", metavar="FILE[:NAME]", help="a target file (and name)")
    parser.add_argument(
        "--site", action="append", default=[], metavar="ID|FUNCTION=SPEC", help=sites_help
    )
    parser.add_argument("--device", default=None, metavar="D", help="e.g. cpu:1")
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="also compile each configuration's gradient (never run) for its memory",
    )
    parser.add_argument("--format", choices=FORMATS, default="text")
    parser.add_argument("-o", "--output", metavar="PATH", help="write to PATH atomically")


def compare_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remat-tui compare",
        description="Residual bytes and recompute FLOPs of every built-in policy, the "
        "target's own, the checkpoint_name save/offload sets and, for code with "
        "jax.checkpoint sites, each policy at each site; Pareto-optimal rows marked.",
    )
    _target_args(parser, "site overrides every row starts from; repeatable")
    parser.add_argument(
        "--policy",
        action="append",
        metavar="SPEC",
        help="compare only these outer policies (repeatable)",
    )
    return parser


def suggest_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remat-tui suggest",
        description="The configuration with the least recomputation whose memory fits "
        "a budget (residual bytes on device, or the compiled peak with --compiled).",
    )
    _target_args(parser, "site overrides the search starts from; repeatable")
    parser.add_argument("--budget", required=True, metavar="SIZE", help="e.g. 2GiB, 1.5e9")
    return parser


def diff_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remat-tui diff",
        description="What configuration A saves that B does not, and back; byte and "
        "recompute deltas (B - A).",
    )
    _target_args(parser, "a site override on side A; repeatable")
    parser.add_argument("--policy", default="as_written", metavar="A", help="side A's policy")
    parser.add_argument("--vs", default="as_written", metavar="B", help="side B's policy")
    parser.add_argument(
        "--vs-site",
        action="append",
        default=[],
        metavar="ID|FUNCTION=SPEC",
        help="a site override on side B; repeatable",
    )
    return parser


COMMANDS = {"compare": compare_parser, "suggest": suggest_parser, "diff": diff_parser}


def run(command: str, argv: list[str]) -> int:
    opts = COMMANDS[command]().parse_args(argv)
    budget = None
    if command == "suggest":
        from remat_tui.report.units import parse_size

        budget = parse_size(opts.budget)
    from remat_tui.cli import _site_overrides
    from remat_tui.core.loading import load_target
    from remat_tui.report.costs import render_compare, render_diff, render_suggest

    sites = _site_overrides(opts.site)
    target = load_target(opts.target)
    if command == "compare":
        from remat_tui.core.compare import compare

        result = compare(
            target,
            policies=opts.policy,
            sites=sites,
            compiled=opts.compiled,
            device=opts.device,
            progress=_progress,
        )
        text = render_compare(result, opts.format)
    elif command == "suggest":
        from remat_tui.core.suggest import suggest

        result = suggest(
            target,
            budget,
            sites=sites,
            compiled=opts.compiled,
            device=opts.device,
            progress=_progress,
        )
        text = render_suggest(result, opts.format)
    else:
        from remat_tui.core.config import Config
        from remat_tui.core.diff import diff

        a = Config.make(opts.policy, sites, opts.device, target.policies)
        b = Config.make(opts.vs, _site_overrides(opts.vs_site), opts.device, target.policies)
        text = render_diff(diff(target, a, b), opts.format)
    _emit(text, opts)
    return 0


def _progress(i: int, total: int, config, stage: str = "") -> None:
    what = f"{stage} " if stage else ""
    print(f"remat-tui: [{i + 1}/{total}] {what}{config.label()}", file=sys.stderr, flush=True)


def _emit(text: str, opts) -> None:
    if opts.output:
        from remat_tui.report.write import write_atomic

        path = write_atomic(opts.output, text)
        print(f"remat-tui: wrote {opts.format} to {path}", file=sys.stderr)
    else:
        sys.stdout.write(text)
