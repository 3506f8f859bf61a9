"""Provides the headless run every command that takes a target shares
(`run`): its module's parser and checks, the target loaded, the module's
`run`, and what it gives back written.

What the target prints goes to standard error, so standard output carries
the report alone; the format comes from --format, else from -o's extension;
files are written atomically; the exit status is the command's (0, 1 when a
gate is exceeded or a check changed, 2 for bad input, 130 when Ctrl-C
stopped it); a command that has no answer (stopped before one) returns no
text, and nothing is written.

Imports only the standard library at module level, so `--help` is instant.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING

from remat_tui.cli import commands
from remat_tui.cli.rendering import output_format
from remat_tui.core.units import count
from remat_tui.errors import RematError

if TYPE_CHECKING:
    from remat_tui.registry import Target


def run(argv: list[str]) -> int:
    """`remat-tui COMMAND ...` (`argv[0]`, one of `commands.SUBCOMMANDS`): its
    module alone imported and parsing."""
    command = commands.load(argv[0])
    opts = commands.parser(argv[0]).parse_args(argv)
    _warn_if_untested_jax()
    return _headless(command, opts)


def _warn_if_untested_jax() -> None:
    """Once per command, on stderr: this JAX is outside the tested range."""
    from remat_tui.core.jaxcompat import untested_message

    if message := untested_message():
        print(f"remat-tui: warning: {message}", file=sys.stderr)


def _headless(command: ModuleType, opts: argparse.Namespace) -> int:
    """Run one command: its result rendered, written, and its exit status."""
    from remat_tui.core.setup.loading import load_target

    counted_before = _compile_counts()  # this command's compiles are said, not the process's
    checks = _check_before(command, opts)  # bad sizes fail before anything is analysed
    fmt = output_format(opts)
    _compile_settings(opts)
    if getattr(opts, "recalibrate", False):
        _recalibrate()
    with _user_output_to_stderr():
        target = _with_mesh(load_target(opts.target), opts, checks)
        text, warnings, status = command.run(target, opts, fmt, checks)
    warnings = [*warnings, *_compile_notices()]
    if said := _compiles_said(counted_before):
        print(f"remat-tui: {said}", file=sys.stderr)
    for warning in warnings:
        print(f"remat-tui: warning: {warning}", file=sys.stderr)
    if not text:  # no answer (stopped before one): no file written, none said written
        return int(status())
    if opts.output:
        from remat_tui.report.write import write_atomic

        path = write_atomic(opts.output, text)
        print(f"remat-tui: wrote {fmt} {opts.command} to {path}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return int(status())


def _check_before(command: ModuleType, opts: argparse.Namespace) -> dict:
    """What the options say that can be checked before JAX loads: the mesh
    every command takes, then the command's own (`check`: sizes in bytes,
    the options' sense)."""
    checks: dict = {}
    if opts.mesh is not None:
        from remat_tui.core.setup.meshes import parse_mesh

        checks["mesh"] = parse_mesh(opts.mesh)
    return checks | command.check(opts)


def _with_mesh(target: Target, opts: argparse.Namespace, checks: dict) -> Target:
    """The target asking for the mesh the checks hold (--mesh, or the one a
    command took from elsewhere: check's baseline), its sizes checked against
    the chosen device set's."""
    mesh = checks.get("mesh")
    if mesh is None:
        return target
    from remat_tui.core.setup.devices import device_set, resolve_device
    from remat_tui.core.setup.loading import with_mesh

    device = checks.get("mesh_device", opts.device)
    return with_mesh(target, mesh, device_set(resolve_device(device)))


def _compile_settings(opts: argparse.Namespace) -> None:
    """--no-cache (for worker processes too: they inherit the environment),
    --jobs and --cluster (options.compile_options)."""
    if getattr(opts, "no_cache", False):
        os.environ["REMAT_TUI_NO_CACHE"] = "1"
    jobs, cluster = getattr(opts, "jobs", None), getattr(opts, "cluster", None)
    if jobs is not None and jobs < 1:
        raise RematError(f"--jobs {jobs}: give 1 or more worker processes (1: compile here).")
    if jobs is not None or cluster is not None:
        from remat_tui.core.xla.run import pool as compile_pool

        compile_pool.configure(jobs=jobs, cluster=cluster)


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
