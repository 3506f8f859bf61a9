"""Provides the command line: `remat-tui FILE[:NAME]` (the app) and
`remat-tui report FILE[:NAME]` (headless).

Imports only the standard library at module level, so `--help` is instant;
jax loads when a target is analysed and textual only when the app starts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from remat_tui import __version__
from remat_tui.errors import RematError
from remat_tui.report import FORMATS  # light: the report modules import no jax


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="FILE[:NAME]",
        help="a Python file registering targets with @remat_tui.target; "
        ":NAME picks one when it has several",
    )
    parser.add_argument(
        "--policy",
        default="as_written",
        metavar="SPEC",
        help="a jax.checkpoint policy, written as after "
        "jax.checkpoint_policies. (default: as_written, no checkpoint)",
    )
    parser.add_argument(
        "--device",
        default=None,
        metavar="D",
        help="device to analyse on, e.g. cpu:1 (default: JAX's default)",
    )
    parser.add_argument(
        "--site",
        action="append",
        default=[],
        metavar="ID|FUNCTION=SPEC",
        help="set the policy of a jax.checkpoint in the code: a site id or the "
        "checkpointed function's name, e.g. --site block=nothing_saveable "
        "(as_written removes that checkpoint); repeatable",
    )


def app_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remat-tui",
        description="See what JAX autodiff saves for the backward pass and what "
        "jax.checkpoint policies change. `remat-tui report --help` for the "
        "headless report.",
    )
    parser.add_argument("--version", action="version", version=f"remat-tui {__version__}")
    _common(parser)
    parser.add_argument(
        "--web", action="store_true", help="serve the app to a browser on localhost instead"
    )
    parser.add_argument(
        "--port", type=int, default=None, metavar="N", help="port for --web (default: 8000)"
    )
    return parser


def report_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remat-tui report",
        description="Print the saved residuals, both jaxprs and totals of one target "
        "under one policy.",
    )
    _common(parser)
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="report format (default: from -o's extension, .json .md .html .txt; else text)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="write to PATH (atomically) instead of standard output",
    )
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="also compile the gradient for the device (never run it) and lead with "
        "XLA's peak bytes per device",
    )
    parser.add_argument(
        "--max-residual-bytes",
        metavar="SIZE",
        help="exit 1 if the residual bytes on a device exceed SIZE (512MiB, 2GiB, "
        "1.5e9 or a byte count); the report is written first",
    )
    parser.add_argument(
        "--max-peak-bytes",
        metavar="SIZE",
        help="with --compiled: exit 1 if the compiled peak per device exceeds SIZE",
    )
    return parser


# -o's extension picks the format when --format is not given.
OUTPUT_FORMATS = {".json": "json", ".md": "md", ".markdown": "md", ".html": "html"}
OUTPUT_FORMATS |= {".htm": "html", ".txt": "text"}


def report_format(opts: argparse.Namespace) -> str:
    import os

    if opts.format:
        return opts.format
    ext = os.path.splitext(opts.output or "")[1].lower()
    return OUTPUT_FORMATS.get(ext, "text")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv and argv[0] == "report":
            opts = report_parser().parse_args(argv[1:])
            _warn_if_untested_jax()
            return run_report(opts)
        if argv and argv[0] in ("compare", "suggest", "diff"):
            from remat_tui import cli_costs

            _warn_if_untested_jax()
            return cli_costs.run(argv[0], argv[1:])
        return run_app(app_parser().parse_args(argv))
    except RematError as exc:
        print(f"remat-tui: error: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _warn_if_untested_jax() -> None:
    """Once per command, on stderr: this JAX is outside the tested range."""
    from remat_tui.core.jaxcompat import untested_message

    if message := untested_message():
        print(f"remat-tui: warning: {message}", file=sys.stderr)


def run_report(opts: argparse.Namespace) -> int:
    from remat_tui.core.analysis import analyze
    from remat_tui.core.loading import load_target
    from remat_tui.report import render
    from remat_tui.report.write import write_atomic

    limits = _limits(opts)  # a bad size fails before anything is analysed
    sites = _site_overrides(opts.site)
    with _user_output_to_stderr():
        analysis = analyze(
            load_target(opts.target),
            policy=opts.policy,
            device=opts.device,
            sites=sites,
            compiled=opts.compiled,
        )
    for warning in analysis.warnings:
        print(f"remat-tui: warning: {warning}", file=sys.stderr)
    fmt = report_format(opts)
    text = render(analysis, fmt)
    if opts.output:
        path = write_atomic(opts.output, text)
        print(f"remat-tui: wrote {fmt} report to {path}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return _gates(analysis, limits)


def _limits(opts: argparse.Namespace) -> dict[str, int]:
    """The CI gates asked for: {option: bytes}."""
    from remat_tui.report.units import parse_size

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
            try:
                limits[option] = parse_size(value)
            except RematError as exc:
                raise RematError(f"{option}: {exc.message}") from None
    return limits


def _gates(analysis, limits: dict[str, int]) -> int:
    """Exit status 1, with a message per excess, when a gate is exceeded."""
    from remat_tui.report.compiled import residual_bytes
    from remat_tui.report.units import human_bytes

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


@contextlib.contextmanager
def _user_output_to_stderr():
    """While the target's code runs (its import, its arguments, its trace),
    what it prints goes to stderr, print() and raw writes to file descriptor 1
    alike: stdout carries the report alone, so `--format json | jq` parses."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def run_app(opts: argparse.Namespace) -> int:
    import os

    from remat_tui.core.loading import split_target_ref
    from remat_tui.core.policies import check_syntax

    # What can be checked before JAX loads fails here, with exit status 2; the
    # rest (the file's own errors, its policy names, the device) shows in the app.
    check_syntax(opts.policy)
    for spec in _site_overrides(opts.site).values():
        check_syntax(spec)
    path, name = split_target_ref(opts.target)
    if not os.path.isfile(path):
        raise RematError(
            f"{os.path.abspath(path)}: no such file. Give the path of a Python "
            "file that registers targets with @remat_tui.target(...)."
        )
    if opts.web or opts.port is not None:
        if not opts.web:
            raise RematError("--port is for --web; add --web to serve the app to a browser.")
        from remat_tui.web import DEFAULT_PORT, serve

        port = DEFAULT_PORT if opts.port is None else opts.port
        return serve(path, name, policy=opts.policy, device=opts.device, port=port, sites=opts.site)
    from remat_tui.app.launch import run

    return run(path, name, policy=opts.policy, device=opts.device, sites=opts.site)


def _site_overrides(options: list[str]) -> dict:
    """`--site` options -> {site id or function name: spec}; the last one for a key wins."""
    from remat_tui.core.config import parse_site_option

    return dict(parse_site_option(text) for text in options)
