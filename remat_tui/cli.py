"""Provides the command line: `remat-tui FILE[:NAME]` (the app), the headless
subcommands `report`, `compare`, `suggest`, `diff`, `memory` and `fit`
(cli_fit.py), and `remat-tui cache`, the compile cache.

The subcommands share one set of options (target, policy, sites, device,
format, output) and run one way (`_headless`): what the target prints goes to
standard error, so standard output carries the report alone; the format comes
from --format, else from -o's extension; files are written atomically; the
exit status is 0, 1 when a gate is exceeded, 2 for bad input.

Imports only the standard library at module level, so `--help` is instant;
jax loads when a target is analysed and textual only when the app starts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from remat_tui import cli_check, cli_fit
from remat_tui.cli_parser import app_parser, cache_parser, headless_parser
from remat_tui.core.units import count
from remat_tui.errors import RematError

SUBCOMMANDS = ("report", "compare", "suggest", "diff", "memory", "fit", "check")
# -o's extension picks the format when --format is not given.
OUTPUT_FORMATS = {".json": "json", ".md": "md", ".markdown": "md", ".html": "html"}
OUTPUT_FORMATS |= {".htm": "html", ".txt": "text"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv and argv[0] == "cache":
            return _cache(cache_parser().parse_args(argv[1:]))
        if argv and argv[0] in SUBCOMMANDS:
            opts = headless_parser().parse_args(argv)
            _warn_if_untested_jax()
            return _headless(opts)
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


def output_format(opts: argparse.Namespace) -> str:
    if opts.format:
        return opts.format
    ext = os.path.splitext(opts.output or "")[1].lower()
    return OUTPUT_FORMATS.get(ext, "text")


def _headless(opts: argparse.Namespace) -> int:
    """Run one subcommand: its result rendered, written, and its exit status."""
    from remat_tui.core.setup.loading import load_target

    checks = _check_before(opts)  # bad sizes fail before anything is analysed
    fmt = output_format(opts)
    _compile_settings(opts)
    if getattr(opts, "recalibrate", False):
        _recalibrate()
    with _user_output_to_stderr():
        target = load_target(opts.target)
        text, warnings, status = RUNNERS[opts.command](target, opts, fmt, checks)
    warnings = [*warnings, *_compile_notices()]
    if said := _compiles_said():
        print(f"remat-tui: {said}", file=sys.stderr)
    for warning in warnings:
        print(f"remat-tui: warning: {warning}", file=sys.stderr)
    if opts.output:
        from remat_tui.report.write import write_atomic

        path = write_atomic(opts.output, text)
        print(f"remat-tui: wrote {fmt} {opts.command} to {path}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return status()


def _compile_settings(opts: argparse.Namespace) -> None:
    """--no-cache (for worker processes too: they inherit the environment),
    --jobs and --cluster."""
    if getattr(opts, "no_cache", False):
        os.environ["REMAT_TUI_NO_CACHE"] = "1"
    jobs, cluster = getattr(opts, "jobs", None), getattr(opts, "cluster", None)
    if jobs is not None and jobs < 1:
        raise RematError(f"--jobs {jobs}: give 1 or more worker processes (1: compile here).")
    if jobs is not None or cluster is not None:
        from remat_tui.core.xla import compile_pool

        compile_pool.configure(jobs=jobs, cluster=cluster)


def _compiles_said() -> str | None:
    """What this command's compiles were, in one line: how many XLA compiled,
    how many the compile cache answered; None when nothing was compiled."""
    service = sys.modules.get("remat_tui.core.xla.compile_service")
    if service is None:
        return None
    n = service.counts.snapshot()
    made = n["compiled"] + n["in_workers"]
    if made <= 1 and not (n["stored"] or n["in_workers"] or n["ahead"]):
        return None  # one program compiled here, as asked: nothing worth a line
    parts = [f"{count(made, 'program')} compiled"]
    if n["in_workers"]:
        parts[0] += f" ({n['in_workers']} in workers)"
    if n["stored"]:
        where = service.store().folder.parent
        parts.append(f"{n['stored']} answered by the compile cache ({where})")
    if n["ahead"]:
        parts.append(f"{n['ahead']} compiled ahead and not needed")
    return "compiles: " + ", ".join(parts)


def _compile_notices() -> list[str]:
    pool = sys.modules.get("remat_tui.core.xla.compile_pool")
    return sorted(pool.notices) if pool is not None else []


def _cache(opts: argparse.Namespace) -> int:
    """`remat-tui cache [show|clear]`."""
    from remat_tui.core.xla.program_store import Store, describe

    store = Store()
    if opts.action == "clear":
        gone = store.clear()
        print(f"remat-tui: cleared the compile cache: {count(gone, 'program')} ({store.folder})")
        return 0
    sys.stdout.write(describe(store.summary()))
    return 0
def _recalibrate() -> None:
    """--recalibrate: the CPU's rates measured again and kept, before the estimates."""
    from remat_tui.core.xla.chips import recalibrate_cpu

    calibration = recalibrate_cpu().calibration
    print(
        f"remat-tui: calibrated this CPU's rates in {calibration.measuring_seconds:.1f} s; "
        + (f"kept in {calibration.file}" if calibration.file else calibration.not_kept),
        file=sys.stderr,
    )


def _check_before(opts: argparse.Namespace) -> dict:
    """What the options say that can be checked before JAX loads: the gate
    sizes and suggest's budget, in bytes."""
    from remat_tui.report.units import parse_size

    checks: dict = {}
    if getattr(opts, "vs_written", False) and not opts.compiled and not opts.measure:
        raise RematError(
            "--vs-written needs --compiled: it weighs the compiled peak against the code as "
            "written's. Add --compiled."
        )
    if getattr(opts, "measure", False):
        if opts.runs < 1:
            raise RematError(
                f"--runs {opts.runs}: measuring needs at least one timed run; give --runs 1 "
                "or more (default 5)."
            )
        opts.compiled = True
    elif getattr(opts, "runs", 5) != 5:
        raise RematError("--runs is for --measure; add --measure to run the compiled steps.")
    if opts.command == "suggest":
        checks["budget"] = parse_size(opts.budget)
    if opts.command == "fit":
        checks |= cli_fit.check(opts)
    if opts.command == "report":
        checks["limits"] = _limits(opts)
    if opts.command == "check":
        checks |= cli_check.check(opts)
    if opts.command == "memory" and opts.memory_limit is not None:
        try:
            checks["memory_limit"] = parse_size(opts.memory_limit)
        except RematError as exc:
            raise RematError(f"--memory-limit: {exc.message}") from None
    return checks


def _analysis(target, opts, compiled: bool, vs_written: bool = False):
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


def _report(target, opts, fmt, checks):
    from remat_tui.report import render

    analysis = _analysis(target, opts, opts.compiled, opts.vs_written)
    failed = [analysis.config.label()] if (analysis.measured or {}).get("error") else []

    # The verdicts are printed after the report is written.
    def status() -> int:
        return _failed_runs(failed, analysis.measured) or _gates(analysis, checks["limits"])

    return render(analysis, fmt), analysis.warnings, status


def _compare(target, opts, fmt, checks):
    from remat_tui.core.search.compare import compare
    from remat_tui.report.costs import render_compare

    rows = []
    try:
        result = compare(target, policies=opts.policy, on_row=rows.append, **_search_options(opts))
    except KeyboardInterrupt:
        if not rows:
            raise
        result = _cancelled_comparison(target, opts, rows)
        print(
            f"remat-tui: cancelled: {count(len(rows), 'row')} made so far, below",
            file=sys.stderr,
        )
        return render_compare(result, fmt), [], lambda: 130
    failed = [r for r in result.rows if r.measure_failed]
    return (
        render_compare(result, fmt),
        [],
        lambda: _failed_runs(
            [r.config.label() for r in failed], failed[0].measured if failed else None
        ),
    )


def _cancelled_comparison(target, opts, rows):
    """The rows made before Ctrl-C, concluded as a comparison of their own."""
    from remat_tui.core.search.compare import conclude, measure_baseline
    from remat_tui.core.setup.config import Config

    base = Config.make(sites=site_overrides(opts.site), device=opts.device,
                       declared=target.policies)  # fmt: skip
    baseline, _ = measure_baseline(target, base, compiled=False)
    return conclude(target, rows, baseline, base, 0.0)


def _failed_runs(labels: list[str], measured: dict | None) -> int:
    """Exit status 2, with a message, when a compiled step raised when run (the
    report, with every row measured, is written first)."""
    if not labels:
        return 0
    first = (measured or {}).get("error", "").replace("\n", " ")
    print(
        f"remat-tui: error: {len(labels)} configuration(s) raised when run on the device "
        f"({', '.join(labels[:3])}{', ...' if len(labels) > 3 else ''}): {first}. The rows "
        "measured are in the report; fix the step, or drop --measure to rank by the estimate.",
        file=sys.stderr,
    )
    return 2


def _suggest(target, opts, fmt, checks):
    from remat_tui import cli_suggest

    return cli_suggest.run(target, opts, fmt, checks, _search_options(opts), _failed_runs)


def _search_options(opts: argparse.Namespace) -> dict:
    """What compare and suggest take alike from the command line."""
    return {
        "sites": site_overrides(opts.site),
        "compiled": opts.compiled,
        "device": opts.device,
        "progress": Progress(),
        "measure": opts.measure,
        "runs": opts.runs,
    }


def _diff(target, opts, fmt, checks):
    from remat_tui.core.search.diff import diff
    from remat_tui.core.setup.config import Config
    from remat_tui.report.costs import render_diff

    sides = (
        Config.make(opts.policy, site_overrides(opts.site), opts.device, target.policies),
        Config.make(opts.vs, site_overrides(opts.vs_site), opts.device, target.policies),
    )
    return render_diff(diff(target, *sides), fmt), [], lambda: 0


def _memory(target, opts, fmt, checks):
    from remat_tui.report.memory import render

    # Why the peak did or did not move against the code as written is what
    # the memory view is for: the comparison is always asked for here.
    analysis = _analysis(target, opts, compiled=True, vs_written=True)
    if "memory_limit" in checks:  # what XLA's own rematerialization pass does under a limit
        from dataclasses import replace

        from remat_tui.core.xla.xla_remat import remat_pass

        limited = remat_pass(target, analysis.config, checks["memory_limit"])
        memory = {**(analysis.compiled.memory or {}), "xla_remat": limited.to_dict()}
        if analysis.compiled.memory is not None:
            analysis = replace(analysis, compiled=replace(analysis.compiled, memory=memory))
    return render(analysis, fmt), analysis.warnings, lambda: 0


RUNNERS = {
    "report": _report,
    "compare": _compare,
    "suggest": _suggest,
    "diff": _diff,
    "memory": _memory,
    "fit": cli_fit.run,
    "check": cli_check.run,
}


class Progress:
    """The progress line on stderr, one per configuration: `[3/12] compiling
    nothing_saveable (about 40 s left)`, the time left from the pace so far."""

    def __init__(self) -> None:
        self.start: float | None = None

    def __call__(self, i: int, total: int, config, stage: str = "") -> None:
        import time

        now = time.perf_counter()
        if self.start is None or i == 0:
            self.start = now
        what = f"{stage} " if stage else ""
        left = ""
        if i > 0:
            seconds = (now - self.start) / i * (total - i)
            left = f" (about {seconds:.0f} s left)" if seconds >= 1 else ""
        print(
            f"remat-tui: [{i + 1}/{total}] {what}{config.label()}{left}",
            file=sys.stderr,
            flush=True,
        )


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
    from remat_tui.core.setup.loading import split_target_ref
    from remat_tui.core.setup.policies import check_syntax

    # What can be checked before JAX loads fails here, with exit status 2; the
    # rest (the file's own errors, its policy names, the device) shows in the app.
    check_syntax(opts.policy)
    for spec in site_overrides(opts.site).values():
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


def site_overrides(options: list[str]) -> dict:
    """`--site` options -> {site id or function name: spec}; the last one for a key wins."""
    from remat_tui.core.setup.config import parse_site_option

    return dict(parse_site_option(text) for text in options)
