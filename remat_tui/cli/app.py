"""Provides `remat-tui FILE[:NAME]`: the app's parser and its start, the
options checked before JAX loads.

Imports only the standard library and light modules at module level.
"""

from __future__ import annotations

import argparse
import os
import sys

from remat_tui import __version__
from remat_tui.cli.commands import SUBCOMMANDS
from remat_tui.cli.options import policy_option, site_overrides, target_options
from remat_tui.errors import RematError


def parser() -> argparse.ArgumentParser:
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


def run(opts: argparse.Namespace) -> int:
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
    if not _on_a_terminal():
        raise RematError(
            "the app needs a terminal, and this output is not one; for output to a pipe or "
            f"a file run a command, e.g. `remat-tui report {opts.target}` (or --web for a "
            "browser)."
        )
    from remat_tui.app.launch import run

    return run(path, name, opts.policy, opts.device, sites=opts.site, mesh=opts.mesh)


def _on_a_terminal() -> bool:
    """Whether the app can draw: a terminal on stdin and stdout, or a driver
    Textual was given (textual-serve's, for --web, runs it over pipes)."""
    if os.environ.get("TEXTUAL_DRIVER"):
        return True
    return sys.stdin.isatty() and sys.stdout.isatty()
