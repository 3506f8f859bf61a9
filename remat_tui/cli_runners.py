"""Provides the headless subcommands' runners (Contract 6's commands):
`report`, `compare`, `suggest`, `diff` and `memory` here, `fit` in
cli_fit.py and `check` in cli_check.py, each in `RUNNERS` as
`(target, opts, fmt, checks) -> (text, warnings, status)`: the report's text,
its warnings, and a function giving the exit status once the report is
written (1 when a gate is exceeded, 2 when a measured step raised). cli.py's
`_headless` loads the target and writes what a runner returns.

Imports only the standard library at module level, as cli.py does: each
runner imports the core and the reports it needs when it runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from remat_tui import cli_check, cli_fit, cli_verify
from remat_tui.core.units import count

if TYPE_CHECKING:
    from remat_tui.cli_check import Rendered
    from remat_tui.core.model import Analysis
    from remat_tui.core.search.compare import Comparison
    from remat_tui.core.search.rows import Row
    from remat_tui.core.setup.config import Config
    from remat_tui.registry import Target


def _analysis(
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


def _report(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    from remat_tui.report import render

    cli_verify.refuse_topology(opts)
    from remat_tui.core.xla.run.shared_runs import sharing

    with sharing(opts.verify):  # --measure's first run is --verify's (core/xla/run/shared_runs.py)
        analysis = _analysis(target, opts, opts.compiled, opts.vs_written)
    failed = [analysis.config.label()] if (analysis.measured or {}).get("error") else []
    if opts.verify:
        from dataclasses import replace

        from remat_tui.core.xla.verify.runs import verify

        analysis = replace(analysis, gradients=verify(target, analysis.config))

    # The verdicts are printed after the report is written.
    def status() -> int:
        return (
            _failed_runs(failed, analysis.measured)
            or _gates(analysis, checks["limits"])
            or _differing(analysis)
        )

    return render(analysis, fmt), analysis.warnings, status


def _compare(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    import time

    from remat_tui.core.search.compare import compare
    from remat_tui.report.comparisons import render_compare

    cli_verify.refuse_topology(opts)
    rows: list[Row] = []
    options = _search_options(opts)
    began = time.perf_counter()
    try:
        result = compare(target, policies=opts.policy, on_row=rows.append, verify=opts.verify,
                         **options)  # fmt: skip
    except KeyboardInterrupt:
        if not rows:
            raise
        seconds = time.perf_counter() - began
        result = _cancelled_comparison(target, opts, rows, seconds)
        planned = options["progress"].total or len(rows)
        print(
            f"remat-tui: cancelled: {count(len(rows), 'row')} made so far, below",
            file=sys.stderr,
        )
        return render_compare(result, fmt, stopped_of=planned), [], lambda: 130
    failed = [r for r in result.rows if r.measure_failed]
    return (
        render_compare(result, fmt),
        [],
        lambda: _failed_runs(
            [r.config.label() for r in failed], failed[0].measured if failed else None
        ),
    )


def _differing(analysis: Analysis) -> int:
    """report --verify: exit status 1, said, when the gradients differ."""
    v = analysis.gradients
    if v is None or v.verdict != "differ":
        return 0
    print(
        f"remat-tui: gradients differ: {analysis.config.label()} does not compute what the code "
        f"as written computes ({', '.join(x.path for x in v.differing)})",
        file=sys.stderr,
    )
    return 1


def _cancelled_comparison(
    target: Target, opts: argparse.Namespace, rows: list[Row], seconds: float
) -> Comparison:
    """The rows made before Ctrl-C, concluded as a comparison of their own
    (`seconds`: the time the comparison ran)."""
    from remat_tui.core.search.compare import conclude, measure_baseline
    from remat_tui.core.setup.config import Config

    base = Config.make(sites=site_overrides(opts.site), device=opts.device,
                       declared=target.policies)  # fmt: skip
    baseline, _ = measure_baseline(target, base, compiled=False)
    return conclude(target, rows, baseline, base, seconds)


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


def _suggest(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    from remat_tui import cli_suggest

    cli_verify.refuse_topology(opts)
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
        "skip": opts.skip,
    }


def _diff(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    from remat_tui.core.search.diff import diff
    from remat_tui.core.setup.config import Config
    from remat_tui.report.comparisons import render_diff

    sides = (
        Config.make(opts.policy, site_overrides(opts.site), opts.device, target.policies),
        Config.make(opts.vs, site_overrides(opts.vs_site), opts.device, target.policies),
    )
    return render_diff(diff(target, *sides), fmt), [], lambda: 0


def _memory(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    from remat_tui.report.memory import render

    # Why the peak did or did not move against the code as written is what
    # the memory view is for: the comparison is always asked for here.
    analysis = _analysis(target, opts, compiled=True, vs_written=True)
    if "memory_limit" in checks:  # what XLA's own rematerialization pass does under a limit
        from dataclasses import replace

        from remat_tui.core.xla.fates.remat_pass import remat_pass

        limited = remat_pass(target, analysis.config, checks["memory_limit"])
        memory = {**(analysis.compiled.memory or {}), "xla_remat": limited.to_dict()}
        if analysis.compiled.memory is not None:
            analysis = replace(analysis, compiled=replace(analysis.compiled, memory=memory))
    return render(analysis, fmt), analysis.warnings, lambda: 0


def _fit(target: Target, opts: argparse.Namespace, fmt: str, checks: dict) -> Rendered:
    cli_verify.refuse_topology(opts)
    return cli_fit.run(target, opts, fmt, checks)


RUNNERS = {
    "report": _report,
    "compare": _compare,
    "suggest": _suggest,
    "diff": _diff,
    "memory": _memory,
    "fit": _fit,
    "check": cli_check.run,
    "verify": cli_verify.run,
}


class Progress:
    """The progress line on stderr, one per configuration: `[3/12] compiling
    nothing_saveable (about 40 s left)`, the time left from the pace so far."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.total: int | None = None  # the configurations the command will make

    def __call__(self, i: int, total: int, config: Config, stage: str = "") -> None:
        import time

        self.total = total
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


def _gates(analysis: Analysis, limits: dict[str, int]) -> int:
    """Exit status 1, with a message per excess, when a gate is exceeded."""
    from remat_tui.core.units import human_bytes
    from remat_tui.report.compiled import residual_bytes

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


def site_overrides(options: list[str]) -> dict:
    """`--site` options -> {site id or function name: spec}; the last one for a key wins."""
    from remat_tui.core.setup.config import parse_site_option

    return dict(parse_site_option(text) for text in options)
