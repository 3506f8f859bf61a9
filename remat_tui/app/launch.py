"""Provides `run`: the app launched from the command line, with its exit
status, standard output kept off the screen, and no wait for a trace the
user quit during."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from remat_tui.app.main import RematApp


def run(
    path: str,
    name: str | None,
    policy: str = "as_written",
    device: str | None = None,
    sites: list[str] | tuple[str, ...] = (),
    mesh: str | None = None,
) -> int:
    import asyncio
    import sys
    import threading

    app = RematApp(path, name, policy=policy, device=device, sites=sites, mesh=mesh)
    with _stdout_off_the_screen():
        # Our own loop: asyncio.run (Python 3.12+) would wait for every worker
        # thread at the end, a trace the user quit during included.
        app.run(loop=asyncio.new_event_loop())
    code = 2 if app.loaded.load_error else 0  # bad input exits 2, as in the headless CLI
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    if any(t.is_alive() and not t.daemon for t in others):
        # A trace still running (threads cannot be stopped): Python would wait
        # for it at exit, seconds after the screen closed. Nothing of it is wanted.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


@contextlib.contextmanager
def _stdout_off_the_screen() -> Iterator[None]:
    """Textual draws on stderr; a target that writes to file descriptor 1 (a C
    library, os.write; print() is captured by Textual) would draw over the app
    when both are the terminal. Such writes are dropped while the app runs."""
    import sys

    if sys.platform == "win32" or not (os.isatty(1) and os.isatty(2)):
        yield  # Windows draws on stdout; textual-serve talks over it
        return
    sys.stdout.flush()
    saved = os.dup(1)
    # Textual measures the screen with shutil.get_terminal_size(), which asks
    # sys.__stdout__: it must still be the terminal, or every size reads 80x24.
    # (typeshed marks sys.__stdout__ Final: replacing it here is the point)
    real_stdout = sys.__stdout__
    sys.__stdout__ = os.fdopen(os.dup(saved), "w")  # type: ignore[misc]
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        sys.__stdout__.close()
        sys.__stdout__ = real_stdout  # type: ignore[misc]  # as above
