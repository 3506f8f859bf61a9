"""Provides `remat-tui FILE --web`: the same app, served to a browser by
textual-serve.

textual-serve starts one app process per browser tab (a shell command run with
Textual's web driver); this module builds that command and runs the server on
localhost only. textual_serve is imported when the server starts, never at
`remat-tui --help`.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence

from remat_tui.errors import RematError

DEFAULT_HOST = "localhost"
DEFAULT_PORT = 8000


def app_command(
    path: str,
    name: str | None,
    policy: str,
    device: str | None,
    sites: Sequence[str] = (),
    mesh: str | None = None,
) -> str:
    """The shell command textual-serve runs for each browser tab: this Python,
    `-m remat_tui` and the same target, policy, device, sites and mesh, each quoted."""
    ref = os.path.abspath(path) + (f":{name}" if name else "")
    argv = [sys.executable, "-m", "remat_tui", ref, "--policy", policy]
    if device:
        argv += ["--device", device]
    for site in sites:
        argv += ["--site", site]
    if mesh:
        argv += ["--mesh", mesh]
    return shlex.join(argv)


def serve(
    path: str,
    name: str | None,
    policy: str = "as_written",
    device: str | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    sites: Sequence[str] = (),
    mesh: str | None = None,
) -> int:
    """Serve the app at http://host:port/ until interrupted (Ctrl+C or SIGTERM)."""
    if not 0 < port < 65536:
        raise RematError(f"--port {port}: give a port from 1 to 65535.")
    try:
        from textual_serve.server import Server
    except ImportError:
        raise RematError(
            "--web needs the textual-serve package: pip install textual-serve"
        ) from None
    ref = os.path.basename(path) + (f":{name}" if name else "")
    server = Server(
        app_command(path, name, policy, device, sites, mesh),
        host=host,
        port=port,
        title=f"remat-tui {ref}",
    )
    try:
        server.serve()
    except OSError as exc:  # the port is taken, or the host cannot be bound
        raise RematError(
            f"cannot serve on {host}:{port}: {exc.strerror or exc}. Try another --port."
        ) from None
    return 0
