"""Provides the command line: `remat-tui FILE[:NAME]` (the app), the headless
subcommands `report`, `compare`, `suggest`, `diff`, `memory`, `fit` and
`check` (their runners in cli_runners.py, cli_fit.py and cli_check.py), and
`remat-tui cache`, the compile cache.

The subcommands share one set of options (target, policy, sites, device,
format, output) and run one way (`_headless`): what the target prints goes to
standard error, so standard output carries the report alone; the format comes
from --format, else from -o's extension; files are written atomically; the
exit status is 0, 1 when a gate is exceeded, 2 for bad input, 130 when
Ctrl-C stopped it; a runner that has no answer (stopped before one) returns
no text, and nothing is written.

Imports only the standard library at module level, so `--help` is instant;
jax loads when a target is analysed and textual only when the app starts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator

from remat_tui import cli_check, cli_fit
from remat_tui.cli_parser import SUBCOMMANDS, app_parser, cache_parser, headless_parser
from remat_tui.cli_runners import RUNNERS, site_overrides
from remat_tui.core.units import count
from remat_tui.errors import RematError
from remat_tui.registry import Target

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

    counted_before = _compile_counts()  # this command's compiles are said, not the process's
    checks = _check_before(opts)  # bad sizes fail before anything is analysed
    fmt = output_format(opts)
    _compile_settings(opts)
    if getattr(opts, "recalibrate", False):
        _recalibrate()
    with _user_output_to_stderr():
        target = _with_mesh(load_target(opts.target), opts, checks)
        text, warnings, status = RUNNERS[opts.command](target, opts, fmt, checks)
    warnings = [*warnings, *_compile_notices()]
    if said := _compiles_said(counted_before):
        print(f"remat-tui: {said}", file=sys.stderr)
    for warning in warnings:
        print(f"remat-tui: warning: {warning}", file=sys.stderr)
    if not text:  # no answer (stopped before one): no file written, none said written
        return status()
    if opts.output:
        from remat_tui.report.write import write_atomic

        path = write_atomic(opts.output, text)
        print(f"remat-tui: wrote {fmt} {opts.command} to {path}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return status()


def _with_mesh(target: Target, opts: argparse.Namespace, checks: dict) -> Target:
    """The target asking for --mesh (or, checked against a baseline without
    --mesh, the mesh the baseline asked for), its sizes checked against the
    chosen device set's."""
    mesh = checks.get("mesh")
    if mesh is None and opts.command == "check" and checks.get("baseline") is not None:
        mesh = cli_check.mesh_asked(checks["baseline"])
    if mesh is None:
        return target
    from remat_tui.core.setup.devices import device_set, resolve_device
    from remat_tui.core.setup.loading import with_mesh

    device = opts.device
    if device is None and checks.get("baseline") is not None:
        device = cli_check.device_of(checks["baseline"])
    return with_mesh(target, mesh, device_set(resolve_device(device)))


def _compile_settings(opts: argparse.Namespace) -> None:
    """--no-cache (for worker processes too: they inherit the environment),
    --jobs and --cluster."""
    if getattr(opts, "no_cache", False):
        os.environ["REMAT_TUI_NO_CACHE"] = "1"
    jobs, cluster = getattr(opts, "jobs", None), getattr(opts, "cluster", None)
    if jobs is not None and jobs < 1:
        raise RematError(f"--jobs {jobs}: give 1 or more worker processes (1: compile here).")
    if jobs is not None or cluster is not None:
        from remat_tui.core.xla.run import pool as compile_pool

        compile_pool.configure(jobs=jobs, cluster=cluster)


def _compile_counts() -> dict[str, int]:
    """The compile service's counts so far in this process ({} before it is
    loaded: importing it would load jax)."""
    service = sys.modules.get("remat_tui.core.xla.compile.service")
    return service.counts.snapshot() if service is not None else {}


def _compiles_said(before: dict[str, int]) -> str | None:
    """What this command's compiles were (since `before`), in one line: how
    many XLA compiled, how many the compile cache answered; None when
    nothing was compiled or answered."""
    service = sys.modules.get("remat_tui.core.xla.compile.service")
    if service is None:
        return None
    n = {k: v - before.get(k, 0) for k, v in service.counts.snapshot().items()}
    made = n["compiled"] + n["in_workers"]
    if not (made or n["stored"] or n["ahead"]):
        return None  # nothing compiled, nothing answered by the cache
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
    pool = sys.modules.get("remat_tui.core.xla.run.pool")
    return sorted(pool.notices) if pool is not None else []


def _cache(opts: argparse.Namespace) -> int:
    """`remat-tui cache [show|clear]`."""
    from remat_tui.core.xla.compile.store import Store, describe

    store = Store()
    if opts.action == "clear":
        gone = store.clear()
        print(f"remat-tui: cleared the compile cache: {count(gone, 'program')} ({store.folder})")
        return 0
    sys.stdout.write(describe(store.summary()))
    return 0


def _recalibrate() -> None:
    """--recalibrate: the CPU's rates measured again and kept, before the estimates."""
    from remat_tui.core.xla.estimates.chips import recalibrate_cpu

    calibration = recalibrate_cpu().calibration
    assert calibration is not None  # measured just now
    print(
        f"remat-tui: calibrated this CPU's rates in {calibration.measuring_seconds:.1f} s; "
        + (f"kept in {calibration.file}" if calibration.file else calibration.not_kept),
        file=sys.stderr,
    )


def _check_before(opts: argparse.Namespace) -> dict:
    """What the options say that can be checked before JAX loads: the gate
    sizes and suggest's budget, in bytes."""
    from remat_tui.core.units import parse_size

    checks: dict = {}
    if getattr(opts, "mesh", None) is not None:
        from remat_tui.core.setup.meshes import parse_mesh

        checks["mesh"] = parse_mesh(opts.mesh)
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
        if opts.policy is not None:
            raise RematError(
                f"suggest --policy {opts.policy}: suggest searches the outer policies and the "
                "sites' itself and takes no --policy. To weigh given outer policies, use "
                f"remat-tui compare --policy {opts.policy} (repeatable); to set a site's, --site."
            )
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


def _limits(opts: argparse.Namespace) -> dict[str, int]:
    """The CI gates asked for: {option: bytes}."""
    from remat_tui.core.units import parse_size

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


@contextlib.contextmanager
def _user_output_to_stderr() -> Iterator[None]:
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
    if opts.mesh is not None:  # its sizes against the devices are said in the app
        from remat_tui.core.setup.meshes import parse_mesh

        parse_mesh(opts.mesh)
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
        return serve(
            path, name, opts.policy, opts.device, port=port, sites=opts.site, mesh=opts.mesh
        )
    from remat_tui.app.launch import run

    return run(path, name, opts.policy, opts.device, sites=opts.site, mesh=opts.mesh)
